"""The simulator's one source of randomness: a seeded numpy generator, drawn from in blocks.

Every random quantity of a run (straggler factors, storage jitter) comes from
one ``Draws`` over ``numpy.random.default_rng(seed)``. Draws are taken in
blocks of ``BLOCK`` values with numpy's vectorised samplers and handed out one
at a time, which is much cheaper than one call into numpy per draw. Uniform
and normal values come from two separate blocks of the same generator; the
order in which the run asks for them is deterministic, so a seed still gives
byte-identical runs.
"""

from __future__ import annotations

import math

import numpy as np

BLOCK = 4096


class Draws:
    """Uniform and standard-normal variates from one seeded generator, in blocks."""

    __slots__ = ("generator", "_uniform", "_u", "_normal", "_n")

    def __init__(self, generator: np.random.Generator):
        self.generator = generator
        self._uniform: list[float] = []
        self._u = 0
        self._normal: list[float] = []
        self._n = 0

    def random(self) -> float:
        """A uniform variate on [0, 1) (the ``numpy.random.Generator.random`` signature)."""
        if self._u == len(self._uniform):
            self._uniform, self._u = self.generator.random(BLOCK).tolist(), 0
        value = self._uniform[self._u]
        self._u += 1
        return value

    def standard_normal(self) -> float:
        if self._n == len(self._normal):
            self._normal, self._n = self.generator.standard_normal(BLOCK).tolist(), 0
        value = self._normal[self._n]
        self._n += 1
        return value

    def lognormal(self, mean: float, sigma: float) -> float:
        """A log-normal variate: ``exp(mean + sigma * Z)`` with ``Z`` standard normal."""
        return math.exp(mean + sigma * self.standard_normal())
