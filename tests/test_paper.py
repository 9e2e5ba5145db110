"""The paper reads only what the experiments wrote (paper/build.py, paper/results/).

- Every number in the paper's hand-written Typst comes from a results file: the prose holds no numeric
  literal outside the allow-list below, and every generated value resolves, through provenance.json, to a
  results file and key whose value, derived and formatted again, gives the text the paper shows.
- Every figure in the paper is a byte copy of an experiment's own figure in paper/results/.
- The committed generated files are what build.py makes from paper/results/ now; a changed results value
  without a rebuild is detected.
Fast: no experiment runs; the PDF is compiled once (under a second) when the typst package is installed.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
    # the project's own SPEC sections, which the prose cites by number (section structure)
    (r"\bSPEC section \d+\b", "a section of the project's SPEC"),
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
            assert source["file"].startswith("paper/results/"), name
            path = ROOT / source["file"]
            if not path.exists():
                problems.append(f"{name}: {source['file']} does not exist")
                continue
            raw = build.lookup(json.loads(path.read_text()), source["key"])
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
    manifest = json.loads((PAPER / "generated" / "figures.json").read_text())
    used = re.findall(r'image\("\.\./figures/([^"]+)"', (PAPER / "generated" / "figures.typ").read_text())
    assert used, "the paper shows no experiment figure"
    for name in used:
        copy = PAPER / "figures" / name
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
                       and not e["sources"][0]["file"].endswith(("published.json", "analysis.json")))
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


def test_absent_backends_are_said_to_be_absent(tmp_path):
    """Without some backend's results the generated text says so instead of showing a number, and the paper
    still compiles: a figure placed by index (the engine's, in the appendix) becomes a labelled placeholder."""
    paper = tmp_path / "paper"
    shutil.copytree(PAPER, paper, ignore=shutil.ignore_patterns("*.pdf", "generated", "figures"))
    copy = paper / "results"
    for run in list(copy.glob("offset-management/*")) + list(copy.glob("pipelining/spark-*")):
        shutil.rmtree(run)
    files, copies = build.generate(copy)
    assert "no results yet" in files["numbers.typ"]
    assert 'om_sim_base_batch: "n/a"' in files["numbers.typ"]
    assert "pipelining__spark" not in files["figures.typ"]
    build.write(files, copies, paper)
    build.compile_pdf(paper, tmp_path / "paper.pdf")
    assert (tmp_path / "paper.pdf").read_bytes()[:4] == b"%PDF"


def test_the_runs_table_covers_every_experiment():
    collect = _load("collect_results")
    from experiments.registry import DEFINITIONS, get_experiment
    covered = {(r.experiment, r.backend) for r in collect.RUNS}
    for name in DEFINITIONS:
        backends = set(get_experiment(name).backends)
        assert {b for e, b in covered if e == name} == backends, name


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


def test_the_paper_compiles(tmp_path):
    import typst   # installed by make (pyproject): its absence is a failure, not a skip
    out = tmp_path / "paper.pdf"
    typst.compile(str(PAPER / "lightspeed-ref.typ"), output=str(out), root=str(PAPER), ignore_system_fonts=True)
    assert out.read_bytes()[:4] == b"%PDF"


def test_spark_results_and_the_missing_files_are_picked_up_when_present(tmp_path):
    """Results of the Spark backends in the same layout, a mutation score and a bug zoo fill the paper's
    cells and replace the 'not measured yet' sentences; the paper still compiles."""
    import typst   # installed by make (pyproject): its absence is a failure, not a skip
    paper = tmp_path / "paper"
    shutil.copytree(PAPER, paper, ignore=shutil.ignore_patterns("*.pdf", "generated", "figures"))
    results = paper / "results"
    for experiment in ("offset-management", "pipelining", "async-state-checkpoint", "fault-matrix"):
        sim = results / experiment / "sim-quick"
        for backend in ("spark", "spark-native") if experiment in ("offset-management", "fault-matrix") else ("spark",):
            target = results / experiment / f"{backend}-full"
            shutil.rmtree(target, ignore_errors=True)   # a real run kept in the repository is replaced
            shutil.copytree(sim, target)
            doc = json.loads((target / "results.json").read_text())
            doc["backend"], doc["mode"] = backend, "full"
            if experiment == "fault-matrix":
                doc["summary"]["counts"][backend] = doc["summary"]["counts"]["sim"]
            (target / "results.json").write_text(json.dumps(doc))
    calibration = results / "calibration" / "spark-full"
    calibration.mkdir(parents=True, exist_ok=True)   # a real run kept in the repository is replaced
    row = {"workload": "stateless", "config": "baseline", "role": "fit", "measured_p50": 700.0,
           "predicted_p50_shipped": 500.0, "predicted_p50_fitted": 690.0, "error_shipped": -0.29,
           "error_fitted": -0.01}
    (calibration / "results.json").write_text(json.dumps({
        "experiment": "calibration", "backend": "spark", "mode": "full", "seeds": [1, 2], "wall_s": 60.0,
        "environment": {}, "points": [], "summary": {"rows": {"stateless/baseline": row},
                                                     "validation_mean_abs_error": 0.12}}))
    (results / "mutation.json").write_text(json.dumps({
        "tool": "mutmut", "date": "2026-12-01", "scope": ["reference/"], "total": 10, "killed": 8, "survived": 1,
        "equivalent": [{"mutant": "m1", "reason": "dead branch"}], "score_percent": 88.9}))
    (results / "zoo.json").write_text(json.dumps([
        {"jira": "SPARK-43404", "planted": "retried task reuses a file", "caught_by": "lineage", "seconds": 1.5,
         "unplanted_passes": True}]))
    files, copies = build.generate(results)
    numbers = files["numbers.typ"]
    assert "has not been measured yet" not in numbers and "has not been run yet" not in numbers
    assert "paper/results/offset-management/spark-full/results.json" in numbers
    assert 'cal_spark_validation: "12%"' in numbers and 'mut_score: "88.9"' in numbers
    tables = files["tables.typ"]
    assert "PySpark engine, 100K/s" in tables and "SPARK-43404" in tables
    assert any("spark-full" in name for name in copies)
    build.write(files, copies, paper)
    build.compile_pdf(paper, tmp_path / "paper.pdf")
    assert (tmp_path / "paper.pdf").read_bytes()[:4] == b"%PDF"


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
    """analysis.json repeats reference/timing.py's keep-up constants for the text; they must not drift apart."""
    from reference import timing

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


def test_the_summary_verdicts_follow_the_experiments_rule():
    """Table 1 judges each value by experiments/verdicts.py's rule with the experiment's tolerance."""
    assert build.verdict([0.87], 0.85, 0.86, tolerance=0.10) == "reproduced"
    assert build.verdict([0.22, 0.24], 0.50, 0.50, tolerance=0.10) == "direction only; smaller"
    assert build.verdict([0.45, 0.30], 0.50, 0.50, tolerance=0.10) == "partly reproduced"
    assert build.verdict([0.9, 1.8], 2.0, 3.0, tolerance=0.5, neutral=1.0) == "not reproduced (no gain)"
    assert build.verdict([1.3, 2.8], 2.0, 3.0, tolerance=0.5, neutral=1.0) == "partly reproduced"
    assert build.verdict([0.36], 0.25, 0.25, up_to=True, tolerance=0.10) == "direction only; larger than published"
    assert build.verdict([0.12], 0.25, 0.25, up_to=True, tolerance=0.10) == "reproduced"
    assert build.verdict([None], 0.5, 0.5) == "not measured"


def test_a_published_most_is_kept_by_any_value_up_to_it():
    """"May need to re-process two micro-batches" is a bound: 0, 1 and 2 keep it, 3 breaks it."""
    assert build.bound_verdict([0.0, 1.0, 2.0], 2.0) == "within the published bound"
    assert build.bound_verdict([1.0, 3.0], 2.0) == "past the published bound"
    assert build.bound_verdict([None], 2.0) == "not measured"


def test_a_span_reads_as_one_value_when_its_ends_agree():
    """``X_span`` replaces the prose's "X_min to X_max", which read "49% to 49%" when a result did not vary."""
    assert build.fmt("span:pct", build.DERIVATIONS["span"]([0.491, 0.488, None])) == "49%"
    assert build.fmt("span:pct", build.DERIVATIONS["span"]([0.62, 0.70])) == "62% to 70%"
    assert build.DERIVATIONS["span"]([None, "n/a"]) is None
    generated = (PAPER / "generated" / "numbers.typ").read_text()
    for name in re.findall(r"#v\.(\w+)_min\s+to\s+#v\.(\w+)_max", PROSE[0].read_text()):
        assert f"  {name[0]}_span:" not in generated or name[0] != name[1], f"write #v.{name[0]}_span"
