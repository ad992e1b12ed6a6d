"""Search spaces: sizes, legality (cheap rules vs built kernels and lowering), round trips."""

import itertools
import random
from dataclasses import replace

import pytest

from search_spaces import get_template
from simulator.functional import count
from simulator.hardware import DEFAULT, PRESETS
from vtatune.errors import IllegalSchedule, ScheduleError

# whitebox: the kernel rules are recorded and checked against built kernels (tests/test_imports.py)
from vtatune.lowering import _plan, _rules, legality, lower, rules
from vtatune.schedule import (
    GEMM_AXES,
    Schedule,
    from_autotvm,
    gemm_tutorial_schedule,
    tutorial_schedule,
)
from vtatune.workloads import WORKLOADS, Conv2dWorkload, GemmWorkload, resnet18_layers

HW48 = PRESETS["4x8"]
C8 = WORKLOADS["conv2d"]["resnet18.C8"]
CASES = ([(wl, DEFAULT) for wl in resnet18_layers()]
         + [(WORKLOADS["gemm"]["tutorial"], DEFAULT), (WORKLOADS["gemm"]["dense128"], DEFAULT),
            (GemmWorkload(16, 256, 128), HW48),
            (Conv2dWorkload(4, 14, 14, 256, 256, 3, 1, 1), HW48),
            (Conv2dWorkload(4, 28, 28, 128, 256, 1, 0, 2), HW48)])


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


# --- sizes and the AutoTVM sub-space ---------------------------------------------------------


def test_autotvm_c8_has_1600_points_and_103_legal():
    raw = get_template(C8, DEFAULT, space="autotvm", prune=False)
    assert raw.size() == 1600  # 1 x 4 x 4 x 5 x 5 x 2 x 2, as AutoTVM reports
    brute = [c for c in itertools.starmap(
        lambda *v: dict(zip(raw.knob_names, v, strict=True)),
        itertools.product(*(k.choices for k in raw.knobs))) if raw.legal(c)]
    assert list(raw.legal_configs()) == brute
    tpl = get_template(C8, DEFAULT, space="autotvm")
    assert (tpl.raw_size(), tpl.size(), tpl.count_legal()) == (1600, 320, len(brute))
    # TVM cannot pad a load of several channel blocks: every tile_ci > 1 is pruned
    assert tpl.pruned == (("tile_ci", (2, 4, 8, 16)),)
    # TopHub's shipped best C8 point is in the space and legal
    best = tpl.from_autotvm({"tile_b": [1, 1], "tile_h": [1, 14], "tile_w": [1, 14],
                             "tile_ci": [16, 1], "tile_co": [4, 4], "oc_nthread": 2,
                             "h_nthread": 1})
    assert best is not None and tpl.legal(best)


@pytest.mark.parametrize("wl", [C8, WORKLOADS["conv2d"]["resnet18.C4"],
                                WORKLOADS["gemm"]["tutorial"], WORKLOADS["gemm"]["dense128"]],
                         ids=lambda w: w.name)
def test_autotvm_space_is_from_autotvm(wl):
    tpl = get_template(wl, DEFAULT, space="autotvm", prune=False)
    for i in range(tpl.size()):
        config = tpl.config_at(i)
        knobs = tpl.autotvm_knobs(config)
        assert tpl.to_schedule(config) == from_autotvm(knobs, wl, DEFAULT)
        assert tpl.from_autotvm(knobs) == config
        inner = {k: v[1] if isinstance(v, list) else v for k, v in knobs.items()}
        assert inner == config  # the config holds AutoTVM's inner split factors


def test_sizes_are_products_of_curated_choices():
    tpl = get_template(C8, DEFAULT)
    sizes = {k.name: len(k.choices) for k in tpl.knobs}
    # batch 1: b never iterates, 3! orders of h, c, w; 30 folded pairs + the GEMM tutorial's
    assert sizes == {"tile_b": 1, "tile_h": 4, "tile_w": 4, "tile_ci": 5, "tile_co": 5,
                     "oc_nthread": 2, "h_nthread": 2, "gemm_order": 31, "outer_order": 6}
    assert tpl.size() == 1600 * 31 * 6
    gemm = get_template(WORKLOADS["gemm"]["tutorial"], DEFAULT)
    assert gemm.knob("gemm_order").choices == ("ci,w,kw,kh,co,h", "co,h,w,ci,kh,kw")
    assert gemm.knob("outer_order").choices == ("bhcw",)
    assert len(get_template(WORKLOADS["conv2d"]["resnet18.C4"], DEFAULT)
               .knob("gemm_order").choices) == 13  # 1x1: 4 relevant axes, 12 pairs + 1
    for tpl in (get_template(C8, DEFAULT), get_template(GemmWorkload(64, 64, 64), DEFAULT)):
        orders = tpl.knob("gemm_order").choices
        assert {"ci,w,kw,kh,co,h", "co,h,w,ci,kh,kw"} <= set(orders) or len(orders) == 2
    assert "co,h,ci,kh,kw,w" in get_template(C8, DEFAULT).knob("gemm_order").choices


def test_count_legal_matches_enumeration():
    for wl, hw in [(WORKLOADS["gemm"]["dense128"], DEFAULT), (GemmWorkload(16, 256, 128), HW48),
                   (WORKLOADS["conv2d"]["resnet18.C11"], DEFAULT)]:
        tpl = get_template(wl, hw)
        configs = list(tpl.legal_configs())
        assert tpl.count_legal() == len(configs) > 0
        assert configs == sorted(configs, key=tpl.index_of)  # product order
    small = get_template(WORKLOADS["gemm"]["dense128"], DEFAULT, prune=False)
    brute = sum(small.legal(small.config_at(i)) for i in range(small.size()))
    assert small.count_legal() == brute


# --- pruning ---------------------------------------------------------------------------------


def test_pruned_choices_are_unusable_and_kept_ones_used():
    # C11 has 7 output rows: no even row-tile split exists
    c11 = get_template(WORKLOADS["conv2d"]["resnet18.C11"], DEFAULT)
    assert c11.knob("h_nthread").choices == (1,) and ("h_nthread", (2,)) in c11.pruned
    # a 3x3 conv with 128 input blocks: 128*9 weight blocks overflow the 1024-deep WGT
    wide = get_template(Conv2dWorkload(1, 14, 14, 2048, 64, 3, 1, 1), DEFAULT)
    assert ("tile_ci", (128,)) in wide.pruned and 64 in wide.knob("tile_ci").choices
    # exact pruning (small space): every removed value is illegal everywhere and every
    # remaining value occurs in a legal config
    wl = GemmWorkload(1, 32768, 16)
    raw, tpl = get_template(wl, DEFAULT, prune=False), get_template(wl, DEFAULT)
    legal = list(raw.legal_configs())
    assert dict(tpl.pruned)["tile_ci"] == (2048,)
    for k in tpl.knobs:
        assert {c[k.name] for c in legal} == set(k.choices)


def test_unknown_space_and_bad_configs():
    with pytest.raises(ScheduleError, match="unknown search space 'ansor'"):
        get_template(C8, DEFAULT, space="ansor")
    with pytest.raises(ScheduleError, match="full space only"):
        get_template(C8, DEFAULT, space="autotvm", tune_store=True)
    tpl = get_template(C8, DEFAULT)
    cfg = tpl.default_config()
    with pytest.raises(ScheduleError, match="missing tile_h"):
        tpl.check({k: v for k, v in cfg.items() if k != "tile_h"})
    with pytest.raises(ScheduleError, match="unknown tile_x"):
        tpl.legal(dict(cfg, tile_x=1))
    with pytest.raises(ScheduleError, match="oc_nthread must be 1 or 2"):
        tpl.legal(dict(cfg, oc_nthread=4))
    with pytest.raises(IllegalSchedule, match="tile_h=5 does not divide the 14") as exc:
        tpl.check(dict(cfg, tile_h=5))
    assert exc.value.rule == "tile_divides"


def _rules_verdict(tpl, config):
    """What the rules say of a config, straight from them (no template memo)."""
    try:
        rules(tpl.context, tpl.to_schedule(config), tpl.bias)
    except IllegalSchedule as exc:
        return exc.rule, str(exc)
    return None


def _check_verdict(tpl, config):
    try:
        tpl.check(config)
    except IllegalSchedule as exc:
        assert tpl.legal(config) is False
        return exc.rule, str(exc)
    assert tpl.legal(config) is True
    return None


@pytest.mark.parametrize("wl, hw, kw", [
    (C8, DEFAULT, {"space": "autotvm", "prune": False}),
    (WORKLOADS["gemm"]["tutorial"], DEFAULT, {}),
    # the largest space (about 10 s): the full sweep only; conv-store covers tune_store
    pytest.param(WORKLOADS["gemm"]["dense128"], DEFAULT, {"tune_store": True},
                 marks=pytest.mark.slow),
    (GemmWorkload(16, 256, 128), HW48, {"bias": True}),
    (Conv2dWorkload(1, 7, 7, 64, 64, 3, 1, 1), DEFAULT, {"bias": True}),
    (Conv2dWorkload(1, 7, 7, 64, 64, 3, 1, 1), DEFAULT, {"tune_store": True}),
], ids=["c8-autotvm-raw", "gemm", "dense128-store", "gemm-4x8-bias", "conv-bias", "conv-store"])
def test_remembered_legality_is_the_rules_on_every_config(wl, hw, kw):
    """check/legal remember the rules' verdict per combination of the knobs the rules read
    (outer orders share one): on every config of the space, in two passes (the second
    answered from memory, in another order), the same rule and message as the rules."""
    tpl = get_template(wl, hw, **kw)
    configs = [tpl.config_at(i) for i in range(tpl.size())]
    expected = [_rules_verdict(tpl, c) for c in configs]
    assert any(e is None for e in expected) and any(e is not None for e in expected)
    assert [_check_verdict(tpl, c) for c in configs] == expected
    assert tpl._verdicts  # remembered
    assert tpl._shape_inputs[2]  # and tile shapes failing before the loop orders are read
    assert [_check_verdict(tpl, c) for c in reversed(configs)] == expected[::-1]


def test_remembered_legality_still_validates():
    """A remembered verdict is never handed to a config that is not one of the space's:
    values of another type that compare equal (True, 1.0 for 1), a bad free knob, missing
    or extra knobs, a non-dict."""
    tpl = get_template(C8, DEFAULT)
    cfg = tpl.default_config()
    assert tpl.legal(cfg) and tpl.legal(dict(cfg))  # remembered now
    with pytest.raises(ScheduleError):
        tpl.check(dict(cfg, tile_b=True))
    with pytest.raises(ScheduleError):
        tpl.legal(dict(cfg, tile_h=float(cfg["tile_h"])))
    with pytest.raises(ScheduleError):
        tpl.legal(dict(cfg, outer_order="xyzw"))
    with pytest.raises(ScheduleError, match="missing tile_h"):
        tpl.legal({k: v for k, v in cfg.items() if k != "tile_h"})
    with pytest.raises(ScheduleError, match="unknown tile_x"):
        tpl.legal(dict(cfg, tile_x=1))
    with pytest.raises(ScheduleError, match="must be a dict"):
        tpl.legal(list(cfg.items()))
    assert tpl.legal(cfg)
    # A tile shape remembered as too big for the SRAM: its other loop orders are refused
    # without a rules pass, but a loop order that is no choice is still malformed.
    big = dict(cfg, tile_h=14, tile_w=14, tile_ci=16, tile_co=16)
    with pytest.raises(IllegalSchedule, match="buffer has") as first:
        tpl.check(big)
    other = next(o for o in tpl.knob("gemm_order").choices if o != big["gemm_order"])
    with pytest.raises(IllegalSchedule) as again:
        tpl.check(dict(big, gemm_order=other))
    assert (again.value.rule, str(again.value)) == (first.value.rule, str(first.value))
    with pytest.raises(ScheduleError):
        tpl.check(dict(big, gemm_order="h,w"))


# --- config <-> schedule ---------------------------------------------------------------------


def test_round_trip_and_equivalent_orders():
    rng = random.Random(1)
    for wl, hw in CASES:
        for space in ("full", "autotvm"):
            tpl = get_template(wl, hw, space=space)
            for _ in range(20):
                config = tpl.config_at(rng.randrange(tpl.size()))
                assert tpl.from_schedule(tpl.to_schedule(config)) == config
                assert tpl.index_of(config) < tpl.size()
    tpl = get_template(C8, DEFAULT)
    # an order outside the choices maps to the choice giving the same program (tile_ci=1:
    # the ci loop vanishes) ...
    base = tpl.to_schedule(tpl.default_config())
    assert base.tile_ci == 1
    s = replace(base, gemm_order="kh,kw,co,ci,h,w")
    cfg = tpl.from_schedule(s)
    assert cfg["gemm_order"] == "ci,kh,kw,co,h,w"  # the first choice with that program
    assert lower(C8, s, DEFAULT).program == lower(C8, tpl.to_schedule(cfg), DEFAULT).program
    # ... but a different uop order is a different program (same cost: see the docstring)
    assert tpl.from_schedule(replace(base, gemm_order="kh,kw,ci,co,w,h")) is None
    # what the space fixes cannot be expressed
    assert tpl.from_schedule(tutorial_schedule(C8)) is None  # store="element"
    stored = get_template(C8, DEFAULT, tune_store=True)
    assert stored.name == "conv2d.full+store.v1"
    cfg = stored.from_schedule(replace(tutorial_schedule(C8), clip_order="min_max", reuse=True))
    assert cfg["store"] == "element" and cfg["gemm_order"] == "co,h,ci,kh,kw,w"
    gemm = WORKLOADS["gemm"]["tutorial"]
    g = get_template(gemm, DEFAULT)
    assert g.from_schedule(replace(gemm_tutorial_schedule(256, 256), store="tile", reuse=True,
                                   clip_order="min_max"))["gemm_order"] == "co,h,w,ci,kh,kw"


@pytest.mark.parametrize("wl, hw", CASES, ids=lambda x: getattr(x, "name", "") or str(x)[:12])
def test_default_config_is_legal(wl, hw):
    for space in ("full", "autotvm"):
        tpl = get_template(wl, hw, space=space)
        # the GEMM's full space is v2 since its rows also tile as pixels (issue 38)
        version = "v2" if (wl.operator, space) == ("gemm", "full") else "v1"
        assert tpl.name == f"{wl.operator}.{space}.{version}"
        assert tpl.legal(tpl.default_config())


def test_legal_configs_really_lower():
    rng = random.Random(7)
    lowered = 0
    for wl, hw in [(C8, DEFAULT), (WORKLOADS["conv2d"]["resnet18.C11"], DEFAULT),
                   (WORKLOADS["gemm"]["tutorial"], DEFAULT), (GemmWorkload(16, 256, 128), HW48),
                   (Conv2dWorkload(4, 14, 14, 256, 256, 3, 1, 1), HW48)]:
        for space in ("full", "autotvm"):
            tpl = get_template(wl, hw, space=space)
            legal = [c for c in (tpl.config_at(rng.randrange(tpl.size())) for _ in range(400))
                     if tpl.legal(c)]
            # keep the lowering cheap: few tiles
            small = [c for c in legal if _tiles(wl, hw, tpl.to_schedule(c)) <= 32][:4]
            for config in small:
                s = tpl.to_schedule(config)
                low = lower(wl, s, hw, verify_encoding=True)  # encodes every field too
                assert count(low.program, hw).gemm_counter > 0
                _assert_kernels_sound(low.plan, hw)
                lowered += 1
    # (the GEMM tutorial's dense_packed space has 7 buildable points, all of 64 tiles)
    assert lowered >= 24


def _tiles(wl, hw, s):
    c = wl.as_conv()
    return (c.batch // hw.batch // s.tile_b * c.out_height // s.tile_h * c.out_width // s.tile_w
            * c.out_channels // hw.block_out // s.tile_co * c.in_channels // hw.block_in
            // s.tile_ci)


def _assert_kernels_sound(plan, hw):
    for t in range(plan.nthreads):
        for bi in range(plan.schedule.tile_b):
            for kern in (plan.gemm_kernel(t, bi), plan.reset_kernel(t, bi)):
                assert len(kern.uops) <= hw.uop_depth
                assert _first_dst_clash(kern.uops) is None


def _first_dst_clash(uops):
    for i in range(1, len(uops)):
        for back in (1, 2):
            if i - back >= 0 and uops[i].dst == uops[i - back].dst:
                return i - back, i, uops[i].dst
    return None


# --- the cheap rules agree with built kernels and with lowering ------------------------------


def _reference_rule(wl, s, hw, bias, monkeypatch):
    """The verdict with the analytic kernel rules replaced by building each micro-op kernel
    (as the emitter does) and scanning its uops."""
    seen = []

    def record(what, axes, folds, ctx):
        seen.append((what, axes, folds, ctx))
        n = 1
        for _, e, _ in axes[folds:]:
            n *= e
        return n

    with monkeypatch.context() as m:
        m.setattr(_rules, "kernel_rules", record)
        # the kernel rules' cache would answer a seen loop nest without calling them
        m.setattr(_rules, "_kernel_facts", _rules._kernel_facts.__wrapped__)
        try:
            legality(wl, s, hw, bias)
            late = None
        except IllegalSchedule as exc:
            late = exc
    if not seen:  # failed before the kernels
        return late.rule, str(late)
    for what, axes, folds, ctx in seen:
        n = 1
        for _, e, _ in axes[folds:]:
            n *= e
        if n > ctx.uop_depth:
            return "uop_capacity", f"has {n} uops"
        kern = _plan._fold_kernel(axes, folds, (0, 0, 0), reset=what == "reset")
        assert len(kern.uops) == n
        if any(lp.extent > ctx.loop_limit for lp in kern.loops):
            return "loop_extent", ""
        clash = _first_dst_clash(kern.uops)
        if clash:
            a, b, d = clash
            return "dst_dependency", f"{what} micro-ops #{a} and #{b} both write ACC[{d}]"
    return (late.rule, str(late)) if late else ("ok", "")


def test_cheap_rules_agree_with_kernels_and_lowering(monkeypatch):
    rng = random.Random(2024)
    small_uop = replace(DEFAULT, log_uop_buff_size=10)  # 256 uops: exercises uop_capacity
    cases = CASES + [(wl, small_uop) for wl in resnet18_layers()[:3]]
    seen, lowered = {}, 0
    for _ in range(400):
        wl, hw = rng.choice(cases)
        c = wl.as_conv()
        order = list(GEMM_AXES)
        rng.shuffle(order)
        s = Schedule(
            tile_b=rng.choice(_divisors(c.batch // hw.batch)),
            tile_h=rng.choice(_divisors(c.out_height)), tile_w=rng.choice(_divisors(c.out_width)),
            tile_co=rng.choice(_divisors(c.out_channels // hw.block_out)),
            tile_ci=rng.choice(_divisors(c.in_channels // hw.block_in)),
            oc_nthread=rng.choice((1, 2)), h_nthread=rng.choice((1, 2)),
            outer_order="".join(rng.sample("bhcw", 4)), gemm_order=",".join(order),
            store=rng.choice(("tile", "element")), tvm_strict=rng.random() < 0.3)
        bias = rng.random() < 0.3
        try:
            legality(wl, s, hw, bias)
            rule, msg = "ok", ""
        except IllegalSchedule as exc:
            rule, msg = exc.rule, str(exc)
        ref_rule, ref_msg = _reference_rule(wl, s, hw, bias, monkeypatch)
        assert (rule, ref_msg in msg) == (ref_rule, True), (wl.describe(), s.short())
        seen[rule] = seen.get(rule, 0) + 1
        if rule == "ok" and _tiles(wl, hw, s) <= 16 and lowered < 25:
            _assert_kernels_sound(lower(wl, s, hw, bias).plan, hw)
            lowered += 1
        elif rule != "ok":
            with pytest.raises(IllegalSchedule) as exc:
                lower(wl, s, hw, bias)
            assert exc.value.rule == rule
    assert {"ok", "dst_dependency", "uop_capacity", "thread_split", "inp_capacity",
            "dma_pattern"} <= set(seen)
    # (7 with seed 7: TVM-strict GEMM points are dense_packed ones, nearly all illegal)
    assert lowered >= 6


# --- exhaustive (slow) -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("wl, hw", CASES, ids=lambda x: getattr(x, "name", "") or str(x)[:12])
def test_exhaustive_legal_counts_and_pruning(wl, hw):
    for space in ("full", "autotvm"):
        raw, tpl = get_template(wl, hw, space=space, prune=False), get_template(wl, hw, space=space)
        legal = list(raw.legal_configs())
        assert raw.count_legal() == len(legal) == tpl.count_legal()
        removed = dict(tpl.pruned)
        for c in legal:
            assert all(c[k] not in v for k, v in removed.items())
        if space == "autotvm":
            assert sum(raw.legal(raw.config_at(i)) for i in range(raw.size())) == len(legal)
