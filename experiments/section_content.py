"""What an experiment's section of the paper holds, as data: values read from results files with their
provenance, sentences, tables and figures. ``paper/`` renders it (Typst); nothing here knows the paper's format.

Each experiment owns its section (``experiments/<name>/section.py``, ``write(w)``), written with these blocks: a
section reads its experiment's results files through ``Writeup.run`` and shows every number through ``Values``,
which records the file and key it came from, so that ``tests/slow/test_paper.py`` can resolve each one again. A
published number comes from ``experiments.claims`` (provenance ``experiments/claims.py``); a verdict from its
run's ``summary.findings``, never judged here.

Prose is ``Text``: plain strings (shown as they are: no character is markup) joined with a few marked spans
(``code``, ``strong``, ``emph``, ``small``, ``ref`` to a label, ``cite`` of a source). A ``Text`` refuses to be
formatted into an f-string, so its marks are never flattened into plain text by accident.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from experiments import ledger
from experiments.claims import CLAIMS
from experiments.publications import DASH, MINUS, TIMES, plain_number, published_text
from experiments.registration import unregistered

BACKENDS = ("sim", "spark", "spark-native")          # the backends a result table compares, in column order
BACKEND_NAME = {"reference": "reference model", "sim": "simulator", "spark": "PySpark engine",
                "spark-native": "Spark (native)"}
THE = {"reference": "the reference model", "sim": "the simulator", "spark": "the PySpark engine",
       "spark-native": "native Spark"}
MODES = ("full", "quick")                            # preference order of a run's mode
RESULTS_PREFIX = "paper/results/"
CLAIMS_FILE = "experiments/claims.py"                # provenance of a published number
RESULTS_MARKER = "analysis.json"                     # a results directory holds this file


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
    def seed_words(self) -> str:
        """Its seeds in words: "1 seed", "3 seeds", or "no seed" for a run that draws nothing at random (the
        explorer)."""
        return f"{self.seeds} seed{'s' * (self.seeds != 1)}" if self.seeds else "no seed"

    @property
    def tag(self) -> str:
        """Backend, mode and seeds: what every row built from this run says about it."""
        return f"{BACKEND_NAME[self.backend]}, {self.mode}, {self.seed_words}"

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


LEDGER_UNITS = ledger.UNITS     # a results folder measured under the ledger holds its units here
FRESH, STALE = ledger.FRESH, ledger.STALE
EXPLORATORY_RUN = "exploratory"   # a run whose every unit is fresh, with fewer seeds than a verdict needs


@dataclass(frozen=True)
class Standing:
    """Whether a run's verdicts may count (the ledger, ``experiments.ledger``): ``fresh`` when every unit was
    measured at the code of HEAD, from a clean tree, on a quiet machine, with at least three seeds; else what
    it is (``exploratory``: fewer seeds; ``stale``, ``dirty``, ``noisy``, ``failed``, ``missing``: its worst
    unit; ``unknown``: no ledger to ask) and why, and the commits it was measured at."""

    status: str
    reason: str
    commits: tuple[str, ...]

    @property
    def counted(self) -> bool:
        return self.status == FRESH


def standing_of(directory: Path, doc: dict[str, Any]) -> Standing:
    """A results folder's standing: a folder without units was measured before the ledger, and is stale."""
    git = lookup(doc, ["environment", "git"]) or {}
    legacy = tuple(c for c in [git.get("commit")] if c)
    if not (directory / LEDGER_UNITS).is_dir():
        return Standing(STALE, f"measured before the ledger (commit {(legacy or ('?',))[0][:10]}"
                               + (", uncommitted changes" if git.get("dirty") else "") + ")", legacy)
    status = ledger.run_status(directory)
    if status.verdicts_allowed:
        return Standing(FRESH, "", tuple(status.commits))
    if status.complete and status.exploratory:
        return Standing(EXPLORATORY_RUN, f"{len(status.seeds)} seed{'s' * (len(status.seeds) != 1)}, fewer than "
                                         f"{ledger.MIN_VERDICT_SEEDS}", tuple(status.commits))
    counts = status.counts()
    worst = next((s for s in reversed(ledger.STATUSES) if counts.get(s)), STALE)
    return Standing(worst, ", ".join(f"{n} {s}" for s, n in counts.items() if n), tuple(status.commits))


class Results:
    """The results files under one directory (``paper/results`` or a copy of it)."""

    def __init__(self, root: Path):
        self.root = root
        self.docs: dict[str, Any] = {}
        self.standings: dict[str, Standing] = {}

    def standing(self, run: "Run") -> Standing:
        """The run's standing (``standing_of``), computed once."""
        key = str(run.directory)
        if key not in self.standings:
            self.standings[key] = standing_of(run.directory, run.doc)
        return self.standings[key]

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
        """Every run of ``experiments`` in this directory, on any backend (the reference model's too)."""
        return [r for e in experiments for b in BACKEND_NAME if (r := self.run(e, b)) is not None]

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
    records by ``reference/protocol/timing.py``'s one rule); None: no input rate, or a file made before the
    metric."""
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
    # the same over point records given one source each
    "backlogged points": lambda xs: sum(1 for r in xs if backlogged(r or {})),
    "judged points": lambda xs: sum(1 for r in xs if backlogged(r or {}) is not None),
    "caught": lambda xs: sum(1 for e in xs[0] or [] if e.get("caught_by")),
    "s_to_ms": lambda xs: xs[0] * 1000.0 if _num(xs[0]) is not None else None,
}


def _signed(text: str) -> str:
    return text.replace("-", MINUS)


def _nonzero(value: float, digits: int) -> float:
    """``value``, or 0.0 when it rounds to zero (so no "-0.0" is shown)."""
    return 0.0 if round(value, digits) == 0 else value


def joined(low: str, high: str) -> str:
    """A range's display text: one value when both ends read the same ("49%", not "49% to 49%"), and a shared
    word once ("26% to 27% lower", not "26% lower to 27% lower")."""
    if low == high:
        return low
    low_head, _, low_word = low.partition(" ")
    high_head, _, high_word = high.partition(" ")
    if low_word and low_word == high_word:
        return f"{low_head} to {high_head} {high_word}"
    return f"{low} to {high}"


UNIT_SPEC = {"%": "num0pct", "x": "x", "ms": "ms", "batches": "num1", "doublings": "num1"}
# a claim's value in percent, by the claim's sense (experiments.publications.SENSES): one convention everywhere
SENSE_SPEC = {"lower": "pct_lower", "higher": "pct_higher", "faster": "pct_faster", "points": "points"}


def claim_spec(claim_id: str, unit: str) -> str:
    """The format a claim's measured values are shown in: by its sense (a cut reads "33% lower"), else its unit."""
    known = CLAIMS.get(claim_id)
    if known is not None and known.sense and unit == "%":
        return SENSE_SPEC[known.sense]
    return UNIT_SPEC.get(unit, "num1")


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
    if spec.startswith("interval:"):     # a confidence interval: both ends, always
        return f"{fmt(spec[len('interval:'):], value[0])} to {fmt(spec[len('interval:'):], value[1])}"
    v = float(value)
    formats: dict[str, Callable[[float], str]] = {
        "ms": lambda x: f"{x:,.0f} ms", "ms1": lambda x: f"{x:,.1f} ms", "ms_sig": lambda x: f"{x:.3g} ms",
        "s": lambda x: f"{x:,.0f} s" if x >= 10 else f"{x:,.1f} s", "min": lambda x: f"{x / 60:,.1f} min",
        "pct": lambda x: _signed(f"{_nonzero(x * 100, 0):,.0f}%"),
        "pct1": lambda x: _signed(f"{_nonzero(x * 100, 1):,.1f}%"),
        "cut": lambda x: _direction(x, "lower", "higher"),       # a reduction (0.4 = 40% lower), in words
        "change": lambda x: _direction(x, "higher", "lower"),     # a relative change (0.3 = 30% higher), in words
        "num0pct": lambda x: _signed(f"{_nonzero(x, 0):,.0f}%"),  # a number already in percent
        "pct_lower": lambda x: _direction(x / 100, "lower", "higher"),     # in percent, by a claim's sense
        "pct_higher": lambda x: _direction(x / 100, "higher", "lower"),
        "pct_faster": lambda x: _direction(x / 100, "faster", "slower"),
        "points": lambda x: "no difference" if round(x) == 0 else f"{abs(round(x)):,} points {'more' if x > 0 else 'less'}",
        "pp1": lambda x: _signed(f"{_nonzero(x, 1):+.1f} points"),
        "x": lambda x: f"{x:.2f}{TIMES}", "int": lambda x: f"{x:,.0f}", "num1": lambda x: f"{x:,.1f}",
        "num2": lambda x: f"{x:,.2f}", "krows": lambda x: f"{_three_figures(x / 1000)}k rows/s",
        "rows": lambda x: f"{x:,.0f} rows/s", "mb": lambda x: f"{x / 1e6:,.2f} MB", "rate": _rate, "keys": _rate,
    }
    if spec not in formats:
        raise ValueError(f"unknown format {spec!r}")
    return formats[spec](v)


def _direction(change: float, more: str, less: str) -> str:
    """A relative change as the paper writes every change: a magnitude and a word, never a sign ("33% lower",
    "10% higher"; "unchanged" when it rounds to 0%)."""
    percent = round(abs(change) * 100)
    return "unchanged" if percent == 0 else f"{percent:,}% {more if change > 0 else less}"


def _three_figures(value: float) -> str:
    """At least three significant figures (1.44, 14.4, 144, 1,440): a rounded value never hides a ratio the
    same table shows."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


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
        derived from the claim's rule, value, unit and neutral; else one of its fields as text. A name already
        defined for the same claim is the same value (sections and the claims table quote the same claims)."""
        if name in self.entries and all(s["file"] == CLAIMS_FILE and s["key"][1] == claim_id
                                        for s in self.entries[name]["sources"]):
            return str(self.entries[name]["text"])
        if field_name != "published":
            return self.add(name, [(CLAIMS_FILE, ["CLAIMS", claim_id, field_name])], "str")
        sources = [(CLAIMS_FILE, ["CLAIMS", claim_id, f]) for f in ("rule", "low", "high", "unit", "neutral")]
        return self.add(name, sources, "str", "published")


DERIVATIONS["published"] = lambda xs: published_text(*xs)


# --------------------------------------------------------------- prose


SPAN_KINDS = ("code", "strong", "emph", "small", "ref", "cite", "break")


@dataclass(frozen=True)
class Span:
    """A marked piece of prose: ``code`` (a path, a command; ``body`` is its plain text), ``strong``, ``emph``,
    ``small`` (a smaller aside), ``ref`` (a reference to the label ``body``), ``cite`` (of the bibliography key
    ``body``), ``break`` (a line break in a table cell)."""

    kind: str
    body: "str | Text"

    def __post_init__(self) -> None:
        assert self.kind in SPAN_KINDS, f"span kind {self.kind!r} is not one of {SPAN_KINDS}"
        assert isinstance(self.body, str) or self.kind in ("strong", "emph", "small"), \
            f"a {self.kind} span holds plain text"


class Text:
    """Prose: plain strings and marked spans, in order. Build it with ``+`` (with strings or other texts),
    ``text(...)`` and ``Text.join``; never with an f-string (``format`` raises)."""

    __slots__ = ("parts",)

    def __init__(self, *parts: "str | Text | Span"):
        flat: list[str | Span] = []
        for part in parts:
            if isinstance(part, Text):
                flat.extend(part.parts)
            elif isinstance(part, (str, Span)):
                flat.append(part)
            else:
                raise TypeError(f"a Text holds strings and spans, not {type(part).__name__}")
        merged: list[str | Span] = []
        for part in flat:           # neighbouring strings as one, and no empty string
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] = merged[-1] + part
            elif part != "":
                merged.append(part)
        self.parts: tuple[str | Span, ...] = tuple(merged)

    def __add__(self, other: "str | Text | Span") -> "Text":
        return Text(self, other)

    def __radd__(self, other: "str | Text | Span") -> "Text":
        return Text(other, self)

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Text) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"Text{self.parts!r}"

    def __format__(self, spec: str) -> str:
        raise TypeError("a Text in an f-string would lose its marks: join it with + or text()")

    def join(self, items: "Iterable[str | Text | Span]") -> "Text":
        """The items with this text between each two (as ``str.join``)."""
        out: list[str | Text | Span] = []
        for i, item in enumerate(items):
            if i:
                out.append(self)
            out.append(item)
        return Text(*out)

    def plain(self) -> str:
        """The words without their marks (a reference as its label, a citation as its key)."""
        return "".join(p if isinstance(p, str) else "\n" if p.kind == "break" else
                       p.body.plain() if isinstance(p.body, Text) else p.body for p in self.parts)


Prose = str | Text      # what a sentence or a table cell may be: a plain string or marked text
Row = Sequence[Prose]   # a table row: its cells


def text(*parts: "str | Text | Span") -> Text:
    """Plain strings and marked spans as one text."""
    return Text(*parts)


def joined_text(separator: str, items: "Iterable[Prose]") -> Text:
    return Text(separator).join(items)


def code(body: str) -> Text:
    return Text(Span("code", str(body)))


def strong(body: Prose) -> Text:
    return Text(Span("strong", Text(body)))


def emph(body: Prose) -> Text:
    return Text(Span("emph", Text(body)))


def small(body: Prose) -> Text:
    return Text(Span("small", Text(body)))


def ref(label: str) -> Text:
    return Text(Span("ref", label))


def cite(key: str) -> Text:
    return Text(Span("cite", key))


LINE_BREAK = Text(Span("break", ""))


@dataclass
class Table:
    """A table: a header and rows of cells (plain strings or ``Text``); a row of one cell spans every column.
    ``aligns`` (default: the first column left, the others, numbers, right) and ``widths`` (Typst track sizes:
    ``auto``, ``1fr``, ``2cm``) say how it is laid out."""

    header: list[str]
    rows: Sequence[Sequence[Prose]]
    aligns: list[str] | None = None
    widths: list[str] | None = None

    def __post_init__(self) -> None:
        for row in self.rows:
            assert len(row) in (1, len(self.header)), f"a row of {len(row)} cells in a table of {len(self.header)}"


@dataclass
class Placed:
    """A generated table, the label the prose places it under, its caption (what it shows, then the runs it was
    made from: ``Writeup.runs_note``), and the runs and commands that make it (for the map from each table to the
    commands that regenerate it)."""

    table: Table
    label: str
    caption: Prose
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


Figure = tuple[Text, list[list[tuple[Path, int]]]]   # caption, rows of (source PNG, width in percent)


# ----------------------------------------------------------------- writeup


class Writeup:
    """Everything generated: values, sentences, tables and figures; what each section writes into."""

    def __init__(self, results: Results):
        self.results = results
        self.v = Values(results)
        self.t: dict[str, Prose] = {}        # name -> a sentence the prose places
        self.tables: dict[str, Placed] = {}
        self.figures: dict[str, list[Figure]] = {}
        # a figure drawn here, not copied: name -> (PNG, the code it is drawn from, its caption)
        self.drawn: dict[str, tuple[bytes, str, Prose]] = {}
        self.command_map: dict[str, list[str]] = {}     # a table's label -> the commands that regenerate it

    def text(self, name: str, content: Prose) -> None:
        if name in self.t:
            raise ValueError(f"text {name!r} defined twice")
        self.t[name] = content

    def table(self, name: str, table: Table, *, label: str, caption: Prose, runs: Iterable[Run | None] = (),
              commands: Iterable[str] = (), runs_in_caption: bool = True) -> None:
        """A table the prose places under ``label``; its caption is ``caption`` (what it shows) and then what runs
        it comes from, the commits they were measured at and whether their findings count (``runs_note``; a table
        whose every row names its own run says so in its rows instead: ``runs_in_caption=False``)."""
        if name in self.tables:
            raise ValueError(f"table {name!r} defined twice")
        shown = list(dict.fromkeys(r for r in runs if r is not None))
        note = self.runs_note(shown) if runs_in_caption else ""
        self.tables[name] = Placed(table, label, text(caption, " ", note) if note else Text(caption), shown,
                                   list(commands))

    def run_note(self, run: Run) -> Text:
        """A run in a few words: its backend, mode and seeds, the commit it was measured at, and whether its
        findings count (fresh) or what it is (stale, exploratory, ...)."""
        standing = self.results.standing(run)
        commits = ", ".join(c[:7] for c in standing.commits) or "an unrecorded commit"
        return text(f"{BACKEND_NAME[run.backend]}, {run.mode} mode, {run.seed_words}, "
                    f"measured at ", code(commits) if standing.commits else commits,
                    ", " + ("fresh" if standing.counted else standing.status))

    def runs_note(self, runs: Sequence[Run]) -> Prose:
        """The runs a table or a figure comes from, as its caption's last sentence; empty for none."""
        if not runs:
            return ""
        return text("Runs: ", joined_text("; ", (self.run_note(r) for r in runs)), ".")

    def run(self, experiment: str, backend: str) -> Run | None:
        return self.results.run(experiment, backend)

    def absent_cell(self, experiment: str, backend: str) -> Text:
        reason = unsupported_reason(experiment, backend)
        if reason:
            return text("not applicable (", reason, ")")
        return text("not run (", code(f"paper/results/{experiment}/{backend}-*/"), " is absent)")

    def describe_run(self, run: Run) -> Text:
        seeds = self.v.add(f"seeds_{key(run.experiment)}_{key(run.backend)}", [(run.file, ["seeds"])], "int", "len")
        dirty = text("; ", strong("collected from a working tree with uncommitted changes")) if run.dirty else ""
        return text(f"{BACKEND_NAME[run.backend]}: {run.mode} mode, {seeds} seed{'s' * (run.seeds != 1)} (",
                    code(run.file), ")", dirty)

    def availability(self, experiment: str, backends: Iterable[str] = BACKENDS) -> Text:
        """A sentence per backend: which run the numbers come from, or why there are none."""
        parts = []
        for backend in backends:
            run = self.run(experiment, backend)
            parts.append(self.describe_run(run) if run is not None else
                         text(f"{BACKEND_NAME[backend]}: ", self.absent_cell(experiment, backend)))
        return joined_text("; ", parts) + "."

    def finding(self, run: Run | None, claim_id: str, basis: str | None = None) -> tuple[int, dict[str, Any]] | None:
        """The index and the finding of ``claim_id`` (with ``basis``, or the run's first) in the run's summary."""
        for i, f in enumerate(lookup(run.doc, ["summary", "findings"]) or [] if run else []):
            if f["claim"] == claim_id and (basis is None or f["basis"] == basis):
                return i, f
        return None

    def counted(self, run: Run, claim_id: str) -> str | None:
        """Why the run's finding on ``claim_id`` may not count as a verdict, in a word or two (None: it counts): the
        run's standing when it is not fresh (``Standing``: why, in ``standing_text``), or ``measured before
        registration`` (``experiments.registration``)."""
        standing = self.results.standing(run)
        if not standing.counted:
            return standing.status
        return None if unregistered(claim_id, list(standing.commits)) is None else "measured before registration"

    def finding_text(self, name: str, run: Run, index: int, finding: dict[str, Any]) -> Text:
        """One finding as the paper shows it everywhere: the verdict when it counts, else what stops it; the mean
        over the seeds with its 95% interval (a bound: the seeds' range) and the seeds. The one way the paper
        names a verdict. A finding judged before the rules (no interval) shows its measured span alone."""
        path = ["summary", "findings", index]
        spec = claim_spec(finding["claim"], finding["unit"])
        measured: Prose
        if finding.get("measured_min") is None:
            measured = "not measured"
        else:
            mean = self.v.add(f"{name}_mean", [(run.file, path + ["measured_min"]), (run.file, path + ["measured_max"])],
                              "span:" + spec, "span")
            if finding.get("ci_min") is None:
                measured = f"measured {mean}"
            else:
                seeds = self.v.of(run, f"{name}_seeds", path + ["seeds"], "int")
                interval = self.v.add(f"{name}_ci", [(run.file, path + ["ci_min"]), (run.file, path + ["ci_max"])],
                                      "interval:" + spec, "range")
                spread = "seeds" if finding.get("rule") == "at most" else "CI"
                measured = f"{mean} ({spread} {interval}; {seeds} seed{'s' * (seeds != '1')})"
        stopped = self.counted(run, finding["claim"])
        if stopped is not None:
            self.v.absent(f"{name}_verdict")
            return text(emph("no verdict, " + stopped), ": ", measured)
        verdict = self.v.of(run, f"{name}_verdict", path + ["verdict"], "str")
        return text(strong(verdict), ": ", measured)

    def standing_text(self, run: Run) -> Prose:
        """Why a run's findings are or are not verdicts, in a sentence."""
        standing = self.results.standing(run)
        where = f"{run.experiment} on {THE[run.backend]} ({run.mode})"
        if standing.counted:
            return f"{where}: fresh, measured at " + ", ".join(c[:10] for c in standing.commits)
        return f"{where}: {standing.status}" + (f", {standing.reason}" if standing.reason else "")

    def verdict(self, name: str, run: Run | None, claim_id: str, basis: str | None = None) -> Prose:
        """A claim's finding on one run (``finding_text``); 'not run' or 'not judged' when there is none."""
        found = self.finding(run, claim_id, basis)
        if run is None or found is None:
            self.v.absent(f"{name}_verdict")
            return "not run" if run is None else "not judged in this results file"
        return self.finding_text(name, run, *found)

    def verdicts(self, name: str, run: Run | None, claim_ids: Sequence[str], basis: str | None = None) -> Prose:
        """Several claims' findings on one run ("what: finding"), registered as ``t.<name>``; says so when the run
        is absent."""
        content: Prose = "not run in this build" if run is None else joined_text("; ", (
            text(f"{CLAIMS[cid].what}: ", self.verdict(f"{name}_{key(cid)}", run, cid, basis)) for cid in claim_ids))
        self.text(name, content)
        return content

    def span(self, name: str, run: Run | None, paths: Sequence[Sequence[Any]], spec: str) -> str:
        """The smallest to the largest of several values of one run (one value when both read the same)."""
        if run is None or not paths:
            return self.v.absent(name)
        return self.v.add(name, [(run.file, p) for p in paths], "span:" + spec, "span")

    def add_figures(self, experiment: str, stems: Sequence[tuple[str, str]], captions: Sequence[Prose],
                    groups: Sequence[tuple[str, ...]] | None = None, only: Sequence[Run] | None = None) -> None:
        """The experiment's figures (``stems``: the PNG's stem and its width on the page): one per backend with
        results (its figures stacked), or one per group of stems (that group's figures of every backend, packed
        into rows). ``captions`` says what each shows (one per group; without groups, one for every backend's);
        each caption ends with the runs it was drawn from (``runs_note``: backend, mode, seeds, commit, standing)
        and, with one seed, that no whisker shows a spread. A backend's PNG narrower than the widest of the same
        stem is shown narrower in proportion, so that every backend's figure has the same text size on the page.
        ``only``: these runs' figures alone."""
        chosen = only if only is not None else [r for b in BACKENDS if (r := self.run(experiment, b)) is not None]
        widest: dict[str, int] = {}
        for run in chosen:
            for stem, _ in stems:
                if (run.directory / f"{stem}.png").exists():
                    widest[stem] = max(widest.get(stem, 0), png_width(run.directory / f"{stem}.png"))

        def images(run: Run, wanted: tuple[str, ...]) -> list[tuple[Path, int]]:
            return [(run.directory / f"{stem}.png",
                     round(float(width.rstrip("%")) * png_width(run.directory / f"{stem}.png") / widest[stem]))
                    for stem, width in stems if stem in wanted and (run.directory / f"{stem}.png").exists()]

        def caption(index: int, runs: Sequence[Run]) -> Text:
            single = " With one seed a bar is that seed's value: no whisker shows a spread." \
                if any(r.seeds == 1 for r in runs) else ""
            return text(captions[min(index, len(captions) - 1)], " ", self.runs_note(runs), single)

        figures: list[Figure] = []
        if groups is None:          # one figure per backend
            wanted = tuple(stem for stem, _ in stems)
            for run in chosen:
                shown = images(run, wanted)
                if shown:
                    figures.append((caption(0, [run]), [[image] for image in shown]))
        for i, wanted in enumerate(groups or []):
            packed = [(run, image) for run in chosen for image in images(run, wanted)]
            if not packed:
                continue
            rows: list[list[tuple[Path, int]]] = []
            for _, image in packed:   # greedy: a figure joins the last row while the row fits the page
                if rows and sum(w for _, w in rows[-1]) + len(rows[-1]) * 2 + image[1] <= 100:
                    rows[-1].append(image)
                else:
                    rows.append([image])
            shown_runs = list(dict.fromkeys(run for run, _ in packed))
            order = "" if len(shown_runs) == 1 else \
                " Panels in reading order, one per backend (named in its title or legend)."
            figures.append((caption(i, shown_runs) + order, rows))
        self.figures[key(experiment)] = figures


def unsupported_reason(experiment: str, backend: str) -> str | None:
    """Why ``experiment`` has no run on ``backend`` by design (its definition's ``unsupported``), or None."""
    from experiments.registry import DEFINITIONS, get_experiment
    if experiment not in DEFINITIONS:
        return None
    return get_experiment(experiment).unsupported.get(backend)
