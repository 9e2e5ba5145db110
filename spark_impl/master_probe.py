"""Is a ``spark://`` URL a standalone master that can run an application now? Asked in seconds, before Spark waits.

Left to itself, a SparkContext on a standalone master waits a long time when
the master is wrong: ``StandaloneAppClient`` tries to register three times,
20 s apart, then gives up with "All masters are unresponsive!" (its constants
``REGISTRATION_TIMEOUT_SECONDS`` and ``REGISTRATION_RETRIES``), printing a
Java stack trace per try; and an application registered with a master that has
no worker with a free core waits for ever (Spark only logs "Initial job has
not accepted any resources", which the project's log level hides). So before a
session starts on a ``spark://`` URL:

1. ``check_reachable``: each ``host:port`` of the URL must accept a TCP
   connection within ``CONNECT_TIMEOUT_S`` (no JVM needed);
2. ``probe`` (in the driver's JVM, through py4j): a client-mode RPC
   environment looks up the endpoint ``Master`` there and asks it for its
   bound ports (``BoundPortsRequest``), each within ``PROBE_TIMEOUT_S``. An
   RPC server without that endpoint (a worker's port) or a server that does
   not speak Spark's RPC (the master's web UI port) is "not a Spark master".
   The master's state is then read from its web UI (``/json/``): the state
   the master sends over RPC (``RequestMasterState``) is no use here, as a
   ``WorkerInfo``'s state and used cores are transient fields, reset to
   ALIVE and 0 when deserialized;
3. ``MasterState.problem``: a master with no alive worker, or none with a free
   core and the executor's memory free, is named with what holds the cores.
   A master whose web UI cannot be read is not judged here; the session's
   wait for its first executor is the last word.

Each failure is ``MasterUnusable`` with one sentence; the Java exception goes
to the driver's log, never to the screen.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from dataclasses import dataclass
from typing import Any

CONNECT_TIMEOUT_S = 3.0     # a master on a reachable host accepts a connection at once
PROBE_TIMEOUT_S = 10.0      # the RPC lookup and ask; a live master answers in well under a second
DEFAULT_EXECUTOR_MEMORY_MB = 1024   # spark.executor.memory's default, 1g
MASTER_ENDPOINT = "Master"  # the master's RPC endpoint name (Master.ENDPOINT_NAME)
STATUS_HINT = "`lightspeed cluster status` prints a running cluster's URL"


class MasterUnusable(RuntimeError):
    """The URL names no standalone master, or one that cannot start an executor for this application now."""


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def master_addresses(url: str) -> list[Address]:
    """The ``host:port`` pairs of ``spark://h1:p1[,h2:p2...]`` (several for masters with a standby)."""
    if not url.startswith("spark://"):
        raise ValueError(f"{url!r} is not a standalone master URL (spark://HOST:PORT)")
    out = []
    for part in url[len("spark://"):].split(","):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{url!r}: {part!r} is not HOST:PORT")
        out.append(Address(host, int(port)))
    return out


def _connect_failure(exc: OSError, timeout_s: float) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens on that port)"
    if isinstance(exc, socket.timeout):
        return f"no answer within {timeout_s:.0f} s"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    return exc.strerror or type(exc).__name__


def check_reachable(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """``MasterUnusable`` unless some ``host:port`` of ``url`` accepts a TCP connection."""
    failed = []
    for address in master_addresses(url):
        try:
            with socket.create_connection((address.host, address.port), timeout=timeout_s):
                return
        except OSError as exc:
            failed.append(f"{address}: {_connect_failure(exc, timeout_s)}")
    raise MasterUnusable(f"no Spark master answers at {url} ({'; '.join(failed)}); {STATUS_HINT}")


@dataclass(frozen=True)
class Worker:
    id: str
    host: str
    state: str
    cores: int
    cores_free: int
    memory_free_mb: int


@dataclass(frozen=True)
class App:
    id: str
    name: str
    cores: int


@dataclass(frozen=True)
class MasterState:
    url: str
    status: str                 # ALIVE, STANDBY, RECOVERING, ...
    workers: tuple[Worker, ...]
    apps: tuple[App, ...]       # the running applications

    def alive(self) -> list[Worker]:
        return [w for w in self.workers if w.state == "ALIVE"]

    def problem(self, executor_memory_mb: int = DEFAULT_EXECUTOR_MEMORY_MB) -> str | None:
        """Why the master cannot start an executor for a new application now; None when it can."""
        alive = self.alive()
        if not alive:
            seen = f" ({len(self.workers)} registered, none alive)" if self.workers else ""
            return (f"the master at {self.url} has no workers{seen}, so no executor would ever start: start "
                    "workers (`lightspeed cluster start` starts a master with workers)")
        if not any(w.cores_free >= 1 for w in alive):
            holders = ", ".join(f"{a.name} ({a.id}, {a.cores} cores)" for a in self.apps) or "no application"
            return (f"the master at {self.url} has no free core: its {len(alive)} worker(s) have "
                    f"{sum(w.cores for w in alive)} cores, all taken by running applications: {holders}")
        if not any(w.cores_free >= 1 and w.memory_free_mb >= executor_memory_mb for w in alive):
            most = max(w.memory_free_mb for w in alive if w.cores_free >= 1)
            return (f"no worker of the master at {self.url} with a free core has {executor_memory_mb} MB free for an "
                    f"executor (spark.executor.memory); the most free is {most} MB")
        return None


def memory_mb(text: str) -> int:
    """Spark's memory string (``512m``, ``1g``, ``2048``: MB without a unit) in MB."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", text.lower())
    if m is None:
        raise ValueError(f"{text!r} is not a memory size such as 512m or 1g")
    value, unit = int(m.group(1)), m.group(2) or "m"
    return {"k": value // 1024, "m": value, "g": value * 1024, "t": value * 1024 * 1024}[unit]


def probe(jvm: Any, url: str, timeout_s: float = PROBE_TIMEOUT_S) -> MasterState | None:
    """The state of the first master of ``url`` that answers as an alive master (None when it answers but its web
    UI cannot be read); ``MasterUnusable`` saying what each address is otherwise. ``jvm`` is a py4j gateway's
    ``jvm`` (the driver's, before its SparkContext)."""
    failed = []
    for address in master_addresses(url):
        try:
            state = _probe_one(jvm, url, address, timeout_s)
        except _NotAMaster as exc:
            failed.append(f"{address} {exc}")
            continue
        if state is None or state.status == "ALIVE":
            return state
        failed.append(f"{address} is a master in state {state.status}, not ALIVE")
    raise MasterUnusable(f"{url} is not a usable Spark master: {'; '.join(failed)}; {STATUS_HINT}")


class _NotAMaster(Exception):
    pass


def _static(jvm: Any, scala_object: str) -> Any:
    """A Scala ``object``'s instance (``Name$.MODULE$``) through py4j."""
    package, _, name = scala_object.rpartition(".")
    holder: Any = jvm
    for part in package.split("."):
        holder = getattr(holder, part)
    return getattr(getattr(holder, name + "$"), "MODULE$")


def _probe_one(jvm: Any, url: str, address: Address, timeout_s: float) -> MasterState | None:
    """The master's state, None when its web UI cannot be read; ``_NotAMaster`` when no master answers."""
    from py4j.protocol import Py4JJavaError
    conf = jvm.org.apache.spark.SparkConf(False)
    conf.set("spark.rpc.lookupTimeout", f"{timeout_s:.0f}s")
    conf.set("spark.rpc.askTimeout", f"{timeout_s:.0f}s")
    security_cls = jvm.org.apache.spark.SecurityManager
    security = security_cls(conf, getattr(security_cls, "$lessinit$greater$default$2")(),
                            getattr(security_cls, "$lessinit$greater$default$3")())
    env = _static(jvm, "org.apache.spark.rpc.RpcEnv").create("lightspeedMasterProbe", "127.0.0.1", 0, conf,
                                                             security, True)
    try:
        ref = env.setupEndpointRef(jvm.org.apache.spark.rpc.RpcAddress(address.host, address.port),
                                   MASTER_ENDPOINT)
        ask = _static(jvm, "org.apache.spark.deploy.master.MasterMessages.BoundPortsRequest")
        timeout = _static(jvm, "org.apache.spark.rpc.RpcTimeout").apply(conf, "spark.rpc.askTimeout")
        ui_port = int(ref.askSync(ask, timeout, jvm.scala.reflect.ClassTag.Any()).webUIPort())
    except Py4JJavaError as exc:
        raise _NotAMaster(_why_not(exc.java_exception, timeout_s)) from None
    finally:
        env.shutdown()
    try:
        with urllib.request.urlopen(f"http://{address.host}:{ui_port}/json/", timeout=timeout_s) as resp:
            return master_state(url, json.loads(resp.read()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def master_state(url: str, page: dict[str, Any]) -> MasterState:
    """A master's state from its web UI's ``/json/`` page."""
    workers = tuple(Worker(str(w["id"]), str(w["host"]), str(w["state"]), int(w["cores"]), int(w["coresfree"]),
                           int(w["memoryfree"])) for w in page.get("workers", []))
    apps = tuple(App(str(a["id"]), str(a["name"]), int(a["cores"])) for a in page.get("activeapps", []))
    return MasterState(url, str(page.get("status", "")), workers, apps)


def _why_not(java_exception: Any, timeout_s: float) -> str:
    """What the chain of causes of a failed lookup says the address is."""
    names: list[str] = []
    messages: list[str] = []
    cause = java_exception
    while cause is not None and len(names) < 20:
        names.append(str(cause.getClass().getName()))
        messages.append(str(cause.getMessage() or ""))
        cause = cause.getCause()
    text = " ".join(names + messages)
    if "RpcEndpointNotFoundException" in text:
        return "runs Spark's RPC without a master (a worker's port?)"
    if "ConnectException" in text or "Failed to connect" in text:
        return "refused the connection"
    if "Timeout" in text:
        return f"did not answer in Spark's RPC protocol within {timeout_s:.0f} s (not a master's port?)"
    return "does not speak Spark's RPC protocol (the master's web UI port? another service?)"
