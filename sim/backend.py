"""The simulator behind the backend interface (``reference.protocol.backend.Backend``, spec section 4).

``SimBackend().run(scenario, RunOptions(profile=..., sim_mode=...))`` returns a
``RunResult``: the typed outcome (with its timing block) and, in data mode,
the simulated checkpoint (a ``reference.protocol.storage.DurableStorage``) for the
oracles that read files. Volume mode writes no state files, so it gives no
checkpoint. Bad options are typed errors that name them, never a traceback
for the command line to show: a malformed cost profile raises
``cost_model.ProfileError`` naming the parameter, an unknown ``sim_mode``
raises ``simulation.SimModeError``; both are ``BackendError``s (and
``ValueError``s). A scenario larger than the mode can hold is refused before
anything is simulated, with the numbers (``reference.language.size``: data mode holds
every record, volume mode counts them). ``storage_profile`` replaces the cost profile's checkpoint
storage with a named ``reference.protocol.storage_profiles`` profile, the one the
Spark engine sleeps under the same name. Any other option is refused with
``OptionRefused``.
"""

from __future__ import annotations

import importlib.util

from reference.protocol.backend import RunOptions, RunResult, refuse_too_large, refuse_unknown_options
from reference.language.scenario import Scenario
from reference.language.size import MATERIALISED, VOLUME
from reference.protocol.storage import SnapshotReader

REQUIRED_PACKAGES = ("simpy", "numpy")


class SimBackend:
    """The SimPy cluster simulator: timed, with a cost profile; data mode (real records) or volume mode."""

    name = "sim"
    options: frozenset[str] = frozenset({"profile", "sim_mode", "storage_profile"})
    timed = True
    snapshot_formats: dict[str, SnapshotReader] = {}   # the simulator writes the reference's snapshots

    def unavailable(self) -> str | None:
        missing = [name for name in REQUIRED_PACKAGES if importlib.util.find_spec(name) is None]
        if missing:
            return f"the simulator needs {' and '.join(missing)} (pip install {' '.join(missing)})"
        return None

    def run(self, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
        """Simulate ``scenario`` to the end: the outcome, and the checkpoint in data mode (None in volume mode)."""
        refuse_unknown_options(self, options)
        refuse_too_large(self.name, scenario, VOLUME if options.sim_mode == "volume" else MATERIALISED)
        from .simulation import simulate   # simpy and numpy are imported only to run
        profile = options.profile
        if options.storage_profile is not None:   # the checkpoint storage of the engine's --storage-profile
            from .cost_model import resolve_profile, with_storage_profile
            profile = with_storage_profile(resolve_profile(profile), options.storage_profile)
        sim = simulate(scenario, profile, mode=options.sim_mode, trace_enabled=False)
        return RunResult(sim.outcome(), sim.storage if sim.mode == "data" else None)
