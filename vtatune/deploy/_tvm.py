"""The one door to Apache TVM: imported on first use, so that ``import vtatune`` (and
``import vtatune.deploy``) never needs it.

vtatune deploys through TVM's Relax BYOC API, which moves between releases (0.25 -> 0.27
renamed constants, variable names, global function registration, targets and
``call_dps_packed``'s keyword), so exactly one release is supported: :data:`TVM_VERSION`,
the ``tvm`` extra's pin.
"""

from __future__ import annotations

from types import ModuleType

from vtatune.deploy.runtime._errors import DeployError

#: The apache-tvm release this layer is written against (pyproject's ``tvm`` extra pins it).
TVM_VERSION = "0.27.0.post1"
#: How to get it.
INSTALL_HINT = "pip install -e '.[tvm]'"


def tvm() -> ModuleType:
    """The ``tvm`` package with Relax loaded; DeployError with the install command when it is
    missing or another release."""
    try:
        import tvm as _tvm
        import tvm.relax  # noqa: F401  (registers the Relax passes and ops)
    except ImportError as exc:
        raise DeployError(f"deploying needs apache-tvm {TVM_VERSION} ({exc.name or exc} is "
                          f"not installed): {INSTALL_HINT}") from None
    version = getattr(_tvm, "__version__", "?")
    if _base(version) != _base(TVM_VERSION):
        raise DeployError(f"deploying needs apache-tvm {TVM_VERSION}, found {version} (the "
                          f"Relax API differs between releases): {INSTALL_HINT}")
    return _tvm


def onnx() -> ModuleType:
    """The ``onnx`` package; DeployError with the install command when it is missing."""
    try:
        import onnx as _onnx
    except ImportError:
        raise DeployError(f"reading ONNX models needs the onnx package: {INSTALL_HINT}") \
            from None
    return _onnx


def _base(version: str) -> str:
    """``0.27.0`` of ``0.27.0.post1`` / ``0.27.0.dev3``: post-releases keep the API."""
    return ".".join(version.split(".")[:3])
