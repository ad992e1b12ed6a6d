"""Schedule templates for VTA operators: knobs, legality, config <-> schedule, and the
default (fallback) schedule of any workload. No Optuna.

A :class:`Template` is plain data plus pure functions, so any search strategy can use it:
knobs with fixed ordered choices (ints and strings: Optuna-categorical friendly), a config
is ``{knob name: choice}``, ``to_schedule`` / ``from_schedule`` convert, ``check`` /
``legal`` decide legality with arithmetic only (the one rule function,
``vtatune.lowering.rules``, ~10-20 µs), and ``legal_configs`` / ``count_legal`` enumerate.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> tpl = get_template(WORKLOADS["conv2d"]["tutorial"], DEFAULT)
    >>> tpl.name, [k.name for k in tpl.knobs][:3]
    ('conv2d.full.v1', ['tile_b', 'tile_h', 'tile_w'])
    >>> tpl.legal(tpl.default_config())
    True
    >>> tpl.to_schedule(tpl.default_config()).short()
    'b1 h14 w14 co8 ci1 vt1x1 bhcw [ci,w,kw,kh,co,h] store=tile reuse'

Knobs of the ``full`` space (vtatune's own; ``w`` knobs only for conv2d)
------------------------------------------------------------------------
``tile_b``      batch blocks per tile: divisors of N / BATCH
``tile_h``      output rows per tile and thread: divisors of the output height (GEMM: of
                its rows N / BATCH, with ``rows="spatial"``)
``tile_w``      output columns per tile: divisors of the output width
``tile_ci``     input-channel blocks per load step: divisors of CI / BLOCK_IN
``tile_co``     output-channel blocks per tile and thread: divisors of CO / BLOCK_OUT
``oc_nthread``  virtual threads on the output-channel tiles, (1, 2)
``h_nthread``   virtual threads on the row tiles, (1, 2)
``rows``        GEMM only: ``batch`` (its rows tiled by ``tile_b``, each row its own input
                load and GEMM kernel, as TVM's dense_packed) or ``spatial`` (tiled by
                ``tile_h`` as a 1x1 conv's pixels: a tile's rows in one load and in the GEMM
                instruction's loops, ``h_nthread`` threads on them). The legality rule
                ``row_mode`` keeps each mode's knobs to itself. The GEMM's full space is
                ``gemm.full.v2`` (v1, before ``spatial``, had neither ``tile_h`` nor
                ``h_nthread``; its logs still load and replay: ``rows`` defaults to
                ``batch``).
``gemm_order``  the inner loop order (curated, below)
``outer_order`` the order of the outer tile loops (curated, below); never affects legality
``store``       only with ``get_template(..., tune_store=True)``: ``tile`` / ``element``

Fixed in the full space: ``store="tile"`` (the largest legal 2D DMA: fewest STOREs),
``reuse=True`` (skipping the LOAD of a tile already resident in its SRAM slot only removes
DMA work), ``clip_order="min_max"`` (both orders cost the same ALU work),
``tvm_strict=False``.

Pruning: a choice that no legal config can use is dropped when the template is built
(``Template.pruned`` lists them; ``raw_size()`` is the size before). Small spaces (the
autotvm ones, GEMM) are pruned exactly by enumeration; larger ones drop a value when it
fails a monotone rule (SRAM capacity, thread split) with every other knob at its smallest
choice, which proves that no completion is legal. E.g. ``h_nthread=2`` for C11 (7 rows), or
``tile_ci > 1`` in the autotvm space of a padded conv (TVM cannot pad a multi-block load).

Curated loop orders (what is kept, and why nothing that matters is lost)
-------------------------------------------------------------------------
``outer_order``: unit loops are never emitted, so a program depends only on the relative
order of the outer axes whose loop can iterate more than once. One ``bhcw`` permutation is
kept per relative order of the workload's *relevant* axes (those with more than one block):
6 for a batch-1 conv2d; a GEMM's rows count as ``b`` and ``h`` (its two row modes): 6 for a
GEMM of several rows. AutoTVM's ``bhcw`` and the
tutorials' ``bchw`` represent their classes.

``gemm_order``: of the inner loops (``ci co h w kh kw``) the two outermost non-unit ones
fold into the GEMM instruction's loops, the rest unroll into micro-ops. For every
counter and every cycle of the timing model only (a) the folded pair (which loop is
``iter_out`` / ``iter_in``) and (b) the *set* of unrolled extents matter: the uop count is
the product of the unrolled extents whatever their order, GEMM costs one cycle per uop. The
order of the unrolled axes decides only the dst-distinct rule (two uops within distance 2
must not write the same ACC row). Because the ACC index is injective in (co, h, w) and
ignores (ci, kh, kw), an order with the dst-free axes outermost and (co, h, w) innermost is
legal whenever any order of the same unrolled set is. So one order per ordered pair of
relevant axes, rest in that canonical form, loses no legal program class: 30 (+1) for a
3x3 conv, 12 for a 1x1 conv, 6 for a GEMM of several rows (ci, co and its rows as ``h``;
instead of 720). AutoTVM's ``ci,w,kw,kh,co,h`` and
the conv tutorial's ``co,h,ci,kh,kw,w`` are canonical for their pairs and replace those
entries; the GEMM tutorial's ``co,h,w,ci,kh,kw`` is added as is (for GEMM it is the
``co,ci`` entry). ``from_schedule`` maps any order to the choice that gives the schedule
the same program.

The ``autotvm`` space: AutoTVM's conv2d_packed / dense_packed
--------------------------------------------------------------
Knobs: exactly the template's — conv2d ``tile_b tile_h tile_w tile_ci tile_co oc_nthread
h_nthread`` (group_conv2d_packed and conv2d_transpose_packed define the same; group_conv2d's
``tile_ci`` splits one group's input blocks), dense ``tile_b tile_ci tile_co oc_nthread``
— with the orders fixed to
AutoTVM's (``outer_order="bhcw"``, ``gemm_order="ci,w,kw,kh,co,h"``), ``store="tile"``,
``reuse=False``, ``clip_order="min_max"`` and ``tvm_strict=True`` (TVM's own lowering
limits). AutoTVM writes each tile knob as a split ``[outer, inner]`` of the axis' block
count; the config holds the inner factor (the tile), ``outer = extent // inner``.
``Template.autotvm_knobs(config)`` gives the AutoTVM point (``vtatune.schedule.to_autotvm``)
and ``to_schedule(config) == from_autotvm(autotvm_knobs(config))``. Legality is what TVM
builds and runs: ``dense_packed`` compiles only ``tile_co`` inner 1 and ``oc_nthread`` 1
(``tvm_dense_tensorize``), and no schedule's batch tile exceeds 99 rows, the runtime's
kernel-key limit (``uop_kernel_keys``), so gemm.dense128's 256 points have 28 legal.
ResNet-18 C8 has AutoTVM's 1600 points (``prune=False``); pruning leaves 320 (``tile_ci``
must be 1).

    >>> c8 = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> atvm = get_template(c8, DEFAULT, space="autotvm")
    >>> atvm.raw_size(), atvm.size(), atvm.count_legal()
    (1600, 320, 103)
    >>> atvm.autotvm_knobs({"tile_b": 1, "tile_h": 14, "tile_w": 14, "tile_ci": 1,
    ...                     "tile_co": 4, "oc_nthread": 2, "h_nthread": 1})["tile_co"]
    [4, 4]
"""

from search_spaces._defaults import stock_candidates
from search_spaces._resolve import default_schedule, resolve_schedule
from search_spaces._template import LEGALITY_FREE, SPACES, Knob, Template, get_template

__all__ = ["LEGALITY_FREE", "SPACES", "Knob", "Template", "default_schedule", "get_template",
           "resolve_schedule", "stock_candidates"]
