"""The paper's sections no experiment owns (``paper.build.PAPER_SECTIONS``): the mutation score (``mutation``),
the engine against native Spark like with like (``speed``), the simulator's storage profiles (``profiles``) and
the step-graph figure drawn from the code (``step_graph``). Each defines ``write(w)`` on an
``experiments.section_content.Writeup``, as an experiment's section does."""
