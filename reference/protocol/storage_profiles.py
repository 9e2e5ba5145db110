"""Named latency profiles of checkpoint storage: local disk, HDFS and a cloud object store.

The published Lightspeed runs wrote their checkpoints to a cloud object
store, where each log write costs tens of milliseconds; on a local disk the
same write costs about one. A profile gives the cost of each storage
operation the protocol uses (spec section 3), so that the simulator charges
it on its clock and the Spark engine's checkpoint storage sleeps it on the
wall clock (``spark_impl/engine/storage_latency.py``): the same named profile
on both, so their results can be compared.

An operation's latency is its base cost times a log-normal jitter factor of
shape ``jitter_sigma`` (median 1); a write of ``n`` bytes adds
``n / bandwidth``; an atomic create is a write plus a rename. The factor of
the n-th operation of a kind on a stream is a pure function of (stream, kind,
n) (``LatencyDraws``, below), computed alike by the simulator, the Spark
engine and the Java filesystem under native Spark's checkpoint.

Where the numbers come from (medians for one small file):

- ``local_disk``: an ext4 file on an SSD, written and fsync'd, then renamed;
  of the order of a millisecond for a small write and a fraction for
  metadata operations (the reference's ``LocalStorage`` measures about 1 ms
  per log write on the 2-core machine these experiments ran on).
- ``hdfs``: a create and close goes through the NameNode and a pipeline of
  three DataNodes (Shvachko et al., "The Hadoop Distributed File System",
  MSST 2010); renames, listings and deletes are one NameNode RPC each.
- ``object_store``: an S3-like store. Amazon's performance guidelines
  ("Best practices design patterns: optimizing Amazon S3 performance") give
  roughly 100-200 ms first-byte latency for small objects; a small PUT is of
  the same order; a listing is a paged request; a rename is a copy and a
  delete (Hadoop's S3A documentation: rename is not atomic and costs a copy).
  The numbers are deliberately at the low end: Databricks' checkpoint paths
  use the same stores with client-side optimisations the project cannot see.

These are modelled latencies, not measurements of a particular store; the
latency experiment fits the object-store profile to the published figures
and keeps both the first-principles profile below and the fitted one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


MAX_JITTER_SIGMA = 5.0        # a jitter factor within exp(+-42): beyond that a profile describes no storage


class StorageProfileError(ValueError):
    """A storage profile is unknown or malformed; ``parameter`` names the offending entry."""

    def __init__(self, parameter: str, message: str):
        super().__init__(f"storage profile {parameter}: {message}")
        self.parameter = parameter


@dataclass(frozen=True)
class StorageProfile:
    """Latency of each checkpoint-storage operation, in ms, and the bandwidth of large transfers."""

    small_write_ms: float      # create + close of a small file
    rename_ms: float           # the rename that makes a write atomic (object store: copy + delete)
    list_ms: float             # one directory listing
    delete_ms: float           # one file delete
    read_ms: float             # open + first byte of a read
    bandwidth_mb_per_s: float  # large transfers, reads and writes
    jitter_sigma: float        # log-normal shape of per-operation jitter (0: none)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                    or value < 0:
                raise StorageProfileError(name, f"expected a finite number >= 0, got {value!r}")
        if self.bandwidth_mb_per_s <= 0:
            raise StorageProfileError("bandwidth_mb_per_s", "must be > 0")
        if self.jitter_sigma > MAX_JITTER_SIGMA:
            raise StorageProfileError("jitter_sigma", f"must be at most {MAX_JITTER_SIGMA}, got {self.jitter_sigma}")

    def transfer_ms(self, size_bytes: float) -> float:
        return size_bytes / (self.bandwidth_mb_per_s * 1e6) * 1000.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


STORAGE_PROFILES: dict[str, StorageProfile] = {
    "local_disk": StorageProfile(small_write_ms=2.0, rename_ms=0.5, list_ms=0.5, delete_ms=0.3, read_ms=0.3,
                                 bandwidth_mb_per_s=500.0, jitter_sigma=0.1),
    "hdfs": StorageProfile(small_write_ms=10.0, rename_ms=5.0, list_ms=5.0, delete_ms=5.0, read_ms=5.0,
                           bandwidth_mb_per_s=200.0, jitter_sigma=0.2),
    "object_store": StorageProfile(small_write_ms=40.0, rename_ms=60.0, list_ms=80.0, delete_ms=30.0,
                                   read_ms=25.0, bandwidth_mb_per_s=100.0, jitter_sigma=0.3),
}
STORAGE_PROFILE_ALIASES = {"s3": "object_store"}


def storage_profile(name: str) -> StorageProfile:
    """The named profile; ``StorageProfileError`` naming the known ones for an unknown name."""
    key = STORAGE_PROFILE_ALIASES.get(name, name)
    if key not in STORAGE_PROFILES:
        raise StorageProfileError("name", f"unknown profile {name!r}; expected one of "
                                          f"{', '.join(STORAGE_PROFILES)}")
    return STORAGE_PROFILES[key]


def storage_profile_from_dict(raw: object, path: str = "storage") -> StorageProfile:
    """A profile given in full; ``StorageProfileError`` naming a missing, unknown or bad parameter."""
    if not isinstance(raw, dict):
        raise StorageProfileError(path, f"expected an object of parameters, got {raw!r}")
    names = list(StorageProfile.__dataclass_fields__)
    missing = [n for n in names if n not in raw]
    if missing:
        raise StorageProfileError(f"{path}.{missing[0]}", "required parameter is missing")
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise StorageProfileError(f"{path}.{unknown[0]}", "unknown parameter")
    return StorageProfile(**{n: raw[n] for n in names})


# ------------------------------------------------------------------ the seeded draws
#
# Every backend draws an operation's latency from one pure function of (stream, operation kind, sequence
# number): the simulator on its clock (sim/storage_service.py), the Spark engine's checkpoint storage on the
# wall clock (spark_impl/engine/storage_latency.py), and the Hadoop filesystem through which Spark's own
# Structured Streaming writes its checkpoint (spark_impl/native/java/lightspeed/checkpointfs/LatencyDraws.java,
# a line-by-line twin of this code). The function uses integer hashing and the four IEEE operations (plus an
# exact split by powers of two and the correctly rounded square root), which Python and Java compute to the
# same bits; tests/spark/test_native_checkpoint_fs.py runs both on the same test vector and requires equal numbers.
#
# - the uniform variate: FNV-1a 64 of the UTF-8 key "<stream>/<kind>/<n>", then SplitMix64's output
#   function (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014);
# - the normal variate: Acklam's rational approximation of the normal quantile (relative error below 1.2e-9);
# - the log-normal factor exp(sigma * z), with exp and log written out below (libm's may differ by an ulp
#   between languages).

OPERATION_KINDS = ("create", "rename", "read", "exists", "list", "delete")

_MASK64 = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_LN2 = 0.6931471805599453
_SQRT_HALF = 0.7071067811865476
_LOG_TERMS = 14
_EXP_TERMS = 18
_ACKLAM_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
             -3.066479806614716e+01, 2.506628277459239e+00)
_ACKLAM_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
             -1.328068155288572e+01)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
             4.374664141464968e+00, 2.938163982698783e+00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
_ACKLAM_LOW = 0.02425


def fnv1a64(data: bytes) -> int:
    """The 64-bit FNV-1a hash of ``data``."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK64
    return h


def splitmix64(state: int) -> int:
    """SplitMix64's next output from generator state ``state`` (the golden-gamma step, then the mix)."""
    z = (state + _GOLDEN_GAMMA) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def unit_uniform(key: str) -> float:
    """A uniform variate in (0, 1), a function of ``key`` alone: 52 bits of ``splitmix64(fnv1a64(key))``,
    centred in their cell (so never 0 or 1; the sum is exact in a double)."""
    bits = splitmix64(fnv1a64(key.encode("utf-8"))) >> 12
    return (bits + 0.5) * math.ldexp(1.0, -52)


def exact_log(x: float) -> float:
    """The natural logarithm of ``x > 0`` from an exact split ``x = m * 2**e`` and the series of
    ``2 atanh((m - 1) / (m + 1))`` (about 1e-16 relative), in the same operations as the Java twin."""
    m, e = math.frexp(x)
    if m < _SQRT_HALF:        # m in [sqrt(1/2), sqrt(2)): |t| <= 0.172, so the series converges fast
        m *= 2.0
        e -= 1
    t = (m - 1.0) / (m + 1.0)
    t2 = t * t
    s = 0.0
    for k in range(_LOG_TERMS - 1, -1, -1):
        s = s * t2 + 1.0 / (2 * k + 1)
    return 2.0 * t * s + e * _LN2


def exact_exp(x: float) -> float:
    """``e ** x`` from ``x = k ln 2 + r`` (``|r| <= 0.35``) and the Taylor series of ``e ** r`` (Horner), in the
    same operations as the Java twin."""
    k = math.floor(x / _LN2 + 0.5)
    r = x - k * _LN2
    s = 1.0
    for i in range(_EXP_TERMS, 0, -1):
        s = 1.0 + r * s / i
    return math.ldexp(s, k)


def normal_quantile(u: float) -> float:
    """The standard normal quantile of ``u`` in (0, 1) (P. J. Acklam's rational approximation)."""
    a, b, c, d = _ACKLAM_A, _ACKLAM_B, _ACKLAM_C, _ACKLAM_D
    if u < _ACKLAM_LOW or u > 1.0 - _ACKLAM_LOW:
        q = math.sqrt(-2.0 * exact_log(u if u < _ACKLAM_LOW else 1.0 - u))
        tail = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
        return tail if u < _ACKLAM_LOW else -tail
    q = u - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0)


def jitter_factor(sigma: float, key: str) -> float:
    """The log-normal jitter factor (median 1, shape ``sigma``) drawn for ``key``; 1 when ``sigma`` is 0."""
    if sigma <= 0:
        return 1.0
    return exact_exp(sigma * normal_quantile(unit_uniform(key)))


def draw_key(stream: str, kind: str, sequence: int) -> str:
    """The key of the ``sequence``-th operation of ``kind`` on ``stream`` (``"<seed>/<name>"``)."""
    return f"{stream}/{kind}/{sequence}"


def operation_ms(profile: StorageProfile, kind: str, size_bytes: int, factor: float) -> float:
    """One operation's latency: its base cost (with the transfer of ``size_bytes`` for a create or a read)
    times the jitter ``factor``. ``create`` is a file's create, write and close; ``exists`` a metadata
    request (getFileStatus); ``read`` an open and the transfer of the file."""
    p = profile
    if kind == "create":
        return (p.small_write_ms + p.transfer_ms(size_bytes)) * factor
    if kind == "read":
        return (p.read_ms + p.transfer_ms(size_bytes)) * factor
    base = {"rename": p.rename_ms, "exists": p.read_ms, "list": p.list_ms, "delete": p.delete_ms}.get(kind)
    if base is None:
        raise ValueError(f"unknown storage operation {kind!r}; expected one of {', '.join(OPERATION_KINDS)}")
    return base * factor


class LatencyDraws:
    """Seeded per-operation latencies of one profile on one stream of operations (``"<seed>/<name>"``).

    The n-th operation of each kind draws ``jitter_factor(sigma, draw_key(stream, kind, n))``: the same
    stream gives the same latencies, operation kind by operation kind, in every backend and language.
    """

    def __init__(self, profile: StorageProfile, stream: int | str):
        self.profile, self.stream = profile, str(stream)
        self.sequence = {kind: 0 for kind in OPERATION_KINDS}

    def draw(self, kind: str, size_bytes: int = 0) -> float:
        """The next operation of ``kind``'s latency, ms."""
        if kind not in self.sequence:
            raise ValueError(f"unknown storage operation {kind!r}; expected one of {', '.join(OPERATION_KINDS)}")
        n = self.sequence[kind]
        self.sequence[kind] = n + 1
        return operation_ms(self.profile, kind, size_bytes,
                            jitter_factor(self.profile.jitter_sigma, draw_key(self.stream, kind, n)))

    def write_ms(self, size_bytes: int) -> float:
        """An atomic create: the create of ``size_bytes`` and the rename that publishes it."""
        return self.draw("create", size_bytes) + self.draw("rename")

    def create_ms(self, size_bytes: int) -> float:
        return self.draw("create", size_bytes)

    def read_ms(self, size_bytes: int) -> float:
        return self.draw("read", size_bytes)

    def exists_ms(self) -> float:
        return self.draw("exists")

    def list_ms(self) -> float:
        return self.draw("list")

    def delete_ms(self) -> float:
        return self.draw("delete")

    def rename_ms(self) -> float:
        return self.draw("rename")
