"""The building blocks of the paper's generated parts: runs read from results files, values with provenance,
tables and sentences in Typst, the experiments' figures.

``paper/build.py`` owns the document (reading, rendering, provenance,
compiling); each experiment owns its section (``experiments/sections``),
written with these blocks: a section reads its experiment's results files
through ``Writeup.run`` and shows every number through ``Values``, which
records the file and key it came from, so that ``tests/slow/test_paper.py`` can
resolve each one again. A published number comes from ``experiments.claims``
(provenance ``experiments/claims.py``); a verdict from its run's
``summary.findings``, never judged here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from experiments.claims import CLAIMS

BACKENDS = ("sim", "spark", "spark-native")          # the backends a result table compares, in column order
BACKEND_NAME = {"reference": "reference model", "sim": "simulator", "spark": "PySpark engine",
                "spark-native": "Spark (native)"}
THE = {"reference": "the reference model", "sim": "the simulator", "spark": "the PySpark engine",
       "spark-native": "native Spark"}
MODES = ("full", "quick")                            # preference order of a run's mode
RESULTS_PREFIX = "paper/results/"
CLAIMS_FILE = "experiments/claims.py"                # provenance of a published number
RESULTS_MARKER = "analysis.json"                     # a results directory holds this file
MINUS, TIMES, DASH = "\u2212", "\u00d7", "\u2013"


# ------------------------------------------------------------------ runs


@dataclass(frozen=True)
class Run:
    """One experiment's results on one backend: ``paper/results/<experiment>/<backend>-<mode>/``."""

    experiment: str
    backend: str
    mode: str
    directory: Path
    doc: dict[str, Any] = field(compare=False, hash=False)

    @property
    def file(self) -> str:
        """The results file's logical path, ``paper/results/...`` (what provenance records)."""
        return logical(self.directory / "results.json")

    @property
    def seeds(self) -> int:
        return len(self.doc.get("seeds") or [])

    @property
    def tag(self) -> str:
        """Backend, mode and seeds: what every row built from this run says about it."""
        return f"{BACKEND_NAME[self.backend]}, {self.mode}, {self.seeds} seed{'s' * (self.seeds != 1)}"

    @property
    def dirty(self) -> bool:
        return bool(lookup(self.doc, ["environment", "git", "dirty"]))


def logical(path: Path) -> str:
    """A results file's path as the paper names it, ``paper/results/<...>``, wherever the results directory is
    (a copy of it gives the same generated files)."""
    parts = path.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "results" and (Path(*parts[:i + 1]) / RESULTS_MARKER).exists():
            return RESULTS_PREFIX + Path(*parts[i + 1:]).as_posix()
    raise ValueError(f"{path}: not inside a results directory (one holding {RESULTS_MARKER})")


def claims_document() -> dict[str, Any]:
    """The claims table as a document, so that provenance can name a published number by key."""
    return {"CLAIMS": {cid: asdict(c) for cid, c in CLAIMS.items()}}


class Results:
    """The results files under one directory (``paper/results`` or a copy of it)."""

    def __init__(self, root: Path):
        self.root = root
        self.docs: dict[str, Any] = {}

    def doc(self, path: Path) -> Any:
        key = str(path)
        if key not in self.docs:
            self.docs[key] = json.loads(path.read_text()) if path.exists() else None
        return self.docs[key]

    def at(self, file: str) -> Any:
        """The document at a logical path (``paper/results/...``, or the claims table)."""
        if file == CLAIMS_FILE:
            return claims_document()
        if not file.startswith(RESULTS_PREFIX):
            raise ValueError(f"{file}: not a path under {RESULTS_PREFIX}")
        return self.doc(self.root / file[len(RESULTS_PREFIX):])

    def run(self, experiment: str, backend: str, mode: str | None = None) -> Run | None:
        """The run of ``experiment`` on ``backend``: the full one when it exists, else the quick one."""
        for m in (mode,) if mode else MODES:
            directory = self.root / experiment / f"{backend}-{m}"
            doc = self.doc(directory / "results.json")
            if doc is not None:
                return Run(experiment, backend, m, directory, doc)
        return None

    def runs(self, experiments: Iterable[str]) -> list[Run]:
        return [r for e in experiments for b in BACKENDS if (r := self.run(e, b)) is not None]

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


def backlogged(record: dict[str, Any]) -> bool | None:
    """Whether a rate-source latency point fell behind its input (the metric ``kept_up`` every timed backend
    records by ``reference/protocol/timing.py``'s one rule); None: no input rate, or a file made before the metric."""
    metrics, point = record.get("metrics") or {}, record.get("point") or {}
    source = (point.get("scenario") or {}).get("source") or {}
    if source.get("rows_per_second") is None:
        return None
    kept_up = metrics.get("kept_up")
    return None if kept_up is None else not kept_up


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
    "count": lambda xs: len(xs),
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


def _signed(text: str) -> str:
    return text.replace("-", MINUS)


def _nonzero(value: float, digits: int) -> float:
    """``value``, or 0.0 when it rounds to zero (so no "-0.0" is shown)."""
    return 0.0 if round(value, digits) == 0 else value


def plain_number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")


def joined(low: str, high: str) -> str:
    """A range's display text: one value when both ends read the same ("49%", not "49% to 49%")."""
    return low if low == high else f"{low} to {high}"


UNIT_SPEC = {"%": "num0pct", "x": "x", "ms": "ms", "batches": "num1", "doublings": "num1"}


def fmt(spec: str, value: Any) -> str:
    """Display text of a value. ``spec`` names the unit and rounding."""
    if value is None:
        return "n/a"
    if spec == "str":
        return str(value)
    if spec == "yesno":
        return "yes" if value else "no"
    if spec.startswith("span:"):
        return joined(fmt(spec[len("span:"):], value[0]), fmt(spec[len("span:"):], value[1]))
    v = float(value)
    formats: dict[str, Callable[[float], str]] = {
        "ms": lambda x: f"{x:,.0f} ms", "ms1": lambda x: f"{x:,.1f} ms",
        "s": lambda x: f"{x:,.0f} s" if x >= 10 else f"{x:,.1f} s", "min": lambda x: f"{x / 60:,.1f} min",
        "pct": lambda x: _signed(f"{_nonzero(x * 100, 0):,.0f}%"),
        "pct1": lambda x: _signed(f"{_nonzero(x * 100, 1):,.1f}%"),
        "cut": lambda x: _signed(f"{-x * 100:+.0f}%"),            # a reduction (0.4 = 40% less) as a change
        "change": lambda x: _signed(f"{x * 100:+.0f}%"),          # a relative change (0.3 = 30% more)
        "num0pct": lambda x: _signed(f"{_nonzero(x, 0):,.0f}%"),  # a number already in percent
        "pp1": lambda x: _signed(f"{_nonzero(x, 1):+.1f} points"),
        "x": lambda x: f"{x:.2f}{TIMES}", "int": lambda x: f"{x:,.0f}", "num1": lambda x: f"{x:,.1f}",
        "num2": lambda x: f"{x:,.2f}", "krows": lambda x: f"{x / 1000:,.0f}k rows/s",
        "rows": lambda x: f"{x:,.0f} rows/s", "mb": lambda x: f"{x / 1e6:,.2f} MB", "rate": _rate, "keys": _rate,
    }
    if spec not in formats:
        raise ValueError(f"unknown format {spec!r}")
    return formats[spec](v)


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


def key(text: str) -> str:
    return text.replace("-", "_").replace("/", "_").replace(".", "_").replace(" ", "_")


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
        raws = [lookup(self.results.at(file), list(path)) for file, path in sources]
        text = fmt(spec, DERIVATIONS[derivation](raws))
        self.entries[name] = {"text": text, "format": spec, "derivation": derivation,
                              "sources": [{"file": file, "key": list(path), "value": recorded(raw)}
                                          for (file, path), raw in zip(sources, raws)]}
        return text

    def of(self, run: Run | None, name: str, path: Sequence[Any], spec: str, derivation: str = "value") -> str:
        """A value of one run; when the run is absent, 'n/a' with no source."""
        if run is None:
            return self.absent(name)
        return self.add(name, [(run.file, path)], spec, derivation)

    def absent(self, name: str) -> str:
        self.entries[name] = {"text": "n/a", "format": "str", "derivation": "absent", "sources": []}
        return "n/a"

    def claim(self, name: str, claim_id: str, field_name: str = "published") -> str:
        """A published claim (``experiments.claims``): by default its published value as the paper shows it,
        derived from the claim's kind, value, unit and neutral; else one of its fields as text. A name already
        defined for the same claim is the same value (sections and the claims table quote the same claims)."""
        if name in self.entries and all(s["file"] == CLAIMS_FILE and s["key"][1] == claim_id
                                        for s in self.entries[name]["sources"]):
            return str(self.entries[name]["text"])
        if field_name != "published":
            return self.add(name, [(CLAIMS_FILE, ["CLAIMS", claim_id, field_name])], "str")
        sources = [(CLAIMS_FILE, ["CLAIMS", claim_id, f]) for f in ("kind", "low", "high", "unit", "neutral")]
        return self.add(name, sources, "str", "published")


def published_text(kind: str, low: float, high: float, unit: str, neutral: float | None) -> str:
    """A claim's published value as the paper shows it (``Claim.published``, with a real dash and sign)."""
    if kind == "direction":
        return "more" if high > 0 else "less"
    text = plain_number(low) if low == high else f"{plain_number(low)}{DASH}{plain_number(high)}"
    prefix = {"ceiling": "up to " if neutral is not None else "at most "}.get(kind, "")
    if unit == "batches" and low == high == 1:
        unit = "batch"
    return prefix + text + ("" if not unit else {"%": "%", "x": TIMES}.get(unit, f" {unit}"))


DERIVATIONS["published"] = lambda xs: published_text(*xs)


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


@dataclass
class Placed:
    """A generated table, the label the prose places it under, and the runs it was made from (for the map
    from each table to the commands that regenerate it)."""

    table: Table
    label: str
    runs: list[Run] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)    # what else makes it (the explorer, the zoo, ...)


# ---------------------------------------------------------------- figures


def png_width(path: Path) -> int:
    """The pixel width in a PNG's header (the IHDR chunk's first field)."""
    with path.open("rb") as f:
        header = f.read(24)
    if header[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    return int.from_bytes(header[16:20], "big")


Figure = tuple[str, list[list[tuple[Path, int]]]]   # caption suffix, rows of (source PNG, width in percent)


# ----------------------------------------------------------------- writeup


class Writeup:
    """Everything generated: values, sentences, tables and figures; what each section writes into."""

    def __init__(self, results: Results):
        self.results = results
        self.v = Values(results)
        self.t: dict[str, str] = {}          # name -> Typst content (escaped)
        self.tables: dict[str, Placed] = {}
        self.figures: dict[str, list[Figure]] = {}
        self.drawn: dict[str, tuple[bytes, str]] = {}   # a figure drawn here, not copied: name -> (PNG, source)
        self.command_map: dict[str, list[str]] = {}     # a table's label -> the commands that regenerate it

    def text(self, name: str, content: str) -> None:
        if name in self.t:
            raise ValueError(f"text {name!r} defined twice")
        self.t[name] = content

    def table(self, name: str, table: Table, *, label: str, runs: Iterable[Run | None] = (),
              commands: Iterable[str] = ()) -> None:
        if name in self.tables:
            raise ValueError(f"table {name!r} defined twice")
        self.tables[name] = Placed(table, label, [r for r in runs if r is not None], list(commands))

    def run(self, experiment: str, backend: str) -> Run | None:
        return self.results.run(experiment, backend)

    def absent_cell(self, experiment: str, backend: str) -> str:
        reason = unsupported_reason(experiment, backend)
        if reason:
            return "not applicable (" + esc(reason) + ")"
        return "not run (" + code(f"paper/results/{experiment}/{backend}-*/") + " is absent)"

    def describe_run(self, run: Run) -> str:
        seeds = self.v.add(f"seeds_{key(run.experiment)}_{key(run.backend)}", [(run.file, ["seeds"])], "int", "len")
        dirty = "; *collected from a working tree with uncommitted changes*" if run.dirty else ""
        return (f"{esc(BACKEND_NAME[run.backend])}: {esc(run.mode)} mode, {seeds} seed{'s' * (run.seeds != 1)} ("
                + code(run.file) + f"){dirty}")

    def availability(self, experiment: str, backends: Iterable[str] = BACKENDS) -> str:
        """A sentence per backend: which run the numbers come from, or why there are none."""
        parts = []
        for backend in backends:
            run = self.run(experiment, backend)
            parts.append(self.describe_run(run) if run is not None else
                         f"{esc(BACKEND_NAME[backend])}: " + self.absent_cell(experiment, backend))
        return "; ".join(parts) + "."

    def finding(self, run: Run | None, claim_id: str, basis: str | None = None) -> tuple[int, dict[str, Any]] | None:
        """The index and the finding of ``claim_id`` (with ``basis``, or the run's first) in the run's summary."""
        for i, f in enumerate(lookup(run.doc, ["summary", "findings"]) or [] if run else []):
            if f["claim"] == claim_id and (basis is None or f["basis"] == basis):
                return i, f
        return None

    def verdict(self, name: str, run: Run | None, claim_id: str, basis: str | None = None) -> str:
        """A claim's verdict as the run's own finding states it, with the measured span and the tolerance: the
        one way the text names a verdict. 'not run' or 'not judged' when there is none."""
        found = self.finding(run, claim_id, basis)
        if run is None or found is None:
            self.v.absent(f"{name}_verdict")
            return "not run" if run is None else "not judged in this results file"
        i, f = found
        path = ["summary", "findings", i]
        spec = UNIT_SPEC.get(f["unit"], "num1")
        verdict = self.v.of(run, f"{name}_verdict", path + ["verdict"], "str")
        span = self.v.add(f"{name}_measured", [(run.file, path + ["measured_min"]), (run.file, path + ["measured_max"])],
                          "span:" + spec, "span") if f["measured_min"] is not None else "not measured"
        tolerance = self.v.of(run, f"{name}_tolerance", path + ["tolerance"], spec)
        return f"{esc(verdict)} (measured {span}, tolerance {tolerance})"

    def verdicts(self, name: str, run: Run | None, claim_ids: Sequence[str], basis: str | None = None) -> str:
        """The text naming several claims' verdicts on one run ("what: verdict (measured ..., tolerance ...)"),
        registered as ``t.<name>``; says so when the run is absent."""
        if run is None:
            text = "not run in this build"
        else:
            text = "; ".join(f"{esc(CLAIMS[cid].what)}: {self.verdict(f'{name}_{key(cid)}', run, cid, basis)}"
                             for cid in claim_ids)
        self.text(name, text)
        return text

    def span(self, name: str, run: Run | None, paths: Sequence[Sequence[Any]], spec: str) -> str:
        """The smallest to the largest of several values of one run (one value when both read the same)."""
        if run is None or not paths:
            return self.v.absent(name)
        return self.v.add(name, [(run.file, p) for p in paths], "span:" + spec, "span")

    def add_figures(self, experiment: str, stems: Sequence[tuple[str, str]],
                    groups: Sequence[tuple[str, ...]] | None = None, only: Sequence[Run] | None = None) -> None:
        """The experiment's figures (``stems``: the PNG's stem and its width on the page): one per backend with
        results (its figures stacked), or one per group of stems (that group's figures of every backend, packed
        into rows). A backend's PNG narrower than the widest of the same stem is shown narrower in proportion,
        so that every backend's figure has the same text size on the page. ``only``: these runs' figures alone."""
        chosen = only if only is not None else [r for b in BACKENDS if (r := self.run(experiment, b)) is not None]
        runs = [(r.backend, r) for r in chosen]
        widest: dict[str, int] = {}
        for _, run in runs:
            for stem, _ in stems:
                if (run.directory / f"{stem}.png").exists():
                    widest[stem] = max(widest.get(stem, 0), png_width(run.directory / f"{stem}.png"))

        def images(run: Run, wanted: tuple[str, ...]) -> list[tuple[Path, int]]:
            return [(run.directory / f"{stem}.png",
                     round(float(width.rstrip("%")) * png_width(run.directory / f"{stem}.png") / widest[stem]))
                    for stem, width in stems if stem in wanted and (run.directory / f"{stem}.png").exists()]

        figures: list[Figure] = []
        for wanted in groups or [tuple(stem for stem, _ in stems)]:
            labelled = [(f"{THE[backend]} ({run.mode} mode, {run.seeds} seed{'s' * (run.seeds != 1)})", image)
                        for backend, run in runs for image in images(run, wanted)]
            if groups is None:      # one figure per backend
                for backend, run in runs:
                    shown = images(run, wanted)
                    if shown:
                        who = f"{THE[backend]}, {run.mode} mode, {run.seeds} seed{'s' * (run.seeds != 1)}."
                        figures.append((esc(who[0].upper() + who[1:]), [[image] for image in shown]))
                continue
            if not labelled:
                continue
            rows: list[list[tuple[Path, int]]] = []
            for _, image in labelled:   # greedy: a figure joins the last row while the row fits the page
                if rows and sum(w for _, w in rows[-1]) + len(rows[-1]) * 2 + image[1] <= 100:
                    rows[-1].append(image)
                else:
                    rows.append([image])
            names = list(dict.fromkeys(name for name, _ in labelled))
            order = "left to right" if len(rows) == 1 else "in reading order"
            suffix = (f"{names[0][0].upper()}{names[0][1:]}." if len(names) == 1 else
                      f"From {' and '.join(names)}, {order}; each panel's title or legend names its backend.")
            figures.append((esc(suffix), rows))
        self.figures[key(experiment)] = figures


def unsupported_reason(experiment: str, backend: str) -> str | None:
    """Why ``experiment`` has no run on ``backend`` by design (its definition's ``unsupported``), or None."""
    from experiments.registry import DEFINITIONS, get_experiment
    if experiment not in DEFINITIONS:
        return None
    return get_experiment(experiment).unsupported.get(backend)
