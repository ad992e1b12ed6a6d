"""Command line: ``python -m vtatune <command>`` (or the ``vtatune`` script).

One module per command family, each exposing ``register(subparsers) -> None`` that adds its
subcommand(s) and sets ``func`` (the handler ``(args) -> int``) with ``set_defaults``. To add a
command, add a module and list it in ``MODULES``.

Bad input prints one line ``vtatune: error: ...`` and exits with status 2; a failed
``--verify`` or ``replay`` exits with status 1; an interrupted run with status 130. Output
piped to a reader that stops early (``| head``) ends quietly with status 141, as a command
killed by SIGPIPE does in a shell.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from simulator.errors import VTAError
from simulator.jit import on_first_compile, skip_blas_probe
from vtatune import __version__
from vtatune.cli._common import Parser, UsageError, check_optional, say_compiling

#: The command modules, in the order their commands are listed by ``--help``.
MODULES = ("simulate", "tune", "network", "design", "build", "logs", "autotvm", "deploy",
           "run")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command``, only the module that adds that command
    registers (each lists its :data:`COMMANDS`), when one does: a run of one command does
    not import what the others' options name (``network``'s and ``design``'s libraries,
    ``run``'s runtime: 0.1 s of CPU of a warm main command, measured without bytecode). The
    whole parser otherwise (``--help``, a mistyped command: its error lists every
    command)."""
    parser = Parser(prog="vtatune", description="Schedule search engine for the VTA "
                                                "accelerator.")
    parser.add_argument("--version", action="version", version=f"vtatune {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    modules = [importlib.import_module(f"{__name__}.{name}") for name in MODULES]
    for module in [m for m in modules if command in m.COMMANDS] or modules:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()  # the command's wall time, which tuning tables report
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words else None)
    on_first_compile(say_compiling)  # said right before numba compiles, if it does
    skip_blas_probe()  # no engine calls BLAS: numba need not import scipy.linalg
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        args.started = started
        check_optional(args)  # before any work, in every command
        status = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except VTAError as exc:
        print(f"vtatune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vtatune: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader is gone: send what is still buffered nowhere (Python's documented
        # recipe) so the interpreter's final flush cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


__all__ = ["MODULES", "UsageError", "build_parser", "main", "say_compiling"]
