"""Memory of one model, River's trees against the compiled core: resident memory and snapshot bytes.

For each stream and tree core, a fresh process loads the stream, learns a default AdaBandit (N =
20) on it with :func:`service.sim.loop.simulate`, and reports the growth of its resident set
(after a garbage collection) over the process just before the model was made, the bytes of the
pickled model (the learner's snapshot) and of its serving copy
(:func:`learners.frozen.dumps_serving`, what the API replicas load), and the trees' leaves.

    python -m benchmarks.speed.model_memory                        # digits, mice, car; 1,000 rows
    python -m benchmarks.speed.model_memory --results              # also the RESULTS.md block
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.results import replace_block

CORES = ("river", "compiled")


def _rss_kb() -> int:
    """The process's resident set now (Linux's /proc; not the peak, which the kernels'
    compilation would set)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def measure(stream: str, core: str, rows: int) -> dict[str, Any]:
    """One model's figures, in this process (call it in a fresh one)."""
    from boosters.registry import make_booster
    from learners.compiled import warm_up
    from learners.frozen import dumps_serving
    from service.sim.loop import simulate
    from service.sim.streams import load_stream

    warm_up()
    data = load_stream(stream, rows)
    before = _rss_kb()
    booster = make_booster("adabandit", n_actions=data.n_classes, seed=1, tree_core=core)
    result = simulate(booster, data, dup=1, seed=1)
    gc.collect()
    after = _rss_kb()
    leaves = (int(booster.forest.n_leaves().sum()) if booster.forest is not None else
              sum(t.tree.summary["n_leaves"] for t in booster.learners))
    return {"stream": stream, "core": core, "rows": len(data), "leaves": leaves,
            "rss_growth_mb": (after - before) / 1024, "snapshot_bytes": len(pickle.dumps(booster)),
            "serving_bytes": len(dumps_serving(booster)), "accuracy": result.accuracy}


def run(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for stream in args.streams:
        for core in CORES:
            print(f"{stream} {core}", file=sys.stderr, flush=True)
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.speed.model_memory", "--one", stream, core,
                 "--rows", str(args.rows)],
                check=True, capture_output=True, text=True, cwd=ROOT,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"command": "python -m benchmarks.speed.model_memory " + " ".join(sys.argv[1:]),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "rows": rows}


def report(res: dict[str, Any]) -> str:
    lines = [
        f"Command: `{res['command']}` ({res['date']}; CPython {res['machine']['python']}). "
        "Default AdaBandit (N = 20), one pass over the stream, each model in a fresh process.",
        "",
        "| stream | trees | rounds | leaves | RSS growth | snapshot | serving copy |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['stream']} | {r['core']} | {r['rows']:,} | {r['leaves']:,} | "
            f"{r['rss_growth_mb']:.1f} MB | {r['snapshot_bytes'] / 1e6:.2f} MB | "
            f"{r['serving_bytes'] / 1e6:.2f} MB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", nargs="+", default=["digits", "mice", "car"])
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--one", nargs=2, metavar=("STREAM", "CORE"), help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/model-memory.json")
    p.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], args.rows)))
        return
    res = run(args)
    args.out.write_text(json.dumps(res, indent=1))
    body = report(res)
    print(body)
    if args.results:
        replace_block("model-memory", body)


if __name__ == "__main__":
    main()
