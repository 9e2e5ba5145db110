"""Build the paper from the results files (``make paper``).

The paper's prose (``paper/lightspeed-ref.typ``) holds no measured number.
This script reads ``paper/results/`` (what ``paper/collect_results.py``
wrote, plus ``published.json``, ``analysis.json`` and, when present,
``mutation.json`` and ``zoo.json``) and writes:

- ``paper/generated/numbers.typ``: ``v``, every number the prose uses, by
  name, as display text; ``t``, generated sentences (which backends have
  results, what is absent and why);
- ``paper/generated/tables.typ``: the tables, every cell a named value;
- ``paper/generated/figures.typ``: the experiments' own figures, copied
  byte for byte into ``paper/figures/``;
- ``paper/generated/provenance.json``: for every value, the results file and
  key path it was read from, the raw value, and how it was derived and
  formatted (``tests/test_paper.py`` resolves each one again);
- ``paper/generated/figures.json``: each copied figure and its source.

Then it compiles ``paper/lightspeed-ref.typ`` with Typst (``--pdf``).
``--check`` regenerates into memory and exits 1 if a committed generated
file differs from what the results files give now.

For each experiment and backend the run used is the full one when
``paper/results/<experiment>/<backend>-full/`` exists, else the quick one;
the text says which.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

PAPER = Path(__file__).resolve().parent
ROOT = PAPER.parent
RESULTS = PAPER / "results"
GENERATED = PAPER / "generated"
FIGURES = PAPER / "figures"
MAIN = PAPER / "lightspeed-ref.typ"
PDF = PAPER / "lightspeed-ref.pdf"

EXPERIMENTS = ("offset-management", "pipelining", "async-state-checkpoint", "changelog-checkpointing",
               "checkpoint-interval", "calibration", "fault-matrix", "state-rebalancing")
COMPARED = ("sim", "spark", "spark-native")          # the backends a result table compares, in column order
BACKEND_NAME = {"reference": "reference model", "sim": "simulator", "spark": "PySpark engine",
                "spark-native": "native Spark"}
THE = {"reference": "the reference model", "sim": "the simulator", "spark": "the PySpark engine",
       "spark-native": "native Spark"}
MODES = ("full", "quick")                            # preference order of a run's mode
# Why an experiment has no run on a backend even when every run the paper asks for is in place.
NOT_APPLICABLE = {
    ("offset-management", "spark-native"): None,
    ("pipelining", "spark-native"): "open-source Spark has no micro-batch pipelining (MicroBatchExecution runs one "
                                    "batch at a time), so native Spark cannot run this experiment",
    ("async-state-checkpoint", "spark-native"): "asynchronous state checkpointing is a Databricks Runtime feature, "
                                                "not part of open-source Spark",
    ("changelog-checkpointing", "spark"): "this experiment runs on the simulator only; the engine's RocksDB store "
                                          "is measured by the project's benchmarks, not by a results file",
    ("changelog-checkpointing", "spark-native"): "this experiment runs on the simulator only",
    ("checkpoint-interval", "spark"): "this experiment runs on the simulator only (it needs hundreds of crashes)",
    ("checkpoint-interval", "spark-native"): "this experiment runs on the simulator only",
    ("calibration", "sim"): "the calibration fits the simulator to a Spark backend, so it has no simulator-only run",
}
# The figures of each experiment the paper shows, in order: (stem of the experiment's PNG file, width on the page).
# experiments/figures.py draws them about as wide as the page (WIDE, 7 in; 3.5 in for a half-width chart), so at
# these widths their text stays within ten percent of its drawn size (8-10 pt).
# A backend's PNG narrower than the widest of the same stem (fewer panels) is shown narrower in proportion, so
# that every backend's figure of an experiment has the same text size on the page.
# By default each backend's figures float as one figure; an experiment in FIGURE_GROUPS instead floats one figure
# per group of stems, holding those stems of every backend, side by side where their widths fit.
FIGURE_GROUPS = {
    "offset-management": (("offset_management_reduction",),
                          ("offset_management_latency", "offset_management_latency_fitted")),
}
FIGURE_STEMS = {
    "offset-management": (("offset_management_reduction", "49%"), ("offset_management_latency", "100%"),
                          ("offset_management_latency_fitted", "100%")),
    "pipelining": (("pipelining", "82%"),),
    "async-state-checkpoint": (("async_state_checkpoint", "100%"),),
    "changelog-checkpointing": (("changelog_checkpointing", "85%"),),
    "checkpoint-interval": (("checkpoint_interval", "85%"),),
    "calibration": (("calibration", "100%"),),
    "fault-matrix": (("fault_matrix", "100%"),),
    "state-rebalancing": (("state_rebalancing", "58%"),),
}
MINUS = "\u2212"
TIMES = "\u00d7"
DASH = "\u2013"


# ------------------------------------------------------------------ runs


@dataclass(frozen=True)
class Run:
    """One experiment's results on one backend: ``paper/results/<experiment>/<backend>-<mode>/``."""

    experiment: str
    backend: str
    mode: str
    directory: Path
    doc: dict[str, Any]

    @property
    def file(self) -> str:
        """The results file's logical path, ``paper/results/...`` (what provenance records)."""
        return logical(self.directory / "results.json")

    @property
    def label(self) -> str:
        return f"{self.backend}-{self.mode}"


def rel(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


RESULTS_PREFIX = "paper/results/"


def logical(path: Path) -> str:
    """A results file's path as the paper names it, ``paper/results/<...>``, wherever the results directory is
    (``generate`` can read a copy of it; the generated files must not depend on where the copy is)."""
    parts = path.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "results" and (Path(*parts[:i + 1]) / "published.json").exists():
            return RESULTS_PREFIX + Path(*parts[i + 1:]).as_posix()
    raise ValueError(f"{path}: not inside a results directory (one holding published.json)")


class Results:
    """The results files under one directory (``paper/results`` or a copy of it)."""

    def __init__(self, root: Path = RESULTS):
        self.root = root
        self.docs: dict[str, Any] = {}

    def doc(self, path: Path) -> Any:
        key = str(path)
        if key not in self.docs:
            self.docs[key] = json.loads(path.read_text()) if path.exists() else None
        return self.docs[key]

    def at(self, file: str) -> Any:
        """The document at a logical path (``paper/results/...``)."""
        if not file.startswith(RESULTS_PREFIX):
            raise ValueError(f"{file}: not a path under {RESULTS_PREFIX}")
        return self.doc(self.root / file[len(RESULTS_PREFIX):])

    def run(self, experiment: str, backend: str) -> Run | None:
        for mode in MODES:
            directory = self.root / experiment / f"{backend}-{mode}"
            doc = self.doc(directory / "results.json")
            if doc is not None:
                return Run(experiment, backend, mode, directory, doc)
        return None

    def runs(self) -> list[Run]:
        return [r for e in EXPERIMENTS for b in COMPARED if (r := self.run(e, b)) is not None]

    def explorer(self) -> Run | None:
        for mode in MODES:
            directory = self.root / "explorer" / f"reference-{mode}"
            doc = self.doc(directory / "results.json")
            if doc is not None:
                return Run("explorer", "reference", mode, directory, doc)
        return None

    def optional(self, name: str) -> tuple[str, Any] | None:
        path = self.root / name
        doc = self.doc(path)
        return (logical(path), doc) if doc is not None else None


def lookup(doc: Any, key: Sequence[Any]) -> Any:
    """The value at a key path (dict keys and list indexes); None when the path does not exist."""
    node = doc
    for part in key:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        else:
            return None
    return node


# ----------------------------------------------------------------- values


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


DERIVATIONS: dict[str, Callable[[list[Any]], Any]] = {
    "value": lambda xs: xs[0],
    "neg": lambda xs: -xs[0] if _num(xs[0]) is not None else None,
    "ratio": lambda xs: xs[0] / xs[1] if _num(xs[0]) is not None and _num(xs[1]) else None,
    "change": lambda xs: xs[0] / xs[1] - 1.0 if _num(xs[0]) is not None and _num(xs[1]) else None,
    "diff": lambda xs: xs[0] - xs[1] if _num(xs[0]) is not None and _num(xs[1]) is not None else None,
    "sum": lambda xs: sum(xs) if all(_num(x) is not None for x in xs) else None,
    "len": lambda xs: len(xs[0]) if isinstance(xs[0], (list, dict)) else None,
    "range": lambda xs: (xs[0], xs[1]),
    # the smallest and the largest of the sources: shown as one value when both read the same ("span:" formats)
    "span": lambda xs: (min(n for x in xs if (n := _num(x)) is not None),
                        max(n for x in xs if (n := _num(x)) is not None))
    if any(_num(x) is not None for x in xs) else None,
    "max": lambda xs: max((x for x in xs if _num(x) is not None), default=None),
    "min": lambda xs: min((x for x in xs if _num(x) is not None), default=None),
    "yesno": lambda xs: xs[0],
    "backlogged": lambda xs: sum(1 for r in xs[0] or [] if backlogged(r)),
    "judged": lambda xs: sum(1 for r in xs[0] or [] if backlogged(r) is not None),
    "caught": lambda xs: sum(1 for e in xs[0] or [] if e.get("caught_by")),
    "s_to_ms": lambda xs: xs[0] * 1000.0 if _num(xs[0]) is not None else None,
}


def backlogged(record: dict[str, Any]) -> bool | None:
    """Whether a rate-source latency point fell behind its input; None: cannot tell.

    The rule is the project's one rule (``reference/timing.py``'s ``kept_up``,
    which every timed backend reports and ``experiments/defs`` records as the
    metric ``kept_up``); ``analysis.json`` repeats its constants so that the
    text can quote them, and a test keeps the two equal. A point without the
    metric (a results file written before it existed) cannot be told.
    """
    metrics, point = record.get("metrics") or {}, record.get("point") or {}
    source = (point.get("scenario") or {}).get("source") or {}
    if source.get("rows_per_second") is None:
        return None
    kept_up = metrics.get("kept_up")
    return None if kept_up is None else not kept_up


def _signed(text: str) -> str:
    return text.replace("-", MINUS)


def _nonzero(value: float, digits: int) -> float:
    """``value``, or 0.0 when it rounds to zero (so no "-0.0" is shown)."""
    return 0.0 if round(value, digits) == 0 else value


def _plain_number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")


def joined(low: str, high: str) -> str:
    """A range's display text: one value when both ends read the same ("49%", not "49% to 49%")."""
    return low if low == high else f"{low} to {high}"


def fmt(spec: str, value: Any) -> str:
    """Display text of a value. ``spec`` names the unit and rounding."""
    if value is None:
        return "n/a"
    if spec == "str":
        return str(value)
    if spec == "yesno":
        return "yes" if value else "no"
    if spec.startswith("claim:"):
        unit = spec.split(":", 1)[1]
        if isinstance(value, (list, tuple)):
            text = f"{_plain_number(value[0])}{DASH}{_plain_number(value[1])}"
        else:
            text = _plain_number(value)
        if unit == "batches" and not isinstance(value, (list, tuple)) and value == 1:
            unit = "batch"
        suffix = {"%": "%", "x": TIMES, "": ""}.get(unit, f" {unit}")
        return text + suffix
    if spec.startswith("span:"):
        return joined(fmt(spec[len("span:"):], value[0]), fmt(spec[len("span:"):], value[1]))
    if spec.startswith("claimcut"):
        if isinstance(value, (list, tuple)):
            return f"{MINUS}{_plain_number(value[0])} to {MINUS}{_plain_number(value[1])}%"
        return f"{MINUS}{_plain_number(value)}%"
    v = float(value)
    if spec == "ms":
        return f"{v:,.0f} ms"
    if spec == "ms1":
        return f"{v:,.1f} ms"
    if spec == "s":
        return f"{v:,.0f} s" if v >= 10 else f"{v:,.1f} s"
    if spec == "min":
        return f"{v / 60:,.1f} min"
    if spec == "pct":
        return _signed(f"{_nonzero(v * 100, 0):,.0f}%")
    if spec == "pct1":
        return _signed(f"{_nonzero(v * 100, 1):,.1f}%")
    if spec == "cut":        # a reduction (0.4 = 40% less) shown as a signed change
        return _signed(f"{-v * 100:+.0f}%")
    if spec == "change":     # a relative change (0.3 = 30% more)
        return _signed(f"{v * 100:+.0f}%")
    if spec == "pp1":        # a difference of percentages, in points
        return _signed(f"{_nonzero(v, 1):+.1f} points")
    if spec == "x":
        return f"{v:.2f}{TIMES}"
    if spec == "int":
        return f"{v:,.0f}"
    if spec == "num1":
        return f"{v:,.1f}"
    if spec == "num2":
        return f"{v:,.2f}"
    if spec == "krows":
        return f"{v / 1000:,.0f}k rows/s"
    if spec == "rows":
        return f"{v:,.0f} rows/s"
    if spec == "mb":
        return f"{v / 1e6:,.2f} MB"
    if spec == "rate":
        return _rate(v)
    if spec == "keys":
        return _rate(v)
    raise ValueError(f"unknown format {spec!r}")


def _rate(v: float) -> str:
    if v >= 1_000_000 and v % 1_000_000 == 0:
        return f"{v / 1_000_000:.0f}M"
    if v >= 1000 and v % 1000 == 0:
        return f"{v / 1000:.0f}K"
    return f"{v:,.0f}"


def recorded(raw: Any) -> Any:
    """What provenance keeps of a source value: a number or string as it is, a list or object by its digest
    (a count of points need not copy the points)."""
    if isinstance(raw, (list, dict)):
        canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return {"canonical_json_sha256": hashlib.sha256(canonical.encode()).hexdigest()}
    return raw


class Values:
    """Every number the paper shows, by name, with where it was read from."""

    def __init__(self, results: Results):
        self.results = results
        self.entries: dict[str, dict[str, Any]] = {}

    def add(self, name: str, sources: Sequence[tuple[str, Sequence[Any]]], spec: str,
            derivation: str = "value") -> str:
        if name in self.entries:
            raise ValueError(f"value {name!r} defined twice")
        if not name.replace("_", "").isalnum() or not name[0].isalpha():
            raise ValueError(f"value name {name!r}: letters, digits and underscores only")
        raws = [lookup(self.results.at(file), list(key)) for file, key in sources]
        value = DERIVATIONS[derivation](raws)
        text = fmt(spec, value)
        self.entries[name] = {"text": text, "format": spec, "derivation": derivation,
                              "sources": [{"file": file, "key": list(key), "value": recorded(raw)}
                                          for (file, key), raw in zip(sources, raws)]}
        return text

    def of(self, run: Run | None, name: str, key: Sequence[Any], spec: str, derivation: str = "value") -> str:
        """A value of one run; when the run is absent, 'n/a' with no source."""
        if run is None:
            return self.absent(name)
        return self.add(name, [(run.file, key)], spec, derivation)

    def absent(self, name: str) -> str:
        self.entries[name] = {"text": "n/a", "format": "str", "derivation": "absent", "sources": []}
        return "n/a"

    def claim(self, name: str, claim: str, spec: str | None = None) -> str:
        """A published claim of published.json (``claim:<unit>`` unless ``spec`` is ``claimcut``)."""
        file = logical(self.results.root / "published.json")
        entry = lookup(self.results.at(file), ["claims", claim])
        if entry is None:
            raise ValueError(f"published.json has no claim {claim!r}")
        unit = entry.get("unit", "")
        if "low" in entry:
            sources = [(file, ["claims", claim, "low"]), (file, ["claims", claim, "high"])]
            return self.add(name, sources, spec or f"claim:{unit}", "range")
        return self.add(name, [(file, ["claims", claim, "value"])], spec or f"claim:{unit}")


# --------------------------------------------------------------- Typst text


def esc(text: str) -> str:
    """Text for a Typst content block: markup characters escaped."""
    out = "".join("\\" + ch if ch in "\\#*_`$@<>[]~/" else ch for ch in str(text))
    return out.replace("--", "-\\-").replace("...", ".\\..")   # no en dash, no ellipsis: literal text


def tstr(text: str) -> str:
    """A Typst string literal."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def code(text: str) -> str:
    """Inline raw text (a path, a command) in a content block."""
    return "#raw(" + tstr(text) + ")"


@dataclass
class Table:
    """A table whose every cell is display text (already escaped content)."""

    header: list[str]
    rows: list[list[str]]
    aligns: list[str] | None = None     # default: the first column left, the others (numbers) right
    widths: list[str] | None = None

    def typst(self) -> str:
        n = len(self.header)
        widths = self.widths or ["auto"] * n
        aligns = self.aligns or ["left"] + ["right"] * (n - 1)
        lines = [f"table(columns: ({', '.join(widths)},),",
                 "  align: (" + ", ".join(aligns) + ",),",
                 "  table.header(" + ", ".join(f"[*{esc(h)}*]" for h in self.header) + "),"]
        for row in self.rows:
            if len(row) == 1:
                lines.append(f"  table.cell(colspan: {n}, align: left)[{row[0]}],")
            else:
                lines.append("  " + ", ".join(f"[{c}]" for c in row) + ",")
        lines.append(")")
        return "\n".join(lines)


class Paper:
    """Everything generated: values, sentences, tables and figures."""

    def __init__(self, results: Results):
        self.results = results
        self.v = Values(results)
        self.t: dict[str, str] = {}          # name -> Typst content (escaped)
        self.tables: dict[str, Table] = {}
        # name -> per backend: (caption suffix, [(source PNG, width)])
        # name -> its floating figures: (caption suffix, rows of (source PNG, width in percent))
        self.figures: dict[str, list[tuple[str, list[list[tuple[Path, int]]]]]] = {}

    # -- helpers
    def text(self, name: str, content: str) -> None:
        if name in self.t:
            raise ValueError(f"text {name!r} defined twice")
        self.t[name] = content

    def run(self, experiment: str, backend: str) -> Run | None:
        return self.results.run(experiment, backend)

    def describe_run(self, run: Run) -> str:
        seeds = run.doc.get("seeds") or []
        return (f"{BACKEND_NAME[run.backend]}: {run.mode} mode, "
                f"{self.v.add(f'seeds_{key(run.experiment)}_{key(run.backend)}', [(run.file, ['seeds'])], 'int', 'len')}"
                f" seed{'s' if len(seeds) != 1 else ''}")

    def availability(self, experiment: str, backends: Iterable[str] = COMPARED) -> str:
        """A sentence per backend: which run the numbers come from, or why there are none."""
        parts = []
        for backend in backends:
            run = self.run(experiment, backend)
            if run is not None:
                parts.append(esc(self.describe_run(run)) + " (" + code(run.file) + ")")
                continue
            reason = NOT_APPLICABLE.get((experiment, backend))
            if reason:
                parts.append(f"{esc(BACKEND_NAME[backend])}: not applicable, {esc(reason)}")
            else:
                parts.append(f"{esc(BACKEND_NAME[backend])}: *no results yet*; nothing under "
                             + code(f"paper/results/{experiment}/{backend}-*/") +
                             ", so its cells read n/a")
        return "; ".join(parts) + "."

    def add_figures(self, experiment: str) -> None:
        """The experiment's figures: one per backend with results (its figures stacked), or one per group of
        FIGURE_GROUPS (that group's figures of every backend, packed into rows)."""
        runs = [(b, r) for b in COMPARED if (r := self.run(experiment, b)) is not None]
        widest: dict[str, int] = {}
        for _, run in runs:
            for stem, _ in FIGURE_STEMS[experiment]:
                if (run.directory / f"{stem}.png").exists():
                    widest[stem] = max(widest.get(stem, 0), png_width(run.directory / f"{stem}.png"))

        def images(run: Run, stems: tuple[str, ...]) -> list[tuple[Path, int]]:
            return [(run.directory / f"{stem}.png",
                     round(float(width.rstrip("%")) * png_width(run.directory / f"{stem}.png") / widest[stem]))
                    for stem, width in FIGURE_STEMS[experiment]
                    if stem in stems and (run.directory / f"{stem}.png").exists()]

        figures: list[tuple[str, list[list[tuple[Path, int]]]]] = []
        if experiment not in FIGURE_GROUPS:
            for backend, run in runs:
                shown = images(run, tuple(stem for stem, _ in FIGURE_STEMS[experiment]))
                if shown:
                    who = f"{THE[backend]}, {run.mode} mode."
                    figures.append((esc(who[0].upper() + who[1:]), [[image] for image in shown]))
        else:
            for stems in FIGURE_GROUPS[experiment]:
                labelled = [(f"{THE[backend]} ({run.mode} mode)", image)
                            for backend, run in runs for image in images(run, stems)]
                if not labelled:
                    continue
                rows: list[list[tuple[Path, int]]] = []
                for _, image in labelled:   # greedy: a figure joins the last row while the row fits the page
                    if rows and sum(w for _, w in rows[-1]) + len(rows[-1]) * 2 + image[1] <= 100:
                        rows[-1].append(image)
                    else:
                        rows.append([image])
                backends = list(dict.fromkeys(name for name, _ in labelled))
                order = "left to right" if len(rows) == 1 else "in reading order"
                suffix = (f"{backends[0][0].upper()}{backends[0][1:]}." if len(backends) == 1 else
                          f"From {' and '.join(backends)}, {order}; each panel's title or legend names its "
                          "backend.")
                figures.append((esc(suffix), rows))
        self.figures[key(experiment)] = figures


def png_width(path: Path) -> int:
    """The pixel width in a PNG's header (the IHDR chunk's first field)."""
    with path.open("rb") as f:
        header = f.read(24)
    if header[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    return int.from_bytes(header[16:20], "big")


def key(text: str) -> str:
    return text.replace("-", "_").replace("/", "_").replace(".", "_")


def pct_cut_claim(v: Values, name: str, claim: str) -> str:
    return v.claim(name, claim, "claimcut")


# ------------------------------------------------------------- sections


def section_published(p: Paper) -> None:
    v = p.v
    for name, spec in (("om_before_ms", None), ("om_after_ms", None), ("om_improvement", None),
                       ("om_rate_low", "rate"), ("om_rate_high", "rate"), ("om_workers", None), ("om_cores", None),
                       ("om_cut_purge", None), ("om_cut_progress", None), ("om_cut_both", None),
                       ("om_both_below_ms", None), ("om_kafka_cut", None), ("om_saved_per_feature_ms", None),
                       ("om_saved_both_ms", None), ("om_purge_saving_update_ms", None), ("pipe_speedup", None),
                       ("state_commit_share", None), ("asc_pending", None), ("asc_rerun", None),
                       ("asc_mean_cut", None), ("flink_ckpt_p50_changelog_ms", None),
                       ("flink_ckpt_p50_full_ms", None), ("flink_ckpt_p999_changelog_ms", None),
                       ("flink_ckpt_p999_full_ms", None), ("flink_space_overhead", None),
                       ("flink_recovery_full_s", None), ("flink_recovery_changelog_s", None),
                       ("flink_recovery_slowdown", None), ("flink_parallelism", None), ("flink_input_rate", "rate"),
                       ("doppio_error", None), ("ernest_error", None)):
        if spec == "rate":
            file = logical(p.results.root / "published.json")
            v.add(f"pub_{name}", [(file, ["claims", name, "value"])], "rate")
        else:
            v.claim(f"pub_{name}", name, spec)
    for name in ("om_cut_purge", "om_cut_progress", "om_cut_both", "asc_mean_cut"):
        v.claim(f"pubcut_{name}", name, "claimcut")
    file = logical(p.results.root / "published.json")
    # the largest share of the published baseline that one feature's published saving can be
    v.add("pub_om_saving_share", [(file, ["claims", "om_saved_per_feature_ms", "high"]),
                                  (file, ["claims", "om_before_ms", "low"])], "pct", "ratio")
    # the table of every claim with its source and place
    doc = p.results.doc(p.results.root / "published.json")
    rows = []
    file = logical(p.results.root / "published.json")
    for name, claim in doc["claims"].items():
        source = doc["sources"][claim["source"]]
        where = esc(claim["where"])
        if claim.get("line"):
            where += ", line " + v.add(f"publine_{name}", [(file, ["claims", name, "line"])], "int") + \
                " of the archived text"
        rows.append([esc(claim["what"]), v.entries[f"pub_{name}"]["text"] if f"pub_{name}" in v.entries else
                     v.claim(f"pub_{name}", name),
                     f"#cite(<{source['bib']}>)", where])
    p.tables["published"] = Table(["Claim", "Published", "Source", "Where"], rows,
                                  aligns=["left", "right", "center", "left"],
                                  widths=["2.2fr", "auto", "auto", "2.4fr"])
    p.text("published_file", code(file))


def backlog_summary(p: Paper) -> None:
    """Which latency points of which runs did not keep up: the methodology's rule, applied to every run."""
    v = p.v
    file = logical(p.results.root / "analysis.json")
    v.add("backlog_min_processed", [(file, ["backlog", "min_processed_fraction"])], "pct")
    v.add("backlog_max_growth", [(file, ["backlog", "max_latency_growth_ms_per_s"])], "int")
    lines = []
    for run in p.results.runs():
        points = run.doc.get("points", [])
        judged = [backlogged(r) for r in points]
        if not any(j is not None for j in judged):
            continue
        name = f"{key(run.experiment)}_{key(run.backend)}"
        sources = [(run.file, ["points"]), (file, ["backlog"])]
        n_judged = v.add(f"judged_{name}", sources, "int", "judged")
        n_behind = v.add(f"backlogged_{name}", sources, "int", "backlogged")
        behind = [r["id"] for r, j in zip(points, judged) if j]
        where = f"{esc(run.experiment)} on {esc(THE[run.backend])} ({esc(run.mode)})"
        if behind:
            lines.append(f"{where}: {n_behind} of {n_judged} rate-source points backlogged (" +
                         ", ".join(code(b) for b in behind[:3]) + (", ..." if len(behind) > 3 else "") + ")")
        else:
            lines.append(f"{where}: all {n_judged} rate-source points kept up")
    p.text("backlog", "; ".join(lines) + "." if lines else "No run has rate-source points to judge.")


# -- 6.1 offset management

OM_CONFIGS = ("baseline", "async-purge", "async-progress", "both")
OM_ENGINE_PARTS = ("baseline_p50", "purge_cut", "progress_cut", "both_cut", "both_p50", "storage",
                   # at the highest rate: how many batches the baseline and both features planned, and their tasks
                   "hi_rate", "hi_batches_baseline_min", "hi_batches_baseline_max", "hi_batches_both_min",
                   "hi_batches_both_max", "hi_addbatch_baseline", "hi_addbatch_both", "hi_purge_cut",
                   "hi_progress_cut", "hi_both_cut", "hi_both_p50", "judged", "backlogged")
# the values of the fitted cloud profile's run (absent when the results hold none)
OM_FIT_VALUES = tuple(f"om_fit_{c}_cut_{a}" for c in ("purge", "progress", "both") for a in ("min", "max")) + \
    tuple(f"om_fit_{c}_p50_{a}" for c in ("base", "both") for a in ("min", "max")) + \
    ("fit_delete_ms", "fit_rename_ms", "fit_planning_ms", "fit_profile_name")


def section_offset_management(p: Paper) -> None:
    v = p.v
    exp = "offset-management"
    rows = [["published (rate source)", v.entries["pub_om_before_ms"]["text"],
             v.entries["pubcut_om_cut_purge"]["text"], v.entries["pubcut_om_cut_progress"]["text"],
             v.entries["pubcut_om_cut_both"]["text"], v.entries["pub_om_after_ms"]["text"]]]
    for backend in COMPARED:
        run = p.run(exp, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + _absent_cell(exp, backend)])
            if backend == "spark":   # the prose quotes the engine's lowest rate
                for part in OM_ENGINE_PARTS:
                    v.absent(f"om_engine_{part}")
            continue
        if backend == "spark":
            lo = min(run.doc["summary"]["rates"], key=float)
            base = ["summary", "rates", lo]
            for part, path, spec in (("baseline_p50", ["baseline", "p50", "median"], "ms"),
                                     ("purge_cut", ["async-purge", "cut_p50"], "cut"),
                                     ("progress_cut", ["async-progress", "cut_p50"], "cut"),
                                     ("both_cut", ["both", "cut_p50"], "cut"),
                                     ("both_p50", ["both", "p50", "median"], "ms")):
                v.of(run, f"om_engine_{part}", base + path, spec)
            v.of(run, "om_engine_storage", ["storage_profile"], "str")
            v.of(run, "om_engine_judged", ["points"], "int", "judged")          # the backlog rule of section 5
            v.of(run, "om_engine_backlogged", ["points"], "int", "backlogged")
            hi = max(run.doc["summary"]["rates"], key=float)
            at_hi = [i for i, r in enumerate(run.doc["points"]) if str(r["point"]["params"].get("rate")) == hi
                     and r["point"]["task"] == "latency" and (r.get("metrics") or {}).get("batches")]
            v.of(run, "om_engine_hi_rate", ["points", at_hi[0], "point", "params", "rate"], "rate")
            for config in ("baseline", "both"):
                mine = [i for i in at_hi if run.doc["points"][i]["point"]["config"] == config]
                for agg in ("min", "max"):
                    v.add(f"om_engine_hi_batches_{config}_{agg}",
                          [(run.file, ["points", i, "metrics", "batches"]) for i in mine], "int", agg)
            for part, path, spec in (("hi_purge_cut", ["async-purge", "cut_p50"], "cut"),
                                     ("hi_progress_cut", ["async-progress", "cut_p50"], "cut"),
                                     ("hi_both_cut", ["both", "cut_p50"], "cut"),
                                     ("hi_both_p50", ["both", "p50", "median"], "ms")):
                v.of(run, f"om_engine_{part}", ["summary", "rates", hi] + path, spec)
            for config in ("baseline", "both"):
                v.of(run, f"om_engine_hi_addbatch_{config}",
                     ["summary", "rates", hi, config, "breakdown_ms", "addBatch"], "ms")
        for rate in sorted(run.doc["summary"]["rates"], key=float):
            base = ["summary", "rates", rate]
            n = f"om_{key(backend)}_{rate}"
            label = f"{esc(BACKEND_NAME[backend])}, {fmt('rate', float(rate))}/s"
            backlog = [backlogged(r) for r in run.doc["points"]
                       if str(r["point"]["params"].get("rate")) == rate and "profile" not in r["point"]["params"]]
            if any(backlog):
                label += " (backlogged)"
            rows.append([label,
                         v.of(run, f"{n}_baseline_p50", base + ["baseline", "p50", "median"], "ms"),
                         v.of(run, f"{n}_purge_cut", base + ["async-purge", "cut_p50"], "cut"),
                         v.of(run, f"{n}_progress_cut", base + ["async-progress", "cut_p50"], "cut"),
                         v.of(run, f"{n}_both_cut", base + ["both", "cut_p50"], "cut"),
                         v.of(run, f"{n}_both_p50", base + ["both", "p50", "median"], "ms")])
        fitted = run.doc["summary"].get("fitted")
        for rate in sorted((fitted or {}).get("rates", {}), key=float):
            base = ["summary", "fitted", "rates", rate]
            n = f"omfit_{key(backend)}_{rate}"
            rows.append([f"{esc(BACKEND_NAME[backend])}, fitted profile, {fmt('rate', float(rate))}/s",
                         v.of(run, f"{n}_baseline_p50", base + ["baseline", "p50", "median"], "ms"),
                         v.of(run, f"{n}_purge_cut", base + ["async-purge", "cut_p50"], "cut"),
                         v.of(run, f"{n}_progress_cut", base + ["async-progress", "cut_p50"], "cut"),
                         v.of(run, f"{n}_both_cut", base + ["both", "cut_p50"], "cut"),
                         v.of(run, f"{n}_both_p50", base + ["both", "p50", "median"], "ms")])
    p.tables["offset_management"] = Table(
        ["Source", "Baseline p50", "Async purge", "Async progress", "Both", "Both p50"], rows)
    _om_breakdown(p)
    p.text("om_availability", p.availability(exp))
    p.add_figures(exp)
    # the decomposition behind the gap: how much of the baseline batch the log writes are
    run = p.run(exp, "sim")
    if run is not None:
        lo = min(run.doc["summary"]["rates"], key=float)
        points = run.doc["points"]
        idx = {(r["point"]["config"], str(r["point"]["params"]["rate"])): i for i, r in enumerate(points)
               if "profile" not in r["point"]["params"]}   # the first-principles profile, not the fitted one
        b, g = idx[("baseline", lo)], idx[("async-progress", lo)]
        pu = idx[("async-purge", lo)]
        v.of(run, "om_sim_rate_lo", ["points", b, "point", "params", "rate"], "rate")
        v.of(run, "om_sim_base_batch", ["points", b, "metrics", "trigger_ms_mean"], "ms")
        v.of(run, "om_sim_base_logwrite", ["points", b, "metrics", "log_write_ms_mean"], "ms")
        v.add("om_sim_logwrite_share", [(run.file, ["points", b, "metrics", "log_write_ms_mean"]),
                                        (run.file, ["points", b, "metrics", "trigger_ms_mean"])], "pct", "ratio")
        v.of(run, "om_sim_progress_batch", ["points", g, "metrics", "trigger_ms_mean"], "ms")
        v.of(run, "om_sim_purge_batch", ["points", pu, "metrics", "trigger_ms_mean"], "ms")
        v.add("om_sim_purge_saving", [(run.file, ["points", b, "metrics", "trigger_ms_mean"]),
                                      (run.file, ["points", pu, "metrics", "trigger_ms_mean"])], "ms", "diff")
        v.add("om_sim_progress_saving", [(run.file, ["points", b, "metrics", "trigger_ms_mean"]),
                                         (run.file, ["points", g, "metrics", "trigger_ms_mean"])], "ms", "diff")
        rates = list(run.doc["summary"]["rates"])
        v.add("om_sim_both_cut_min", [(run.file, ["summary", "rates", r, "both", "cut_p50"]) for r in rates],
              "pct", "min")
        v.add("om_sim_both_cut_max", [(run.file, ["summary", "rates", r, "both", "cut_p50"]) for r in rates],
              "pct", "max")
        v.add("om_sim_progress_cut_max", [(run.file, ["summary", "rates", r, "async-progress", "cut_p50"])
                                          for r in rates], "pct", "max")
        v.add("om_sim_purge_cut_min", [(run.file, ["summary", "rates", r, "async-purge", "cut_p50"])
                                       for r in rates], "pct", "min")
        v.add("om_sim_purge_cut_max", [(run.file, ["summary", "rates", r, "async-purge", "cut_p50"])
                                       for r in rates], "pct", "max")
        v.add("om_sim_both_p50_min", [(run.file, ["summary", "rates", r, "both", "p50", "median"]) for r in rates],
              "ms", "min")
        v.add("om_sim_base_p50_min", [(run.file, ["summary", "rates", r, "baseline", "p50", "median"])
                                      for r in rates], "ms", "min")
        v.add("om_sim_base_p50_max", [(run.file, ["summary", "rates", r, "baseline", "p50", "median"])
                                      for r in rates], "ms", "max")
        v.add("om_sim_progress_cut_min", [(run.file, ["summary", "rates", r, "async-progress", "cut_p50"])
                                          for r in rates], "pct", "min")
        fitted = run.doc["summary"].get("fitted")
        if fitted:
            frates = list(fitted["rates"])
            for config, short in (("async-purge", "purge"), ("async-progress", "progress"), ("both", "both")):
                for agg in ("min", "max"):
                    v.add(f"om_fit_{short}_cut_{agg}", [(run.file, ["summary", "fitted", "rates", r, config, "cut_p50"])
                                                        for r in frates], "pct", agg)
            for config, short in (("baseline", "base"), ("both", "both")):
                for agg in ("min", "max"):
                    v.add(f"om_fit_{short}_p50_{agg}", [(run.file, ["summary", "fitted", "rates", r, config, "p50",
                                                                    "median"]) for r in frates], "ms", agg)
            f = next(i for i, r in enumerate(points) if "profile" in r["point"]["params"])
            fprof = ["points", f, "point", "profile"]
            v.of(run, "fit_delete_ms", fprof + ["storage", "delete_ms"], "ms")
            v.of(run, "fit_rename_ms", fprof + ["storage", "rename_ms"], "ms")
            v.of(run, "fit_planning_ms", fprof + ["planning_ms"], "ms")
            v.of(run, "fit_profile_name", ["summary", "fitted", "profile"], "str")
        else:
            for name in OM_FIT_VALUES:
                v.absent(name)
        prof = ["points", b, "point", "profile"]
        for name in ("small_write_ms", "rename_ms", "list_ms", "delete_ms", "read_ms"):
            v.of(run, f"cluster_{name}", prof + ["storage", name], "ms")
        v.of(run, "cluster_executors", prof + ["executors"], "int")
        v.of(run, "cluster_cores", prof + ["cores_per_executor"], "int")
        v.of(run, "cluster_restart", prof + ["restart_ms"], "ms")
        v.of(run, "cluster_jitter", prof + ["storage", "jitter_sigma"], "num1")
    else:
        for name in ("om_sim_rate_lo", "om_sim_base_batch", "om_sim_base_logwrite", "om_sim_logwrite_share",
                     "om_sim_progress_batch", "om_sim_purge_batch", "om_sim_purge_saving", "om_sim_progress_saving",
                     "om_sim_both_cut_min",
                     "om_sim_both_cut_max", "om_sim_progress_cut_max", "om_sim_purge_cut_min",
                     "om_sim_purge_cut_max", "om_sim_both_p50_min", "om_sim_base_p50_min", "om_sim_base_p50_max",
                     "cluster_small_write_ms", "cluster_rename_ms", "cluster_list_ms", "cluster_delete_ms",
                     "cluster_read_ms", "cluster_executors", "cluster_cores", "cluster_restart", "cluster_jitter",
                     "om_sim_progress_cut_min") + OM_FIT_VALUES:
            v.absent(name)


OM_BREAKDOWN_PARTS = ("planning", "offsetWrite", "purge", "addBatch", "commitOffsets", "other")


def _om_breakdown(p: Paper) -> None:
    """Where a batch's time goes (the experiment's ``breakdown_ms``: durationMs in disjoint parts), per
    configuration at each backend's lowest rate; the simulator with both of its profiles."""
    v, exp, rows = p.v, "offset-management", []
    for backend in ("sim", "spark"):
        run = p.run(exp, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + _absent_cell(exp, backend)] + [""] * 7)
            for config in OM_CONFIGS:     # the prose quotes these; without the run they read n/a
                for part in OM_BREAKDOWN_PARTS + ("total",):
                    v.absent(f"ombd_{key(backend)}_{key(config)}_{key(part)}")
            continue
        for label, summary in (("", ["summary"]), (", fitted", ["summary", "fitted"])):
            rates = lookup(run.doc, summary + ["rates"]) if label == "" else \
                (run.doc["summary"].get("fitted") or {}).get("rates")
            if not rates:
                continue
            lo = min(rates, key=float)
            for config in OM_CONFIGS:
                base = summary + ["rates", lo, config, "breakdown_ms"]
                if lookup(run.doc, base) is None:
                    continue
                n = f"ombd_{key(backend)}{'_fit' if label else ''}_{key(config)}"
                rows.append([f"{esc(BACKEND_NAME[backend])}{label}, {fmt('rate', float(lo))}/s, {esc(config)}"] +
                            [v.of(run, f"{n}_{key(part)}", base + [part], "ms") for part in OM_BREAKDOWN_PARTS] +
                            [v.add(f"{n}_total", [(run.file, base + [part]) for part in OM_BREAKDOWN_PARTS],
                                   "ms", "sum")])
    p.tables["om_breakdown"] = Table(["Run, configuration", "Planning", "Offset write", "Purge", "addBatch",
                                      "Commit log", "Other", "Total"], rows)


def _absent_cell(experiment: str, backend: str) -> str:
    reason = NOT_APPLICABLE.get((experiment, backend))
    if reason:
        return "not applicable (" + esc(reason) + ")"
    return "no results yet (" + code(f"paper/results/{experiment}/{backend}-*/") + " is absent)"


# -- 6.2 pipelining


def section_pipelining(p: Paper) -> None:
    v = p.v
    exp = "pipelining"
    rows = [["published", "", "", "", v.entries["pub_pipe_speedup"]["text"], "", ""]]
    for backend in COMPARED:
        run = p.run(exp, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + _absent_cell(exp, backend)])
            continue
        summary = run.doc["summary"]
        order = {"none": 0, "mild": 1, "heavy": 2, "severe": 3, "extreme": 4}
        keys = sorted(summary["rows"], key=lambda k: (summary["rows"][k]["operator"] != "map",
                                                      order.get(summary["rows"][k]["stragglers"], 9)))
        for k in keys:
            base = ["summary", "rows", k]
            n = f"pipe_{key(backend)}_{key(k)}"
            rows.append([f"{esc(BACKEND_NAME[backend])}, {esc(k)}",
                         v.of(run, f"{n}_seq", base + ["sequential", "rows_per_s", "median"], "krows"),
                         v.of(run, f"{n}_pipe", base + ["pipelined", "rows_per_s", "median"], "krows"),
                         v.of(run, f"{n}_deep", base + ["deep", "rows_per_s", "median"], "krows"),
                         v.of(run, f"{n}_speedup", base + ["speedup"], "x"),
                         v.of(run, f"{n}_speedup_deep", base + ["speedup_deep"], "x"),
                         v.of(run, f"{n}_lat_ratio", base + ["latency_ratio_p50"], "num2")])
    deep = next((v.of(r, "pipe_deep", ["summary", "deep"], "int") for r in
                 (p.run(exp, b) for b in COMPARED) if r is not None), None) or v.absent("pipe_deep")
    p.tables["pipelining"] = Table(["Source, operator/stragglers", "Sequential", "Pipelined", f"Depth {deep}",
                                    "Speedup", f"Speedup depth {deep}", "p50 ratio"], rows)
    p.text("pipe_availability", p.availability(exp))
    p.add_figures(exp)
    # the engine's latency at a rate its sequential run sustains: the pipelined median over the sequential one,
    # and how many of its latency runs fell behind (section 5's rule)
    engine = p.run(exp, "spark")
    engine_names = ("pipe_engine_none_speedup", "pipe_engine_heavy_speedup", "pipe_engine_heavy_deep",
                    "pipe_engine_heavy_seeds_min", "pipe_engine_heavy_seeds_max", "pipe_engine_heavy_deep_seeds_min",
                    "pipe_engine_heavy_deep_seeds_max", "pipe_engine_heavy_extra", "pipe_engine_heavy_prob",
                    "pipe_engine_seeds")
    if engine is None or not {"aggregate/none", "aggregate/heavy"} <= set(engine.doc["summary"]["rows"]):
        for name in engine_names:
            v.absent(name)
    else:   # the running count, in both the quick and the full run; each seed paired with its own sequential run
        none, heavy = ["summary", "rows", "aggregate/none"], ["summary", "rows", "aggregate/heavy"]
        v.of(engine, "pipe_engine_none_speedup", none + ["speedup"], "x")
        v.of(engine, "pipe_engine_heavy_speedup", heavy + ["speedup"], "x")
        v.of(engine, "pipe_engine_heavy_deep", heavy + ["speedup_deep"], "x")
        for field, name in (("speedup_seeds", "pipe_engine_heavy_seeds"),
                            ("speedup_deep_seeds", "pipe_engine_heavy_deep_seeds")):
            v.of(engine, f"{name}_min", heavy + [field, "min"], "x")
            v.of(engine, f"{name}_max", heavy + [field, "max"], "x")
        v.of(engine, "pipe_engine_seeds", heavy + ["speedup_deep_seeds", "n"], "int")
        v.of(engine, "pipe_engine_heavy_extra", heavy + ["extra_ms"], "ms")
        v.of(engine, "pipe_engine_heavy_prob", heavy + ["probability"], "pct")
    if engine is None:
        for name in ("pipe_engine_lat_ratio_min", "pipe_engine_lat_ratio_max", "pipe_engine_judged",
                     "pipe_engine_backlogged"):
            v.absent(name)
    else:
        ratios = [(engine.file, ["summary", "rows", k, "latency_ratio_p50"]) for k in engine.doc["summary"]["rows"]]
        v.add("pipe_engine_lat_ratio_min", ratios, "num2", "min")
        v.add("pipe_engine_lat_ratio_max", ratios, "num2", "max")
        v.of(engine, "pipe_engine_judged", ["points"], "int", "judged")
        v.of(engine, "pipe_engine_backlogged", ["points"], "int", "backlogged")
    run = p.run(exp, "sim")
    names = ("pipe_sim_speedup_min", "pipe_sim_speedup_max", "pipe_sim_deep_max", "pipe_sim_none_speedup",
             "pipe_sim_heavy_lat_ratio", "pipe_sim_heavy_prob", "pipe_sim_heavy_slow")
    if run is None:
        for name in names:
            v.absent(name)
        return
    rows_ = run.doc["summary"]["rows"]
    v.add("pipe_sim_speedup_min", [(run.file, ["summary", "rows", k, "speedup"]) for k in rows_], "x", "min")
    v.add("pipe_sim_speedup_max", [(run.file, ["summary", "rows", k, "speedup"]) for k in rows_], "x", "max")
    v.add("pipe_sim_deep_max", [(run.file, ["summary", "rows", k, "speedup_deep"]) for k in rows_], "x", "max")
    v.of(run, "pipe_sim_none_speedup", ["summary", "rows", "map/none", "speedup"], "x")
    v.of(run, "pipe_sim_heavy_lat_ratio", ["summary", "rows", "map/heavy", "latency_ratio_p50"], "num2")
    v.of(run, "pipe_sim_heavy_prob", ["summary", "rows", "map/heavy", "probability"], "pct")
    v.of(run, "pipe_sim_heavy_slow", ["summary", "rows", "map/heavy", "slowdown"], "int")


# -- 6.3 async state checkpointing


def section_async_state(p: Paper) -> None:
    v = p.v
    exp = "async-state-checkpoint"
    rows = [["published", "", "", v.entries["pubcut_asc_mean_cut"]["text"] + " (up to)", "larger than the mean",
             v.entries["pub_asc_rerun"]["text"]]]
    for backend in COMPARED:
        run = p.run(exp, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + _absent_cell(exp, backend)])
            continue
        s = run.doc["summary"]
        for keys_ in sorted(s["sizes"], key=float):
            base = ["summary", "sizes", keys_]
            n = f"asc_{key(backend)}_{keys_}"
            rows.append([f"{esc(BACKEND_NAME[backend])}, {fmt('keys', float(keys_))} keys",
                         v.of(run, f"{n}_sync", base + ["sync", "batch_mean", "median"], "ms"),
                         v.of(run, f"{n}_async", base + ["async", "batch_mean", "median"], "ms"),
                         v.of(run, f"{n}_mean_cut", base + ["mean_cut"], "cut"),
                         v.of(run, f"{n}_peak_cut", base + ["peak_cut"], "cut"),
                         v.of(run, f"{n}_rerun", ["summary", "price", "async", "rerun_batches_max", "max"], "int")])
    p.tables["async_state"] = Table(["Source", "Mean batch, sync", "Mean batch, async", "Mean cut", "Peak cut",
                                     "Worst re-run (batches)"], rows)
    p.text("asc_availability", p.availability(exp))
    p.add_figures(exp)
    _asc_engine_price(p, exp)
    _asc_engine_commit(p, exp)
    run = p.run(exp, "sim")
    names = ("asc_sim_mean_cut_min", "asc_sim_mean_cut_max", "asc_sim_peak_cut_max", "asc_sim_sync_rerun",
             "asc_sim_async_rerun", "asc_sim_async_rerun_mean", "asc_sim_keys_max", "asc_sim_sync_lost",
             "asc_sim_async_lost", "asc_sim_sync_rows", "asc_sim_async_rows", "asc_sim_p50_cut_max",
             "asc_sim_interval_change_min", "asc_sim_interval_change_max")
    if run is None:
        for name in names:
            v.absent(name)
        p.text("asc_price", "The price has not been measured in this build (no simulator run).")
        return
    sizes = list(run.doc["summary"]["sizes"])
    v.add("asc_sim_mean_cut_min", [(run.file, ["summary", "sizes", k, "mean_cut"]) for k in sizes], "pct", "min")
    v.add("asc_sim_mean_cut_max", [(run.file, ["summary", "sizes", k, "mean_cut"]) for k in sizes], "pct", "max")
    v.add("asc_sim_peak_cut_max", [(run.file, ["summary", "sizes", k, "peak_cut"]) for k in sizes], "pct", "max")
    v.add("asc_sim_p50_cut_max", [(run.file, ["summary", "sizes", k, "p50_cut"]) for k in sizes], "pct", "max")
    # the cadence: a negative cut is a longer interval between batches
    v.add("asc_sim_interval_change_min", [(run.file, ["summary", "sizes", k, "interval_cut"]) for k in sizes], "cut",
          "max")
    v.add("asc_sim_interval_change_max", [(run.file, ["summary", "sizes", k, "interval_cut"]) for k in sizes], "cut",
          "min")
    v.add("asc_sim_keys_max", [(run.file, ["summary", "sizes", k, "sync", "state_rows", "median"]) for k in sizes],
          "keys", "max")
    price = ["summary", "price"]
    v.of(run, "asc_sim_sync_rerun", price + ["sync", "rerun_batches_max", "max"], "int")
    v.of(run, "asc_sim_async_rerun", price + ["async", "rerun_batches_max", "max"], "int")
    v.of(run, "asc_sim_async_rerun_mean", price + ["async", "rerun_batches_mean", "median"], "num1")
    v.of(run, "asc_sim_sync_lost", price + ["sync", "lost_ms_mean", "median"], "ms")
    v.of(run, "asc_sim_async_lost", price + ["async", "lost_ms_mean", "median"], "ms")
    v.of(run, "asc_sim_sync_rows", price + ["sync", "rerun_rows_mean", "median"], "int")
    v.of(run, "asc_sim_async_rows", price + ["async", "rerun_rows_mean", "median"], "int")
    # whether this build's crashes show the extra batch: the sentence follows the numbers
    worst_async = lookup(run.doc, price + ["async", "rerun_batches_max", "max"])
    worst_sync = lookup(run.doc, price + ["sync", "rerun_batches_max", "max"])
    if worst_async is not None and worst_sync is not None and worst_async > worst_sync:
        p.text("asc_price", f"The simulator's crashes show it: an asynchronous restart re-ran up to "
                            f"{v.entries['asc_sim_async_rerun']['text']} batches "
                            f"({v.entries['asc_sim_async_rerun_mean']['text']} on average) against "
                            f"{v.entries['asc_sim_sync_rerun']['text']} for a synchronous one.")
    else:
        p.text("asc_price", f"This build's crashes do not show it: an asynchronous restart re-ran at most "
                            f"{v.entries['asc_sim_async_rerun']['text']} on the simulator, as many as a synchronous "
                            f"one ({v.entries['asc_sim_sync_rerun']['text']}); the explorer, which cuts every such "
                            f"interleaving, finds every restart within the bound.")


def _asc_engine_commit(p: Paper, exp: str) -> None:
    """The engine's state commit at its largest state: a task's time and its share of a synchronous batch."""
    v, run = p.v, p.run(exp, "spark")
    if run is None or not run.doc["summary"]["sizes"]:
        v.absent("asc_spark_commit_task")
        v.absent("asc_spark_commit_share")
        v.absent("asc_spark_interval_change")
        return
    largest = max(run.doc["summary"]["sizes"], key=float)
    size = ["summary", "sizes", largest]
    v.of(run, "asc_spark_commit_task", size + ["sync", "commit_per_task", "median"], "ms")
    v.of(run, "asc_spark_commit_share", size + ["commit_share"], "pct")
    v.of(run, "asc_spark_interval_change", size + ["interval_cut"], "cut")


def _asc_engine_price(p: Paper, exp: str) -> None:
    """The engine's crashes: what an asynchronous and a synchronous restart re-ran (a sentence that follows the
    numbers; empty without an engine run)."""
    v, run = p.v, p.run(exp, "spark")
    price = ["summary", "price"]
    names = {"async": "asc_spark_async_rerun", "mean": "asc_spark_async_rerun_mean", "sync": "asc_spark_sync_rerun"}
    if run is None:
        for name in names.values():
            v.absent(name)
        p.text("asc_engine_price", "")
        return
    worst = v.of(run, names["async"], price + ["async", "rerun_batches_max", "max"], "int")
    mean = v.of(run, names["mean"], price + ["async", "rerun_batches_mean", "median"], "num1")
    sync = v.of(run, names["sync"], price + ["sync", "rerun_batches_max", "max"], "int")
    if not lookup(run.doc, price + ["async", "rerun_batches_max", "max"]):
        p.text("asc_engine_price", "On the engine's crashes no restart re-ran a batch.")
        return
    p.text("asc_engine_price", f"On the engine's crashes an asynchronous restart re-ran up to {worst} "
                               f"({mean} on average), a synchronous one up to {sync}.")


# -- 6.4 changelog checkpointing


def section_changelog(p: Paper) -> None:
    v = p.v
    exp = "changelog-checkpointing"
    run = p.run(exp, "sim")
    p.text("cl_availability", p.availability(exp))
    p.add_figures(exp)
    rows = []
    names = ("cl_state_keys", "cl_keys", "cl_cmp_deltas", "cl_cmp_commit_changelog", "cl_cmp_commit_snapshot",
             "cl_cmp_commit_ratio", "cl_cmp_storage", "cl_cmp_written", "cl_cmp_recovery", "cl_cmp_recovery_pct",
             "cl_cmp_storage_less")
    if run is None:
        rows.append([_absent_cell(exp, "sim")])
        for name in names:
            v.absent(name)
    else:
        s = run.doc["summary"]
        for k in s["rows"]:
            base = ["summary", "rows", k]
            n = f"cl_{key(k)}"
            rows.append([esc(k),
                         v.of(run, f"{n}_commit_p50", base + ["commit_ms_p50", "median"], "ms"),
                         v.of(run, f"{n}_commit_p99", base + ["commit_ms_p99", "median"], "ms"),
                         v.of(run, f"{n}_snapshots", base + ["snapshot_uploads", "median"], "int"),
                         v.of(run, f"{n}_written", base + ["bytes_written", "median"], "mb"),
                         v.of(run, f"{n}_kept", base + ["state_bytes_retained", "median"], "mb"),
                         v.of(run, f"{n}_recovery", base + ["recovery_load_ms_mean", "median"], "ms")])
        v.of(run, "cl_state_keys", ["summary", "state_keys"], "keys")
        v.of(run, "cl_keys", ["summary", "keys"], "int")
        c = ["summary", "comparison"]
        v.of(run, "cl_cmp_deltas", c + ["changelog_min_deltas"], "int")
        v.of(run, "cl_cmp_commit_changelog", c + ["commit_p50_changelog_ms"], "ms")
        v.of(run, "cl_cmp_commit_snapshot", c + ["commit_p50_snapshot_ms"], "ms")
        v.add("cl_cmp_commit_ratio", [(run.file, c + ["commit_p50_snapshot_ms"]),
                                      (run.file, c + ["commit_p50_changelog_ms"])], "x", "ratio")
        v.of(run, "cl_cmp_storage", c + ["storage_overhead"], "change")
        v.of(run, "cl_cmp_written", c + ["bytes_written_ratio"], "change")
        v.of(run, "cl_cmp_recovery", c + ["recovery_slowdown"], "change")
        v.of(run, "cl_cmp_recovery_pct", c + ["recovery_slowdown"], "pct")
        v.of(run, "cl_cmp_storage_less", c + ["storage_overhead"], "pct", "neg")
    p.tables["changelog"] = Table(["Provider / min deltas", "Commit p50", "Commit p99", "Snapshots",
                                   "Bytes written", "State kept", "Recovery load"], rows)
    # side by side with Flink
    pub = v.entries
    flink_ratio = v.add("pub_flink_ckpt_ratio", [(logical(p.results.root / "published.json"),
                                                  ["claims", "flink_ckpt_p50_full_ms", "value"]),
                                                 (logical(p.results.root / "published.json"),
                                                  ["claims", "flink_ckpt_p50_changelog_ms", "value"])], "x", "ratio")
    # the experiment's verdicts, in its order: commit ratio, storage, recovery (experiments/defs/changelog_...)
    judged = [x["verdict"] for x in (lookup(run.doc, ["summary", "verdicts"]) or [])] if run is not None else []
    judged = judged if len(judged) == 3 else ["not measured"] * 3
    p.tables["changelog_flink"] = Table(
        ["Measure", "Flink, published", "Simulator", "Verdict"],
        [["checkpoint (commit) p50, changelog vs full", pub["pub_flink_ckpt_p50_changelog_ms"]["text"] + " vs " +
          pub["pub_flink_ckpt_p50_full_ms"]["text"], pub["cl_cmp_commit_changelog"]["text"] + " vs " +
          pub["cl_cmp_commit_snapshot"]["text"], ""],
         ["full over changelog", flink_ratio, pub["cl_cmp_commit_ratio"]["text"], judged[0]],
         ["storage kept, changelog vs full", "+" + pub["pub_flink_space_overhead"]["text"],
          pub["cl_cmp_storage"]["text"], judged[1]],
         ["recovery, changelog vs full", "+" + pub["pub_flink_recovery_slowdown"]["text"],
          pub["cl_cmp_recovery"]["text"], judged[2]]], aligns=["left", "right", "right", "left"])


# -- 6.5 checkpoint interval


def section_interval(p: Paper) -> None:
    v = p.v
    exp = "checkpoint-interval"
    run = p.run(exp, "sim")
    p.text("ci_availability", p.availability(exp))
    p.add_figures(exp)
    names = ("ci_mtbf", "ci_c_ms", "ci_free", "ci_young_ms", "ci_best_ms", "ci_snap_c", "ci_batch",
             "ci_young_batches", "ci_best_batches", "ci_grid_max_ms", "ci_grid_max_deltas", "ci_grid_min_ms",
             "ci_grid_min_deltas", "ci_restart", "ci_load_slope", "ci_replay_batches")
    if run is None:
        for name in names:
            v.absent(name)
        p.tables["interval"] = Table(["Interval", "Value"], [[_absent_cell(exp, "sim")]])
        p.text("ci_snap_finding", "the simulated optimum has not been measured in this build")
        p.text("ci_replay_where", "")
        return
    s = ["summary"]
    v.of(run, "ci_mtbf", s + ["mtbf_s"], "s")
    v.of(run, "ci_c_ms", s + ["progress", "checkpoint_cost_ms"], "ms")
    v.of(run, "ci_free", s + ["progress", "free_cadence_ms"], "ms")
    v.of(run, "ci_young_ms", s + ["progress", "young_ms"], "ms")
    v.of(run, "ci_best_ms", s + ["progress", "simulated_best_ms"], "ms")
    v.of(run, "ci_snap_c", s + ["snapshot", "snapshot_cost_ms"], "ms")
    v.of(run, "ci_batch", s + ["snapshot", "batch_ms"], "ms")
    v.of(run, "ci_young_batches", s + ["snapshot", "young_batches"], "num1")
    v.of(run, "ci_best_batches", s + ["snapshot", "simulated_best_batches"], "int")
    curve = run.doc["summary"]["progress"]["curve"]
    snap = run.doc["summary"]["snapshot"]["curve"]
    v.add("ci_grid_min_ms", [(run.file, s + ["progress", "curve", i, "interval_ms"]) for i in range(len(curve))],
          "ms", "min")
    v.add("ci_grid_max_ms", [(run.file, s + ["progress", "curve", i, "interval_ms"]) for i in range(len(curve))],
          "ms", "max")
    v.add("ci_grid_min_deltas", [(run.file, s + ["snapshot", "curve", i, "min_deltas"]) for i in range(len(snap))],
          "int", "min")
    v.add("ci_grid_max_deltas", [(run.file, s + ["snapshot", "curve", i, "min_deltas"]) for i in range(len(snap))],
          "int", "max")
    v.of(run, "ci_load_slope", s + ["snapshot", "load_ms_per_version"], "ms1")
    v.of(run, "ci_replay_batches", s + ["snapshot", "replay_batches"], "int")
    _ci_snap_finding(p, run)
    replay, grid = lookup(run.doc, s + ["snapshot", "replay_batches"]), [r["min_deltas"] for r in snap]
    p.text("ci_replay_where", "" if replay is None or not grid else
           "past the grid's end, where the simulated loss has nearly stopped falling" if replay > max(grid) else
           "inside the grid, where the simulated loss is least" if replay >= min(grid) else "before the grid")
    first = next((i for i, r in enumerate(run.doc["points"]) if r["point"]["task"] == "progress"), 0)
    v.of(run, "ci_restart", ["points", first, "point", "profile", "restart_ms"], "ms")
    rows = []
    for i, r in enumerate(sorted(range(len(curve)), key=lambda j: curve[j]["interval_ms"])):
        base = s + ["progress", "curve", r]
        rows.append([f"progress, {v.of(run, f'ci_p_{i}_interval', base + ['interval_ms'], 'ms')}",
                     v.of(run, f"ci_p_{i}_overhead", base + ["overhead"], "pct1"),
                     v.of(run, f"ci_p_{i}_redo", base + ["redo_ms"], "ms"),
                     v.of(run, f"ci_p_{i}_lost", base + ["lost"], "pct1")])
    for i, r in enumerate(sorted(range(len(snap)), key=lambda j: snap[j]["min_deltas"])):
        base = s + ["snapshot", "curve", r]
        rows.append([f"snapshot, every {v.of(run, f'ci_s_{i}_deltas', base + ['min_deltas'], 'int')} versions",
                     v.of(run, f"ci_s_{i}_overhead", base + ["overhead"], "pct1"),
                     v.of(run, f"ci_s_{i}_load", base + ["load_ms"], "ms"),
                     v.of(run, f"ci_s_{i}_lost", base + ["lost"], "pct1")])
    p.tables["interval"] = Table(["Interval", "Overhead", "Redo / state load", "Time lost"], rows)


def _ci_snap_finding(p: Paper, run: Run) -> None:
    """Where the simulated snapshot optimum lies against Young's, as the experiment's verdict says (a clause)."""
    path = ["summary", "verdicts"]
    index = next((i for i, verdict in enumerate(lookup(run.doc, path) or []) if "snapshot" in verdict["claim"]), None)
    if index is None:
        p.text("ci_snap_finding", "the run has no verdict on Young's optimum")
        return
    verdict = run.doc["summary"]["verdicts"][index]
    if verdict["measured"] is None:
        p.text("ci_snap_finding", "the loss still falls at the grid's edge, short of where Young's optimum would be "
                                  f"refuted, so the simulation does not decide ({verdict['verdict']})")
        return
    doublings = p.v.of(run, "ci_snap_doublings", path + [index, "measured"], "num1")
    snapshot = run.doc["summary"]["snapshot"]
    if not snapshot.get("best_at_edge"):
        where = "the loss curve turns inside the grid, its minimum"
    elif snapshot["simulated_best_batches"] == max(r["min_deltas"] for r in snapshot["curve"]):
        where = ("the loss falls all the way to the grid's longest interval, so the optimum lies past the one before "
                 "it, already")
    else:
        where = ("the loss is least at the grid's shortest interval, so the optimum lies before the one after it, "
                 "already")
    p.text("ci_snap_finding", f"{where} {doublings} doublings from Young's optimum ({verdict['verdict']}, with a "
                              f"tolerance of one doubling either way)")


# -- 6.6 calibration


CAL_QUOTED_ROWS = ("stateless/baseline", "stateless/both", "running-count/sync", "running-count/async-state")


def section_calibration(p: Paper) -> None:
    v = p.v
    exp = "calibration"
    p.text("cal_availability", p.availability(exp, ("spark", "spark-native")))
    p.add_figures(exp)
    rows = []
    for backend in ("spark", "spark-native"):
        run = p.run(exp, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + _absent_cell(exp, backend)])
            v.absent(f"cal_{key(backend)}_validation")
            if backend == "spark":
                for name in ("cal_spark_unseen_err_min", "cal_spark_unseen_err_max"):
                    v.absent(name)
                p.text("cal_conclusion", "")
            continue
        s = run.doc["summary"]
        order = _cal_order(run)
        for k, row in sorted(s.get("rows", {}).items(), key=lambda item: order.get(item[0], len(order))):
            base = ["summary", "rows", k]
            n = f"cal_{key(backend)}_{key(k)}"
            rows.append([f"{esc(BACKEND_NAME[backend])}, {esc(k)} ({esc(row['role'])})",
                         v.of(run, f"{n}_measured", base + ["measured_p50"], "ms"),
                         v.of(run, f"{n}_shipped", base + ["predicted_p50_shipped"], "ms"),
                         v.of(run, f"{n}_err_shipped", base + ["error_shipped"], "change"),
                         v.of(run, f"{n}_fitted", base + ["predicted_p50_fitted"], "ms"),
                         v.of(run, f"{n}_err_fitted", base + ["error_fitted"], "change")])
        v.of(run, f"cal_{key(backend)}_validation", ["summary", "validation_mean_abs_error"], "pct")
        if backend == "spark":
            _cal_unseen(p, run)
            _cal_parts(p, run)
    # rows the prose quotes by name: n/a when this build's run did not measure them
    for name in CAL_PART_VALUES:
        if name not in v.entries:
            v.absent(name)
    for k in CAL_QUOTED_ROWS:
        for part in ("measured", "shipped", "err_shipped", "fitted", "err_fitted"):
            if f"cal_spark_{key(k)}_{part}" not in v.entries:
                v.absent(f"cal_spark_{key(k)}_{part}")
    p.tables["calibration"] = Table(["Source, workload/config", "Measured p50", "Sim, shipped", "Error",
                                     "Sim, fitted", "Error"], rows)
    measured = [b for b in ("spark", "spark-native") if p.run(exp, b) is not None]
    if measured:
        p.text("cal_status", "The calibration was measured on " + " and ".join(esc(THE[b]) for b in measured) + "; its validation error is in the table.")
    else:
        p.text("cal_status", "*The calibration has not been measured yet*: it needs a Spark backend, and no "
                             "calibration results are under " + code("paper/results/calibration/") +
                             ". The simulator's profiles are therefore the shipped ones, not fitted ones, and "
                             "no prediction error can be reported.")


# where the engine's batch time goes, quoted by the calibration section: (value name, row, part) of the measured
# and predicted batch parts, and the mean state_load of the engine's tasks over the seeds of a row
CAL_PARTS = (("cal_spark_addbatch_measured", "stateless/baseline", "measured_targets", "addBatch"),
             ("cal_spark_addbatch_fitted", "stateless/baseline", "predicted_targets_fitted", "addBatch"),
             ("cal_spark_planning_measured", "stateless/baseline", "measured_targets", "planning"),
             ("cal_spark_offset_write_measured", "stateless/baseline", "measured_targets", "offsetWrite"))
CAL_LOADS = (("cal_spark_load_stateless_span", "stateless", "baseline"),
             ("cal_spark_load_count_span", "running-count", "sync"))
CAL_PART_VALUES = tuple(name for name, *_rest in CAL_PARTS) + tuple(name for name, *_rest in CAL_LOADS)


def _cal_parts(p: Paper, run: Run) -> None:
    """The batch parts and task state loads the calibration prose quotes (absent when the run lacks them: a
    run made before the parts were recorded)."""
    v, rows = p.v, run.doc["summary"].get("rows", {})
    for name, row, side, part in CAL_PARTS:
        if part in (rows.get(row, {}).get(side) or {}):
            v.of(run, name, ["summary", "rows", row, side, part], "ms1" if part != "addBatch" else "ms")
    for name, workload, config in CAL_LOADS:
        found = [(run.file, ["points", i, "metrics", "task_step_ms_mean", "state_load"])
                 for i, point in enumerate(run.doc["points"])
                 if point["point"]["config"] == config and point["point"]["params"].get("workload") == workload
                 and ((point.get("metrics") or {}).get("task_step_ms_mean") or {}).get("state_load") is not None]
        if found:
            v.add(name, found, "span:ms1", "span")


def _cal_order(run: Run) -> dict[str, int]:
    """Each calibration row's place in the experiment's own order (the fit's workload first): where the first
    seed ran it (the stored summary's rows come back sorted by name)."""
    measured = [pt["point"] for pt in run.doc["points"] if pt["point"]["task"] == "measure"]
    first = min((pt["seed"] for pt in measured), default=None)
    order = [f"{pt['params']['workload']}/{pt['config']}" for pt in measured if pt["seed"] == first]
    return {row: i for i, row in enumerate(order)}


def _cal_unseen(p: Paper, run: Run) -> None:
    """The engine's prediction error on the configurations the fit did not see (its range, quoted by the
    calibration section) and the conclusion's sentence, which holds it against Doppio's published error."""
    v = p.v
    rows = run.doc["summary"].get("rows", {})
    unseen = [k for k, row in rows.items() if row["role"] == "validation"]
    low, high = (v.add(f"cal_spark_unseen_err_{agg}", [(run.file, ["summary", "rows", k, "error_fitted"])
                                                        for k in unseen], "change", agg) for agg in ("min", "max"))
    errors = [rows[k]["error_fitted"] for k in unseen if rows[k]["error_fitted"] is not None]
    if not errors:
        p.text("cal_conclusion", "")
        return
    doppio = lookup(p.results.at(logical(p.results.root / "published.json")), ["claims", "doppio_error", "value"])
    within = "within" if max(abs(e) for e in errors) * 100 <= doppio else "not within"
    p.text("cal_conclusion", f"*Calibration:* fitted on one engine workload, the simulator predicted the engine's "
                             f"median latency on the configurations it had not seen with errors of "
                             f"{joined(low, high)}, {within} the {v.entries['pub_doppio_error']['text']} Doppio "
                             f"reports.")


def section_rebalancing(p: Paper) -> None:
    """State rebalancing (a seed feature, no published number): the move's cost by state size and the throughput
    once balanced, against a policy that never moves."""
    v, exp = p.v, "state-rebalancing"
    p.text("rb_availability", p.availability(exp, ("sim",)))
    p.add_figures(exp)
    run = p.run(exp, "sim")
    # name -> (row: the smallest or the largest state, policy, metric, format); the row's median over seeds
    values = {"rb_moves": (-1, "rebalance", "moves", "int"),
              "rb_small_keys": (0, "rebalance", "state_keys_at_move", "int"),
              "rb_small_load": (0, "rebalance", "moved_load_ms_max", "ms"),
              "rb_small_spike": (0, "rebalance", "spike_ms", "ms"),
              "rb_big_keys": (-1, "rebalance", "state_keys_at_move", "int"),
              "rb_big_mb": (-1, "rebalance", "state_mb_at_move", "int"),
              "rb_big_load": (-1, "rebalance", "moved_load_ms_max", "ms"),
              "rb_big_spike": (-1, "rebalance", "spike_ms", "ms"),
              "rb_big_recovery": (-1, "rebalance", "recovery_ms", "ms"),
              "rb_big_settled": (-1, "rebalance", "settled_batch_ms", "ms"),
              "rb_big_never": (-1, "never_move", "settled_batch_ms", "ms")}
    if run is None:
        for name in (*values, "rb_partitions", "rb_gain_min", "rb_gain_max"):
            v.absent(name)
        return
    rows = sorted(run.doc["summary"]["rows"], key=float)
    v.of(run, "rb_partitions", ["summary", "state_partitions"], "int")
    for name, (row, policy, metric, spec) in values.items():
        v.of(run, name, ["summary", "rows", rows[row], policy, metric, "median"], spec)
    v.add("rb_gain_min", [(run.file, ["summary", "rows", r, "throughput_gain"]) for r in rows], "pct", "min")
    v.add("rb_gain_max", [(run.file, ["summary", "rows", r, "throughput_gain"]) for r in rows], "pct", "max")


# -- 7 correctness


def section_fault_matrix(p: Paper) -> None:
    v = p.v
    exp = "fault-matrix"
    p.text("fm_availability", p.availability(exp))
    p.add_figures(exp)
    rows = []
    shown = []
    for backend in ("reference", "sim", "spark", "spark-native"):
        run = p.run(exp, "sim" if backend in ("reference", "sim") else backend)
        if run is None or backend not in run.doc["summary"].get("counts", {}):
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + _absent_cell(exp, backend)])
            for s in ("pass", "loud", "fail", "unsupported"):
                v.absent(f"fm_{key(backend)}_{s}")
            continue
        base = ["summary", "counts", backend]
        shown.append(backend)
        rows.append([f"{esc(BACKEND_NAME[backend])} ({run.mode} mode)"] +
                    [v.of(run, f"fm_{key(backend)}_{s}", base + [s], "int")
                     for s in ("pass", "loud", "fail", "unsupported")])
    p.tables["fault_matrix"] = Table(["Backend", "Pass", "Loud", "Fail", "Unsupported"], rows)
    run = p.run(exp, "sim")
    if run is None:
        for name in ("fm_operators", "fm_modes", "fm_faults", "fm_points"):
            v.absent(name)
        return
    v.of(run, "fm_operators", ["summary", "operators"], "int", "len")
    v.of(run, "fm_modes", ["summary", "modes"], "int", "len")
    v.of(run, "fm_faults", ["summary", "faults"], "int", "len")
    v.of(run, "fm_points", ["points"], "int", "len")


def section_explorer(p: Paper) -> None:
    v = p.v
    run = p.results.explorer()
    if run is None:
        p.tables["explorer"] = Table(["Scenario and mode", "Crash cuts"],
                                     [["no explorer results (" + code("paper/results/explorer/") + " is absent)"]])
        for name in ("ex_total_schedules", "ex_total_violations", "ex_depth", "ex_max_cuts", "ex_total_seconds"):
            v.absent(name)
        p.text("ex_status", "No explorer results are in this build.")
        return
    entries = run.doc["entries"]
    rows = []
    for i, e in enumerate(entries):
        base = ["entries", i]
        rows.append([esc(e["label"]) + f" ({esc(e['operator'])})",
                     v.of(run, f"ex_{i}_cuts", base + ["crash_cuts"], "int"),
                     v.of(run, f"ex_{i}_distinct", base + ["distinct_checkpoints"], "int"),
                     v.of(run, f"ex_{i}_schedules", base + ["schedules"], "int"),
                     v.of(run, f"ex_{i}_seconds", base + ["seconds"], "s"),
                     v.of(run, f"ex_{i}_violations", base + ["violations"], "int")])
    p.tables["explorer"] = Table(["Scenario and mode (operator)", "Crash cuts", "Distinct checkpoints",
                                  "Schedules", "Time", "Violations"], rows)
    v.add("ex_total_schedules", [(run.file, ["entries", i, "schedules"]) for i in range(len(entries))], "int", "sum")
    v.add("ex_total_violations", [(run.file, ["entries", i, "violations"]) for i in range(len(entries))], "int",
          "sum")
    v.add("ex_total_seconds", [(run.file, ["entries", i, "seconds"]) for i in range(len(entries))], "s", "sum")
    v.add("ex_max_cuts", [(run.file, ["entries", i, "crash_cuts"]) for i in range(len(entries))], "int", "max")
    v.of(run, "ex_depth", ["depth"], "int")
    v.of(run, "ex_batches", ["entries", 0, "batches"], "int")
    v.of(run, "ex_partitions", ["entries", 0, "state_partitions"], "int")
    p.text("ex_status", f"The explorer results are from its {esc(run.mode)} mode (" + code(run.file) + ").")


def section_mutation_and_zoo(p: Paper) -> None:
    v = p.v
    found = p.results.optional("mutation.json")
    if found is None:
        p.text("mutation", "*The mutation score has not been measured yet*: there is no " +
               code("paper/results/mutation.json") + " (it is written by " + code("make mutation") + ").")
        p.text("mutation_scope", "none yet")
    else:
        file, doc = found
        score = v.add("mut_score", [(file, ["score_percent"])], "num1")
        total = v.add("mut_total", [(file, ["total"])], "int")
        killed = v.add("mut_killed", [(file, ["killed"])], "int")
        survived = v.add("mut_survived", [(file, ["survived"])], "int")
        equivalent = v.add("mut_equivalent", [(file, ["equivalent"])], "int", "len")
        modules = v.add("mut_modules", [(file, ["scope"])], "int", "len")
        p.text("mutation_scope", ", ".join(code(s) for s in doc.get("scope", [])))
        p.text("mutation", f"{esc(str(doc.get('tool')))} ({esc(str(doc.get('date')))}) made {total} mutants of "
               f"{modules} modules (of " + code("reference/") + " and " + code("sim/") +
               f"): {killed} killed, {survived} survived, "
               f"{equivalent} judged equivalent; a mutation score of "
               f"{score}% (" + code(file) + ").")
    found = p.results.optional("zoo.json")
    if found is None:
        p.text("zoo", "*The bug zoo has not been run yet*: there is no " + code("paper/results/zoo.json") +
               ", so this version cannot say which oracle catches each planted bug, or how fast.")
        p.tables["zoo"] = Table(["JIRA", "Planted mistake", "Caught by", "Time", "Unplanted passes"],
                                aligns=["left", "left", "left", "right", "left"], rows=
                                [["no results yet (" + code("paper/results/zoo.json") + " is absent)"]])
    else:
        file, doc = found
        rows = []
        for i, entry in enumerate(doc):
            rows.append([esc(entry["jira"]), esc(entry["planted"]), esc(entry["caught_by"]),
                         v.add(f"zoo_{i}_seconds", [(file, [i, "seconds"])], "ms", "s_to_ms"),
                         v.add(f"zoo_{i}_unplanted", [(file, [i, "unplanted_passes"])], "yesno", "yesno")])
        p.tables["zoo"] = Table(["JIRA", "Planted mistake", "Caught by", "Time", "Unplanted passes"], rows,
                                aligns=["left", "left", "left", "right", "left"],
                                widths=["auto", "2fr", "1.2fr", "auto", "auto"])
        total = v.add("zoo_total", [(file, [])], "int", "len")
        caught = v.add("zoo_caught", [(file, [])], "int", "caught")
        p.text("zoo", f"The bug zoo planted {total} bugs; {caught} were caught (" + code(file) + ").")


# -- methodology and reproducibility


def section_environment(p: Paper) -> None:
    v = p.v
    runs = p.results.runs()
    explorer = p.results.explorer()
    first = runs[0] if runs else None
    env = ["environment"]
    if first is None:
        for name in ("env_python", "env_platform", "env_cpus", "env_java", "pkg_simpy", "pkg_numpy", "pkg_pyspark",
                     "pkg_rocksdict", "pkg_matplotlib", "env_commit"):
            v.absent(name)
    else:
        v.of(first, "env_python", env + ["python"], "str")
        v.of(first, "env_platform", env + ["platform"], "str")
        v.of(first, "env_cpus", env + ["cpu_count"], "int")
        v.of(first, "env_java", env + ["java"], "str")
        for pkg in ("simpy", "numpy", "pyspark", "rocksdict", "matplotlib"):
            v.of(first, f"pkg_{pkg}", env + ["packages", pkg], "str")
        v.of(first, "env_commit", env + ["git", "commit"], "str")
    # do all runs share one environment?
    def fingerprint(run: Run) -> tuple:
        e = run.doc.get("environment", {})
        return (e.get("python"), e.get("platform"), e.get("cpu_count"), json.dumps(e.get("packages"), sort_keys=True))
    prints = {fingerprint(r) for r in runs + ([explorer] if explorer else [])}
    commits = sorted({(lookup(r.doc, ["environment", "git", "commit"]) or "?")[:10]
                      for r in runs + ([explorer] if explorer else [])})
    dirty = any(lookup(r.doc, ["environment", "git", "dirty"]) for r in runs)
    p.text("env_same", ("All runs recorded the same interpreter, platform, core count and package versions."
                        if len(prints) <= 1 else
                        "*The runs do not share one environment*: interpreters, platforms or package versions "
                        "differ between them (each run's are in its results file).") +
           " Source revisions: " + ", ".join(code(c) for c in commits) +
           (" (some with uncommitted changes in the working tree)" if dirty else "") + ".")
    # reproducibility table: every run, its mode, seeds, points and time
    rows = []
    for run in runs:
        n = f"{key(run.experiment)}_{key(run.backend)}"
        rows.append([esc(run.experiment), esc(BACKEND_NAME[run.backend]), esc(run.mode),
                     v.of(run, f"repro_{n}_seeds", ["seeds"], "int", "len"),
                     v.of(run, f"repro_{n}_points", ["points"], "int", "len"),
                     v.of(run, f"repro_{n}_wall", ["wall_s"], "s"),
                     esc(str(lookup(run.doc, ["started_at"]) or "")[:10])])
    if explorer is not None:
        rows.append(["explorer", "reference model", esc(explorer.mode), "",
                     v.of(explorer, "repro_explorer_points", ["entries"], "int", "len"),
                     v.of(explorer, "repro_explorer_wall", ["wall_s"], "s"),
                     esc(str(lookup(explorer.doc, ["started_at"]) or "")[:10])])
    p.tables["reproducibility"] = Table(["Experiment", "Backend", "Mode", "Seeds", "Points", "Wall time", "Date"],
                                        rows, aligns=["left", "left", "left", "right", "right", "right", "left"])
    v.add("repro_total_wall", [(r.file, ["wall_s"]) for r in runs] +
          ([(explorer.file, ["wall_s"])] if explorer else []), "s", "sum")
    # which results are in this build, in one sentence for the abstract and the introduction
    present = sorted({r.backend for r in runs})
    modes = sorted({r.mode for r in runs})
    missing = [b for b in COMPARED if b not in present]
    p.text("results_status",
           "The numbers in this version come from " +
           " and ".join(esc(THE[b]) for b in present) +
           f" ({' and '.join(esc(m) for m in modes)} mode" + ("s" if len(modes) > 1 else "") + ")" +
           ("; " + " and ".join(esc(THE[b]) for b in missing) +
            (" has no results in this build yet, and its cells read n/a" if len(missing) == 1 else
             " have no results in this build yet, and their cells read n/a") if missing else "") + ".")
    p.text("quick_warning",
           ("*Every run in this build is a quick run* (short inputs, one seed): the numbers show the pipeline and "
            "the direction of each effect, not final magnitudes, which the full runs will give." if modes == ["quick"]
            else
            "Quick runs, where a table row says so, are short inputs with one seed." if "quick" in modes else
            "All runs are full runs."))


def verdict(measured: Sequence[float | None], low: float, high: float, *, up_to: bool = False,
            tolerance: float = 0.0, neutral: float = 0.0) -> str:
    """How measured values (one per rate, distribution or size) compare with a published value or range.

    Each value is judged by the experiments' own rule (``experiments.verdicts.judge``: within ``tolerance`` of
    the published range, else on its side of ``neutral``, the value meaning "no effect"), with the tolerance the
    experiment states; the row's verdict summarises them. ``up_to``: the claim is a ceiling ("up to 25%"), so
    any gain up to ``high`` (plus the tolerance) reproduces it.
    """
    from experiments.verdicts import DIRECTION_ONLY, REPRODUCED, judge
    values = [m for m in measured if m is not None]
    if not values:
        return "not measured"
    if any(m <= neutral for m in values):
        return "not reproduced (no gain)"
    each = [judge("", m, (low, high), tolerance=tolerance, neutral=neutral, up_to=up_to).verdict for m in values]
    if up_to and not all(e == REPRODUCED for e in each):
        return "direction only; larger than published"
    if all(e == REPRODUCED for e in each):
        return "reproduced"
    if all(e == DIRECTION_ONLY for e in each):
        return "direction only; " + ("smaller" if max(values) < low else "larger" if min(values) > high else "mixed")
    return "partly reproduced" if REPRODUCED in each else "not reproduced"


def bound_verdict(measured: Sequence[float | None], most: float) -> str:
    """How measured values compare with a published most ("may need to re-process two micro-batches"): any value
    up to it keeps the bound, one past it breaks it."""
    values = [m for m in measured if m is not None]
    if not values:
        return "not measured"
    return "within the published bound" if max(values) <= most else "past the published bound"


# The tolerances the experiments state for their verdicts (experiments/defs), in the paper's units:
# cuts as fractions, speed-ups as ratios.
def _tolerances() -> tuple[float, float, float, float]:
    from experiments.defs import async_state_checkpoint, changelog_checkpointing, offset_management, pipelining
    return (offset_management.CUT_TOLERANCE_PP / 100.0, pipelining.SPEEDUP_TOLERANCE,
            async_state_checkpoint.MEAN_CUT_TOLERANCE_PP / 100.0, changelog_checkpointing.RATIO_TOLERANCE)


OM_CUT_TOLERANCE, PIPE_SPEEDUP_TOLERANCE, ASC_MEAN_CUT_TOLERANCE, CL_RATIO_TOLERANCE = _tolerances()


def section_summary(p: Paper) -> None:
    """One row per published claim: the published value, each backend's measurement, and how they compare."""
    v = p.v
    pub = logical(p.results.root / "published.json")
    claims = p.results.at(pub)["claims"]

    def frac(claim: str) -> tuple[float, float]:
        c = claims[claim]
        lo, hi = (c["low"], c["high"]) if "low" in c else (c["value"], c["value"])
        return (lo / 100.0, hi / 100.0) if c["unit"] == "%" else (lo, hi)

    def span(name: str, run: Run | None, keys: list[list[Any]], spec: str) -> tuple[str, list[float | None]]:
        if run is None or not keys:
            return "n/a", []
        raws = [lookup(run.doc, k) for k in keys]
        lo = v.add(f"{name}_min", [(run.file, k) for k in keys], spec, "min")
        hi = v.add(f"{name}_max", [(run.file, k) for k in keys], spec, "max")
        return joined(lo, hi), [_num(r) for r in raws]

    def absent(name: str) -> None:
        """A backend without results: the prose's quotes of its range read n/a (the table says why)."""
        for end in ("min", "max"):
            v.absent(f"{name}_{end}")

    rows = []

    def missing(experiment: str, backend: str) -> str:
        return "not applicable" if NOT_APPLICABLE.get((experiment, backend)) else "no results yet"

    def row(label: str, claim_text: str, claim: str, cells: dict[str, tuple[str, list[float | None]]],
            experiment: str, up_to: bool = False, tolerance: float = 0.0, neutral: float = 0.0,
            bound: bool = False) -> None:
        """``bound``: the claim is a most ("may need to re-process two micro-batches"), which any value up to it
        keeps, none past it."""
        lo, hi = frac(claim)
        out = [esc(label), claim_text]
        verdicts = []
        for backend in COMPARED:
            text, values = cells.get(backend, (missing(experiment, backend), []))
            out.append(text)
            if bound and values:
                verdicts.append(f"{BACKEND_NAME[backend]}: {bound_verdict(values, hi)}")
            elif values:
                verdicts.append(f"{BACKEND_NAME[backend]}: "
                                f"{verdict(values, lo, hi, up_to=up_to, tolerance=tolerance, neutral=neutral)}")
        out.append(esc("; ".join(verdicts)) if verdicts else "not measured yet")
        rows.append(out)

    def om(config: str) -> dict[str, tuple[str, list[float | None]]]:
        out = {}
        for backend in COMPARED:
            run = p.run("offset-management", backend)
            if run is not None:
                keys = [["summary", "rates", r, config, "cut_p50"] for r in run.doc["summary"]["rates"]]
                out[backend] = span(f"sum_om_{key(config)}_{key(backend)}", run, keys, "pct")
            else:
                absent(f"sum_om_{key(config)}_{key(backend)}")
        return out

    row("async log purge: p50 cut", v.entries["pub_om_cut_purge"]["text"], "om_cut_purge", om("async-purge"),
        "offset-management", tolerance=OM_CUT_TOLERANCE)
    row("async progress: p50 cut", v.entries["pub_om_cut_progress"]["text"], "om_cut_progress",
        om("async-progress"), "offset-management", tolerance=OM_CUT_TOLERANCE)
    row("both: p50 cut", v.entries["pub_om_cut_both"]["text"], "om_cut_both", om("both"), "offset-management",
        tolerance=OM_CUT_TOLERANCE)

    def pipe(field: str) -> dict[str, tuple[str, list[float | None]]]:
        out = {}
        for backend in COMPARED:
            run = p.run("pipelining", backend)
            if run is not None:
                keys = [["summary", "rows", k, field] for k in run.doc["summary"]["rows"]]
                out[backend] = span(f"sum_pipe_{field}_{key(backend)}", run, keys, "x")
            else:
                absent(f"sum_pipe_{field}_{key(backend)}")
        return out

    row("pipelining: throughput, default depth", v.entries["pub_pipe_speedup"]["text"], "pipe_speedup",
        pipe("speedup"), "pipelining", tolerance=PIPE_SPEEDUP_TOLERANCE, neutral=1.0)
    row("pipelining: throughput, deeper pipeline", v.entries["pub_pipe_speedup"]["text"], "pipe_speedup",
        pipe("speedup_deep"), "pipelining", tolerance=PIPE_SPEEDUP_TOLERANCE, neutral=1.0)

    def asc(field: str, spec: str) -> dict[str, tuple[str, list[float | None]]]:
        out = {}
        for backend in COMPARED:
            run = p.run("async-state-checkpoint", backend)
            if run is not None:
                if field == "rerun":
                    keys = [["summary", "price", "async", "rerun_batches_max", "max"]]
                else:
                    keys = [["summary", "sizes", k, field] for k in run.doc["summary"]["sizes"]]
                out[backend] = span(f"sum_asc_{field}_{key(backend)}", run, keys, spec)
            else:
                absent(f"sum_asc_{field}_{key(backend)}")
        return out

    row("async state checkpointing: mean batch cut", "up to " + v.entries["pub_asc_mean_cut"]["text"],
        "asc_mean_cut", asc("mean_cut", "pct"), "async-state-checkpoint", up_to=True,
        tolerance=ASC_MEAN_CUT_TOLERANCE)
    row("async state checkpointing: batches re-run", "at most " + v.entries["pub_asc_rerun"]["text"], "asc_rerun",
        asc("rerun", "int"), "async-state-checkpoint", bound=True)

    def direction_row(label: str, claim_text: str, experiment: str, prefix: str) -> None:
        """A claim of direction only, as the experiment's own verdict judged it (``judge_direction``)."""
        out, verdicts = [esc(label), esc(claim_text)], []
        for backend in COMPARED:
            run = p.run(experiment, backend)
            stored = lookup(run.doc, ["summary", "verdicts"]) or [] if run is not None else []
            index = next((i for i, x in enumerate(stored) if x["claim"].startswith(prefix)), None)
            if run is None or index is None or stored[index]["measured"] is None:
                out.append(missing(experiment, backend) if run is None else "not measured")
                continue
            out.append(v.of(run, f"sum_{key(experiment)}_{key(prefix.replace(' ', '_'))}_{key(backend)}",
                            ["summary", "verdicts", index, "measured"], "pp1"))
            verdicts.append(f"{BACKEND_NAME[backend]}: {stored[index]['verdict']}")
        out.append(esc("; ".join(verdicts)) if verdicts else "not measured yet")
        rows.append(out)

    direction_row("async state checkpointing: peak cut over mean cut, largest state", "more",
                  "async-state-checkpoint", "peak batch cut over the mean batch cut")
    direction_row("async state checkpointing: mean cut, largest state over smallest", "more",
                  "async-state-checkpoint", "mean batch cut with")
    run = p.run("changelog-checkpointing", "sim")
    cells = {}
    if run is not None:
        c = ["summary", "comparison"]
        ratio = v.add("sum_cl_ratio_sim", [(run.file, c + ["commit_p50_snapshot_ms"]),
                                           (run.file, c + ["commit_p50_changelog_ms"])], "x", "ratio")
        raw = DERIVATIONS["ratio"]([lookup(run.doc, c + ["commit_p50_snapshot_ms"]),
                                    lookup(run.doc, c + ["commit_p50_changelog_ms"])])
        cells["sim"] = (ratio, [raw])
    flink = claims["flink_ckpt_p50_full_ms"]["value"] / claims["flink_ckpt_p50_changelog_ms"]["value"]
    out = [esc("changelog: full over changelog commit (Flink)"), v.entries["pub_flink_ckpt_ratio"]["text"]]
    for backend in COMPARED:
        out.append(cells.get(backend, (missing("changelog-checkpointing", backend), []))[0])
    out.append(esc(f"simulator: {verdict(cells['sim'][1], flink, flink, neutral=1.0, tolerance=CL_RATIO_TOLERANCE)}")
               if "sim" in cells else "not measured yet")
    rows.append(out)
    p.tables["summary"] = Table(["Claim", "Published", "Simulator", "PySpark engine", "Native Spark", "Verdict"],
                                rows, aligns=["left", "right", "right", "right", "right", "left"],
                                widths=["1.5fr", "auto", "auto", "auto", "auto", "2fr"])


def section_profiles(p: Paper) -> None:
    """The storage latencies of the two shipped cost profiles, as the results files recorded them."""
    v = p.v
    sources = {"lightspeed_cluster": p.run("offset-management", "sim"), "local_spark": p.run("fault-matrix", "sim")}
    rows = []
    for parameter, spec, label in (("small_write_ms", "ms1", "small write"), ("rename_ms", "ms1", "rename"),
                                   ("list_ms", "ms1", "listing"), ("delete_ms", "ms1", "delete"),
                                   ("read_ms", "ms1", "read"), ("bandwidth_mb_per_s", "int", "bandwidth (MB/s)"),
                                   ("jitter_sigma", "num1", "jitter (log-normal shape)")):
        row = [esc(label)]
        for profile, run in sources.items():
            index = None if run is None else next(
                (i for i, r in enumerate(run.doc["points"])
                 if (r["point"].get("profile") or {}).get("name") == profile), None)
            name = f"profile_{profile}_{parameter}"
            row.append(v.absent(name) if index is None else
                       v.of(run, name, ["points", index, "point", "profile", "storage", parameter], spec))
        rows.append(row)
    p.tables["profiles"] = Table(["Storage operation", "lightspeed_cluster", "local_spark"], rows)


def section_commands(p: Paper) -> None:
    """The commands of the reproducibility appendix, from collect_results.py's table of runs."""
    sys.path.insert(0, str(PAPER))
    import collect_results  # noqa: E402 - paper/ is not a package
    rows = []
    for run in collect_results.RUNS:
        rows.append([esc(run.experiment), esc(BACKEND_NAME[run.backend]),
                     code(f"lightspeed experiment {run.experiment} --backend {run.backend} --no-spark")])
    p.tables["commands"] = Table(["Experiment", "Backend", "Command (full mode; add --quick for the quick one)"],
                                 rows, aligns=["left", "left", "left"], widths=["auto", "auto", "1fr"])


# ---------------------------------------------------------------- output


def spans(v: Values) -> None:
    """For every pair X_min, X_max over the same sources' minimum and maximum, X_span: the prose's "X_min to
    X_max" without the "47% to 47%" it reads when the two are equal."""
    for name in [n for n in v.entries if n.endswith("_min")]:
        low, high = v.entries[name], v.entries.get(name[:-len("_min")] + "_max")
        if high is not None and low["derivation"] == high["derivation"] == "absent":
            v.absent(name[:-len("_min")] + "_span")   # the run is not in this build: n/a, as the pair reads
            continue
        if high is None or low["derivation"] != "min" or high["derivation"] != "max" or \
                low["format"] != high["format"] or low["sources"] != high["sources"]:
            continue
        v.add(name[:-len("_min")] + "_span", [(s["file"], s["key"]) for s in low["sources"]],
              "span:" + low["format"], "span")


def generate(results_root: Path = RESULTS) -> tuple[dict[str, str], dict[str, Path]]:
    """Every generated file's text by name, and the figures to copy (target name -> source PNG)."""
    p = Paper(Results(results_root))
    section_published(p)
    section_environment(p)
    backlog_summary(p)
    section_offset_management(p)
    section_pipelining(p)
    section_async_state(p)
    section_changelog(p)
    section_interval(p)
    section_calibration(p)
    section_rebalancing(p)
    section_fault_matrix(p)
    section_explorer(p)
    section_mutation_and_zoo(p)
    section_commands(p)
    section_summary(p)
    section_profiles(p)
    spans(p.v)

    header = "// Generated by paper/build.py from paper/results/. Do not edit: run `make paper`.\n"
    numbers = [header, "#let v = ("]
    for name in sorted(p.v.entries):
        numbers.append(f"  {name}: {tstr(p.v.entries[name]['text'])},")
    numbers.append(")\n")
    numbers.append("#let t = (")
    for name in sorted(p.t):
        numbers.append(f"  {name}: [{p.t[name]}],")
    numbers.append(")\n")
    tables = [header]
    for name in sorted(p.tables):
        tables.append(f"#let table_{name} = {p.tables[name].typst()}\n")
    # a figs_ function takes one caption for all its figures or an array of them, one per figure
    figures_typ = [header, "#let pick(caption, i) = if type(caption) == array { "
                           "caption.at(calc.min(i, caption.len() - 1)) } else { caption }\n"]
    copies: dict[str, Path] = {}
    manifest = {}
    for name in sorted(p.figures):
        # figs_NAME(caption, name, only:): one floating figure per backend (or per group of FIGURE_GROUPS)
        figures = []
        for i, (suffix, rows) in enumerate(p.figures[name]):
            lines = []
            for row in rows:
                cells = []
                for png, width in row:
                    target = f"{png.parent.parent.name}__{png.parent.name}__{png.name}"
                    copies[target] = png
                    manifest[target] = {"source": logical(png),
                                        "sha256": hashlib.sha256(png.read_bytes()).hexdigest()}
                    cells.append((f"image(\"../figures/{target}\", width: 100%)", width))
                if len(cells) == 1:
                    lines.append(cells[0][0].replace("width: 100%", f"width: {cells[0][1]}%"))
                else:
                    columns = ", ".join(f"{w}%" for _, w in cells)
                    lines.append(f"grid(columns: ({columns}), column-gutter: 2%, {', '.join(c for c, _ in cells)})")
            body = f"stack(spacing: 6pt, {', '.join(lines)})"
            figures.append(f"    figure({body}, placement: placement, caption: [#pick(caption, {i}) {suffix}]),")
        if not figures:
            figures.append("    figure(block(inset: 8pt, stroke: 0.5pt + gray)[_No figure: no results of this "
                           "experiment are in this build._], caption: pick(caption, 0)),")
        # ``only``: the indices of the figures to place here (default all), so that the prose can put some of an
        # experiment's figures in the appendix; the first figure placed carries the label. ``placement``: auto
        # floats them (the body), none keeps them where they are called (the appendix)
        figures_typ.append(f"#let figs_{name}(caption, name, only: none, placement: auto) = {{\n  let figs = (\n" + "\n".join(figures)
                           + "\n  )\n  let shown = if only == none { range(figs.len()) } else "
                           "{ only.filter(i => i < figs.len()) }\n"
                           "  if shown.len() == 0 [#figure(block(inset: 8pt, stroke: 0.5pt + gray)[_No figure: no "
                           "results of this backend are in this build._], placement: placement, "
                           "caption: pick(caption, only.first())) #label(name)]\n"
                           "  for (k, i) in shown.enumerate() { if k == 0 [#figs.at(i) #label(name)] "
                           "else { figs.at(i) } }\n}\n")
    provenance = {name: p.v.entries[name] for name in sorted(p.v.entries)}
    files = {
        "numbers.typ": "\n".join(numbers),
        "tables.typ": "\n".join(tables),
        "figures.typ": "\n".join(figures_typ),
        "provenance.json": json.dumps(provenance, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
        "figures.json": json.dumps(manifest, indent=1, sort_keys=True) + "\n",
    }
    return files, copies


def write(files: dict[str, str], copies: dict[str, Path], paper_dir: Path = PAPER) -> None:
    """Write the generated files and the figure copies under ``paper_dir`` (``generated/``, ``figures/``)."""
    generated, figures = paper_dir / "generated", paper_dir / "figures"
    generated.mkdir(exist_ok=True)
    for name, text in files.items():
        (generated / name).write_text(text)
    figures.mkdir(exist_ok=True)
    for old in figures.glob("*.png"):
        if old.name not in copies:
            old.unlink()
    for target, source in copies.items():
        shutil.copyfile(source, figures / target)


def check(results_root: Path = RESULTS, generated: Path = GENERATED) -> list[str]:
    """What differs between the committed generated files and what the results give now (empty: up to date)."""
    files, copies = generate(results_root)
    problems = []
    for name, text in files.items():
        path = generated / name
        if not path.exists():
            problems.append(f"{rel(path) if path.is_relative_to(ROOT) else path}: missing")
        elif path.read_text() != text:
            problems.append(f"{name}: differs from what paper/build.py generates from {results_root}")
    for target, source in copies.items():
        copy = FIGURES / target
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            problems.append(f"figures/{target}: not a byte copy of {logical(source)}")
    return problems


def compile_pdf(paper_dir: Path = PAPER, output: Path = PDF) -> float:
    """Compile the paper with Typst (its embedded fonts only, so every machine sets the same text)."""
    import typst
    started = time.perf_counter()
    typst.compile(str(paper_dir / MAIN.name), output=str(output), root=str(paper_dir), ignore_system_fonts=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pdf", action="store_true", help="also compile paper/lightspeed-ref.pdf with Typst")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the committed generated files are not what the results give now")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for line in problems:
            print(line)
        print("generated files are up to date" if not problems else "run `make paper` and commit paper/generated/")
        return 1 if problems else 0
    started = time.perf_counter()
    files, copies = generate()
    write(files, copies)
    values = json.loads(files["provenance.json"])
    print(f"paper/generated: {len(values)} values, {len(copies)} figures "
          f"({time.perf_counter() - started:.1f} s)")
    if args.pdf:
        seconds = compile_pdf()
        print(f"{rel(PDF)} written ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
