"""The latency-area plot of a design search (``design --plot``)."""


from __future__ import annotations

from pathlib import Path

from vtatune.design._designs import Design, DesignResult
from vtatune.design._inner import (
    DesignError,
)

#: Vertical room of one label, in axes fractions (7-point text on a 4.6-inch-high figure).
_LABEL_STEP = 0.055


def label_positions(ys: list[float], step: float = _LABEL_STEP) -> list[float]:
    """Heights (axes fractions, 0..1) for labels wanted at ``ys``: in the same order, each at
    least ``step`` from the next, as near their points as that allows, within 0..1 (closer
    only when more labels than 1/step must fit).

    >>> label_positions([0.5, 0.51, 0.52], 0.1)
    [0.41, 0.51, 0.61]
    >>> [round(y, 2) for y in label_positions([0.0, 0.01], 0.1)]
    [0.0, 0.1]
    """
    if not ys:
        return []
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    step = min(step, 1.0 / max(1, len(ys) - 1))
    # label k (in height order) at x_k + k*step, x non-decreasing and nearest, by least
    # squares, to wanted_k - k*step: pool-adjacent-violators over [mean, count] blocks
    blocks: list[list[float]] = []
    for k, i in enumerate(order):
        blocks.append([ys[i] - k * step, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, n1), (m2, n2) = blocks[-2], blocks[-1]
            blocks[-2:] = [[(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2]]
    xs = [m for m, n in blocks for _ in range(int(n))]
    placed = [x + k * step for k, x in enumerate(xs)]
    # within the axes: shift the whole column where it runs over an end
    low, high = placed[0], placed[-1]
    shift = max(0.0, -low) - max(0.0, high + max(0.0, -low) - 1.0)
    placed = [round(p + shift, 6) for p in placed]
    out = [0.0] * len(ys)
    for i, p in zip(order, placed, strict=True):
        out[i] = p
    return out


def _label(d: Design, stock: Design) -> str:
    tag = "stock " if d.hw.bitstream == stock.hw.bitstream else ""
    return f"{tag}{d.hw.bitstream}  {d.speedup:.2f}x"


def plot_front(result: DesignResult, path: str | Path) -> None:
    """Latency against area of every evaluated design, the front joined, stock starred;
    each design of the front (and the stock) named in a column right of the axes, joined to
    its point by a line, so no two names overlap however close the points are."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DesignError("plotting needs matplotlib (pip install 'vtatune[plot]')") from None
    fig, ax = plt.subplots(figsize=(9.0, 4.6))
    fig.subplots_adjust(left=0.08, right=0.66, top=0.9, bottom=0.12)
    ax.scatter([d.area for d in result.evaluated], [d.total_ms for d in result.evaluated],
               s=14, c="0.6", label="evaluated")
    ax.plot([d.area for d in result.designs], [d.total_ms for d in result.designs], "o-",
            c="tab:red", label="Pareto front")
    ax.scatter([result.stock.area], [result.stock.total_ms], marker="*", s=160, c="tab:blue",
               label="stock", zorder=3)
    ax.set_xlabel(f"mean LUT/BRAM/DSP use of {result.stock.resources.device.part} (%)")
    ax.set_ylabel(f"{result.network} latency (ms at {result.stock.hw.clock_mhz:g} MHz)")
    ax.set_title(f"{result.network} on {result.board}: {result.trials_per_task} trials/task")
    ax.legend(fontsize=8, loc="center right")  # the labels' lines leave the top and bottom
    named = list(result.designs)
    if result.stock.hw.bitstream not in {d.hw.bitstream for d in named}:
        named.append(result.stock)
    fig.canvas.draw()  # the limits are final: points can be placed in axes fractions
    to_axes = ax.transAxes.inverted()
    points = [to_axes.transform(ax.transData.transform((d.area, d.total_ms))) for d in named]
    heights = label_positions([float(p[1]) for p in points])
    for d, y in zip(named, heights, strict=True):
        ax.annotate(_label(d, result.stock), xy=(d.area, d.total_ms), xycoords="data",
                    xytext=(1.03, y), textcoords="axes fraction", fontsize=7, va="center",
                    annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6,
                                "shrinkA": 0, "shrinkB": 3})
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise DesignError(f"cannot write plot {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
