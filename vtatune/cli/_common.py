"""What the commands share: the one-line usage error, the argparse subclass that raises it,
the help layout, the shape, workload and hardware flags, and workload resolution."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import sys
import textwrap
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulator.errors import VTAError
from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from vtatune import workloads
from vtatune.errors import VtatuneError
from vtatune.workloads import WORKLOADS, Workload, get_workload


class UsageError(VtatuneError):
    """Bad command-line input: reported in one line with exit status 2."""


def seed_arg(text: str) -> int:
    """argparse type of every sampler ``--seed``: refused while parsing, before anything is
    created (UsageError is no ValueError, so argparse passes it through unchanged)."""
    from vtatune.tuning import SEED_MAX

    try:
        seed = int(text)
    except ValueError:
        raise UsageError(f"--seed must be an integer, got {text!r}") from None
    if not 0 <= seed <= SEED_MAX:
        raise UsageError(f"--seed must be in 0..{SEED_MAX}, got {seed}")
    return seed


def require(module: str, purpose: str, install: str) -> None:
    """Refuse in one line what ``purpose`` (a command or a flag) cannot do without the
    optional package ``module`` (found, not imported: no cost on the way)."""
    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{purpose} needs {module}: {install}")


def check_optional(args: argparse.Namespace) -> None:
    """Every optional package the parsed command line needs, checked before the command
    does any work (a search of minutes must not end on a missing plotting library): one
    check for every command, keyed by the flags they share."""
    plot = "pip install 'vtatune[plot]'"
    for flag in ("plot", "timeline"):
        if getattr(args, flag, None):
            require("matplotlib", f"--{flag}", plot)
    if args.command == "deploy":
        require("tvm", "deploy", "pip install -e '.[tvm]'")
        require("onnx", "deploy", "pip install -e '.[tvm]'")
        for flag in ("check", "calibration"):
            if getattr(args, flag, None):
                require("onnxruntime", f"deploy --{flag}", "pip install -e '.[tvm]'")
    elif str(getattr(args, "network", None) or "").lower().endswith(".onnx"):
        require("onnx", f"reading {args.network}", "pip install 'vtatune[onnx]'")
    if getattr(args, "sampler", None) in ("gp", "cmaes"):
        from vtatune.tuning.samplers import check_sampler

        check_sampler(args.sampler)
    if "://" in (getattr(args, "storage", None) or ""):
        from vtatune.tuning.storages import resolve_url

        resolve_url(args.storage)


class Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (examples keep their lines); every option that
    has a default says it (``(default: 200)``), flags and unset options don't."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("%(default)" not in text and action.default is not None
                and action.default is not False and action.default != []
                and action.default is not argparse.SUPPRESS
                and (action.option_strings or action.nargs in ("?", "*"))):
            text += " (default: %(default)s)"
        return text


def _example_lines(example: str, width: int = 79) -> str:
    """A shell example indented, and continued with a backslash past ``width`` columns (one
    with quotes or a comment stays whole: a break there could change what it means)."""
    if len(example) + 2 <= width or any(c in example for c in "'\"#"):
        return f"  {example}"
    units: list[str] = []  # words, an option with its value kept together
    for word in example.split():
        if units and units[-1].startswith("-") and " " not in units[-1] \
                and not word.startswith("-"):
            units[-1] += f" {word}"
        else:
            units.append(word)
    lines, line = [], " "
    for word in units:
        if len(line) + 1 + len(word) + 2 > width and line.strip():
            lines.append(f"{line} \\")
            line = "     "
        line += f" {word}"
    return "\n".join([*lines, line])


#: How a schedule reads in one line (``Schedule.short``: the ``best`` line of a tuning table,
#: the ``schedule`` line of ``build`` and ``import``), for the help of the commands that print
#: it; docs/first-hour.md says the same.
SCHEDULE_NOTATION = """\
how a schedule reads (the table's best line), e.g.
b1 h7 w14 co2 ci1 vt2x2 bhcw [ci,w,kw,kh,co,h] store=tile reuse tvm:
  b1 h7 w14 co2 ci1  one tile: 1 batch block, 7 output rows (per thread), 14 output
                     columns, 2 output-channel blocks (per thread); ci1: 1 input-channel
                     block per load step (blocks of BATCH, BLOCK_OUT, BLOCK_IN elements:
                     1, 16, 16 on pynq)
  vt2x2              virtual threads: 2 on the output channels x 2 on the rows
  bhcw               the outer tile loops, outermost first (b batch, h rows, c output
                     channels, w columns)
  [ci,w,kw,kh,co,h]  the loops inside a load step, outermost first: the first two fold into
                     the GEMM instruction's loops, the rest unroll into micro-ops
  store=tile         one 2D DMA per output tile stored (store=element: one per element)
  reuse              a load whose tile is already in its SRAM slot is skipped
  tvm                TVM's own lowering limits (a point of AutoTVM's template)
a GEMM's line may end in rows=spatial: its rows tiled as a 1x1 conv's pixels (h rows a tile
in one load and the GEMM instruction's loops; without it, b rows a tile, a kernel each)"""


def add_command(sub: Any, name: str, summary: str, description: str,
                examples: tuple[str, ...], notes: str = "") -> argparse.ArgumentParser:
    """A subcommand whose help reads like a small man page: ``summary`` in the command
    list, ``description`` on top, ``examples`` (shell lines) in the epilog, then ``notes``
    (kept as written)."""
    epilog = "examples:\n" + "\n".join(map(_example_lines, examples)) \
        + (f"\n\n{notes}" if notes else "")
    return sub.add_parser(name, help=summary, description=textwrap.fill(description, 79),
                          epilog=epilog,
                          formatter_class=HelpFormatter)


#: The operators with workloads and schedules (every command that lowers takes them).
OPERATORS = tuple(WORKLOADS)


def base_workload(operator: str) -> Workload:
    """The workload shape flags start from: the operator's tutorial."""
    table = WORKLOADS[operator]
    return table.get("tutorial") or next(iter(table.values()))


def operator_shape_fields(operator: str) -> tuple[str, ...]:
    """The shape flags of an operator (its workload class's shape fields)."""
    return workloads.shape_fields(type(base_workload(operator)))


def _natural(name: str) -> tuple[Any, ...]:
    """Sort key: the tutorial first, then numbers by value (C2 ... C9, C10, C11)."""
    return (name != "tutorial", *(int(t) if t.isdigit() else t
                                  for t in re.split(r"(\d+)", name)))


def add_workload_flags(p: argparse.ArgumentParser, operators: tuple[str, ...]) -> None:
    """``--workload`` (the operators' named workloads) and their shape flags, in a group."""
    def listed(op: str) -> str:
        return ", ".join(sorted(WORKLOADS[op], key=_natural))

    names = listed(operators[0]) if len(operators) == 1 else \
        "; ".join(f"{op}: {listed(op)}" for op in operators)
    g = p.add_argument_group("workload", textwrap.fill(
        "a named workload or shape flags, not both (shape flags left out take the "
        "tutorial's values)", 77))
    short = (" (the resnet18 layers also as C2 ... C11)" if "resnet18." in names else "")
    g.add_argument("--workload", metavar="NAME",
                   help=f"{names}{short}; default: tutorial")
    seen: set[str] = set()
    for op in operators:
        base = base_workload(op).shape_args()
        for name in operator_shape_fields(op):
            if name in seen:
                continue
            seen.add(name)
            users = [o for o in operators if name in operator_shape_fields(o)]
            where = "" if len(users) == len(operators) else f" ({', '.join(users)})"
            g.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name, metavar="N",
                           help=f"{name.replace('_', ' ')}{where}; tutorial: {base[name]}")
    g.add_argument("--epilogue", choices=tuple(workloads.named_epilogues()),
                   default="benchmark",
                   help="what runs on the accumulators before the int8 store: benchmark "
                        "(TVM's VTA benchmarks: shift 8, clip [0, 127]; --bias adds a bias), "
                        "deployed (a conv of a deployed network: bias, round, shift, clip "
                        "[-127, 127]), deployed-relu (the same with a ReLU: what `network` "
                        "tunes); default: %(default)s")


def hw_help() -> str:
    presets = ", ".join(f"{n} ({h.target} {h.bitstream}, {h.clock_mhz:g} MHz)"
                        for n, h in PRESETS.items())
    return (f"hardware: a preset or a vta_config.json. Presets: {presets}. 'sim' is TVM's "
            "simulator target (the pynq configuration under TVM's default target name, as in "
            "TVM's vta_config.json); default: pynq")


def hw_flag(config: dict[str, Any], log: str | None = None) -> str:
    """`` --hw <preset>`` naming a record's hardware (its ``vta_config.json`` fields) in a
    command that reruns it; empty for the default. A config no preset has is named by the
    ``vta_config.json`` that holds it beside ``log`` (the log's path as given: where
    ``design --out`` writes both) or in the working folder, its path quoted for the shell;
    `` --hw vta_config.json`` when neither holds it."""
    hw = HardwareConfig.from_dict(config)
    if hw == DEFAULT:
        return ""
    name = next((n for n, p in PRESETS.items() if p == hw), None)
    if name:
        return f" --hw {name}"
    for folder in ([Path(log).parent] if log else []) + [Path()]:
        path = folder / "vta_config.json"
        try:
            if path.is_file() and HardwareConfig.from_json(path) == hw:
                return f" --hw {shlex.quote(str(path))}"
        except VTAError:  # not a hardware config: not this one
            continue
    return " --hw vta_config.json"


def add_hw_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hw", metavar="PRESET|FILE", help=hw_help())


def add_study_flags(p: argparse.ArgumentParser, *, log_default: str) -> None:
    """The flags of every command that runs tuning studies (``conv2d`` ... and ``network``):
    sampler, seed, jobs, log, storage, resume, space, bias and quiet, with one help text
    each so the commands never drift apart."""
    from vtatune.tuning import SEED_MAX
    from vtatune.tuning.samplers import DEFAULT_SAMPLER, SAMPLERS

    p.add_argument("--sampler", default=DEFAULT_SAMPLER, metavar="NAME",
                   help=f"{', '.join(SAMPLERS)}; {DEFAULT_SAMPLER}: TPE over legal, "
                        "untried configs, warm-started by a cost model")
    p.add_argument("--seed", type=seed_arg, metavar="N",
                   help=f"sampler seed, 0..{SEED_MAX}: a serial run with a seed is "
                        "reproducible (default: drawn at random and printed)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="simulation processes")
    p.add_argument("--log", metavar="FILE",
                   help=f"JSON-lines log to append to (default: {log_default}; git ignores "
                        "that directory)")
    p.add_argument("--storage", metavar="URL",
                   help="where the studies live; workers with the same problem and "
                        "storage share them: postgresql://user@host/db "
                        "(pip install 'vtatune[postgres]'), mysql://user:pw@host/db, "
                        "sqlite:///tune.db, journal:FILE (default: a journal file beside "
                        "the log, shared by the processes of one machine)")
    p.add_argument("--resume", action="store_true",
                   help="continue this problem's studies (joining them is the default), "
                        "refuse a log or storage of another problem, and rebuild a "
                        "study from the log's records when its storage lost them")
    p.add_argument("--space", choices=("full", "autotvm"), default="full",
                   help="vtatune's space (full) or AutoTVM's space (autotvm: "
                        "conv2d_packed, dense_packed, group_conv2d_packed, "
                        "conv2d_transpose_packed)")
    p.add_argument("--bias", action="store_true", help="add the per-channel int32 bias")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def shape_flags_given(args: argparse.Namespace) -> list[str]:
    names = {n for op in WORKLOADS for n in operator_shape_fields(op)}
    return sorted(n for n in names if getattr(args, n, None) is not None)


def resolve_workload(operator: str, args: argparse.Namespace) -> Workload:
    """A named workload, or the tutorial reshaped by shape flags; never both."""
    given = {k: getattr(args, k) for k in shape_flags_given(args)}
    extra = sorted(set(given) - set(operator_shape_fields(operator)))
    if extra:
        raise UsageError(f"--{extra[0].replace('_', '-')} does not apply to {operator}")
    if args.workload and given:
        raise UsageError(f"give --workload or shape flags, not both (--workload "
                         f"{args.workload} with --{next(iter(given)).replace('_', '-')})")
    if not given:
        wl = get_workload(operator, args.workload or "tutorial")
    else:
        base = base_workload(operator)
        wl = type(base)(**{**base.shape_args(), **given}, name="")
    epilogue = getattr(args, "epilogue", "benchmark")
    if epilogue == "benchmark":
        return wl
    if getattr(args, "bias", False):
        raise UsageError(f"--epilogue {epilogue} reads its own bias: drop --bias")
    return replace(wl, epilogue=workloads.named_epilogues()[epilogue])


def warnings_one_line() -> None:
    """Show Python warnings as ``vtatune: warning: ...`` lines."""

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        print(f"vtatune: warning: {message}", file=sys.stderr)

    warnings.showwarning = show


def say_compiling() -> None:
    """The line that explains the wait of the first run after install (numba compiles the
    simulator's engines, and the guided sampler's once the tuner samples, about 7-10 s): said
    right before the first compilation (:func:`simulator.jit.on_first_compile`), never on a
    run that compiles nothing. Above a progress bar when one is shown."""
    message = "vtatune: compiling the engines (once after install, about 7-10 s)..."
    if "tqdm" in sys.modules:
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)
        sys.stderr.flush()
    else:
        print(message, file=sys.stderr, flush=True)


def workload_flags(workload: Workload) -> str:
    """The flags that name ``workload`` on the command line: ``--workload NAME`` for one of
    the catalogue's, else its shape flags; then ``--epilogue NAME`` unless it is the
    benchmark epilogue."""
    default = type(workload).__dataclass_fields__["epilogue"].default
    shape = replace(workload, epilogue=default)
    if workload.name and WORKLOADS.get(workload.operator, {}).get(workload.name) == shape:
        flags = f"--workload {workload.name}"
    else:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in shape.shape_args().items())
    name = workloads.epilogue_name(workload.epilogue)
    return flags + (f" --epilogue {name}" if name and name != "benchmark" else "")


def next_steps(log: str, workload: Workload, hw: str | None, bias: bool,
               others: int = 0) -> list[str]:
    """The table lines that end a tuning run: the commands to run next on its log (replay,
    build the best schedule of ``workload``, and of the ``others`` tuned with it likewise;
    export them for TVM v0.14), each ready to paste (what follows ``#`` says why)."""
    q = shlex.quote
    flags = workload_flags(workload) + (f" --hw {q(hw)}" if hw else "") \
        + (" --bias" if bias else "")
    out = f"build/{workload.name or workload.operator}"
    exported = str(Path(log).with_suffix(".autotvm.log"))
    return [f"replay    python -m vtatune replay {q(log)} --best",
            f"build     python -m vtatune build {workload.operator} {flags} --log {q(log)} "
            f"--out {q(out)}  # the program" + (f"; likewise the other {others}" if others
                                                 else ""),
            f"export    python -m vtatune export {q(log)} -o {q(exported)}  # for TVM v0.14"]
