"""Batch agnostic boosters: wall time per boosting round against fitting one stump.

For each dataset of Ghai & Singh 2024 (as :mod:`benchmarks.paper.table3` loads it) and each batch
booster of boosters/batch/sample_efficient.py, one repeat times

- the *baseline*: one weighted decision stump (:class:`learners.stumps.DecisionStump`, unit
  weights) fitted on the whole dataset (the same ``X`` and labels the booster gets), as the
  median of ``--stump-fits`` fits;
- the *booster*: ``fit`` with ``T = --rounds`` on the same data; per round = fit time / T. That
  includes everything a round does (relabelling, the weak-learner fit on the round's rows, the
  predictions that update the cached ``H`` on the training and hold-out rows, the hold-out score).

Repeats alternate baseline and booster; the figures are medians over repeats, and
``round / stump`` is the median of the per-repeat ratios (both measured in the same repeat, so
machine load cancels to first order). Boosters: ``ours`` (Algorithm 1 as the paper's experiments
ran it, sigma = 0.25, fractional), ``ours-alg1`` (Algorithm 1 as written: sampling mode,
m = 10 x the rows of the chunks so far), ``kk09``, ``bchm20`` (Madaboost weights),
``bchm20-oco`` (BCHM20's OGD weights) and scikit-learn's AdaBoost over stumps for reference.

    python -m benchmarks.speed.batch_speed --repeats 7
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks import ROOT
from benchmarks.paper.table3 import DATASETS, LABELS, load, make
from benchmarks.stats import median
from learners.stumps import DecisionStump

OUT = ROOT / "benchmarks" / "out"
BOOSTERS = ["ours", "ours-alg1", "kk09", "bchm20", "bchm20-oco", "adaboost"]
SIGMA = 0.25


def time_stump(X: np.ndarray, y01: np.ndarray, fits: int) -> float:
    """Median seconds of one unit-weight stump fit on ``(X, y)``."""
    y = np.where(y01 == 1, 1, -1)
    w = np.ones(y.size)
    stump = DecisionStump()
    times = []
    for i in range(fits):
        start = time.perf_counter()
        stump.fit(X, y, w, i)
        times.append(time.perf_counter() - start)
    return median(times)


def time_booster(booster: str, X: np.ndarray, y01: np.ndarray, rounds: int, seed: int) -> float:
    """Seconds per round of one ``fit`` with ``rounds`` rounds."""
    model = make(booster, rounds, SIGMA if booster.startswith("ours") else None, seed)
    start = time.perf_counter()
    model.fit(X, y01)
    return (time.perf_counter() - start) / rounds


def measure(
    datasets: list[str], boosters: list[str], rounds: int, repeats: int, stump_fits: int
) -> list[dict]:
    """One row per (dataset, booster) with the per-repeat times and their medians."""
    results = []
    cases = [(d, b) for d in datasets for b in boosters]
    for d, b in tqdm(cases, file=sys.stderr):
        X, y = load(d)
        stump, per_round = [], []
        time_booster(b, X, y, min(rounds, 5), 0)  # warm-up (imports, caches)
        for r in range(repeats):
            stump.append(time_stump(X, y, stump_fits))
            per_round.append(time_booster(b, X, y, rounds, r))
        ratios = [p / s for p, s in zip(per_round, stump)]
        results.append(
            {
                "dataset": d,
                "rows": int(X.shape[0]),
                "features": int(X.shape[1]),
                "booster": b,
                "rounds": rounds,
                "stump_seconds": stump,
                "round_seconds": per_round,
                "ratios": ratios,
                "median_stump_ms": 1e3 * median(stump),
                "median_round_ms": 1e3 * median(per_round),
                "median_ratio": median(ratios),
            }
        )
    return results


#: what the ratios mean (the figures come from the table above it)
NOTES = """Why the costs differ: a KK09 round fits its stump on one fresh chunk of n/T rows only,
so on Waveform it costs a tenth of a full-data stump; on the small sets scikit-learn's fixed cost
per fit (about 1 ms) dominates, and a round costs 0.8-1.6 stumps. BCHM20 fits every round on all
training rows, each with both labels (fractional relabelling, up to 2n weighted rows), plus two
predictions over all rows: 1.2-2.5 stumps. Alg. 1 fits on both labels of the chunks seen so far
(n rows on average over the T rounds), so it sits between the two. Alg. 1 as written draws
m = 10 x the rows of the chunks so far with sampled labels (on average 5n rows) and is the most
expensive. None of the boosters costs more than a few stump fits per round."""


def report(results: list[dict], command: str, machine: str) -> str:
    lines = [
        "### Batch agnostic boosters: wall time per round against fitting one stump",
        "",
        "`benchmarks/speed/batch_speed.py`: each booster of "
        "`boosters/batch/sample_efficient.py` "
        "fitted with T rounds on the whole dataset; its time per round against one "
        "unit-weight decision stump fitted on the same data, both timed in every repeat.",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine}. Per round = fit time / T (T = {results[0]['rounds']}); stump = "
        "one unit-weight `DecisionStump` fit on the whole dataset; medians over repeats; "
        "round/stump = median of the per-repeat ratios (the same repeat times both).",
        "",
        "| dataset | rows × features | booster | stump ms | per round ms | round / stump "
        "| ratio range |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        label = LABELS.get(r["booster"], r["booster"])
        lines.append(
            f"| {r['dataset']} | {r['rows']} × {r['features']} | {label} | "
            f"{r['median_stump_ms']:.2f} | {r['median_round_ms']:.2f} | "
            f"{r['median_ratio']:.2f} | {min(r['ratios']):.2f}-{max(r['ratios']):.2f} |"
        )
    spans = {}
    for r in results:
        spans.setdefault(r["booster"], []).append(r["median_ratio"])
    lines += [
        "",
        "Per round, in stump fits (median ratio, smallest-largest over the datasets): "
        + "; ".join(f"{LABELS.get(b, b)} {min(v):.2f}-{max(v):.2f}" for b, v in spans.items())
        + ".",
        "",
        NOTES,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    parser.add_argument("--boosters", nargs="*", default=BOOSTERS, choices=BOOSTERS)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--stump-fits", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT / "batch_speed.json")
    parser.add_argument("--no-results", action="store_true", help="do not touch RESULTS.md")
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the block from --out, no timing"
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.repeats < 1 or args.stump_fits < 1:
        parser.error("--rounds, --repeats and --stump-fits must be >= 1")

    if args.report_only:
        saved = json.loads(args.out.read_text())
        machine, results = saved["machine"], saved["results"]
        args.rounds = results[0]["rounds"]
        args.repeats = len(results[0]["ratios"])
    else:
        with open("/proc/loadavg") as f:
            load_avg = ", ".join(f.read().split()[:3])
        machine = (
            f"{platform.machine()}, {platform.python_implementation()} "
            f"{platform.python_version()}, shared 2-core VM, load average at start {load_avg}"
        )
        results = measure(args.datasets, args.boosters, args.rounds, args.repeats, args.stump_fits)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")
    boosters = sorted({r["booster"] for r in results}, key=BOOSTERS.index)
    command = (
        f"python -m benchmarks.speed.batch_speed --rounds {args.rounds} --repeats {args.repeats} "
        f"--boosters {' '.join(boosters)}"
    )
    body = report(results, command, machine)
    print(body)
    if not args.no_results:
        from benchmarks.results import replace_block

        replace_block("batch-speed", body)


if __name__ == "__main__":
    main()
