"""Wall time of a Personalizer offline evaluation of a custom 20-learner AdaBandit policy.

The evaluation's arithmetic (:func:`service.personalizer.evaluation.evaluate`) on the synthetic
log of :mod:`benchmarks.speed.replay_speed` (10 actions, 4 numeric features and a 5-value
segment, uniform logging): the policy ``--booster adabandit --learners 20`` is replayed through
every event (importance-weighted, learning on each), with the compiled trees (the default) over
``--events`` events and, for comparison, River's trees (``tree_core="river"``) over a prefix of
``--river-events``; repeats alternate the two, medians of the seconds per event (the compiled
kernels are loaded before any timing: a fresh install compiles them once, about 20 s).

    python -m benchmarks.speed.evaluation_speed                       # 20,000 events, 3 repeats
    python -m benchmarks.speed.evaluation_speed --results             # also the RESULTS.md block
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks import ROOT
from benchmarks.results import replace_block
from benchmarks.speed.replay_speed import ACTIONS, write_log
from learners.compiled import warm_up
from service.personalizer.evaluation import Candidate, ModelLog, evaluate

ARGUMENTS = "--booster adabandit --learners 20"


def _candidate(tree_core: str) -> Candidate:
    return Candidate(f"ada20-{tree_core}", "Custom", ARGUMENTS, "adabandit",
                     {"n_learners": 20, "tree_core": tree_core})


def _log(path: Path, n: int) -> ModelLog:
    with open(path) as lines:
        joined = [json.loads(line) for _, line in zip(range(n), lines)]
    return ModelLog.of(joined, ACTIONS, 0.0, 1e12)


def run(args: argparse.Namespace) -> dict[str, Any]:
    warm_up()  # the kernels compiled (or loaded from numba's cache) before any timing
    with tempfile.TemporaryDirectory(prefix="evaluation-speed-") as tmp:
        path = Path(tmp) / "log.jsonl"
        write_log(path, args.events)
        logs = {"compiled": _log(path, args.events), "river": _log(path, args.river_events)}
    seconds: dict[str, list[float]] = {core: [] for core in logs}
    rewards: dict[str, float] = {}
    for r in range(args.repeats):
        for core, log in logs.items():
            print(f"repeat {r + 1}/{args.repeats}: {core}", file=sys.stderr, flush=True)
            started = time.perf_counter()
            result = evaluate([log], [_candidate(core)])[0]
            seconds[core].append(time.perf_counter() - started)
            rewards[core] = result["totalSummary"]["averageReward"]
    return {
        "command": "python -m benchmarks.speed.evaluation_speed " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load": os.getloadavg()},
        "events": {core: len(log.events) for core, log in logs.items()},
        "seconds": seconds,
        "average_reward": rewards,
    }


def report(res: dict[str, Any]) -> str:
    m = res["machine"]
    rows = [
        f"Command: `{res['command']}` ({res['date']}; {m['cpus']} CPUs; CPython {m['python']}; "
        f"load average {[round(x, 2) for x in m['load']]} at the end). Policy: `{ARGUMENTS}`, "
        "replayed through every event (weighted); wall seconds, median of the repeats.",
        "",
        "| trees | events | seconds | events/s | for 20,000 events | estimated reward |",
        "|---|---|---|---|---|---|",
    ]
    for core, secs in res["seconds"].items():
        n, s = res["events"][core], median(secs)
        rows.append(f"| {core} | {n:,} | {s:.1f} | {n / s:,.0f} | {20_000 * s / n:,.0f} s | "
                    f"{res['average_reward'][core]:.4f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--river-events", type=int, default=1_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/evaluation-speed.json")
    p.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    res = run(args)
    args.out.write_text(json.dumps(res, indent=1))
    body = report(res)
    print(body)
    if args.results:
        replace_block("evaluation-speed", body)


if __name__ == "__main__":
    main()
