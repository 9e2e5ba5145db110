"""Rules every checkpoint obeys at every instant (SPEC sections 2 and 3), whatever crashed when.

They are checked on every crash checkpoint the explorer reaches (before
recovery reads it) and on every backend's final checkpoint:

- ``commit_order``: commit entries are written in batch order. Under sync
  progress every batch from the oldest retained commit entry up to the latest
  one has its entry: a gap means a later entry was written before an earlier
  one. (Async progress writes commit entries only for persisted offsets, so
  its logs have gaps by design; the rule does not apply there.)
- ``commit_has_offsets``: no commit entry without its offset entry (purge cuts
  both logs at one threshold).
- ``watermark_monotone``: the watermark in the commit log never decreases.
- ``lineage_reachable``: every version named by the last
  ``min_batches_to_retain`` commit entries is on the committed lineage chain
  walked down from the latest commit entry, with the same uid.

``violations`` returns each broken rule as ``(rule, message)``; an unreadable
log entry is itself a violation naming the file.
"""

from __future__ import annotations

from . import layout
from .logs import CommitEntry, log_batches
from .retained import committed_chain
from .scenario import Scenario
from .storage import CheckpointFormatError, Storage

RULES = ("commit_order", "commit_has_offsets", "watermark_monotone", "lineage_reachable")


def violations(storage: Storage, scenario: Scenario) -> list[tuple[str, str]]:
    offsets = log_batches(storage, layout.OFFSETS)
    commits = log_batches(storage, layout.COMMITS)
    out: list[tuple[str, str]] = []
    if scenario.engine.progress_mode == "sync" and commits:
        missing = sorted(set(range(commits[0], commits[-1] + 1)) - set(commits))
        if missing:
            out.append(("commit_order", f"{layout.commit_path(missing[0])} is missing while "
                                        f"{layout.commit_path(commits[-1])} exists: commit entries were written "
                                        "out of batch order"))
    orphans = [b for b in commits if b not in offsets]
    if orphans:
        out.append(("commit_has_offsets", f"{layout.commit_path(orphans[0])} exists without "
                                          f"{layout.offset_path(orphans[0])}"))
    entries = []
    for b in commits:
        try:
            entries.append(CommitEntry.read(storage, b))
        except CheckpointFormatError as exc:
            out.append(("commit_has_offsets", str(exc)))
            return out
    for before, after in zip(entries, entries[1:]):
        if after.watermark_ms < before.watermark_ms:
            out.append(("watermark_monotone", f"{layout.commit_path(after.batch)} holds watermark "
                                              f"{after.watermark_ms} after {before.watermark_ms} in "
                                              f"{layout.commit_path(before.batch)}"))
            break
    out += _unreachable(storage, scenario, entries)
    return out


def _unreachable(storage: Storage, scenario: Scenario, entries: list[CommitEntry]) -> list[tuple[str, str]]:
    if not entries:
        return []
    latest = entries[-1]
    recent = entries[-scenario.engine.min_batches_to_retain:]
    for sid, per_part in latest.state_lineage.items():
        for p_text, uid in per_part.items():
            chain = {link.version: link.uid for link in committed_chain(storage, sid, int(p_text),
                                                                        latest.batch + 1, uid)}
            for entry in recent:
                want = entry.state_lineage.get(sid, {}).get(p_text)
                version = entry.batch + 1
                if want is not None and chain.get(version) != want:
                    found = chain.get(version)
                    what = f"lineage id {found!r}" if found else "no file on the chain"
                    return [("lineage_reachable", f"{layout.store_dir(sid, int(p_text))}: version {version} "
                                                  f"({layout.commit_path(entry.batch)} names {want!r}) has {what}")]
    return []
