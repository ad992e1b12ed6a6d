"""``run``: run a saved bundle (``deploy MODEL --save DIR``) on an input, in a process that
builds nothing: no ONNX file, no log and no code generation (:func:`vtatune.deploy.load`).
Its arguments and handler are the runtime's own (``python -m vtatune.deploy.runtime``, the
command a board runs without the rest of vtatune's command line)."""

from __future__ import annotations

from typing import Any

from vtatune.cli._common import add_command

__all__ = [
    "COMMANDS", "register",
]

_EXAMPLES = (
    "python -m vtatune run resnet18.bundle --input x.npy --output y.npy",
    "python -m vtatune run resnet18.bundle --input x.npy --device sim --json",
    "python -m vtatune.deploy.runtime resnet18.bundle --device libvta:/usr/lib/libvta.so",
)


#: The commands :func:`register` adds.
COMMANDS = ("run",)


def register(sub: Any) -> None:
    from vtatune.deploy.runtime._command import DESCRIPTION, add_arguments, run_bundle

    p = add_command(sub, "run", "run a saved bundle (deploy --save) on an input",
                    DESCRIPTION, _EXAMPLES)
    add_arguments(p)
    p.set_defaults(func=run_bundle)
