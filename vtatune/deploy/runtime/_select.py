"""Which device runs the offloaded calls, named as the command line names it:
``sim`` (vtatune's functional VTA, :class:`SimulatedDevice`) or ``libvta:PATH`` (VTA's C
driver API in the shared library PATH: a board's ``libvta.so``, or TVM v0.14's
``libvta_fsim.so`` or ``libvta_tsim.so``; ``libvta:DRIVER:HARDWARE`` names tsim's
verilated hardware library too)."""

from __future__ import annotations

from simulator.hardware import HardwareConfig
from vtatune.deploy.runtime._device import Device, SimulatedDevice
from vtatune.deploy.runtime._errors import DeployError

#: The device specs, as ``--device`` lists them.
SPECS = ("sim", "libvta:PATH")


def device_from_spec(spec: str, hw: HardwareConfig) -> Device:
    """The device ``spec`` names, for ``hw``: ``sim`` (vtatune's functional VTA,
    :class:`SimulatedDevice`) or ``libvta:PATH`` (a VTA driver library:
    :class:`~vtatune.deploy.runtime.DriverDevice`, its ``vta_config.json`` and
    ``libtvm_runtime.so`` next to it; ``libvta:DRIVER:HARDWARE``: tsim's driver and its
    verilated hardware library, by default ``libvta_hw.so`` next to the driver);
    DeployError for an unknown spec."""
    if spec == "sim":
        return SimulatedDevice(hw)
    kind, sep, path = spec.partition(":")
    if kind == "libvta" and sep and path:
        from vtatune.deploy.runtime._driver import DriverDevice  # ctypes: when asked for

        driver, _, hardware = path.partition(":")
        return DriverDevice(driver, hw, hardware=hardware or None)
    raise DeployError(f"unknown device {spec!r} (known: {', '.join(SPECS)})")
