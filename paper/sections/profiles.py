"""The storage latencies of the simulator's two shipped cost profiles, as the results files recorded them (the
cluster profile from the offset-management run, the local one from the fault matrix), and the cluster's shape."""

from __future__ import annotations

from experiments.section_content import Row, Table, Writeup

PARAMETERS = (("small_write_ms", "ms1", "small write"), ("rename_ms", "ms1", "rename"), ("list_ms", "ms1", "listing"),
              ("delete_ms", "ms1", "delete"), ("read_ms", "ms1", "read"),
              ("bandwidth_mb_per_s", "int", "bandwidth (MB/s)"), ("jitter_sigma", "num1", "jitter (log-normal shape)"))
SOURCES = (("lightspeed_cluster", "offset-management"), ("local_spark", "fault-matrix"))
CAPTION = ("Storage latencies of the simulator's two shipped profiles, as the results files recorded them (the "
           "cluster profile from the offset-management run, the local one from the fault matrix).")


def write(w: Writeup) -> None:
    rows: list[Row] = []
    runs = []
    located = {}
    for profile, experiment in SOURCES:
        run = w.run(experiment, "sim")
        index = None if run is None else next((i for i, r in enumerate(run.doc["points"])
                                               if (r["point"].get("profile") or {}).get("name") == profile), None)
        located[profile] = (run, index)
        if run is not None:
            runs.append(run)
    for parameter, spec, label in PARAMETERS:
        row = [label]
        for profile, (run, index) in located.items():
            name = f"profile_{profile}_{parameter}"
            row.append(w.v.absent(name) if run is None or index is None else
                       w.v.of(run, name, ["points", index, "point", "profile", "storage", parameter], spec))
        rows.append(row)
    w.table("profiles", Table(["Storage operation", "lightspeed_cluster", "local_spark"], rows), label="tab-profiles",
            caption=CAPTION, runs=runs)
    run, index = located["lightspeed_cluster"]
    for name, path, spec in (("cluster_executors", ["executors"], "int"), ("cluster_cores", ["cores_per_executor"], "int")):
        if run is None or index is None:
            w.v.absent(name)
        else:
            w.v.of(run, name, ["points", index, "point", "profile", *path], spec)
