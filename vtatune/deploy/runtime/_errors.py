"""The deployment layer's one error: bad input to a deploy, reported in one line (exit 2).
It lives in the runtime, which raises it too (a bad bundle, input or device), and the
compiler imports it from here (``vtatune.deploy.DeployError``)."""

from __future__ import annotations

from vtatune.errors import VtatuneError


class DeployError(VtatuneError):
    """A model, input, log or hardware config a deploy cannot take: names what is wrong and,
    where there is one, the fix (a float model: how to quantize it; a missing TVM: the
    install command)."""
