"""A deployed model as it runs: TVM's VM for the CPU's part, the offloaded regions it calls
(registered with TVM under their symbols), the device they run on; one inference
(:meth:`DeployedModel.run`) and what it did (:class:`DeployResult`).

The compiler's :class:`~vtatune.deploy.CompiledModel` is one (built in this process); a
loaded bundle is another (:func:`~vtatune.deploy.runtime.load`).
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from vtatune.deploy.runtime._device import Device
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._inputs import ModelInput
from vtatune.deploy.runtime._region import CpuOp, OffloadedCall, Trace
from vtatune.deploy.runtime._tvm import run_main


class MacShares:
    """The shares of a model's multiply-accumulates on VTA, for a class with ``vta_macs``
    (VTA's layers', as the model has them), ``model_macs`` and ``float_macs`` (the layers'
    the quantizer left in float): a placement (``vtatune.deploy.Placement``) and a run
    (:class:`DeployResult`) count them alike."""

    # what the class provides (a plain class's annotations: no dataclass fields)
    vta_macs: int
    model_macs: int
    float_macs: int

    @property
    def vta_mac_share(self) -> float:
        """The share of the model's multiply-accumulates on VTA."""
        return self.vta_macs / self.model_macs if self.model_macs else 0.0

    @property
    def vta_quantized_share(self) -> float:
        """The share on VTA of the multiply-accumulates the quantizer quantized."""
        quantized = self.model_macs - self.float_macs
        return self.vta_macs / quantized if quantized else 0.0


@dataclass(frozen=True, eq=False)
class DeployResult(MacShares):
    """One inference of a deployed model.

    ``offloaded``: every VTA layer in the order it ran (:class:`OffloadedCall`: op,
    workload, schedule source, requantization, cycles); ``cpu_ops``: everything the CPU ran
    in order (:class:`CpuOp`: TVM's compiled ops, and vtatune's packing around the VTA
    calls), every reason on the layers VTA could have run; ``vta_cycles``: the offloaded
    layers' cycles in all (the timing model's, or, when ``cycle_counter`` names one, the
    device's own: ``RTL``, with the timing model's beside them, :attr:`vta_model_cycles`);
    ``output``: the model's output; ``model_macs``: the model's multiply-accumulates
    (:func:`~vtatune.deploy.model_macs`), ``float_macs`` those of the layers the quantizer
    left in float (:func:`~vtatune.deploy.float_macs`); ``tuning``: what the build tuned (trials,
    workloads, the log: ``vtatune.deploy.Tuning.as_dict``; None for a model loaded from a
    bundle)."""

    model: str
    hw: HardwareConfig
    device: str
    offloaded: tuple[OffloadedCall, ...]
    cpu_ops: tuple[CpuOp, ...]
    vta_cycles: int
    output: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    model_macs: int = 0
    cycle_counter: str | None = None
    tuning: dict[str, Any] | None = None
    float_macs: int = 0

    @property
    def vta_model_cycles(self) -> int | None:
        """The timing model's cycles of the offloaded layers, when the device counted its
        own (``cycle_counter``); else None."""
        model = [c.model_cycles for c in self.offloaded]
        return sum(model) if self.cycle_counter and None not in model else None

    @property
    def default_cycles(self) -> int:
        """The offloaded layers' cycles with the default schedules (each pass timed from an
        idle VTA; 0 when a layer's were not recorded)."""
        return sum(c.default_cycles for c in self.offloaded)

    @property
    def vta_ms(self) -> float:
        """The VTA layers' time at the board's clock."""
        return self.vta_cycles / (self.hw.clock_mhz * 1e3)

    @property
    def vta_macs(self) -> int:
        """The multiply-accumulates of the layers VTA ran, as the model has them (padded
        channels not counted)."""
        return sum(c.macs for c in self.offloaded)

    def as_dict(self, values: bool = False) -> dict[str, Any]:
        """The ``deploy --json`` object: the output as its shape, dtype and
        :func:`output_sha256` (a 128x128 output's values are 340 KB of JSON); ``values``:
        the values too (``output``, nested lists)."""
        return {"model": self.model, "hw": self.hw.target_model, "device": self.device,
                "offloaded": [c.as_dict() for c in self.offloaded],
                "cpu_ops": [c.as_dict() for c in self.cpu_ops],
                "vta_cycles": self.vta_cycles, "vta_ms": self.vta_ms,
                **({"cycle_counter": self.cycle_counter,
                    "vta_model_cycles": self.vta_model_cycles} if self.cycle_counter else {}),
                "default_cycles": self.default_cycles, "tuning": self.tuning,
                "vta_macs": self.vta_macs, "model_macs": self.model_macs,
                "vta_mac_share": self.vta_mac_share, "float_macs": self.float_macs,
                "vta_quantized_share": self.vta_quantized_share,
                "output_shape": list(self.output.shape), "output_dtype": str(self.output.dtype),
                "output_sha256": output_sha256(self.output),
                **({"output": self.output.tolist()} if values else {}),
                "seconds": dict(self.seconds)}

    def report(self) -> str:
        """What ran where, as the ``deploy`` command prints it."""
        lines = [f"{self.model} on {self.hw.target_model} ({self.device})", "",
                 f"VTA: {len(self.offloaded)} offloaded layers, "
                 f"{100 * self.vta_mac_share:.1f} % of the model's multiply-accumulates "
                 f"({self.vta_macs:,} of {self.model_macs:,})"
                 + (f"; {100 * self.vta_quantized_share:.1f} % of those the quantizer "
                    f"quantized, {self.float_macs:,} left in float" if self.float_macs
                    else "")]
        counted = self.vta_model_cycles is not None
        # the default schedules' column where they were recorded (not in older bundles)
        defaults = any(c.default_cycles for c in self.offloaded)
        if self.offloaded:
            rows = [("layer", "workload", "schedule from", "requantization", "passes",
                     f"cycles ({self.cycle_counter})" if counted else "cycles")
                    + (("timing model", "difference") if counted else ())
                    + (("default schedule",) if defaults else ())]
            for c in self.offloaded:
                model = ()
                if counted:
                    model = ((f"{c.model_cycles:,}", _difference(c.cycles, c.model_cycles))
                             if c.model_cycles is not None else ("-", "-"))
                rows.append((c.layer, c.workload, c.provenance, c.requantization, str(c.passes),
                             f"{c.cycles:,}") + model
                            + ((f"{c.default_cycles:,}" if c.default_cycles else "-",)
                               if defaults else ()))
            lines += _table(rows, right=tuple(range(4, len(rows[0]))))
            for c in self.offloaded:
                notes = list(c.notes) + ([f"padding costs {c.padding_cycles:,} cycles"]
                                         if c.padding_cycles else [])
                lines += [f"  {c.layer}: {'; '.join(notes)}"] if notes else []
        tvm_ops = [c for c in self.cpu_ops if c.by == "tvm"]
        host = [c for c in self.cpu_ops if c.by == "vtatune"]
        lines += ["", f"CPU: {len(tvm_ops)} ops compiled by TVM ({_counts(tvm_ops)})"]
        lines += [f"  {c.op} -> {c.shape}: {c.reason}" for c in tvm_ops if c.reason]
        lines.append(f"CPU: {len(host)} ops of vtatune's runtime around the VTA calls"
                     + (f" ({_counts(host)})" if host else ""))
        lines += ["", f"VTA time: {self.vta_cycles:,} cycles = {self.vta_ms:.3f} ms at "
                      f"{self.hw.clock_mhz:g} MHz ({self.cycle_counter or 'timing model'})"]
        if self.vta_model_cycles is not None:
            lines.append(f"timing model: {self.vta_model_cycles:,} cycles (the "
                         f"{self.cycle_counter}: "
                         f"{_difference(self.vta_cycles, self.vta_model_cycles)})")
        if self.default_cycles and self.vta_cycles:
            lines.append(f"with the default schedules: {self.default_cycles:,} cycles "
                         f"({self.default_cycles / self.vta_cycles:.2f}x)")
        if self.tuning is not None:
            lines.append(self.tuning["summary"])
        return "\n".join(lines)


def output_sha256(output: np.ndarray) -> str:
    """SHA-256 (hex) of ``output``'s values as little-endian bytes in C order: what
    ``hashlib.sha256(np.load(f).astype(a.dtype.newbyteorder("<")).tobytes())`` gives for the
    saved file, whatever the machine's byte order."""
    a = np.ascontiguousarray(output, dtype=output.dtype.newbyteorder("<"))
    return hashlib.sha256(a.tobytes()).hexdigest()


def _difference(counted: int, model: int) -> str:
    """``counted`` against the timing model's ``model``: cycles and per cent."""
    share = f" ({100 * (counted - model) / model:+.3f} %)" if model else ""
    return f"{counted - model:+,}{share}"


def _counts(ops: list[CpuOp]) -> str:
    counts: dict[str, int] = {}
    for c in ops:
        counts[c.op] = counts.get(c.op, 0) + 1
    return ", ".join(f"{op} x{n}" for op, n in counts.items())


def _table(rows: list[tuple[str, ...]], right: tuple[int, ...] = ()) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in rows]


class DeployedModel:
    """A model ready to run: :meth:`run` it on inputs (each run is one inference, with its
    own trace of offloaded calls). ``main_ops``: the VM's ``main`` in order, ``("",
    CpuOp)`` for an op TVM compiled for the CPU, ``(symbol, None)`` for an offloaded
    region's call."""

    def __init__(self, name: str, hw: HardwareConfig, device: Device,
                 input_spec: tuple[str, tuple[int, ...], np.dtype], vm: Any, trace: Trace,
                 main_ops: list[tuple[str, CpuOp | None]], seconds: dict[str, float],
                 model_macs: int = 0, float_macs: int = 0) -> None:
        self.name = name
        self.model_macs = model_macs
        self.float_macs = float_macs
        self.hw = hw
        self.device = device
        self.input_name, self.input_shape, self.input_dtype = input_spec
        #: What the model takes (checks what it is given: :class:`ModelInput`).
        self.input = ModelInput(*input_spec)
        self.vm = vm
        self.trace = trace
        self.main_ops = main_ops
        self.seconds = seconds
        #: what the build tuned (a compiled model's; None for a loaded bundle)
        self.tuning: dict[str, Any] | None = None

    def run(self, x: Any = None, seed: int = 0) -> DeployResult:
        """One inference on ``x`` (None: :func:`random_input` with ``seed``)."""
        x = random_input(self.input_shape, self.input_dtype, seed) if x is None \
            else self.input.check(x)
        self.trace.calls.clear()
        self.trace.host_ops.clear()
        self.trace.error = None
        t0 = time.perf_counter()
        with reraised(self.trace):
            output = run_main(self.vm, x)
        seconds = {**self.seconds, "run": time.perf_counter() - t0}
        cpu: list[CpuOp] = []
        for symbol, op in self.main_ops:
            if op is not None:
                cpu.append(op)
            else:
                cpu += [h for s, h in self.trace.host_ops if s == symbol]
        calls = tuple(self.trace.calls)
        return DeployResult(self.name, self.hw, self.device.name, calls, tuple(cpu),
                            sum(c.cycles for c in calls), output, seconds, self.model_macs,
                            cycle_counter=self.device.cycle_counter, tuning=self.tuning,
                            float_macs=self.float_macs)


@contextlib.contextmanager
def reraised(trace: Trace) -> Iterator[None]:
    """The exception a function TVM called raised, as it was (TVM turns it into a
    RuntimeError on its way back); Ctrl-C meanwhile a KeyboardInterrupt, wherever it lands
    (in a function TVM calls it would come back as a bare RuntimeError too)."""
    with _interrupts_noted() as noted:
        try:
            yield
        except BaseException:
            error, trace.error = trace.error, None
            if noted:
                raise KeyboardInterrupt from None
            if error is not None:
                raise error from None
            raise


@contextlib.contextmanager
def _interrupts_noted() -> Iterator[list[int]]:
    """Meanwhile, each SIGINT noted in the list yielded before Python's handler (or the
    one installed) raises KeyboardInterrupt; nothing changes off the main thread or where
    SIGINT is ignored."""
    noted: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)
        previous(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


#: The values a random input of a wider integer type takes: [0, this). Such an input is an
#: index (BERT's token ids, gathered from an embedding table): out of its table, TVM's
#: gather reads out of bounds and the process dies.
INDEX_VALUES = 100


#: The largest seed (numpy seeds a generator with a non-negative integer; the tuner's
#: seeds are 32-bit too).
SEED_MAX = 2**32 - 1


def random_input(shape: tuple[int, ...], dtype: np.dtype, seed: int = 0) -> np.ndarray:
    """A seeded random input: N(0, 1) floats; uniform 8-bit integers over their range;
    wider integers (indices: token ids) in [0, :data:`INDEX_VALUES`). DeployError for a
    seed out of 0..:data:`SEED_MAX`."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= SEED_MAX:
        raise DeployError(f"seed must be an integer in 0..{SEED_MAX}, got {seed!r}")
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        if info.bits > 8:
            return rng.integers(0, INDEX_VALUES, shape).astype(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def output_file(given: str | Path | None, default: str | Path) -> Path:
    """The file a command writes its output to (``given``, else ``default``), checked
    before any work (a model's run is not lost on a place it cannot write): exactly the
    path named, never a directory; DeployError naming it otherwise."""
    out = Path(given if given is not None else default)
    what = f"--output {out}" if given is not None else f"{out} (the default --output)"
    if out.is_dir():
        raise DeployError(f"{what} is a directory: name the file (e.g. {out / 'y.npy'})")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        existed = out.exists()
        with open(out, "ab"):  # creatable or writable; a probe left behind is removed
            pass
        if not existed:
            out.unlink()
    except OSError as exc:
        raise DeployError(f"cannot write {what}: {exc.strerror or exc}") from None
    return out


def save_output(out: Path, array: np.ndarray) -> None:
    """``array`` saved in NumPy's format to exactly ``out`` (``np.save`` given a name adds
    ``.npy`` to it; given a file object, it does not)."""
    try:
        with open(out, "wb") as f:
            np.save(f, array)
    except OSError as exc:
        raise DeployError(f"cannot write {out}: {exc.strerror or exc}") from None
