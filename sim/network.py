"""The network between driver and executors: a one-way message delay (spec section 2's task launch)."""

from __future__ import annotations


class Network:
    """Structure only: the delay a message between driver and an executor takes."""

    def __init__(self, rtt_ms: float):
        assert rtt_ms >= 0, "a round trip takes a non-negative time"
        self.rtt_ms = rtt_ms

    @property
    def one_way_ms(self) -> float:
        return self.rtt_ms / 2.0
