"""Which device runs the offloaded calls, named as the command line names it:
``sim`` (vtatune's functional VTA, :class:`SimulatedDevice`) or ``libvta:PATH`` (VTA's C
driver API in the shared library PATH: a board's ``libvta.so``, or TVM v0.14's
``libvta_fsim.so``)."""

from __future__ import annotations

import importlib

from simulator.hardware import HardwareConfig
from vtatune.deploy._errors import DeployError
from vtatune.deploy.runtime._device import Device, SimulatedDevice

#: The device specs, as ``--device`` lists them.
SPECS = ("sim", "libvta:PATH")
#: The module of the device over VTA's C driver (built apart; imported when asked for).
DRIVER_MODULE = "vtatune.deploy._driver"


def device_from_spec(spec: str, hw: HardwareConfig) -> Device:
    """The device ``spec`` names, for ``hw``; DeployError for an unknown spec."""
    if spec == "sim":
        return SimulatedDevice(hw)
    if spec.startswith("libvta:") and spec != "libvta:":
        try:
            # by name, not imported statically: the driver's module comes separately
            driver = importlib.import_module(DRIVER_MODULE)
        except ModuleNotFoundError as exc:
            if exc.name != DRIVER_MODULE:
                raise
            raise DeployError(f"device {spec}: this vtatune has no driver device (VTA's C "
                              "driver API) yet; use --device sim") from None
        return driver.device_from_spec(spec, hw)
    raise DeployError(f"unknown device {spec!r} (known: {', '.join(SPECS)})")
