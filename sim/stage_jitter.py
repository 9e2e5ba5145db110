"""A stage's storage jitter, drawn for all its partitions at once: ``reference.protocol.storage_profiles.jitter_factor`` in numpy.

Volume mode draws one jitter factor per partition and task step of a batch
(``StorageService.jitter_base``: the shared draw function over the keys
``stage/<base>/<i>``). The scalar function hashes each key in pure Python,
which was a quarter of a cluster-scale run. This is its twin over an array of
partitions, in the same operations on the same IEEE doubles (the hash in
wrapping 64-bit integers; ``frexp``, ``ldexp``, ``floor``, ``sqrt``, ``+ - * /``
are exact or correctly rounded in both), so it gives the same bits:
``tests/slow/test_sim_volume_stage.py`` checks it against the scalar function.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from reference.protocol.storage_profiles import (
    _ACKLAM_A,
    _ACKLAM_B,
    _ACKLAM_C,
    _ACKLAM_D,
    _ACKLAM_LOW,
    _EXP_TERMS,
    _FNV_PRIME,
    _GOLDEN_GAMMA,
    _LN2,
    _LOG_TERMS,
    _SQRT_HALF,
    fnv1a64,
)

_ZERO = ord("0")


def stage_jitter(sigma: float, base: int, count: int) -> np.ndarray:
    """``[jitter_factor(sigma, f"stage/{base}/{i}") for i in range(count)]``, computed as an array."""
    return stage_jitters(sigma, [base], count)[0]


def stage_jitters(sigma: float, bases: list[int | None], count: int) -> list[np.ndarray]:
    """``stage_jitter`` of each base (None: no jitter, all 1.0), computed in one pass over all of them."""
    drawn = [base for base in bases if base is not None]
    if sigma <= 0 or not drawn:
        return [np.ones(count) for _ in bases]
    keys = _key_hashes([f"stage/{base}/".encode("utf-8") for base in drawn], count)
    factors = iter(_exact_exp(sigma * _normal_quantile(_unit_uniform(keys.ravel()))).reshape(keys.shape))
    return [np.ones(count) if base is None else next(factors) for base in bases]


def _key_hashes(prefixes: list[bytes], count: int) -> np.ndarray:
    """FNV-1a of ``prefix + str(i)`` for each prefix (a row) and ``i < count`` (a column): the prefix's state,
    then each decimal digit of ``i``."""
    out = np.empty((len(prefixes), count), dtype=np.uint64)
    starts = np.array([fnv1a64(prefix) for prefix in prefixes], dtype=np.uint64)[:, None]
    prime = np.uint64(_FNV_PRIME)
    for lo, hi, digits in _decimal_digits(count):
        h = np.repeat(starts, hi - lo, axis=1)
        for digit in digits:   # most significant first
            h ^= digit
            h *= prime   # uint64 arithmetic wraps modulo 2**64
        out[:, lo:hi] = h
    return out


@lru_cache(maxsize=16)
def _decimal_digits(count: int) -> tuple[tuple[int, int, tuple[np.ndarray, ...]], ...]:
    """The numbers below ``count`` grouped by their number of digits: ``(lo, hi, digits)``, where ``digits``
    holds the ASCII code of each digit position of ``lo..hi-1``, most significant first."""
    out = []
    lo, width = 0, 1
    while lo < count:
        hi = min(count, 10 ** width)
        numbers = np.arange(lo, hi, dtype=np.int64)
        digits = tuple(((numbers // 10 ** position) % 10 + _ZERO).astype(np.uint64)
                       for position in range(width - 1, -1, -1))
        out.append((lo, hi, digits))
        lo, width = hi, width + 1
    return tuple(out)


def _unit_uniform(h: np.ndarray) -> np.ndarray:
    z = h + np.uint64(_GOLDEN_GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    bits = (z ^ (z >> np.uint64(31))) >> np.uint64(12)
    return (bits.astype(np.float64) + 0.5) * np.ldexp(1.0, -52)


def _exact_log(x: np.ndarray) -> np.ndarray:
    m, e = np.frexp(x)
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)
    e = np.where(low, e - 1, e)
    t = (m - 1.0) / (m + 1.0)
    t2 = t * t
    s = np.zeros_like(t)
    for k in range(_LOG_TERMS - 1, -1, -1):   # s = s * t2 + 1 / (2k + 1), in place
        s *= t2
        s += 1.0 / (2 * k + 1)
    return 2.0 * t * s + e.astype(np.float64) * _LN2


def _exact_exp(x: np.ndarray) -> np.ndarray:
    k = np.floor(x / _LN2 + 0.5)
    r = x - k * _LN2
    s = np.ones_like(x)
    for i in range(_EXP_TERMS, 0, -1):   # s = 1 + r * s / i, in place
        s *= r
        s /= i
        s += 1.0
    return np.ldexp(s, k.astype(np.int64))


def _normal_quantile(u: np.ndarray) -> np.ndarray:
    """Acklam's approximation as the scalar function computes it: the tails (a few per cent of the partitions)
    on their own elements, the central region on all."""
    out = _horner(u - 0.5, u - 0.5, _ACKLAM_A, _ACKLAM_B, central=True)
    lower, upper = u < _ACKLAM_LOW, u > 1.0 - _ACKLAM_LOW
    tails = np.flatnonzero(lower | upper)
    if len(tails):
        t = u[tails]
        low = lower[tails]
        q = np.sqrt(-2.0 * _exact_log(np.where(low, t, 1.0 - t)))
        tail = _horner(q, q, _ACKLAM_C, _ACKLAM_D + (1.0,), central=False)
        out[tails] = np.where(low, tail, -tail)
    return out


def _horner(x: np.ndarray, q: np.ndarray, numerator: tuple[float, ...], denominator: tuple[float, ...],
            central: bool) -> np.ndarray:
    """``n(x) / d(x)`` (``n(x) * q / d(x)`` when ``central``, with ``x = q * q``) for polynomials given by their
    coefficients from the highest power, in Horner's form, in place, in the scalar function's operations."""
    if central:
        x = q * q
    top = _polynomial(x, numerator)
    if central:
        top *= q
    bottom = _polynomial(x, denominator if not central else denominator + (1.0,))
    top /= bottom
    return top


def _polynomial(x: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """``((c0 * x + c1) * x + ...) * x + cn``, each operation in turn."""
    acc = x * coefficients[0]
    for c in coefficients[1:-1]:
        acc += c
        acc *= x
    acc += coefficients[-1]
    return acc
