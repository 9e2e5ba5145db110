"""Cost profile documents for the simulator's points: a shipped profile or a file, with changes applied.

A sim point carries its whole profile document (not a name), so a results
file alone reproduces it. The document is validated by the simulator's own
rules, so a typo is a ``ProfileError`` naming the parameter.
"""

from __future__ import annotations

import json
import os
from typing import Any

from experiments.experiment import ExperimentError
from experiments.input_files import read_json


def sim_profile(name_or_doc: str | dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A cost profile document (a shipped name, a path, or a dict) with ``changes`` applied.

    ``changes`` may name a storage parameter as ``storage__small_write_ms``.
    """
    from sim.cost_model import STORAGE_PRESETS, profile_from_dict, shipped_profile_path
    if isinstance(name_or_doc, dict):
        doc = json.loads(json.dumps(name_or_doc))
    else:
        path = name_or_doc if os.path.exists(name_or_doc) else shipped_profile_path(name_or_doc)
        if path is None:
            raise ExperimentError(f"cost profile {name_or_doc[:200]!r}: no such shipped profile or file")
        doc = read_json(path, "a cost profile JSON file")
        if not isinstance(doc, dict):
            raise ExperimentError(f"cost profile {name_or_doc[:200]!r}: not a JSON object of parameters")
    if isinstance(doc.get("storage"), str):
        doc["storage"] = dict(STORAGE_PRESETS[doc["storage"]])
    for key, value in changes.items():
        if key.startswith("storage__"):
            doc["storage"][key[len("storage__"):]] = value
        else:
            doc[key] = value
    profile_from_dict(doc)  # refuses a bad parameter by name
    return doc
