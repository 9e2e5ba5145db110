"""The experiments' figures: one style and palette, grouped bars, and byte-stable PNG and PDF files."""

from __future__ import annotations

import contextlib
import contextvars
import sys
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Iterator, Mapping, Sequence, cast

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


# two text boxes overlap when they share more than this many pixels each way (at the figure's own dpi): a shared
# edge or a descender touching the next line is not an overlap a reader sees
OVERLAP_PX = 1.0
# while ``layout_checked`` is active: the list its figures' problems go to, and whether their files are written
_COLLECTOR: contextvars.ContextVar[tuple[list[str], bool] | None] = contextvars.ContextVar("layout_problems",
                                                                                          default=None)


def _visible_texts(fig: Any) -> list[Any]:
    """Every text artist a reader sees: titles, labels, annotations, legend texts, and the tick labels of ticks
    inside their axis's view (matplotlib keeps labels for ticks just outside it, which it does not draw)."""
    from matplotlib.text import Text
    hidden: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = (high - low) * 1e-9
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - slack <= tick.get_loc() <= high + slack:
                    hidden.update({id(tick.label1), id(tick.label2)})
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in hidden
            and (t.axes is None or t.axes.get_visible())]


def layout_problems(fig: Any) -> list[str]:
    """What a reader could not read in a drawn figure: two text elements whose boxes overlap, and a legend of an
    axes that reaches outside its axes (a figure's own legend may sit anywhere)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t, t.get_window_extent(renderer)) for t in _visible_texts(fig)]
    problems = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            high = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if wide > OVERLAP_PX and high > OVERLAP_PX:
                problems.append(f"text {a.get_text()!r} overlaps {b.get_text()!r}")
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        inner, outer = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        if inner.x0 < outer.x0 - OVERLAP_PX or inner.x1 > outer.x1 + OVERLAP_PX or \
                inner.y0 < outer.y0 - OVERLAP_PX or inner.y1 > outer.y1 + OVERLAP_PX:
            problems.append(f"the legend of axes {ax.get_title()!r} leaves its axes")
    return problems


@contextlib.contextmanager
def layout_checked(write: bool = True) -> Iterator[list[str]]:
    """``with layout_checked() as problems:``: every figure saved inside adds its layout problems (prefixed with
    its file's stem) to ``problems`` instead of warning about them; ``write=False`` checks them without writing
    their files."""
    problems: list[str] = []
    token = _COLLECTOR.set((problems, write))
    try:
        yield problems
    finally:
        _COLLECTOR.reset(token)


def save_figure(fig: Any, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` without timestamps, so the same numbers give the same bytes. A figure a
    reader could not read (``layout_problems``) is still written, with a warning, or into the active
    ``layout_checked`` collector."""
    import matplotlib.pyplot as plt
    for _ in range(2):     # the layout settles as the limits change: twice is enough for it to stop moving
        fig.canvas.draw()
        for ax in fig.axes:
            if ax in _LEGENDS:
                fit_legend(ax, _LEGENDS[ax])
            if ax in _HEADROOM:
                _apply_headroom(ax)
    problems = [f"{stem}: {p}" for p in layout_problems(fig)]
    collector = _COLLECTOR.get()
    if collector is not None:
        collector[0].extend(problems)
    for problem in problems if collector is None else []:
        print(f"warning: figure {problem}", file=sys.stderr)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.pdf"]
    if collector is not None and not collector[1]:
        plt.close(fig)
        return paths
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
    label_px = LABEL_PT / 72.0 * ax.figure.dpi * (widest * 0.6 if upright else 1.4)   # a value label's height
    if legend and len(series) > 1:
        fit_legend(ax)
    keep_headroom(ax, top or 1.0, label_px)


LEGEND_GAP_PX = 4.0     # between a legend in the headroom and the tallest bar's value label
# axes whose y limit leaves room above their bars: (tallest bar, pixels its value label needs); the limit is set
# again when the figure is saved, once its layout is final (a title or a label added later shrinks the axes)
_HEADROOM: "weakref.WeakKeyDictionary[Any, tuple[float, float]]" = weakref.WeakKeyDictionary()
# axes whose legend ``fit_legend`` placed (with its location): fitted again when the figure is saved
_LEGENDS: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def keep_headroom(ax: Any, top: float, label_px: float) -> None:
    """Keep ``label_px`` pixels and the axes' legend free above ``top`` (a linear axis from 0), now and when the
    figure is saved."""
    _HEADROOM[ax] = (top, label_px)
    _apply_headroom(ax)


def _apply_headroom(ax: Any) -> None:
    top, label_px = _HEADROOM[ax]
    legend = ax.get_legend()
    legend_px = legend.get_window_extent().height + LEGEND_GAP_PX if legend is not None else 0.0
    ax.set_ylim(0, headroom(ax, top, label_px + legend_px))


def fit_legend(ax: Any, loc: str = "upper left") -> Any:
    """The axes' legend inside the axes: in one row when it fits across, else in fewer columns, else smaller;
    never wider than the axes (``layout_problems`` fails a legend that leaves them)."""
    _LEGENDS[ax] = loc
    labels = ax.get_legend_handles_labels()[1]
    width = ax.get_window_extent().width
    legend = None
    for size in (LABEL_PT, LABEL_PT - 1):
        for ncol in sorted({len(labels), max(1, (len(labels) + 1) // 2), 1}, reverse=True):
            legend = ax.legend(loc=loc, ncol=ncol, fontsize=size, handlelength=1.0, columnspacing=0.8,
                               borderaxespad=0.3)
            ax.figure.canvas.draw()
            if legend.get_window_extent().width <= width - 2:
                return legend
    return legend


def headroom(ax: Any, top: float, pixels: float) -> float:
    """The upper y limit (linear axis from 0) that leaves ``pixels`` of the axes' height free above ``top``, for
    value labels and a legend."""
    height = max(ax.get_window_extent().height, 1.0)
    free = min(pixels / height, 0.6)
    return top / (1.0 - free) * 1.02
