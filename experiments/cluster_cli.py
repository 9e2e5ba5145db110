"""``lightspeed cluster``: a Spark standalone cluster on this machine that stays up between commands.

    lightspeed cluster start [--workers N] [--cores C] [--memory M] [--dir DIR] [--host HOST] [--port P]
                             [--join spark://HOST:PORT]
    lightspeed cluster status [--dir DIR]
    lightspeed cluster stop [--dir DIR]

The daemons, their state and logs are ``spark_impl.cluster``'s; this module
only parses, prints and picks the exit code: ``start`` 0 when the master and
every worker are up, 2 for a bad option or a folder that is not free, 3 when
Java is missing or a daemon did not start; ``status`` 0 when everything runs,
3 otherwise; ``stop`` 0 once nothing runs (also when nothing ran), 2 for a
folder that holds something else.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from experiments import exit_codes

DEFAULT_WORKERS = 2


def add_cluster_parser(subparsers: Any, formatter: type[argparse.HelpFormatter]) -> argparse.ArgumentParser:
    """Register ``lightspeed cluster`` on the command line's subparsers; returns the subparser."""
    from spark_impl.cluster import STOP_GRACE_S, default_dir
    where = default_dir(os.environ)
    p = subparsers.add_parser(
        "cluster", help="start, show or stop a Spark standalone cluster on this machine",
        formatter_class=formatter,
        description="A Spark standalone cluster on this machine (a master and one-core workers) that stays up\n"
                    "between commands: `start` prints its spark:// URL for --master, `status` says what runs,\n"
                    f"`stop` ends the daemons (SIGTERM, then SIGKILL after {STOP_GRACE_S:.0f} s) and removes its "
                    f"folder.\nIts state and logs live in one folder, by default {where}.\n\n"
                    f"exit codes: {exit_codes.OK} done (status: everything runs); {exit_codes.BAD_INPUT} bad "
                    f"option or a folder that is not the cluster's;\n{exit_codes.UNAVAILABLE} no Java, a daemon "
                    "did not start, or (status) no cluster runs")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION", help="start, status or stop")
    start = sub.add_parser("start", help="start a master and workers and leave them running",
                           formatter_class=formatter)
    start.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="workers to start (one executor each)")
    start.add_argument("--cores", type=int, default=1, help="cores each worker offers")
    start.add_argument("--memory", default="1g", help="memory each worker offers (an executor takes 1g)")
    start.add_argument("--host", default="127.0.0.1",
                       help="the address the daemons bind to and advertise; an address other machines reach lets "
                            "their workers join (README, Several machines)")
    start.add_argument("--port", type=int, default=0, help="the master's port (0: a free one)")
    start.add_argument("--webui-port", type=int, default=0, help="the master's web UI port (0: a free one)")
    start.add_argument("--join", default="", metavar="URL",
                       help="start no master: only workers, for the master at spark://HOST:PORT (on another machine; "
                            "give --host this machine's address)")
    for action in (start, sub.add_parser("status", help="say what runs", formatter_class=formatter),
                   sub.add_parser("stop", help="stop the daemons and remove the cluster's folder",
                                  formatter_class=formatter)):
        action.add_argument("--dir", default=str(where), help="the cluster's folder")
    p.set_defaults(fn=cmd_cluster)
    return p


def cmd_cluster(args: argparse.Namespace) -> int:
    from spark_impl.cluster import ClusterDown, ClusterError, Cluster, start_cluster, stop_cluster
    from spark_impl.master_probe import memory_mb
    from spark_impl.session import SparkUnavailable
    folder = Path(args.dir).expanduser().absolute()
    try:
        if args.action == "start":
            for name in ("workers", "cores", "port", "webui_port"):
                value, least = getattr(args, name), (1 if name == "cores" else 0)
                if value < least or (name.endswith("port") and value > 65535):
                    print(f"error: --{name.replace('_', '-')} {value}: expected "
                          + ("a port, 0 to 65535" if name.endswith("port") else f"at least {least}"), file=sys.stderr)
                    return exit_codes.BAD_INPUT
            try:
                memory_mb(args.memory)
            except ValueError as exc:
                print(f"error: --memory {exc}", file=sys.stderr)
                return exit_codes.BAD_INPUT
            what = f"{args.workers} worker(s) for {args.join}" if args.join else \
                f"a master and {args.workers} worker(s)"
            print(f"starting {what} in {folder} ...", file=sys.stderr, flush=True)
            cluster = start_cluster(folder, args.workers, args.cores, args.memory, host=args.host, port=args.port,
                                    ui_port=args.webui_port, environ=os.environ, join=args.join)
            print(cluster.url)
            if not args.join:
                print(f"master web UI: {cluster.ui_url}", file=sys.stderr)
            print(f"logs: {folder / 'logs'} (executors': {folder}/worker-N/)", file=sys.stderr)
            print(f"use it with --master {cluster.url}; stop it with: lightspeed cluster stop"
                  + ("" if args.dir == _default() else f" --dir {folder}"), file=sys.stderr)
            return exit_codes.OK
        if args.action == "status":
            up, lines = Cluster.load(folder).describe()
            print(f"cluster in {folder}: " + ("running" if up else "NOT all running"))
            print("\n".join(lines))
            return exit_codes.OK if up else exit_codes.UNAVAILABLE
        print("\n".join(stop_cluster(folder)))
        return exit_codes.OK
    except ClusterDown as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.UNAVAILABLE
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except SparkUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.UNAVAILABLE


def _default() -> str:
    from spark_impl.cluster import default_dir
    return str(default_dir(os.environ))
