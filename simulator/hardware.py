"""VTA hardware configuration: the ``vta_config.json`` keys and everything derived from them.

A :class:`HardwareConfig` holds only the independent parameters (the ``LOG_*`` keys, the
target and the board facts); every size is a derived property, so no number is typed twice.

Example:
    >>> hw = HardwareConfig.preset("pynq")
    >>> hw.bitstream, hw.inp_depth, hw.wgt_elem_bytes
    ('1x16_i8w8a32_15_15_18_17', 2048, 256)
    >>> hw.target_model
    'pynq_1x16_i8w8a32_15_15_18_17'
"""

from __future__ import annotations

import re
from dataclasses import InitVar, asdict, dataclass, replace
from pathlib import Path
from typing import Any

from simulator._jsonfile import load_json
from simulator.errors import ConfigError

__all__ = [
    "BOARDS", "DEFAULT", "HardwareConfig", "PRESETS",
]

#: TVM's target model: <target>_<B>x<BLOCK_IN>[x<BLOCK_OUT>]_i<I>w<W>a<A>_<uop>_<inp>_<wgt>_<acc>
_TARGET_MODEL = re.compile(
    r"^([a-z0-9]+)_(\d+)x(\d+)(?:x(\d+))?_i(\d+)w(\d+)a(\d+)_(\d+)_(\d+)_(\d+)_(\d+)$")

#: Board facts: clock (MHz) and AXI data bus width (bits) per target.
BOARDS: dict[str, tuple[float, int]] = {
    "sim": (100.0, 64),
    "tsim": (100.0, 64),
    "pynq": (100.0, 64),
    "de10nano": (100.0, 64),
    "ultra96": (333.0, 128),
    "zcu104": (333.0, 128),
    "intelfocl": (100.0, 64),
}

_LOG_KEYS = (
    "LOG_INP_WIDTH",
    "LOG_WGT_WIDTH",
    "LOG_ACC_WIDTH",
    "LOG_BATCH",
    "LOG_BLOCK_IN",
    "LOG_BLOCK_OUT",
    "LOG_UOP_BUFF_SIZE",
    "LOG_INP_BUFF_SIZE",
    "LOG_WGT_BUFF_SIZE",
    "LOG_ACC_BUFF_SIZE",
)

#: Range each LOG_* key may take (inclusive).
_LOG_RANGES = {
    "LOG_INP_WIDTH": (3, 3),
    "LOG_WGT_WIDTH": (3, 3),
    "LOG_ACC_WIDTH": (5, 5),
    "LOG_BATCH": (0, 4),
    "LOG_BLOCK_IN": (2, 6),
    "LOG_BLOCK_OUT": (2, 6),
    "LOG_UOP_BUFF_SIZE": (10, 20),
    "LOG_INP_BUFF_SIZE": (10, 22),
    "LOG_WGT_BUFF_SIZE": (10, 22),
    "LOG_ACC_BUFF_SIZE": (10, 22),
}


@dataclass(frozen=True)
class HardwareConfig:
    """One VTA configuration. Field names follow ``vta_config.json`` in lower case.

    BLOCK_IN and BLOCK_OUT are separate fields, as VTA's hardware has them (the HLS
    ``hw_spec.h`` VTA_LOG_BLOCK_IN / VTA_LOG_BLOCK_OUT, the Chisel ``CoreParams`` blockIn /
    blockOut). TVM's ``vta_config.json`` has one ``LOG_BLOCK`` and its ``pkg_config.py``
    sets both from it; ``log_block=`` (constructor, :func:`dataclasses.replace`) and the
    ``LOG_BLOCK`` key mean both, and :attr:`tvm_stock_blocks` says whether TVM's stock
    toolchain can build the configuration.
    """

    target: str = "pynq"
    hw_ver: str = "0.0.2"
    log_inp_width: int = 3
    log_wgt_width: int = 3
    log_acc_width: int = 5
    log_batch: int = 0
    log_block_in: int = 4
    log_block_out: int = 4
    log_uop_buff_size: int = 15
    log_inp_buff_size: int = 15
    log_wgt_buff_size: int = 18
    log_acc_buff_size: int = 17
    # vta_config.json's LOG_BLOCK: sets BLOCK_IN and BLOCK_OUT. An init-only argument, not
    # stored (``hw.log_block`` reads None): read log_block_in / log_block_out.
    log_block: InitVar[int | None] = None

    def __post_init__(self, log_block: int | None) -> None:
        if log_block is not None:
            object.__setattr__(self, "log_block_in", log_block)
            object.__setattr__(self, "log_block_out", log_block)
        if self.target not in BOARDS:
            raise ConfigError(
                f"TARGET: unknown target {self.target!r} (known: {', '.join(BOARDS)})"
            )
        for key in _LOG_KEYS:
            value = getattr(self, key.lower())
            lo, hi = _LOG_RANGES[key]
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ConfigError(f"{key}: must be an integer in [{lo}, {hi}], got {value!r}")
        # Every buffer must hold at least one element of its kind.
        for name in ("inp", "wgt", "acc"):
            if getattr(self, f"{name}_depth") < 1:
                raise ConfigError(
                    f"LOG_{name.upper()}_BUFF_SIZE: {getattr(self, f'{name}_buff_bytes')} B "
                    f"holds no {getattr(self, f'{name}_elem_bytes')}-byte {name} element"
                )

    # --- construction -------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str) -> HardwareConfig:
        """A named configuration: ``pynq`` (default 1x16), ``ultra96``, ``de10nano``, ``4x8``,
        ``1x32`` or ``sim``."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ConfigError(
                f"unknown hardware preset {name!r} (known: {', '.join(PRESETS)})"
            ) from None

    @classmethod
    def from_dict(cls, data: Any) -> HardwareConfig:
        """Build from the keys of a ``vta_config.json`` (upper-case keys, as users have it)."""
        if not isinstance(data, dict):
            raise ConfigError("hardware config must be a JSON object of vta_config.json keys")
        known = {"TARGET", "HW_VER", "LOG_BLOCK", *_LOG_KEYS}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{unknown[0]}: unknown key in hardware config")
        data = dict(data)
        if "LOG_BLOCK" in data:  # TVM's key: BLOCK_IN = BLOCK_OUT = 2^LOG_BLOCK
            block = data.pop("LOG_BLOCK")
            for key in ("LOG_BLOCK_IN", "LOG_BLOCK_OUT"):
                if key in data and data[key] != block:
                    raise ConfigError(f"{key}: {data[key]!r} contradicts LOG_BLOCK {block!r} "
                                      "(give LOG_BLOCK, or LOG_BLOCK_IN and LOG_BLOCK_OUT)")
                data[key] = block
        missing = [k for k in _LOG_KEYS if k not in data]
        if missing:
            hint = " (or LOG_BLOCK for both)" if missing[0].startswith("LOG_BLOCK_") else ""
            raise ConfigError(f"{missing[0]}: missing key in hardware config{hint}")
        kwargs: dict[str, Any] = {k.lower(): data[k] for k in _LOG_KEYS}
        if "TARGET" in data:
            if not isinstance(data["TARGET"], str):
                raise ConfigError(f"TARGET: must be a string, got {data['TARGET']!r}")
            kwargs["target"] = data["TARGET"]
        if "HW_VER" in data:
            kwargs["hw_ver"] = str(data["HW_VER"])
        return cls(**kwargs)

    @classmethod
    def from_json(cls, path: str | Path) -> HardwareConfig:
        """Load a ``vta_config.json`` file."""
        data = load_json(path, "hardware config")
        return cls.from_dict(data)

    @classmethod
    def from_target_model(cls, model: str) -> HardwareConfig:
        """The inverse of :attr:`target_model`: the hardware of a TVM target model such as
        ``pynq_1x16_i8w8a32_15_15_18_17`` (or ``..._1x16x32_...`` when the blocks differ).

        Example:
            >>> HardwareConfig.from_target_model("pynq_1x16_i8w8a32_15_15_18_17") == DEFAULT
            True
        """
        m = _TARGET_MODEL.match(model)
        if not m:
            raise ConfigError(f"unknown VTA model {model!r} (want <target>_<B>x<BLOCK>_i8w8a32_"
                              "<uop>_<inp>_<wgt>_<acc>)")
        target, batch, block_in, block_out, *rest = m.groups()
        block_out = block_out or block_in
        inp, wgt, acc, uop, ibuf, wbuf, abuf = (int(x) for x in rest)
        batch, block_in, block_out = int(batch), int(block_in), int(block_out)
        for name, v in (("batch", batch), ("block in", block_in), ("block out", block_out),
                        ("inp width", inp), ("wgt width", wgt), ("acc width", acc)):
            if v < 1 or v & (v - 1):
                raise ConfigError(f"VTA model {model!r}: {name} {v} is not a power of two")
        return cls(target=target, log_inp_width=inp.bit_length() - 1,
                   log_wgt_width=wgt.bit_length() - 1, log_acc_width=acc.bit_length() - 1,
                   log_batch=batch.bit_length() - 1, log_block_in=block_in.bit_length() - 1,
                   log_block_out=block_out.bit_length() - 1, log_uop_buff_size=uop,
                   log_inp_buff_size=ibuf, log_wgt_buff_size=wbuf, log_acc_buff_size=abuf)

    @classmethod
    def resolve(cls, spec: str | None) -> HardwareConfig:
        """A preset name or a path to a ``vta_config.json``; ``None`` gives the default."""
        if spec is None:
            return DEFAULT
        if spec in PRESETS:
            return PRESETS[spec]
        if spec.endswith(".json") or Path(spec).exists():
            return cls.from_json(spec)
        raise ConfigError(
            f"unknown hardware {spec!r}: give a preset ({', '.join(PRESETS)}) or a "
            "vta_config.json path"
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``vta_config.json`` form (upper-case keys): TVM's single ``LOG_BLOCK`` when
        BLOCK_IN = BLOCK_OUT, else ``LOG_BLOCK_IN`` and ``LOG_BLOCK_OUT`` (the HLS names;
        TVM's stock ``pkg_config.py`` does not read them)."""
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            if k == "log_block_out" and self.tvm_stock_blocks:
                continue
            if k == "log_block_in" and self.tvm_stock_blocks:
                k = "log_block"
            out[k.upper()] = v
        return out

    def with_target(self, target: str) -> HardwareConfig:
        return replace(self, target=target)

    # --- widths and block sizes ---------------------------------------------------------
    @property
    def inp_width(self) -> int:
        return 1 << self.log_inp_width

    @property
    def wgt_width(self) -> int:
        return 1 << self.log_wgt_width

    @property
    def acc_width(self) -> int:
        return 1 << self.log_acc_width

    @property
    def out_width(self) -> int:
        return self.inp_width

    @property
    def batch(self) -> int:
        return 1 << self.log_batch

    @property
    def block_in(self) -> int:
        return 1 << self.log_block_in

    @property
    def block_out(self) -> int:
        return 1 << self.log_block_out

    @property
    def tvm_stock_blocks(self) -> bool:
        """BLOCK_IN = BLOCK_OUT: TVM's stock VTA toolchain (``pkg_config.py`` derives both
        from LOG_BLOCK) can compile for it; otherwise it needs a toolchain change."""
        return self.log_block_in == self.log_block_out

    # --- element sizes (bytes) ----------------------------------------------------------
    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_width // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_width // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_width // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.out_width // 8

    uop_elem_bytes = 4
    insn_bytes = 16

    # --- buffer sizes (bytes) and depths (elements) -------------------------------------
    @property
    def uop_buff_bytes(self) -> int:
        return 1 << self.log_uop_buff_size

    @property
    def inp_buff_bytes(self) -> int:
        return 1 << self.log_inp_buff_size

    @property
    def wgt_buff_bytes(self) -> int:
        return 1 << self.log_wgt_buff_size

    @property
    def acc_buff_bytes(self) -> int:
        return 1 << self.log_acc_buff_size

    @property
    def out_buff_bytes(self) -> int:
        # The output buffer has as many elements as the accumulator.
        return self.acc_depth * self.out_elem_bytes

    @property
    def uop_depth(self) -> int:
        return self.uop_buff_bytes // self.uop_elem_bytes

    @property
    def inp_depth(self) -> int:
        return self.inp_buff_bytes // self.inp_elem_bytes

    @property
    def wgt_depth(self) -> int:
        return self.wgt_buff_bytes // self.wgt_elem_bytes

    @property
    def acc_depth(self) -> int:
        return self.acc_buff_bytes // self.acc_elem_bytes

    @property
    def out_depth(self) -> int:
        return self.acc_depth

    # --- names and board facts ----------------------------------------------------------
    @property
    def bitstream(self) -> str:
        """e.g. ``1x16_i8w8a32_15_15_18_17`` (TVM's name); BATCH x BLOCK_IN x BLOCK_OUT, e.g.
        ``1x16x32_i8w8a32_...``, when the blocks differ (a name TVM never produces)."""
        blocks = (f"{self.block_in}" if self.tvm_stock_blocks
                  else f"{self.block_in}x{self.block_out}")
        return (
            f"{self.batch}x{blocks}_i{self.inp_width}w{self.wgt_width}a{self.acc_width}"
            f"_{self.log_uop_buff_size}_{self.log_inp_buff_size}_{self.log_wgt_buff_size}"
            f"_{self.log_acc_buff_size}"
        )

    @property
    def target_model(self) -> str:
        """TVM's target model string ``<TARGET>_<bitstream>``."""
        return f"{self.target}_{self.bitstream}"

    @property
    def autotvm_target(self) -> str:
        return f"ext_dev -device=vta -keys=cpu -model={self.target_model}"

    @property
    def clock_mhz(self) -> float:
        return BOARDS[self.target][0]

    @property
    def bus_bits(self) -> int:
        return BOARDS[self.target][1]

    @property
    def macs_per_cycle(self) -> int:
        return self.batch * self.block_in * self.block_out

    @property
    def peak_gops(self) -> float:
        """Peak int8 throughput (2 ops per MAC) at the board clock."""
        return 2 * self.macs_per_cycle * self.clock_mhz / 1000.0

    def summary(self) -> str:
        return f"{self.target} {self.bitstream} @ {self.clock_mhz:g} MHz, {self.bus_bits}-bit bus"


DEFAULT = HardwareConfig()

PRESETS: dict[str, HardwareConfig] = {
    "pynq": DEFAULT,
    "ultra96": replace(DEFAULT, target="ultra96"),
    "de10nano": replace(DEFAULT, target="de10nano"),
    "4x8": replace(
        DEFAULT,
        log_batch=2,
        log_block=3,
        log_uop_buff_size=15,
        log_inp_buff_size=16,
        log_wgt_buff_size=16,
        log_acc_buff_size=18,
    ),
    "1x32": replace(
        DEFAULT, log_block=5, log_inp_buff_size=16, log_wgt_buff_size=20, log_acc_buff_size=18
    ),
    "sim": replace(DEFAULT, target="sim"),
}
