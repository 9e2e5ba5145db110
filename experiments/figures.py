"""The experiments' figures: one style and palette, grouped bars, and byte-stable PNG and PDF files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Mapping, Sequence, cast

if TYPE_CHECKING:
    from experiments.experiment import Experiment, RunContext

# The paper's text is about 6.6 in wide, so a figure drawn this wide keeps its font sizes on the page: every
# multi-panel figure is drawn at this width (a single panel narrower), with text no smaller than 8 pt.
WIDE = 7.0
LABEL_PT = 8     # value labels on bars, legends, tick labels of crowded axes

# How a figure names a backend: "spark" alone reads as Spark itself, so the project's engine on PySpark and
# Spark's own Structured Streaming are named apart.
BACKEND_LABEL = {"reference": "reference model", "sim": "simulator", "spark": "PySpark engine",
                 "spark-native": "Spark (native)"}


def backend_label(backend: str) -> str:
    return BACKEND_LABEL.get(backend, backend)


# One palette for every figure, close to the published bar charts (muted, high contrast).
PALETTE = ("#1b3139", "#ff3621", "#00a972", "#ffab00", "#2272b4", "#98102a", "#6b7f86")


def figure_style() -> dict[str, Any]:
    """The matplotlib rc parameters of every figure."""
    return {"font.size": 9, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
            "axes.grid.axis": "y", "grid.alpha": 0.3, "axes.titlesize": 10, "legend.frameon": False,
            "figure.dpi": 100, "savefig.dpi": 150, "pdf.fonttype": 42}


def figure_context(changes: dict[str, Any] | None = None) -> ContextManager[None]:
    """``with figure_context():`` draws in the figure style (plus ``changes``, rc parameter -> value)."""
    import matplotlib.pyplot as plt
    # matplotlib types rc keys as a Literal of every parameter name; these are plain strings
    return plt.rc_context(cast(Any, figure_style() | (changes or {})))


def draw_figures(experiment: "Experiment", summary: dict[str, Any], ctx: "RunContext", out_dir: Path) -> list[Path]:
    """The experiment's figures on the non-interactive backend; none (with a note) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print("note: matplotlib is not installed, figures skipped (pip install matplotlib)", file=sys.stderr)
        return []
    matplotlib.use("Agg", force=True)
    return experiment.figures(summary, ctx, out_dir)


def save_figure(fig: Any, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` without timestamps, so the same numbers give the same bytes."""
    import matplotlib.pyplot as plt
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.pdf"]
    fig.savefig(paths[0], metadata={"Software": None}, bbox_inches="tight")
    fig.savefig(paths[1], metadata={"Creator": None, "Producer": None, "CreationDate": None},
                bbox_inches="tight")
    plt.close(fig)
    return paths


Span = tuple[float, float] | None     # (min, max) over seeds of one bar's value; None: one seed, or none


def seed_span(stats: Mapping[str, Any] | None, scale: float = 1.0) -> Span:
    """The (min, max) over seeds of an ``experiments.stats.over_seeds`` entry, scaled; None with fewer than two
    seeds (no spread was measured)."""
    if not stats or (stats.get("n") or 0) < 2 or stats.get("min") is None or stats.get("max") is None:
        return None
    return stats["min"] * scale, stats["max"] * scale


def grouped_bars(ax: Any, categories: Sequence[str], series: Mapping[str, Sequence[float | None]],
                 unit: str = "ms", value_format: str = "{:,.0f}", legend: bool = True,
                 missing: str | None = None, spread: Mapping[str, Sequence[Span]] | None = None) -> None:
    """Bars per category, one colour per series, each bar labelled with its value (the published style).

    The legend sits in one row above the bars, in headroom the y axis keeps for it. A value of None has no bar;
    with ``missing`` that text stands upright where the bar would be (say why it has no value). ``spread`` gives
    per series each bar's (min, max) over seeds, drawn as an error bar (the bar is the median).
    """
    n = max(len(series), 1)
    width = 0.8 / n
    top = 0.0
    # value labels wider than their bars (about 0.6 em a character) would run into each other: stand them upright
    inches = ax.get_position().width * ax.figure.get_figwidth()
    bar_inches = inches * width / max(len(categories), 1)
    widest = max((len(value_format.format(v)) for vs in series.values() for v in vs if v is not None), default=0)
    upright = widest * LABEL_PT * 0.6 / 72 > bar_inches
    for i, (label, values) in enumerate(series.items()):
        xs = [c + (i - (n - 1) / 2) * width for c in range(len(categories))]
        heights = [v if v is not None else 0.0 for v in values]
        top = max([top] + heights)
        bars = ax.bar(xs, heights, width * 0.92, label=label, color=PALETTE[i % len(PALETTE)])
        spans = list((spread or {}).get(label, [None] * len(values)))
        for bar, v, span in zip(bars, values, spans):
            x = bar.get_x() + bar.get_width() / 2
            if v is not None and span is not None:
                ax.errorbar([x], [v], yerr=[[max(0.0, v - span[0])], [max(0.0, span[1] - v)]], fmt="none",
                            ecolor="0.25", elinewidth=0.8, capsize=2)
                top = max(top, span[1])
            if v is not None:
                ax.annotate(value_format.format(v), (x, max(v, span[1]) if span else bar.get_height()),
                            ha="center", va="bottom", fontsize=LABEL_PT, xytext=(0, 1), textcoords="offset points",
                            rotation=90 if upright else 0)
            elif missing:
                ax.annotate(missing, (x, 0), ha="center", va="bottom",
                            rotation=90, fontsize=LABEL_PT, color="0.3", xytext=(0, 2),
                            textcoords="offset points")
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels(categories, rotation=0)
    if unit:
        ax.set_ylabel(unit)
    # one row when the labels fit across the panel (about 15 characters of LABEL_PT text an inch), else stacked
    inches = ax.get_position().width * ax.figure.get_figwidth()
    ncol = n if sum(len(label) + 4 for label in series) <= 15 * inches else 1 if n <= 2 else 2
    rows = -(-n // ncol) if legend and n > 1 else 0
    ax.set_ylim(0, (top or 1.0) * (1.2 + 0.12 * rows + 0.1 * upright))
    if legend and len(series) > 1:
        ax.legend(loc="upper left", ncol=ncol, fontsize=LABEL_PT, handlelength=1.0, columnspacing=0.8)
