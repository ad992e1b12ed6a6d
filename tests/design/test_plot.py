"""``design --plot``: the names of the front's designs can be read (no two overlap, each
inside the figure), however close their points lie."""

from dataclasses import replace

import matplotlib.pyplot as plt
import pytest
from matplotlib.text import Text

from simulator.resources import estimate
from vtatune.design import Design, DesignResult, label_positions, plot_front, stock


def _result(designs):
    base = designs[-1]
    return DesignResult("resnet18", "ultra96", "latency", 2, base, tuple(designs),
                        tuple(designs), {}, (), "s", "j", "o", 0, 0.0)


def test_close_points_get_labels_that_do_not_overlap(tmp_path, monkeypatch):
    hw = stock("ultra96")
    # five designs within 0.3% of each other's latency and 1% of area, as on ultra96
    variants = [replace(hw, log_inp_buff_size=hw.log_inp_buff_size - k) for k in range(1, 6)]
    designs = [Design(h, estimate(h), {}, 3_700_000 + 2_000 * k, 7_400_000)
               for k, h in enumerate(variants)]
    designs.append(Design(hw, estimate(hw), {}, 7_400_000, 7_400_000))
    figures = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    plot_front(_result(designs), tmp_path / "front.png")
    (fig,) = figures
    fig.canvas.draw()  # at the figure's own dpi, as fig.bbox measures
    renderer = fig.canvas.get_renderer()
    # the texts' own boxes (an annotation's extent also spans its leader line)
    boxes = [Text.get_window_extent(t, renderer) for t in fig.axes[0].texts]
    assert len(boxes) == len({d.hw.bitstream for d in designs})
    assert all(t.get_text().split()[-1].endswith("x") for t in fig.axes[0].texts)
    for i, a in enumerate(boxes):
        assert 0 <= a.x0 and a.x1 <= fig.bbox.x1 and 0 <= a.y0 and a.y1 <= fig.bbox.y1
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)
    real_close(fig)
    assert (tmp_path / "front.png").stat().st_size > 0


@pytest.mark.parametrize("n", [2, 6, 18, 40])
def test_label_positions_keep_order_gap_and_bounds(n):
    ys = [0.5 + 0.001 * (k % 7) for k in range(n)]
    placed = label_positions(ys)
    step = min(0.055, 1 / (n - 1))
    by_height = sorted(range(n), key=lambda i: ys[i])
    heights = [placed[i] for i in by_height]
    assert all(b - a >= step - 1e-5 for a, b in zip(heights, heights[1:], strict=False))
    assert all(-1e-9 <= h <= 1 + 1e-9 for h in heights)
    # far-apart points keep their own heights
    assert label_positions([0.1, 0.5, 0.9]) == [0.1, 0.5, 0.9]
