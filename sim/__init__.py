"""The SimPy cluster simulator: the protocol of spec section 2 with time and a cost model.

What it holds: ``backend.SimBackend`` (the simulator behind the backend
interface of ``reference.protocol.backend``: a scenario in, a ``RunResult`` out),
``simulate`` (a whole ``Simulation``, for experiments that need its trace,
checkpoint or simulated end time), and ``load_profile`` / ``shipped_profile``
(cost profiles, refusing a missing or negative parameter by name with
``ProfileError``; ``profiles/README.md`` documents them). The modules hold the
cluster's components (driver, executors, storage service), the step graph as
templates of the reference's, data and volume mode, faults at steps and
times, and the latency books.

What it may import: ``reference`` (the spec: scenario, graph, step effects,
faults, restarts, outcome), simpy and numpy. Never ``spark_impl`` or
``experiments``. Importing ``sim`` or ``sim.backend`` imports neither simpy nor
numpy, so a machine without them is told what is missing
(``SimBackend.unavailable``) instead of failing at import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cost_model import Profile, ProfileError, load_profile, shipped_profile
    from .simulation import Simulation, simulate

_EXPORTS = {"Profile": "cost_model", "ProfileError": "cost_model", "load_profile": "cost_model",
            "shipped_profile": "cost_model", "Simulation": "simulation", "simulate": "simulation"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """The public names, imported when first used (so ``sim.backend`` loads without simpy and numpy)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sim' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
