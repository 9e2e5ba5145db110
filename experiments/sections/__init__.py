"""The paper's sections, one module per experiment (``experiments.registry.SECTIONS``), and the few no
experiment owns.

Each module defines ``write(w)``, where ``w`` is an ``experiments.writeup.Writeup``:
it reads its experiment's runs (``w.run``), shows every number through
``w.v`` (which records the results file and key it came from), names every
verdict through ``w.verdict`` (the run's own finding, never judged here),
and registers its tables (``w.table``, with the label the prose places them
under and the runs they come from) and figures (``w.add_figures``). The
prose in ``paper/lightspeed-ref.typ`` uses those names; ``paper/build.py``
renders and compiles.
"""
