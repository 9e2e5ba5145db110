"""Figures a reader can read (issue 40): no two text elements of a figure overlap, and no axes' legend leaves its
axes (experiments.figures.layout_problems, from matplotlib's own window extents of every drawn text).

Every figure the paper shows is drawn again here from its stored results (as ``lightspeed experiment --redraw``
does), without writing files, and checked; so is the step graph, whose node boxes must not overlap either. The
checker itself is checked on a figure made to fail it.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg", force=True)

from experiments.experiment_cli import redraw_figures  # noqa: E402 - the Agg backend first
from experiments.figures import layout_checked, layout_problems  # noqa: E402
from experiments.registry import DEFINITIONS, get_experiment  # noqa: E402
from experiments.section_content import MODES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "paper" / "results"


def shown_runs() -> list[Path]:
    """The results files whose figures the paper shows: per experiment and backend, the full run, else the quick
    one (``experiments.section_content.Results.run``)."""
    out = []
    for experiment in sorted(p for p in RESULTS.iterdir() if p.is_dir() and p.name in DEFINITIONS):
        backends = {d.name.rsplit("-", 1)[0] for d in experiment.iterdir() if d.is_dir()}
        for backend in sorted(backends):
            found = next((experiment / f"{backend}-{m}" / "results.json" for m in MODES
                          if (experiment / f"{backend}-{m}" / "results.json").exists()), None)
            if found is not None and json.loads(found.read_text()).get("summary"):
                out.append(found)
    return out


@pytest.mark.parametrize("results", shown_runs(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_figure_the_paper_shows_is_readable(results: Path, tmp_path: Path) -> None:
    with layout_checked(write=False) as problems:
        drawn = redraw_figures(get_experiment(results.parent.parent.name), str(results), tmp_path)
    assert drawn, f"{results}: no figure drawn"
    assert problems == [], "\n".join(problems)


def test_the_step_graph_is_readable_and_its_boxes_do_not_overlap() -> None:
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    from paper.sections import step_graph
    fig = step_graph.figure()
    try:
        assert layout_problems(fig) == []
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            boxes = [p.get_window_extent(renderer) for p in ax.patches if isinstance(p, FancyBboxPatch)]
            assert len(boxes) > 10
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert min(a.x1, b.x1) <= max(a.x0, b.x0) or min(a.y1, b.y1) <= max(a.y0, b.y0), \
                        f"two node boxes overlap in {ax.get_title()!r}"
            for label in (x for x in ax.texts if x.get_text().strip()):    # each step's name inside its own box
                e = label.get_window_extent(renderer)
                centre = ((e.x0 + e.x1) / 2, (e.y0 + e.y1) / 2)
                box = next(b for b in boxes if b.x0 <= centre[0] <= b.x1 and b.y0 <= centre[1] <= b.y1)
                assert max(box.x0 - e.x0, e.x1 - box.x1, box.y0 - e.y0, e.y1 - box.y1) <= 1.0, label.get_text()
    finally:
        plt.close(fig)


def test_the_checker_finds_overlapping_text_and_a_legend_outside_its_axes() -> None:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(3, 2))
    try:
        ax.text(0.5, 0.5, "one label", transform=ax.transAxes)
        ax.text(0.52, 0.5, "another label", transform=ax.transAxes)
        ax.plot([0, 1], [0, 1], label="a legend entry far too long to stay inside these small axes")
        ax.legend(loc="upper left", bbox_to_anchor=(0.5, 1.0))
        problems = layout_problems(fig)
        assert any("'one label' overlaps 'another label'" in p for p in problems)
        assert any("leaves its axes" in p for p in problems)
    finally:
        plt.close(fig)
