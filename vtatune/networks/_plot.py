"""A bar chart of where a tuned network's VTA time goes (``network --plot FILE.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vtatune.errors import VtatuneError

__all__ = ["check_matplotlib", "draw_network"]


def check_matplotlib() -> None:
    """Fail before tuning, not after, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise VtatuneError("--plot needs matplotlib: pip install 'vtatune[plot]'") from None


def draw_network(result: Any, path: str | Path) -> Path:
    """One bar per tuned task: multiplicity x best cycles, in milliseconds at the clock,
    with the default schedules' time behind it."""
    check_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hw = result.hw
    tasks = [t for t in result.tasks if t.best_cycles]
    per_ms = 1.0 / (hw.clock_mhz * 1e3)
    names = [f"{t.task.name.split('.', 1)[-1]} x{t.task.multiplicity}" for t in tasks]
    tuned = [t.network_cycles * per_ms for t in tasks]
    default = [(t.default_cycles or 0) * t.task.multiplicity * per_ms for t in tasks]
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(tasks) + 1.5))
    ys = range(len(tasks))
    from_logs = result.stopped == "from logs"  # network_from_logs: no tuning, no default
    if not from_logs:
        ax.barh(ys, default, color="lightgray", label="default schedule")
    ax.barh(ys, tuned, color="tab:blue", label="log's schedules" if from_logs else "tuned")
    ax.set_yticks(list(ys), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms on VTA (multiplicity x one run)")
    ax.set_title(f"{result.network.name} on {hw.target_model}: {result.total_ms:.2f} ms "
                 + (f"with the records of {result.log}" if from_logs
                    else f"tuned, {result.trials} trials"))
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
