"""The state stores' maintenance pool (spark_impl/state_store/maintenance.py)."""

from __future__ import annotations

import threading

from spark_impl.state_store import MaintenancePool


class _Instant:
    """A store whose maintenance round is over before the pool has even registered it."""

    def __init__(self) -> None:
        self.rounds = 0

    def do_maintenance(self) -> None:
        self.rounds += 1


def test_a_round_that_finishes_at_once_does_not_deadlock_the_submitter():
    pool = MaintenancePool(threads=1)
    store = _Instant()

    def submit_many() -> None:
        for _ in range(2000):
            future = pool.submit(store)
            if future is not None:
                future.result()

    worker = threading.Thread(target=submit_many, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "submit() hung: the done-callback ran under the pool's lock"
    assert store.rounds >= 1
