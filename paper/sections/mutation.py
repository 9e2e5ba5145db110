"""The paper's correctness result no experiment owns: the mutation score of the judge (``make mutation``); the
explorer and the bug zoo are experiments with their own sections."""

from __future__ import annotations

from experiments.section_content import Writeup, code, joined_text, strong, text

MUTATION_COMMAND = "make mutation"


def write(w: Writeup) -> None:
    found = w.results.optional("mutation.json")
    if found is None:
        w.text("mutation", strong("The mutation score has not been measured in this build") + ": there is no " +
               code("paper/results/mutation.json") + " (" + code(MUTATION_COMMAND) + " writes it).")
        w.text("mutation_scope", "none yet")
        return
    file, doc = found
    score = w.v.add("mut_score", [(file, ["score_percent"])], "num1")
    total = w.v.add("mut_total", [(file, ["total"])], "int")
    killed = w.v.add("mut_killed", [(file, ["killed"])], "int")
    survived = w.v.add("mut_survived", [(file, ["survived"])], "int")
    equivalent = w.v.add("mut_equivalent", [(file, ["equivalent"])], "int", "len")
    modules = w.v.add("mut_modules", [(file, ["scope"])], "int", "len")
    w.text("mutation_scope", joined_text(", ", (code(s) for s in doc.get("scope", []))))
    commit = doc.get("commit")
    w.text("mutation", f"{str(doc.get('tool'))} ({str(doc.get('date'))}) made {total} mutants of "
                       f"{modules} chosen modules of " + code("reference/") + " and " + code("sim/") +
           f", not all of them: {killed} killed, {survived} survived, {equivalent} judged equivalent; a mutation "
           f"score of {score}% over those modules (" + code(file) + (text(", measured at ", code(str(commit)[:7]))
                                                                     if commit else ", which records no commit")
           + ").")
