"""How busy the machine was while a unit ran: the CPU time other processes used, read from ``/proc``.

A wall-clock measurement (the Spark engine, native Spark) is only as good as
the machine was quiet. ``LoadMeter`` samples, about once a second and at
every ``mark``:

- the machine's busy CPU time, from the first line of ``/proc/stat``
  (user, nice, system, irq, softirq and steal; guest time is inside user);
- the CPU time of this process's tree: this process and every descendant
  (a JVM that pyspark started, its Python workers), from each one's
  ``/proc/<pid>/stat`` (``utime + stime + cutime + cstime``; a process is
  known by its pid and start time, so a reused pid is a new process).

Between two samples, the tree's share is the growth of every process seen in
both, plus the whole time of every process born in between; a process that
ended and was reaped by a parent inside the tree moves its time into that
parent's ``cutime``, so what it had shown at the last sample is taken off once.
(A process that ends and is reaped outside the tree loses its last partial
second: it counts as other processes' time, which errs towards noisy.)

What other processes used is the machine's busy time minus the tree's. A
unit is **noisy** when that exceeded ``NOISY_SHARE`` of the machine's CPU
capacity (wall time x cores) while it ran. Only wall-clock units are judged
(``judged_by_wall``): a simulator unit measures simulated time, which the
machine's load cannot change, so its load is recorded and never makes it noisy.
On a system without ``/proc`` nothing is recorded (``LoadMeter.available``).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOISY_SHARE = 0.05          # other processes used more than 5% of the machine's CPU (0.1 core of 2) while it ran
SAMPLE_S = 1.0              # how often the meter samples between marks
PROC = Path("/proc")
WALL_CLOCK_BACKENDS = ("spark", "spark-native")    # backends whose measurements are wall time
ProcKey = tuple[int, int]   # (pid, start time in clock ticks)


def judged_by_wall(backend: str) -> bool:
    """Whether a unit on ``backend`` measures wall time (then load can make it noisy)."""
    return backend in WALL_CLOCK_BACKENDS


@dataclass(frozen=True)
class Load:
    """The CPU time used while a unit ran: by this process tree (``own_cpu_s``) and by everything else
    (``other_cpu_s``), over ``wall_s`` seconds on ``cpus`` cores; ``judged`` when its backend measures wall
    time."""

    wall_s: float
    cpus: int
    own_cpu_s: float
    other_cpu_s: float
    judged: bool
    threshold: float = NOISY_SHARE

    @property
    def other_share(self) -> float:
        """The share of the machine's CPU capacity other processes used (0 to 1)."""
        capacity = self.wall_s * self.cpus
        return min(1.0, max(0.0, self.other_cpu_s / capacity)) if capacity > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.judged and self.other_share > self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": round(self.wall_s, 3), "cpus": self.cpus, "own_cpu_s": round(self.own_cpu_s, 3),
                "other_cpu_s": round(self.other_cpu_s, 3), "other_share": round(self.other_share, 4),
                "threshold": self.threshold, "judged": self.judged, "noisy": self.noisy}


@dataclass(frozen=True)
class Mark:
    """The meter's running totals at one moment (seconds of CPU since it started)."""

    at: float
    busy_s: float
    own_s: float


@dataclass(frozen=True)
class _Proc:
    ppid: int
    total: int      # utime + stime + cutime + cstime, clock ticks


def read_busy_ticks(proc: Path = PROC) -> int:
    """The machine's busy CPU time since boot, in clock ticks (``/proc/stat``'s first line)."""
    fields = (proc / "stat").read_text().splitlines()[0].split()
    assert fields[0] == "cpu", "the first line of /proc/stat sums every CPU"
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in (fields[1:9] + ["0"] * 8)[:8])
    return user + nice + system + irq + softirq + steal


def read_processes(proc: Path = PROC) -> dict[ProcKey, _Proc]:
    """Every process's parent and CPU total, by (pid, start time); processes that end while read are skipped."""
    out: dict[ProcKey, _Proc] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces or parentheses: the fields follow the last ')'
        rest = text[text.rindex(")") + 2:].split()
        # rest[0] is field 3 (state): ppid is field 4, utime..cstime fields 14-17, starttime field 22
        ppid, ticks, start = int(rest[1]), sum(int(v) for v in rest[11:15]), int(rest[19])
        out[(int(entry.name), start)] = _Proc(ppid, ticks)
    return out


def tree_of(root: int, processes: dict[ProcKey, _Proc]) -> dict[ProcKey, _Proc]:
    """``root`` and its descendants."""
    children: dict[int, list[ProcKey]] = {}
    for key, p in processes.items():
        children.setdefault(p.ppid, []).append(key)
    mine = {key: p for key, p in processes.items() if key[0] == root}
    stack = [root]
    while stack:
        for key in children.get(stack.pop(), []):
            if key not in mine:
                mine[key] = processes[key]
                stack.append(key[0])
    return mine


def tree_growth(before: dict[ProcKey, _Proc], after: dict[ProcKey, _Proc]) -> int:
    """The CPU ticks the tree used between two samples of it (see the module's note on ended processes)."""
    grown = sum(p.total - before[key].total if key in before else p.total for key, p in after.items())
    alive = {key[0] for key in after}
    reaped_inside = sum(p.total for key, p in before.items() if key not in after and p.ppid in alive)
    return grown - reaped_inside


class LoadMeter:
    """Samples the machine's and this process tree's CPU time in a background thread; ``mark()`` returns the
    running totals, and ``between`` two marks is the ``Load`` of what ran in between."""

    def __init__(self, root: int | None = None, proc: Path = PROC, sample_s: float = SAMPLE_S):
        self.root = root if root is not None else os.getpid()
        self.proc = proc
        self.sample_s = sample_s
        self.tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        self.cpus = os.cpu_count() or 1
        self.available = (proc / "stat").exists()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy0 = 0
        self._busy = 0
        self._own = 0
        self._tree: dict[ProcKey, _Proc] = {}

    def __enter__(self) -> "LoadMeter":
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if not self.available or self._thread is not None:
            return
        self._busy0 = self._busy = read_busy_ticks(self.proc)
        self._tree = tree_of(self.root, read_processes(self.proc))
        self._thread = threading.Thread(target=self._run, name="load meter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.sample_s):
            self._sample()

    def _sample(self) -> None:
        with self._lock:
            busy = read_busy_ticks(self.proc)
            tree = tree_of(self.root, read_processes(self.proc))
            self._own += tree_growth(self._tree, tree)
            self._busy, self._tree = busy, tree

    def mark(self) -> Mark | None:
        """The totals now (None when ``/proc`` cannot be read)."""
        if not self.available:
            return None
        if self._thread is None:
            self.start()
        self._sample()
        with self._lock:
            return Mark(time.monotonic(), (self._busy - self._busy0) * self.tick_s, self._own * self.tick_s)

    def between(self, start: Mark | None, end: Mark | None, judged: bool) -> Load | None:
        if start is None or end is None:
            return None
        own = end.own_s - start.own_s
        other = max(0.0, (end.busy_s - start.busy_s) - own)
        return Load(end.at - start.at, self.cpus, own, other, judged)
