"""The SimPy cluster simulator: the protocol of SPEC section 2 with time (see docs in each module).

Entry points: ``run_sim`` (scenario -> outcome dict, or ``(outcome, checkpoint
storage)`` with ``return_storage=True``), ``simulate`` (the whole simulation,
for its trace and storage), ``load_profile`` (a cost profile, refusing a
missing or negative parameter by name; ``profiles/README.md`` documents them).
"""

from .cost_model import Profile, ProfileError, load_profile, shipped_profile
from .simulation import Simulation, run_sim, simulate

__all__ = ["Profile", "ProfileError", "Simulation", "load_profile", "run_sim", "shipped_profile", "simulate"]
