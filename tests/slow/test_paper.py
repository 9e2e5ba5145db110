"""The paper reads only what the experiments wrote (paper/build.py, paper/results/, experiments/sections/).

- Every number in the paper's hand-written Typst comes from a results file or the claims table: the prose holds
  no numeric literal outside the allow-list below, and every generated value resolves, through
  provenance.json, to a file and key whose value, derived and formatted again, gives the text the paper shows.
- Every verdict the paper names is the experiment's own finding: the prose types none, and Table 1, the
  sections' text and the conclusion show the same finding for the same claim, run and basis.
- Every figure in the paper is a byte copy of an experiment's own figure in paper/results/, or drawn from
  the code (the step graph) to the same bytes.
- Every registered experiment has a paper section and a run, every table a section registers is placed in the
  paper, and build.py holds no experiment's key path.
- The committed generated files are what build.py makes from paper/results/ now; a changed results value
  without a rebuild is detected.
Fast: no experiment runs, and no typst here: compiling the PDF is tests/spark/test_paper_compiles.py.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "paper"
PROSE = (PAPER / "lightspeed-ref.typ", PAPER / "template.typ")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"paper_{name}", PAPER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build = _load("build")

# Numbers the prose may hold, each with the reason it is not a measurement. Matched text is removed before
# the search for digits, so anything not listed here fails the test.
ALLOWED = (
    # names, not numbers: generated values (v.pub_flink_ckpt_p50_ms), citation keys, labels
    (r"#[A-Za-z_][A-Za-z0-9_.]*", "a Typst identifier, such as a generated value's name"),
    (r"@[A-Za-z][\w:-]*", "a citation key or a reference to a label"),
    (r"<[A-Za-z][\w:-]*>", "a label"),
    # identifiers that contain digits: Spark JIRA issues, Flink's FLIP, venue years
    (r"\bSPARK-\d+\b", "a JIRA issue id"),
    (r"\bFLIP-\d+\b", "a Flink improvement proposal id"),
    # versions of the software named (what changed when, not what was measured)
    (r"\bSpark \d+(\.\d+)+\b", "a Spark release"),
    # the project's own spec sections, which the prose cites by number (section structure)
    (r"\bspec section \d+\b", "a section of the project's spec (docs/spec.md)"),
    # Young's formula: the constant of a published formula, not a measurement
    (r"sqrt\(2 C M\)", "Young's formula"),
    # batch-index arithmetic of the protocol (b+1 is the next batch)
    (r"\$b ?[+-] ?\d\$|\bb ?[+-] ?\d\b|\$L ?\+ ?\d\$", "a batch index relative to b or L"),
    # typography in code mode: lengths, ratios, sizes, colours, heading numbering patterns
    (r"\b\d+(\.\d+)?(pt|mm|cm|em|fr)\b", "a length"),
    (r"\b\d+(\.\d+)?%", "a relative size in code mode (figure widths are generated)"),
    (r'numbering: "(1\.1|1|A\.1)"', "a numbering pattern"),
    (r'rgb\("#[0-9a-fA-F]{6}"\)', "a colour"),
    (r"\(x, y\) => if y == 0", "the table rule for the header row"),
    (r'paper: "a4"', "the paper size"),
    (r"\(heading\)\.update\(0\)", "restarting the heading numbers for the appendix"),
    (r"heading\.where\(level: \d\)", "a heading level (section structure)"),
    (r"only: \((\d+, ?)+\)", "which of an experiment's figures a call places (layout: body or appendix)"),
)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"(^|\s)//.*$", "", line) for line in text.splitlines())


def _code_mode_only(pattern: str) -> bool:
    return pattern in (r"\b\d+(\.\d+)?%",)


def test_the_prose_types_no_number():
    offenders = []
    for path in PROSE:
        text = _strip_comments(path.read_text())
        for pattern, _why in ALLOWED:
            if _code_mode_only(pattern) and path.name != "template.typ":
                continue
            text = re.sub(pattern, " ", text)
        for lineno, line in enumerate(text.splitlines(), 1):
            for match in re.finditer(r"\d", line):
                offenders.append(f"{path.name}:{lineno}: {line.strip()[:100]!r}")
                break
    assert not offenders, "numbers typed into the paper (put them in a results file):\n" + "\n".join(offenders)


def test_the_allow_list_is_not_a_loophole():
    """A measured-looking number in prose is caught, however it is written."""
    for sample in ("latency fell by 62%", "took 544 ms", "a speedup of 1.75x", "3 of 4 cells"):
        stripped = sample
        for pattern, _why in ALLOWED:
            if not _code_mode_only(pattern):
                stripped = re.sub(pattern, " ", stripped)
        assert re.search(r"\d", stripped), sample


def _provenance() -> dict:
    return json.loads((PAPER / "generated" / "provenance.json").read_text())


def test_every_value_the_prose_uses_is_generated():
    names = set(_provenance())
    used = set()
    for path in PROSE:
        used |= set(re.findall(r"\bv\.([A-Za-z][A-Za-z0-9_]*)", _strip_comments(path.read_text())))
    missing = sorted(used - names)
    assert not missing, f"values used in the prose but not generated: {missing}"


def _source_document(file: str) -> object:
    """A provenance source: a results file, or the claims table (experiments/claims.py) as a document."""
    from experiments.writeup import CLAIMS_FILE, claims_document
    if file == CLAIMS_FILE:
        return claims_document()
    assert file.startswith("paper/results/"), file
    return json.loads((ROOT / file).read_text()) if (ROOT / file).exists() else None


def test_every_generated_value_resolves_to_a_results_file_and_key():
    results = build.Results(PAPER / "results")
    problems = []
    for name, entry in _provenance().items():
        if entry["derivation"] == "absent":
            if entry["sources"] or entry["text"] != "n/a":
                problems.append(f"{name}: absent, yet it has sources or a value")
            continue
        if not entry["sources"]:
            problems.append(f"{name}: no source")
            continue
        raws = []
        for source in entry["sources"]:
            doc = _source_document(source["file"])
            if doc is None:
                problems.append(f"{name}: {source['file']} does not exist")
                continue
            raw = build.lookup(doc, source["key"])
            if build.recorded(raw) != source["value"]:
                problems.append(f"{name}: {source['file']} {source['key']} is {raw!r}, provenance says "
                                f"{source['value']!r}")
            raws.append(raw)
        if len(raws) == len(entry["sources"]):
            text = build.fmt(entry["format"], build.DERIVATIONS[entry["derivation"]](raws))
            if text != entry["text"]:
                problems.append(f"{name}: re-derived {text!r}, the paper shows {entry['text']!r}")
    assert results.root.exists()
    assert not problems, "\n".join(problems)


def test_generated_numbers_hold_only_provenance_values():
    """numbers.typ's value dictionary is exactly provenance.json's texts."""
    text = (PAPER / "generated" / "numbers.typ").read_text()
    block = text[text.index("#let v = ("):text.index(")\n", text.index("#let v = ("))]
    shown = dict(re.findall(r'^  ([A-Za-z0-9_]+): "((?:[^"\\]|\\.)*)",$', block, flags=re.M))
    prov = _provenance()
    assert set(shown) == set(prov)
    for name, value in shown.items():
        assert value.replace('\\"', '"').replace("\\\\", "\\") == prov[name]["text"], name


def test_figures_are_byte_copies_of_the_experiments_figures():
    from experiments.sections import step_graph
    manifest = json.loads((PAPER / "generated" / "figures.json").read_text())
    used = re.findall(r'image\("\.\./figures/([^"]+)"', (PAPER / "generated" / "figures.typ").read_text())
    assert used, "the paper shows no experiment figure"
    for name in used:
        copy = PAPER / "figures" / name
        if "drawn_from" in manifest[name]:       # drawn from the code itself: the same drawing, the same bytes
            assert manifest[name]["drawn_from"] == step_graph.SOURCE
            assert copy.read_bytes() == step_graph.draw(), f"{name} is not what the step graph draws"
            continue
        source = ROOT / manifest[name]["source"]
        assert copy.read_bytes() == source.read_bytes(), f"{name} is not a byte copy of {source}"
    assert sorted(p.name for p in (PAPER / "figures").glob("*.png")) == sorted(used)
    for path in PROSE:   # the prose shows figures only through figures.typ
        assert "image(" not in _strip_comments(path.read_text()), path.name


def test_the_committed_generated_files_are_up_to_date():
    assert build.check() == [], "run `make paper` and commit paper/generated/ and paper/figures/"


def test_a_changed_result_without_a_rebuild_is_detected(tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(PAPER / "results", copy)
    assert build.check(copy) == []
    # change one measured value the paper shows
    prov = _provenance()
    name, entry = next((n, e) for n, e in sorted(prov.items())
                       if e["derivation"] == "value" and e["format"] == "ms"
                       and e["sources"][0]["file"].startswith("paper/results/")
                       and not e["sources"][0]["file"].endswith("analysis.json"))
    source = entry["sources"][0]
    path = copy / source["file"][len("paper/results/"):]
    doc = json.loads(path.read_text())
    node = doc
    for part in source["key"][:-1]:
        node = node[part]
    node[source["key"][-1]] = source["value"] * 2 + 1
    path.write_text(json.dumps(doc))
    problems = build.check(copy)
    assert any("numbers.typ" in p for p in problems), problems


def test_every_registered_experiment_has_a_paper_section_and_a_run():
    """One registry: the CLI, collect_results.RUNS and the paper derive from it; an experiment without a section
    or a run fails here."""
    collect = _load("collect_results")
    from experiments.registry import EXPERIMENTS, SECTIONS, get_experiment, get_section
    covered = {(r.experiment, r.backend) for r in collect.RUNS}
    for name in EXPERIMENTS:
        backends = set(get_experiment(name).backends)
        assert backends, f"{name}: no run"
        assert {b for e, b in covered if e == name} == backends, name
        assert name in SECTIONS and callable(get_section(name).write), f"{name}: no paper section"


def test_every_table_a_section_writes_is_in_the_paper():
    """No experiment's findings are missing from the paper: every generated table is placed under its label."""
    labels = json.loads((PAPER / "generated" / "tables.json").read_text())
    prose = _strip_comments(PROSE[0].read_text())
    for name, label in labels.items():
        assert f"table_{name}" in prose and f"<{label}>" in prose, f"table {name} ({label}) is not in the paper"
    figures = re.findall(r"#let (figs?_\w+)\(", (PAPER / "generated" / "figures.typ").read_text())
    for name in figures:
        assert f"#{name}(" in prose, f"figure {name} is not in the paper"


def test_build_py_holds_no_experiment_specific_key_path():
    """build.py reads, renders and compiles; every experiment's keys live in its section module."""
    from experiments.registry import EXPERIMENTS
    text = (PAPER / "build.py").read_text()
    assert len(text.splitlines()) < 800
    for name in EXPERIMENTS:
        assert f'"{name}"' not in text, name
    for summary_key in ("rates", "sizes", "rows", "comparison", "inputs", "curve", "counts", "price", "cut_p50"):
        assert f'"{summary_key}"' not in text, summary_key


def test_collect_results_redraw_draws_every_stored_run_and_changes_no_number(tmp_path, monkeypatch):
    collect = _load("collect_results")
    results = tmp_path / "results"
    for run in ("checkpoint-interval/sim-quick", "explorer/reference-quick"):
        (results / run).mkdir(parents=True)
        shutil.copy(PAPER / "results" / run / "results.json", results / run / "results.json")
    before = {p: p.read_bytes() for p in results.rglob("results.json")}
    monkeypatch.setattr(collect, "RESULTS", results)
    monkeypatch.setattr(collect, "ROOT", tmp_path)
    assert collect.main(["--redraw"]) == 0
    # the experiment's figures are drawn; the explorer is no experiment and has none
    assert sorted(p.name for p in (results / "checkpoint-interval/sim-quick").iterdir()) == \
        ["checkpoint_interval.pdf", "checkpoint_interval.png", "results.json"]
    assert sorted(p.name for p in (results / "explorer/reference-quick").iterdir()) == ["results.json"]
    assert {p: p.read_bytes() for p in results.rglob("results.json")} == before


def test_no_value_swallows_the_punctuation_after_it():
    """In Typst markup a semicolon right after an embedded expression ends it and is not printed."""
    for path in PROSE:
        found = re.findall(r"#[vt]\.[A-Za-z0-9_]+;", path.read_text())
        assert not found, f"{path.name}: {found} (write #\";\" after the value)"


def test_no_wrapped_line_starts_a_heading():
    """In Typst markup a line that starts with ``=`` is a heading wherever it stands, so prose wrapped right
    before an equals sign (``cost $C$`` / ``= 804 ms``) opens a new section and renumbers the rest of the paper.
    A heading here always follows a blank line; a line starting with ``=`` after prose is such a wrap."""
    for path in PROSE:
        lines = _strip_comments(path.read_text()).splitlines()
        wrapped = [f"line {i + 1}: {line.strip()[:60]}" for i, line in enumerate(lines)
                   if i and re.match(r"\s*=+\s", line) and lines[i - 1].strip()]
        assert not wrapped, f"{path.name}: a wrapped line starts a heading: {wrapped}"


def test_the_backlog_rule_quoted_is_the_one_the_backends_apply():
    """analysis.json repeats reference/protocol/timing.py's keep-up constants for the text; they must not drift apart."""
    from reference.protocol import timing

    rule = json.loads((PAPER / "results" / "analysis.json").read_text())["backlog"]
    assert rule["min_processed_fraction"] == timing.KEPT_UP_RATE_FRACTION
    assert rule["max_latency_growth_ms_per_s"] == timing.LATENCY_GROWTH_LIMIT_MS_PER_S


def test_a_point_is_backlogged_exactly_when_its_run_did_not_keep_up():
    rate = {"point": {"scenario": {"source": {"rows_per_second": 200}}}}
    assert build.backlogged({**rate, "metrics": {"kept_up": False, "latency_p50": 80}}) is True
    assert build.backlogged({**rate, "metrics": {"kept_up": True, "latency_p50": 90_000}}) is False
    assert build.backlogged({**rate, "metrics": {"latency_p50": 80}}) is None        # written before the metric
    explicit = {"point": {"scenario": {"source": {"kind": "explicit"}}}, "metrics": {"kept_up": False}}
    assert build.backlogged(explicit) is None                                      # no input rate to keep up with


def test_a_span_reads_as_one_value_when_its_ends_agree():
    """``X_span`` replaces the prose's "X_min to X_max", which read "49% to 49%" when a result did not vary."""
    assert build.fmt("span:pct", build.DERIVATIONS["span"]([0.491, 0.488, None])) == "49%"
    assert build.fmt("span:pct", build.DERIVATIONS["span"]([0.62, 0.70])) == "62% to 70%"
    assert build.DERIVATIONS["span"]([None, "n/a"]) is None
    generated = (PAPER / "generated" / "numbers.typ").read_text()
    for name in re.findall(r"#v\.(\w+)_min\s+to\s+#v\.(\w+)_max", PROSE[0].read_text()):
        assert f"  {name[0]}_span:" not in generated or name[0] != name[1], f"write #v.{name[0]}_span"


# Words that name a verdict; the prose may use them only to define the vocabulary (italics, in Table 1's caption)
VERDICT_WORDS = re.compile(r"\b(partly reproduced|not reproduced|reproduced|direction only)\b", re.I)
VERDICT_VOCABULARY = (r"_(partly )?reproduced_", r"_direction only_")


def test_the_prose_names_no_verdict_of_its_own():
    """Every verdict the paper names comes through a generated value or text, from the experiment's finding."""
    for path in PROSE:
        text = _strip_comments(path.read_text())
        for pattern in VERDICT_VOCABULARY:
            text = re.sub(pattern, " ", text)
        found = [m.group(0) for m in VERDICT_WORDS.finditer(text)]
        assert not found, f"{path.name} names verdicts by hand: {found}"


def _verdict_sources() -> dict[tuple[str, int], dict[str, str]]:
    """For each finding the paper shows (results file, index in summary.findings): the generated values that name
    its verdict, by the part of the paper they belong to (t1_: Table 1, concl_: the conclusion, others: text)."""
    out: dict[tuple[str, int], dict[str, str]] = {}
    for name, entry in _provenance().items():
        if entry["derivation"] != "value":        # a count of verdicts (the abstract's) names none
            continue
        for source in entry["sources"]:
            key = source["key"]
            if len(key) == 4 and key[:2] == ["summary", "findings"] and key[3] == "verdict":
                part = "table1" if name.startswith("t1_") else "conclusion" if name.startswith("concl_") else "text"
                out.setdefault((source["file"], key[2]), {})[part] = entry["text"]
    return out


def test_table_1_the_text_and_the_conclusion_name_each_findings_own_verdict():
    """Every finding of every run the paper shows appears in Table 1 and in the conclusion, and every place that
    names its verdict names the one the run wrote (the resolution test re-reads each from its file)."""
    shown = _verdict_sources()
    findings = 0
    for path in sorted((PAPER / "results").glob("*/*/results.json")):
        doc = json.loads(path.read_text())
        file = f"paper/results/{path.parent.parent.name}/{path.parent.name}/results.json"
        for i, finding in enumerate((doc.get("summary") or {}).get("findings") or []):
            if (file, i) not in shown:
                continue        # a quick run the paper does not show beside its full one
            findings += 1
            parts = shown[(file, i)]
            assert {"table1", "conclusion"} <= set(parts), (file, i, parts)
            assert set(parts.values()) == {finding["verdict"]}, (file, i, parts, finding["verdict"])
    assert findings, "the paper shows no finding"


def test_a_changed_finding_changes_table_1_the_text_and_the_conclusion_together(tmp_path):
    """Flip one finding's verdict in a copy of the results: Table 1, the section's sentence and the conclusion all
    say the new verdict, and nothing still says the old one for that claim."""
    copy = tmp_path / "results"
    shutil.copytree(PAPER / "results", copy)
    path = copy / "offset-management" / "sim-full" / "results.json"
    doc = json.loads(path.read_text())
    index, finding = next((i, f) for i, f in enumerate(doc["summary"]["findings"])
                          if f["claim"] == "om_cut_purge" and f["basis"] == "first principles")
    new = "reproduced" if finding["verdict"] != "reproduced" else "not reproduced"
    doc["summary"]["findings"][index]["verdict"] = new
    path.write_text(json.dumps(doc))
    files, _copies, _drawn = build.generate(copy)
    prov = json.loads(files["provenance.json"])
    named = {n: e["text"] for n, e in prov.items() if e["derivation"] == "value" and
             any(s["key"] == ["summary", "findings", index, "verdict"]
                    and s["file"] == "paper/results/offset-management/sim-full/results.json" for s in e["sources"])}
    assert {n[:3] for n in named} >= {"t1_", "con", "om_"}, named
    assert set(named.values()) == {new}
    conclusion = re.search(r"^  conclusion: \[(.*)\],$", files["numbers.typ"], flags=re.M).group(1)
    heading = {"reproduced": "Reproduced within the stated tolerance", "not reproduced": "Not reproduced"}[new]
    assert re.search(rf"\*{heading}:\*[^*]*p50 cut, async log purge \(simulator\)", conclusion), conclusion


def test_the_number_of_checks_is_the_judges_own():
    """The abstract, the introduction and CITATION.cff say thirteen checks: the twelve oracles of
    reference/judge/oracles.py plus determinism, which compares two runs."""
    from reference.judge.oracles import ORACLES
    assert len(ORACLES) + 1 == 13
    assert PROSE[0].read_text().count("thirteen checks") >= 2
    assert "thirteen checks" in (ROOT / "CITATION.cff").read_text()
