"""Tuning logs as pandas DataFrames, and the summaries analysts would otherwise write.

:func:`read_log` gives one row per trial: where it is (``log``, ``line``), who ran it
(``study``, ``trial``, ``timestamp``, ``sampler``, ``seed``, ``template``, ``space``), the
workload (``operator``, ``workload``: its name as :func:`vtatune.tune` takes it, qualified
``conv2d:tutorial`` / ``gemm:tutorial`` where operators share it, ``workload_key``, the
``epilogue`` tuned (:func:`epilogue_label`: ``benchmark``, ``deployed``, ``deployed-relu`` or
its steps) and the shape: ``batch``,
``height``, ``width``, ``in_channels``, ``out_channels``, ``kernel``, ``pad``, ``stride``,
``groups``, ``output_padding``),
the hardware (``target``, ``bitstream``, ``hw_model``), ``bias``, one column per knob of
the config (their names are in ``df.attrs["knobs"]``; integer knobs are ``Int64``, empty
where a workload lacks them), the outcome (``status``, ``rule``,
``error``, ``cycles``, ``seconds``, ``gops``, ``utilization``, ``instructions``) and fsim's
seven counters. Several logs concatenate; a corrupt or truncated line is skipped with one
warning naming it (``path:line``).

Example:
    >>> df = read_log(["logs/a.jsonl", "logs/b.jsonl"])  # doctest: +SKIP
    >>> best_per_workload(df)[["workload", "cycles", "gops"]]  # doctest: +SKIP
    >>> best_so_far(df).groupby("study").best_cycles.last()  # doctest: +SKIP
    >>> knob_stats(df).query("lift > 1.5")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.functional import FsimCounters
from simulator.hardware import HardwareConfig
from vtatune.records import RecordWarning, read_records

SHAPE = ("batch", "height", "width", "in_channels", "out_channels", "kernel", "pad", "stride",
         "groups", "output_padding")
COUNTERS = tuple(FsimCounters.__dataclass_fields__)
_HEAD = ("log", "line", "study", "trial", "timestamp", "sampler", "seed", "template", "space",
         "operator", "workload", "workload_key", "epilogue", *SHAPE, "target", "bitstream",
         "hw_model", "bias")
_TAIL = ("status", "rule", "error", "cycles", "seconds", "gops", "utilization",
         "instructions", *COUNTERS, "version")
_INTS = ("line", "trial", "seed", *SHAPE, "cycles", "instructions", *COUNTERS)
GROUP = ["workload_key", "hw_model", "bias"]  # one tuning problem

__all__ = ["COUNTERS", "GROUP", "SHAPE", "best_per_workload", "best_so_far", "epilogue_label",
           "knob_columns", "knob_stats", "natural_key", "read_log", "summary", "workload_label"]


def workload_label(operator: str, name: str | None, key: str) -> str:
    """A workload's name as :func:`vtatune.tune` takes it: the name alone where only one
    operator has it (``resnet18.C8``, ``dense128``), ``operator:name`` where several do
    (``conv2d:tutorial``, ``gemm:tutorial``), the key for an unnamed shape."""
    from vtatune.workloads import WORKLOADS

    if not name:
        return key
    shared = sum(name in table for table in WORKLOADS.values()) > 1
    return f"{operator}:{name}" if shared else name


def epilogue_label(steps: list[dict[str, Any]] | None) -> str:
    """A record's epilogue (``workload.epilogue``: its steps; none for the benchmark's) by the
    name ``--epilogue`` gives it, else its steps as ``describe()`` writes them."""
    return _epilogue_label(json.dumps(steps or [], sort_keys=True))


@lru_cache(maxsize=256)  # a log repeats a handful of epilogues over thousands of records
def _epilogue_label(steps: str) -> str:
    from vtatune.workloads import Epilogue, epilogue_name

    epilogue = Epilogue.from_list(json.loads(steps)) if steps != "[]" else None
    if epilogue is None:
        return "benchmark"
    return epilogue_name(epilogue) or epilogue.describe()


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders embedded numbers by value: C2, C3, ..., C10, C11."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def _row(path: str, line: int, r: dict[str, Any]) -> dict[str, Any]:
    w, hw = r["workload"], r["hw"]
    row: dict[str, Any] = {
        "log": path, "line": line, "study": r.get("study"), "trial": r.get("trial"),
        "timestamp": r.get("timestamp"), "sampler": r.get("sampler"), "seed": r.get("seed"),
        "template": r.get("template"), "space": r.get("space"), "operator": w["operator"],
        "workload": workload_label(w["operator"], w.get("name"), w["key"]),
        "workload_key": w["key"], "epilogue": epilogue_label(w.get("epilogue")),
        **{k: w["shape"].get(k) for k in SHAPE},
        "target": hw.get("target"), "bitstream": hw.get("bitstream"), "hw_model": hw["model"],
        "bias": bool(r.get("bias", False)),
    }
    for k in _TAIL:
        row[k] = r.get(k)
    counters = r.get("counters") or {}
    for k in COUNTERS:
        row[k] = counters.get(k)
    return row


def read_log(paths: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """One row per trial of one or several logs (see the module docstring for columns).

    A missing log raises :class:`vtatune.records.LogError`.
    """
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    rows: list[dict[str, Any]] = []
    knobs: dict[str, None] = {}
    for path in paths:
        for line, r in read_records(path):
            try:
                row = _row(str(path), line, r)
                config = r.get("config") or {}
                if not isinstance(config, dict):
                    raise TypeError("config")
            except (KeyError, TypeError, AttributeError):
                warnings.warn(f"{path}:{line}: skipped a record without workload or hardware",
                              RecordWarning, stacklevel=2)
                continue
            for k, v in config.items():
                name = k if k not in row or k in knobs else f"config_{k}"
                knobs.setdefault(name)
                row[name] = v
            rows.append(row)
    knob_cols = list(knobs)
    df = pd.DataFrame(rows, columns=[*_HEAD, *knob_cols, *_TAIL])
    for k in _INTS:
        df[k] = pd.array(df[k].tolist(), dtype="Int64") if len(df) else df[k].astype("Int64")
    for k in ("seconds", "gops", "utilization"):
        df[k] = pd.to_numeric(df[k], errors="coerce").astype(float)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, errors="coerce", format="ISO8601")
    df["bias"] = df["bias"].astype(bool)
    for k in knob_cols:  # integer knobs stay integers where a workload lacks them (gemm h/w)
        vals = [row[k] for row in rows if row.get(k) is not None]
        if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            df[k] = pd.array([row.get(k) for row in rows], dtype="Int64")
    df.attrs["knobs"] = knob_cols
    return df


def knob_columns(df: pd.DataFrame) -> list[str]:
    """The knob columns of a frame from :func:`read_log` (kept through filtering)."""
    known = df.attrs.get("knobs")
    if known is not None:
        return [k for k in known if k in df.columns]
    fixed = {*_HEAD, *_TAIL}
    return [c for c in df.columns if c not in fixed]


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["status"] == "ok") & df["cycles"].notna()]


def best_per_workload(df: pd.DataFrame) -> pd.DataFrame:
    """The fastest ``ok`` trial of each workload x hardware x bias (ties: earliest line)."""
    ok = _ok(df).sort_values(["cycles", "log", "line"], kind="stable")
    best = ok.drop_duplicates(GROUP, keep="first")
    return best.sort_values(GROUP, kind="stable").reset_index(drop=True)


def best_so_far(df: pd.DataFrame, by: str = "study") -> pd.DataFrame:
    """The best-so-far curve of each study: ``by``, the problem (``operator``,
    ``workload``, ``hw_model``, ``bias``), ``trial``, ``timestamp``, ``status``, ``cycles``
    (NaN for a failed trial) and ``best_cycles`` (the running minimum), in trial order —
    what Optuna's optimization-history plot draws."""
    cols = list(dict.fromkeys([by, "operator", "workload", "hw_model", "bias", "trial",
                               "timestamp", "status", "cycles"]))
    d = df[cols].sort_values([by, "trial", "timestamp"], kind="stable").copy()
    cyc = d["cycles"].where(d["status"] == "ok").astype("Float64")
    d["cycles"] = cyc
    d["best_cycles"] = cyc.groupby(d[by], sort=False).cummin()
    d["best_cycles"] = d.groupby(by, sort=False)["best_cycles"].ffill()
    return d.reset_index(drop=True)


def knob_stats(df: pd.DataFrame, top: float = 0.1) -> pd.DataFrame:
    """Which knob values the good trials share, per workload x hardware x bias.

    "Good" = the fastest ``top`` fraction of the ``ok`` trials (at least one). For each
    knob value: ``trials`` (ok trials with it), ``good`` (good trials with it),
    ``share`` (of all ok trials), ``good_share`` (of the good trials), ``lift``
    (``good_share / share``: > 1 means good trials favour it), ``best_cycles`` and
    ``median_cycles``.
    """
    out = []
    for key, g in _ok(df).groupby(GROUP, sort=True):
        n_good = max(1, int(np.ceil(top * len(g))))
        good_idx = g.sort_values(["cycles", "line"], kind="stable").index[:n_good]
        good = g.loc[good_idx]
        for knob in knob_columns(g):
            col = g[knob].astype(str).where(g[knob].notna())
            if col.isna().all():
                continue
            stats = g.assign(_v=col).groupby("_v", sort=True)["cycles"].agg(
                trials="size", best_cycles="min", median_cycles="median")
            stats["good"] = good.assign(_v=col.loc[good_idx]).groupby("_v").size()
            stats["good"] = stats["good"].fillna(0).astype(int)
            stats["share"] = stats["trials"] / len(g)
            stats["good_share"] = stats["good"] / len(good)
            stats["lift"] = stats["good_share"] / stats["share"]
            stats = stats.reset_index().rename(columns={"_v": "value"})
            stats.insert(0, "knob", knob)
            for name, v in zip(GROUP, key, strict=True):
                stats.insert(0, name, v)
            stats.insert(0, "workload", g["workload"].iloc[0])
            out.append(stats)
    cols = ["workload", *GROUP, "knob", "value", "trials", "good", "share", "good_share",
            "lift", "best_cycles", "median_cycles"]
    if not out:
        return pd.DataFrame(columns=cols)
    res = pd.concat(out, ignore_index=True)[cols]
    return res.sort_values([*GROUP, "knob", "lift"], ascending=[True] * 4 + [False],
                           kind="stable").reset_index(drop=True)


def _default_cycles(row: pd.Series) -> int | None:
    """Cycles of vtatune's default schedule for the row's workload, epilogue and hardware
    (None for an epilogue ``--epilogue`` has no name for)."""
    from dataclasses import replace

    from search_spaces import default_schedule
    from vtatune.scoring import score
    from vtatune.workloads import WORKLOAD_CLASSES, named_epilogues, shape_fields

    epilogue = named_epilogues().get(row["epilogue"])
    if epilogue is None:
        return None
    try:
        hw = HardwareConfig.from_target_model(row["hw_model"])
        cls = WORKLOAD_CLASSES[row["operator"]]
        wl = cls(**{k: int(row[k]) for k in shape_fields(cls)})
        if not epilogue.is_benchmark:  # the benchmark's: the class's own, --bias adds its bias
            wl = replace(wl, epilogue=epilogue)
        ev = score(wl, default_schedule(wl, hw, bool(row["bias"])), hw,
                      bias=bool(row["bias"]))
    except Exception:  # an exotic hardware or shape: the column stays empty, never a crash
        return None
    return ev.cycles if ev.status == "ok" else None


def summary(df: pd.DataFrame, default: bool = True) -> pd.DataFrame:
    """One row per workload x hardware x bias, in natural order (C2, C3, ..., C11):
    ``workload``, ``operator``, ``workload_key``, ``epilogue``, ``hw_model``, ``bias``,
    ``trials``,
    ``ok``, ``illegal``, ``error`` (``failed`` = both), ``best_cycles``, ``best_ms``,
    ``gops``, ``utilization``, ``default_cycles`` and ``speedup_default`` (simulated
    unless ``default=False``), ``best_line`` (log:line) and ``best_knobs``."""
    rows = []
    best = {tuple(r[k] for k in GROUP): r for _, r in best_per_workload(df).iterrows()}
    for key, g in df.groupby(GROUP, sort=True):
        status = g["status"].value_counts()
        b = best.get(key)
        row: dict[str, Any] = {
            "workload": g["workload"].iloc[0], "operator": g["operator"].iloc[0],
            "workload_key": key[0], "epilogue": g["epilogue"].iloc[0], "hw_model": key[1],
            "bias": key[2], "trials": len(g), "ok": int(status.get("ok", 0)),
            "illegal": int(status.get("illegal", 0)), "error": int(status.get("error", 0)),
        }
        row["failed"] = row["illegal"] + row["error"]
        row["best_cycles"] = None if b is None else int(b["cycles"])
        row["best_ms"] = None if b is None else float(b["seconds"]) * 1e3
        row["gops"] = None if b is None else float(b["gops"])
        row["utilization"] = None if b is None else float(b["utilization"])
        dc = _default_cycles(g.iloc[0]) if default else None
        row["default_cycles"] = dc
        row["speedup_default"] = (dc / row["best_cycles"]) if dc and row["best_cycles"] \
            else None
        row["best_line"] = None if b is None else f"{b['log']}:{b['line']}"
        row["best_knobs"] = None if b is None else " ".join(
            f"{k}={b[k]}" for k in knob_columns(df) if pd.notna(b[k]))
        rows.append(row)
    rows.sort(key=lambda r: (r["operator"], natural_key(r["workload"]), r["hw_model"],
                             r["bias"]))
    cols = ["workload", "operator", "workload_key", "epilogue", "hw_model", "bias", "trials",
            "ok", "illegal",
            "error", "failed", "best_cycles", "best_ms", "gops", "utilization",
            "default_cycles", "speedup_default", "best_line", "best_knobs"]
    out = pd.DataFrame(rows, columns=cols)
    for k in ("best_cycles", "default_cycles"):
        out[k] = out[k].astype("Int64")
    return out
