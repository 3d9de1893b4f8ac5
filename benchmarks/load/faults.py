"""The fault-injection scenarios of tests/service/eventlog/test_faults.py, with more events,
printing the table of benchmarks/RESULTS.md ("Faults") and the machine it ran on.

Each scenario runs the split deployment as real processes on 127.0.0.1 (its own redis-server
with appendonly, ``appendfsync always`` where it is killed, an API replica under uvicorn, one or two
``python -m service learner``), injects its fault under load and checks what was acknowledged
against the log and the model against the fold of the joined stream (see the test module's
docstring for the checks).

    python -m benchmarks.load.faults                          # every scenario, 40 events per phase
    python -m benchmarks.load.faults --events 10 --only lost-replies redis-killed
    python -m benchmarks.load.faults --cluster                # the cluster scenarios (3 primaries,
                                                              # a replica each, replica acks 1)

The exit status is 1 if any scenario found a problem (listed in its notes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from tests.service.eventlog.test_faults import (
    CLUSTER_SCENARIOS,
    SCENARIOS,
    Row,
    run_scenario,
    table,
)


def machine() -> str:
    """``nproc``, Python and redis-server versions, load average."""
    redis_version = subprocess.run(
        [shutil.which("redis-server") or "redis-server", "--version"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"nproc {os.cpu_count()}; Python {platform.python_version()}; {redis_version}; "
            f"load average before the run {load}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40,
                        help="acknowledged decisions per phase of a scenario (the tests use 10)")
    parser.add_argument("--only", nargs="+", choices=sorted({*SCENARIOS, *CLUSTER_SCENARIOS}))
    parser.add_argument("--cluster", action="store_true",
                        help="run the cluster scenarios on a Redis Cluster of three primaries "
                        "with a replica each")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON lines here")
    args = parser.parse_args()
    scenarios = CLUSTER_SCENARIOS if args.cluster else SCENARIOS
    unknown = sorted(set(args.only or ()) - set(scenarios))
    if unknown:
        parser.error(f"not a scenario{' on a cluster' if args.cluster else ''}: {unknown}")
    print(machine(), flush=True)
    rows: list[Row] = []
    started = time.monotonic()
    for name in args.only or list(scenarios):
        with tempfile.TemporaryDirectory(prefix=f"faults-{name}-") as tmp:
            try:
                row, _ = run_scenario(name, Path(tmp), args.events, cluster=args.cluster)
            except Exception as exc:  # a timeout or a crash: reported as a problem of the row
                row = Row(name, problems=[f"{type(exc).__name__}: {exc}"])
        rows.append(row)
        print(f"{name}: {row.seconds:.0f} s, problems: {row.problems or 'none'}", flush=True)
    print(f"\n{table(rows)}\n\ntotal {time.monotonic() - started:.0f} s")
    if args.json is not None:
        with open(args.json, "w") as out:
            for row in rows:
                out.write(json.dumps(asdict(row)) + "\n")
    return 1 if any(row.problems for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
