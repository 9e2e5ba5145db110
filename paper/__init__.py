"""The paper: its prose (``lightspeed-ref.typ``), its build (``build.py``: read the results, render, compile), the
Typst rendering of what the experiments' sections describe (``typst_render.py``) and the sections no experiment
owns (``sections/``). It reads what the experiments wrote; nothing in ``experiments/`` imports it."""
