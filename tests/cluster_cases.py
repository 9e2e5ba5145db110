"""Run scenario files through one of the project's cluster commands and read its report (the cluster tests' set-up).

``spark_impl.cluster`` (the differential suite) and ``spark_impl.native.cluster_runs`` (native Spark with
executor loss) both take scenario files, ``--workers`` and ``--out``, start a localhost standalone cluster,
and write one JSON report; each test judges that report its own way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_cluster_command(module: str, scenarios: list[dict[str, Any]], folder: Path, timeout: float,
                        workers: int = 2) -> tuple[dict[str, Any], subprocess.CompletedProcess]:
    """Write each scenario to ``folder/<name>.json``, run ``python -m MODULE`` on them, return its report."""
    paths = []
    for d in scenarios:
        path = folder / f"{d['name']}.json"
        path.write_text(json.dumps(d))
        paths.append(str(path))
    out = folder / "report.json"
    proc = subprocess.run([sys.executable, "-m", module, *paths, "--workers", str(workers), "--out", str(out)],
                          capture_output=True, text=True, timeout=timeout)
    assert out.exists(), f"{module} wrote no report (exit {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(out.read_text()), proc
