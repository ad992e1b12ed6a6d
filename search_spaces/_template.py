"""The template: knobs with fixed, ordered choices; legality; config <-> schedule.

See the package docstring (``search_spaces/__init__.py``) for the knobs, the curation of the
loop orders and the AutoTVM mapping.
"""

from __future__ import annotations

import itertools
import operator
from collections import namedtuple
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from search_spaces._defaults import first_legal_candidate
from simulator.hardware import HardwareConfig
from vtatune.errors import IllegalSchedule, ScheduleError
from vtatune.lowering import (
    SHAPE_FIELDS,
    SHAPE_RULES,
    Context,
    context,
    rules,
    schedule_context,
    shape_rules,
)
from vtatune.schedule import (
    AUTOTVM_GEMM_ORDER,
    AUTOTVM_OUTER_ORDER,
    GEMM_AXES,
    OUTER_AXES,
    ROW_MODES,
    Schedule,
    from_autotvm,
    gemm_tutorial_schedule,
    to_autotvm,
    tutorial_schedule,
)
from vtatune.workloads import WORKLOADS, AddWorkload, GemmWorkload, Workload

SPACES = ("full", "autotvm")
# The conv tutorial's inner order does not depend on the shape; any conv yields it.
_CONV_PROBE = WORKLOADS["conv2d"]["tutorial"]
VERSION = "v1"
#: The GEMM's full space since it tiles rows as pixels too (knobs ``tile_h``,
#: ``h_nthread``, ``rows``; issue 38): its studies are not v1's (a v1 log's schedules still
#: load and replay: ``rows`` defaults to ``batch``, the only rows v1 had).
GEMM_FULL_VERSION = "v2"

#: Knobs of the full space that no legality rule reads (``vtatune.lowering.rules``):
#: the outer loop order. (The store granularity is read: TVM-strict schedules have a store
#: rule, and the ``field_width`` rule bounds a store's stride.) Legality enumeration
#: multiplies them out.
LEGALITY_FREE = ("outer_order",)

#: Rules whose failure with every *other* knob at its smallest choice (tiles 1, one thread)
#: proves that no completion is legal: SRAM footprints only grow with tiles and threads, and
#: an even thread split exists iff it exists with tile 1 (the most tiles).
#: (``uop_kernel_keys`` and ``tvm_dense_tensorize`` read only tile_b, resp. tile_co and
#: oc_nthread, and fail for every larger value.)
_MONOTONE_RULES = frozenset({"inp_capacity", "wgt_capacity", "acc_capacity", "thread_split",
                             "uop_kernel_keys", "tvm_dense_tensorize"})

#: Rules decided before the micro-op kernels: they do not read ``gemm_order``.
_ORDER_FREE_RULES = frozenset({"row_mode", "tile_divides", "thread_split", "tvm_dense_tensorize",
                               "uop_kernel_keys", "group_tile", "group_thread_split",
                               "tvm_split_tail", "inp_capacity", "wgt_capacity",
                               "acc_capacity", "tvm_vthread_inplace", "dma_pattern",
                               "pad_window"})

#: Spaces whose relevant part is at most this big are pruned exactly (by enumeration).
_EXACT_PRUNE_LIMIT = 5000

#: Verdicts a template remembers (:meth:`Template._verdict`): ~100 B each.
_VERDICT_MEMO_LIMIT = 1 << 18
_UNSEEN = object()

_Z_AXES = ("ci", "kh", "kw")  # no ACC (dst) stride
_D_AXES = ("co", "h", "w")  # ACC index is injective in these

_SCHEDULE_FIELDS = tuple(f.name for f in fields(Schedule))
# A plain tuple with the Schedule's attribute names: what the legality rules read. Building
# it skips Schedule's validation, which the template's choices already guarantee.
_Point = namedtuple("_Point", _SCHEDULE_FIELDS, defaults=[f.default for f in fields(Schedule)])


@dataclass(frozen=True)
class Knob:
    """One tunable knob: a name and its fixed, ordered tuple of choices.

    Example:
        >>> Knob("oc_nthread", (1, 2)).choices
        (1, 2)
    """

    name: str
    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise ScheduleError(f"knob {self.name} has no choices")
        for c in self.choices:
            if not isinstance(c, int | str | bool):
                raise ScheduleError(f"knob {self.name}: choice {c!r} is not an int, str or bool")


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


# --- loop-order curation --------------------------------------------------------------------


def _outer_counts(ctx: Context, s: Any) -> dict[str, int]:
    ctx = schedule_context(ctx, s)
    return {"b": ctx.nb // s.tile_b, "h": ctx.oh // s.tile_h // s.h_nthread,
            "c": ctx.cob // s.tile_co // s.oc_nthread, "w": ctx.ow // s.tile_w}


def _gemm_extents(ctx: Context, s: Any) -> dict[str, int]:
    ctx = schedule_context(ctx, s)
    return {"ci": s.tile_ci, "co": s.tile_co, "h": s.tile_h, "w": s.tile_w, "kh": ctx.k,
            "kw": ctx.k}


def _outer_relevant(ctx: Context) -> tuple[str, ...]:
    """Outer axes whose tile loop can have more than one iteration."""
    full = {"b": ctx.nb, "h": ctx.oh, "c": ctx.cob, "w": ctx.ow}
    if ctx.dense:  # a GEMM's rows loop as batch blocks or as pixels (rows="spatial")
        full["h"] = ctx.nb
    return tuple(a for a in OUTER_AXES if full[a] > 1)


def _gemm_relevant(ctx: Context) -> tuple[str, ...]:
    """Inner axes that can have an extent above 1 (the others always drop out)."""
    full = {"ci": ctx.cib, "co": ctx.cob, "h": ctx.oh, "w": ctx.ow, "kh": ctx.k, "kw": ctx.k}
    if ctx.dense:  # a GEMM's rows are pixels with rows="spatial"
        full["h"] = ctx.nb
    return tuple(a for a in GEMM_AXES if full[a] > 1)


def _restrict(order: list[str] | str, keep: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(a for a in order if a in keep)


def _outer_choices(ctx: Context) -> tuple[str, ...]:
    """One full ``bhcw`` permutation per relative order of the relevant outer axes (unit
    loops vanish, so only that relative order changes the program). AutoTVM's ``bhcw`` and
    the tutorials' ``bchw`` represent their classes."""
    rel = _outer_relevant(ctx)
    seen: dict[tuple[str, ...], str] = {}
    cands = [AUTOTVM_OUTER_ORDER, "bchw", *("".join(p) for p in itertools.permutations("bhcw"))]
    for c in cands:
        seen.setdefault(_restrict(c, rel), c)
    return tuple(seen.values())


def _canonical_tail(rest: list[str]) -> bool:
    """Unrolled axes with no dst stride (ci, kh, kw) all outside those with one."""
    kinds = [a in _D_AXES for a in rest]
    return kinds == sorted(kinds)


def _gemm_choices(ctx: Context, gemm: bool) -> tuple[str, ...]:
    """One inner order per ordered pair of relevant axes folded into the GEMM instruction,
    the unrolled rest dst-free axes first (see the package docstring), plus AutoTVM's and the
    tutorials' orders, each kept once per class of identical programs."""
    rel = _gemm_relevant(ctx)
    literals = [AUTOTVM_GEMM_ORDER]
    tut = [gemm_tutorial_schedule(16 * 16, 16 * 16).gemm_order,
           tutorial_schedule(_CONV_PROBE).gemm_order]
    literals += tut if gemm else tut[::-1]
    others = tuple(a for a in GEMM_AXES if a not in rel)
    pairs = list(itertools.permutations(rel, 2)) or [tuple(rel)]
    canon = []
    for pair in pairs:
        rest = [a for a in _Z_AXES if a in rel and a not in pair]
        rest += [a for a in _D_AXES if a in rel and a not in pair]
        canon.append(",".join([*pair, *rest, *others]))
    out: dict[tuple[str, ...], str] = {}
    covered: set[tuple[str, ...]] = set()  # folded pairs whose canonical class is present
    for lit in literals:
        r = _restrict(lit.split(","), rel)
        if r in out:
            continue
        out[r] = lit
        if _canonical_tail(list(r[2:])):
            covered.add(r[:2])
    for c in canon:
        r = _restrict(c.split(","), rel)
        if r[:2] not in covered and r not in out:
            out[r] = c
            covered.add(r[:2])
    return tuple(out.values())


# --- the template ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """The schedule space of one workload on one hardware config (see the package docstring).

    ``knobs`` are the tunable knobs (choices already pruned of values no legal config uses,
    listed in ``pruned``); ``fixed`` the Schedule fields held constant.
    """

    workload: Workload
    hw: HardwareConfig
    bias: bool
    space: str
    knobs: tuple[Knob, ...]
    fixed: tuple[tuple[str, Any], ...]
    pruned: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    tune_store: bool = False
    _free: int = field(default=0, repr=False)  # trailing knobs that no rule reads

    @property
    def name(self) -> str:
        """e.g. ``conv2d.full.v1``; ``conv2d.full+store.v1`` when the store is tuned
        (``gemm.full.v2``: :data:`GEMM_FULL_VERSION`)."""
        gemm = isinstance(self.workload, GemmWorkload)
        version = GEMM_FULL_VERSION if gemm and self.space == "full" else VERSION
        return f"{self.workload.operator}.{self.space}{'+store' if self.tune_store else ''}" \
               f".{version}"

    @property
    def knob_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(name)

    @cached_property
    def context(self) -> Context:
        """The workload's rule constants on this hardware (block counts, sizes, depths)."""
        return context(self.workload, self.hw)

    # --- internals ----------------------------------------------------------------------
    @cached_property
    def _fixed(self) -> dict[str, Any]:
        return dict(self.fixed)

    @cached_property
    def _choice_sets(self) -> dict[str, frozenset]:
        # bools and ints collide in sets (True == 1): key by (type, value)
        return {k.name: frozenset((type(c), c) for c in k.choices) for k in self.knobs}

    def _validate_keys(self, config: dict[str, Any]) -> None:
        if not isinstance(config, dict):
            raise ScheduleError(f"a {self.name} config must be a dict of knobs")
        if config.keys() != self._choice_sets.keys():
            missing = [n for n in self.knob_names if n not in config]
            extra = [n for n in config if n not in self._choice_sets]
            raise ScheduleError(
                f"config does not match template {self.name}: "
                + (f"missing {', '.join(missing)}" if missing else "")
                + ("; " if missing and extra else "")
                + (f"unknown {', '.join(map(str, extra))}" if extra else ""))

    @cached_property
    def _rule_inputs(self) -> tuple[Any, int, frozenset]:
        """(the knobs' values of a config as a tuple, how many of them the rules read, every
        valid (values, types) of the rest)."""
        names = self.knob_names
        get = operator.itemgetter(*names) if len(names) > 1 else \
            (lambda config: (config[names[0]],))
        n_read = len(names) - self._free
        free_ok = frozenset((values, tuple(map(type, values))) for values in
                            itertools.product(*(k.choices for k in self.knobs[n_read:])))
        return get, n_read, free_ok

    @cached_property
    def _verdicts(self) -> dict[tuple[tuple[Any, ...], tuple[type, ...]], Any]:
        """Memo of :meth:`_verdict`: (values, types) of the knobs the rules read -> (rule,
        message) of the first rule that fails, None when legal."""
        return {}

    @cached_property
    def _shape_inputs(self) -> tuple[Any, tuple[tuple[str, frozenset], ...],
                                      dict[Any, tuple[str, str]]]:
        """(the values of a config's tile-shape knobs as a tuple, (name, valid (type, value)
        pairs) of the other knobs the rules read, the memo of failed shapes: (values, types)
        -> (rule, message) of a :data:`SHAPE_RULES` rule)."""
        names = [n for n in self.knob_names if n in SHAPE_FIELDS]
        get = operator.itemgetter(*names) if len(names) > 1 else \
            (lambda config: (config[names[0]],))
        n_read = len(self.knobs) - self._free
        others = tuple((k.name, self._choice_sets[k.name]) for k in self.knobs[:n_read]
                       if k.name not in SHAPE_FIELDS)
        return get, others, {}

    def _verdict(self, config: dict[str, Any]) -> IllegalSchedule | None:
        """The first rule ``config`` fails (None: legal); ScheduleError if malformed.

        The rules are pure functions of the knobs they read (all but the trailing
        :data:`LEGALITY_FREE` ones), so their outcome is remembered per combination of those
        knobs' values, once validated: a search asks about the same tile shapes and orders
        again and again (with every outer order, as its sampler's candidates, in the
        driver's check). A tile shape that fails a rule decided before the loop orders
        (:data:`vtatune.lowering.SHAPE_RULES`: SRAM capacity, divisibility, ...) is
        remembered too, so its other loop orders are refused without a rules pass. Types
        are part of the key: ``True`` and ``1.0`` are not the choice ``1``. A value outside
        the choices is judged on a validated Schedule, unremembered."""
        get, n_read, free_ok = self._rule_inputs
        shape_of, others, shapes = self._shape_inputs
        memo = self._verdicts
        key = shape = None
        if type(config) is dict:
            try:
                values = get(config)
                read, free = values[:n_read], values[n_read:]
                key = (read, tuple(map(type, read)))
                hit = memo.get(key, _UNSEEN)
                if len(config) == len(values) and (free, tuple(map(type, free))) in free_ok:
                    if hit is not _UNSEEN:
                        return None if hit is None else IllegalSchedule(*hit)
                    tiles = shape_of(config)
                    shape = (tiles, tuple(map(type, tiles)))
                    failed = shapes.get(shape)
                    if failed is not None and all((type(config[n]), config[n]) in ok
                                                  for n, ok in others):
                        return IllegalSchedule(*failed)
            except (KeyError, TypeError):  # a knob missing, an unhashable value
                pass
        point = self._point(config)  # validates: a Schedule when a value is not a choice
        try:
            rules(self.context, point, self.bias)
            hit = None
        except IllegalSchedule as exc:
            hit = (exc.rule, str(exc))
        if key is not None and type(point) is _Point and len(memo) < _VERDICT_MEMO_LIMIT:
            memo[key] = hit
            if hit is not None and hit[0] in SHAPE_RULES and shape is not None:
                shapes[shape] = hit
        return None if hit is None else IllegalSchedule(*hit)

    def _point(self, config: dict[str, Any]) -> Any:
        """What the rules read: a validated plain tuple when every value is a choice."""
        self._validate_keys(config)
        sets = self._choice_sets
        for k, v in config.items():
            if (type(v), v) not in sets[k]:
                return Schedule(**self._fixed, **config)  # raises ScheduleError if malformed
        return _Point(**self._fixed, **config)

    # --- the contract -------------------------------------------------------------------
    def to_schedule(self, config: dict[str, Any]) -> Schedule:
        """The Schedule of a config (raises ScheduleError for unknown/missing knobs)."""
        self._validate_keys(config)
        return Schedule(**self._fixed, **config)

    def from_schedule(self, schedule: Schedule) -> dict[str, Any] | None:
        """The config expressing ``schedule``, or None if this space cannot. Loop orders are
        matched by effect: an order string outside the choices maps to the choice that gives
        this schedule the same program (same relative order of its non-unit loops)."""
        ctx = self.context
        config: dict[str, Any] = {}
        for k in self.knobs:
            v = getattr(schedule, k.name)
            if k.name in ("outer_order", "gemm_order") and v not in k.choices:
                v = self._equivalent_order(k, schedule)
            if v is None or v not in k.choices or type(v) is not type(k.choices[0]):
                return None
            config[k.name] = v
        for name, value in self.fixed:
            v = getattr(schedule, name)
            if v == value:
                continue
            if name == "outer_order" and self._same_outer(schedule, v, value, ctx):
                continue
            if name == "gemm_order" and self._same_gemm(schedule, v, value, ctx):
                continue
            return None
        return config

    @staticmethod
    def _same_outer(s: Schedule, a: str, b: str, ctx: Context) -> bool:
        counts = _outer_counts(ctx, s)
        keep = tuple(x for x in OUTER_AXES if counts[x] > 1)
        return _restrict(a, keep) == _restrict(b, keep)

    @staticmethod
    def _same_gemm(s: Schedule, a: str, b: str, ctx: Context) -> bool:
        ext = _gemm_extents(ctx, s)
        keep = tuple(x for x in GEMM_AXES if ext[x] > 1)
        return _restrict(a.split(","), keep) == _restrict(b.split(","), keep)

    def _equivalent_order(self, knob: Knob, s: Schedule) -> str | None:
        same = self._same_outer if knob.name == "outer_order" else self._same_gemm
        v = getattr(s, knob.name)
        return next((c for c in knob.choices if same(s, v, c, self.context)), None)

    def check(self, config: dict[str, Any]) -> None:
        """Raise IllegalSchedule (naming the rule and numbers) if ``config`` cannot run;
        ScheduleError if it is not a config of this template. Arithmetic only (~30 µs;
        a few µs for a combination of the knobs the rules read that was judged before).

        Example:
            >>> from simulator.hardware import DEFAULT
            >>> from vtatune.workloads import WORKLOADS
            >>> tpl = get_template(WORKLOADS["conv2d"]["resnet18.C8"], DEFAULT)
            >>> tpl.check(dict(tpl.default_config(), tile_co=16, oc_nthread=2))
            Traceback (most recent call last):
            ...
            vtatune.errors.IllegalSchedule: oc_nthread=2 needs an even number of oc tiles, got 1
        """
        exc = self._verdict(config)
        if exc is not None:
            raise exc

    def legal(self, config: dict[str, Any]) -> bool:
        """Whether ``config`` passes every legality rule (ScheduleError if malformed)."""
        return self._verdict(config) is None

    def default_config(self) -> dict[str, Any]:
        """vtatune's default schedule expressed in this space (legal); when the space cannot
        express it legally, the first legal config of :meth:`legal_configs`."""
        found, _ = first_legal_candidate(self.workload, self.hw, self.bias)
        if found is not None:
            config = self.from_schedule(replace(found, **self._fixed))
            if config is not None and self.legal(config):
                return config
        first = next(self.legal_configs(), None)
        if first is None:
            raise IllegalSchedule("no_legal_config", f"template {self.name} has no legal config "
                                                     f"for {self.workload.describe()} on "
                                                     f"{self.hw.bitstream}")
        return first

    def no_legal_config(self) -> IllegalSchedule | None:
        """Why no config of this space can run, decided before any search: a rule the
        workload fails whatever its schedule (:func:`vtatune.lowering.shape_rules`), a
        monotone rule (SRAM capacity) failing at the smallest tiles (larger ones only need
        more), or, for a space small enough to enumerate exactly, no legal config at all.
        None when a legal config exists or cannot be ruled out cheaply.

        Example:
            >>> from simulator.hardware import DEFAULT
            >>> from vtatune.workloads import Conv2dWorkload
            >>> print(get_template(Conv2dWorkload(1, 14, 14, 256, 256, 3, 100, 1), DEFAULT
            ...                    ).no_legal_config())
            LOAD INP: field y_pad_0=100 does not fit 4 bits (max 15); the input's pad of 100 rows
        """
        try:
            shape_rules(self.context)
        except IllegalSchedule as exc:
            return exc
        try:
            rules(self.context, self._point({k.name: k.choices[0] for k in self.knobs}),
                  self.bias)
            return None
        except IllegalSchedule as exc:
            if exc.rule in _MONOTONE_RULES:
                return exc
            smallest = exc
        relevant = 1
        for k in self.knobs[: len(self.knobs) - self._free]:
            relevant *= len(k.choices)
        if relevant <= _EXACT_PRUNE_LIMIT and next(self._legal_prefixes(), None) is None:
            return IllegalSchedule("no_legal_config", f"none of the {self.size()} configs of "
                                   f"{self.name} is legal; the smallest tiles fail with: "
                                   f"{smallest}")
        return None

    def size(self) -> int:
        """Size of the cartesian space of the knobs' (pruned) choices."""
        n = 1
        for k in self.knobs:
            n *= len(k.choices)
        return n

    def raw_size(self) -> int:
        """Size before pruning (for ``autotvm``: the size AutoTVM reports for its space)."""
        removed = dict(self.pruned)
        n = 1
        for k in self.knobs:
            n *= len(k.choices) + len(removed.get(k.name, ()))
        return n

    # --- enumeration --------------------------------------------------------------------
    def _legal_prefixes(self) -> Iterator[tuple[Any, ...]]:
        """Legal value tuples of the knobs that rules read, in product order."""
        rel = self.knobs[: len(self.knobs) - self._free]
        names = [k.name for k in rel]
        ctx, bias, fixed = self.context, self.bias, self._fixed
        if names and names[-1] == "gemm_order":
            orders = rel[-1].choices
            for head in itertools.product(*(k.choices for k in rel[:-1])):
                base = dict(zip(names[:-1], head, strict=True))
                for i, order in enumerate(orders):
                    try:
                        rules(ctx, _Point(**fixed, **base, gemm_order=order), bias)
                    except IllegalSchedule as exc:
                        if i == 0 and exc.rule in _ORDER_FREE_RULES:
                            break  # decided before the kernels: every order fails alike
                        continue
                    yield (*head, order)
        else:
            for values in itertools.product(*(k.choices for k in rel)):
                try:
                    rules(ctx, _Point(**fixed, **dict(zip(names, values, strict=True))), bias)
                except IllegalSchedule:
                    continue
                yield values

    def legal_configs(self) -> Iterator[dict[str, Any]]:
        """Every legal config, in the order of ``itertools.product`` over the knobs."""
        names = self.knob_names
        free = [k.choices for k in self.knobs[len(self.knobs) - self._free:]]
        for head in self._legal_prefixes():
            for tail in itertools.product(*free):
                yield dict(zip(names, (*head, *tail), strict=True))

    def count_legal(self) -> int:
        """Number of legal configs (knobs no rule reads multiply out)."""
        mult = 1
        for k in self.knobs[len(self.knobs) - self._free:]:
            mult *= len(k.choices)
        return mult * sum(1 for _ in self._legal_prefixes())

    def config_at(self, index: int) -> dict[str, Any]:
        """The config at ``index`` of the product order (0 <= index < size())."""
        if not 0 <= index < self.size():
            raise IndexError(f"config index {index} outside 0..{self.size() - 1}")
        out = {}
        for k in reversed(self.knobs):
            index, r = divmod(index, len(k.choices))
            out[k.name] = k.choices[r]
        return {n: out[n] for n in self.knob_names}

    def index_of(self, config: dict[str, Any]) -> int:
        """Inverse of :meth:`config_at`."""
        self._validate_keys(config)
        i = 0
        for k in self.knobs:
            i = i * len(k.choices) + k.choices.index(config[k.name])
        return i

    # --- AutoTVM ------------------------------------------------------------------------
    def autotvm_knobs(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """The AutoTVM point (``{"tile_h": [outer, inner], ..., "oc_nthread": v}``) of a
        config, or None when AutoTVM's template cannot express it (any full-space config
        with vtatune's own orders, reuse or DMA splitting)."""
        return to_autotvm(self.to_schedule(config), self.workload, self.hw)

    def from_autotvm(self, knobs: dict[str, Any]) -> dict[str, Any] | None:
        """The config of an AutoTVM point (None if this space cannot express it)."""
        return self.from_schedule(from_autotvm(knobs, self.workload, self.hw))


def _prune(tpl: Template) -> Template:
    """Drop choices that no legal config uses: exactly (by enumeration) for small spaces,
    else those that fail a monotone rule with every other knob at its smallest choice."""
    used: dict[str, set] = {k.name: set() for k in tpl.knobs}
    rel = tpl.knobs[: len(tpl.knobs) - tpl._free]
    relevant = 1
    for k in rel:
        relevant *= len(k.choices)
    if relevant <= _EXACT_PRUNE_LIMIT:
        any_legal = False
        for values in tpl._legal_prefixes():
            any_legal = True
            for k, v in zip(rel, values, strict=True):
                used[k.name].add(v)
        if not any_legal:
            return tpl  # nothing is legal: keep the space as it is (count_legal() == 0)
        for k in tpl.knobs[len(rel):]:
            used[k.name] = set(k.choices)
    else:
        smallest = {k.name: k.choices[0] for k in tpl.knobs}
        for k in tpl.knobs:
            if not (k.name.startswith("tile_") or k.name.endswith("_nthread")):
                used[k.name] = set(k.choices)
                continue
            for v in k.choices:
                try:
                    rules(tpl.context, _Point(**tpl._fixed, **dict(smallest, **{k.name: v})),
                          tpl.bias)
                except IllegalSchedule as exc:
                    if exc.rule in _MONOTONE_RULES:
                        continue
                used[k.name].add(v)
    knobs, pruned = [], []
    for k in tpl.knobs:
        keep = tuple(c for c in k.choices if c in used[k.name])
        if len(keep) < len(k.choices):
            pruned.append((k.name, tuple(c for c in k.choices if c not in used[k.name])))
        knobs.append(Knob(k.name, keep or k.choices))
    return replace(tpl, knobs=tuple(knobs), pruned=tuple(pruned))


def get_template(workload: Workload, hw: HardwareConfig, bias: bool = False,
                 space: str = "full", tune_store: bool = False, prune: bool = True) -> Template:
    """The template of ``workload`` on ``hw``: ``full`` (vtatune's space) or ``autotvm``
    (AutoTVM's conv2d_packed / dense_packed). ``tune_store`` adds the ``store`` knob (full
    space only); ``prune=False`` keeps choices no legal config uses (for the autotvm space:
    AutoTVM's own space, e.g. 1600 points for ResNet-18 C8).

    Example:
        >>> from simulator.hardware import DEFAULT
        >>> from vtatune.workloads import WORKLOADS
        >>> c8 = WORKLOADS["conv2d"]["resnet18.C8"]
        >>> get_template(c8, DEFAULT, space="autotvm", prune=False).size()
        1600
        >>> get_template(c8, DEFAULT, space="tvm")
        Traceback (most recent call last):
        ...
        vtatune.errors.ScheduleError: unknown search space 'tvm' (known: full, autotvm)
    """
    if space not in SPACES:
        raise ScheduleError(f"unknown search space {space!r} (known: {', '.join(SPACES)})")
    if tune_store and space != "full":
        raise ScheduleError("tune_store applies to the full space only (AutoTVM fixes the "
                            "store)")
    if isinstance(workload, AddWorkload):  # and MultiplyWorkload: TVM's add.vta space
        return _alu_template(workload, hw, bias, space, prune)
    ctx = context(workload, hw)
    gemm = isinstance(workload, GemmWorkload)
    # a GEMM's rows: tile_b batch blocks (rows="batch"), or, in the full space, tile_h rows
    # as a 1x1 conv's pixels with h_nthread threads on them (rows="spatial")
    spatial = gemm and space == "full"
    knobs = [Knob("tile_b", _divisors(ctx.nb))]
    if not gemm:
        knobs += [Knob("tile_h", _divisors(ctx.oh)), Knob("tile_w", _divisors(ctx.ow))]
    if spatial:
        knobs.append(Knob("tile_h", _divisors(ctx.nb)))
    knobs += [Knob("tile_ci", _divisors(ctx.cib)), Knob("tile_co", _divisors(ctx.cob)),
              Knob("oc_nthread", (1, 2))]
    if not gemm or spatial:
        knobs.append(Knob("h_nthread", (1, 2)))
    if spatial:
        knobs.append(Knob("rows", ROW_MODES))
    free = 0
    if space == "autotvm":
        fixed = (("outer_order", AUTOTVM_OUTER_ORDER), ("gemm_order", AUTOTVM_GEMM_ORDER),
                 ("store", "tile"), ("reuse", False), ("clip_order", "min_max"),
                 ("tvm_strict", True))
    else:
        knobs += [Knob("gemm_order", _gemm_choices(ctx, gemm)),
                  Knob("outer_order", _outer_choices(ctx))]
        free = 1
        # reuse: skipping the LOAD of a tile already resident in its SRAM slot only removes
        # DMA work and never adds any, so it is always on.
        fixed = (("reuse", True), ("clip_order", "min_max"), ("tvm_strict", False))
        if tune_store:
            knobs.append(Knob("store", ("tile", "element")))
            free = 2
        else:
            fixed = (("store", "tile"), *fixed)
    tpl = Template(workload, hw, bias, space, tuple(knobs), fixed, (), tune_store, free)
    return _prune(tpl) if prune else tpl


def _alu_template(workload: AddWorkload, hw: HardwareConfig, bias: bool, space: str,
                  prune: bool) -> Template:
    """An ALU-only operator's space: add.vta's knobs (``tile_co``, ``tile_h``, ``tile_w``:
    every divisor), the same in both spaces; the rest fixed as TVM's template has it."""
    ctx = context(workload, hw)
    knobs = (Knob("tile_co", _divisors(ctx.cob)), Knob("tile_h", _divisors(ctx.h)),
             Knob("tile_w", _divisors(ctx.w)))
    fixed = (("outer_order", AUTOTVM_OUTER_ORDER), ("gemm_order", AUTOTVM_GEMM_ORDER),
             ("store", "tile"), ("reuse", False), ("clip_order", "min_max"),
             ("tvm_strict", True))
    tpl = Template(workload, hw, bias, space, knobs, fixed)
    return _prune(tpl) if prune else tpl
