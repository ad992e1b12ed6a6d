"""Command line: ``python -m vtatune <command>`` (or the ``vtatune`` script).

One module per command family, each exposing ``register(subparsers) -> None`` that adds its
subcommand(s) and sets ``func`` (the handler ``(args) -> int``) with ``set_defaults``. To add a
command, add a module and list it in ``MODULES``.

Bad input prints one line ``vtatune: error: ...`` and exits with status 2; a failed
``--verify`` or ``replay`` exits with status 1; an interrupted run with status 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from simulator.errors import VTAError

from .. import __version__
from ._common import Parser, UsageError

#: The command modules, in the order their commands are listed by ``--help``.
MODULES = ("simulate", "tune", "network", "build", "logs", "design")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="vtatune", description="Schedule search engine for the VTA "
                                                "accelerator.")
    parser.add_argument("--version", action="version", version=f"vtatune {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        return args.func(args)
    except VTAError as exc:
        print(f"vtatune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vtatune: interrupted", file=sys.stderr)
        return 130


__all__ = ["MODULES", "UsageError", "build_parser", "main"]
