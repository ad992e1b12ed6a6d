"""The device interface, as the compiler side of ``vtatune.deploy`` names it: it lives in
the runtime (:mod:`vtatune.deploy.runtime`), which a board needs without the compiler."""

from __future__ import annotations

from vtatune.deploy.runtime._device import Buffer, Device, SimulatedDevice

__all__ = ["Buffer", "Device", "SimulatedDevice"]
