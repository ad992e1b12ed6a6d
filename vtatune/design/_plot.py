"""The latency-area plot of a design search (``design --plot``)."""


from __future__ import annotations

from pathlib import Path

from vtatune.design._designs import DesignResult
from vtatune.design._inner import (
    DesignError,
)


def plot_front(result: DesignResult, path: str | Path) -> None:
    """Latency against area of every evaluated design, the front joined, stock starred."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DesignError("plotting needs matplotlib (pip install 'vtatune[plot]')") from None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.scatter([d.area for d in result.evaluated], [d.total_ms for d in result.evaluated],
               s=14, c="0.6", label="evaluated")
    ax.plot([d.area for d in result.designs], [d.total_ms for d in result.designs], "o-",
            c="tab:red", label="Pareto front")
    for d in result.designs:
        ax.annotate(d.hw.bitstream, (d.area, d.total_ms), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.scatter([result.stock.area], [result.stock.total_ms], marker="*", s=160, c="tab:blue",
               label="stock", zorder=3)
    ax.set_xlabel(f"mean LUT/BRAM/DSP use of {result.stock.resources.device.part} (%)")
    ax.set_ylabel(f"{result.network} latency (ms at {result.stock.hw.clock_mhz:g} MHz)")
    ax.set_title(f"{result.network} on {result.board}: {result.trials_per_task} trials/task")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise DesignError(f"cannot write plot {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
