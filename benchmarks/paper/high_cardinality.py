"""A 5,000-value id added to Car: what it costs the online boosters, in accuracy, speed and size.

AdaBandit (N = 20, rho = 0.01) plays the bandit simulation of Zhang et al. 2019 on Car (rows
duplicated ``--dup`` times, shuffled by the seed) with and without a string feature ``user`` drawn
uniformly from 5,000 values (pure noise), on the default (compiled) trees; ``--river`` adds
River's trees with the id (array leaves, whose value cap is per leaf rather than per model, and
River's own leaves, the behaviour before the bounded representation). Runs alternate
with and without the id, seed by seed; the table gives the medians.

    python -m benchmarks.paper.high_cardinality --seeds 1 2 3 --results
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time

import numpy as np

from benchmarks.results import replace_block
from benchmarks.stats import median
from boosters.registry import make_booster
from service.sim.datasets import load_dataset
from service.sim.loop import shuffled_order


def run(seed: int, dup: int, with_id: bool, fast: bool, n_ids: int = 5000,
        tree_core: str = "compiled") -> dict:
    ds = load_dataset("car")
    order = shuffled_order(len(ds), dup, seed)
    ids = np.random.default_rng(seed + 1000).integers(0, n_ids, len(order)).tolist()
    booster = make_booster(
        "adabandit", n_actions=ds.n_classes, n_learners=20, rho=0.01, seed=seed, fast_trees=fast,
        tree_core=tree_core,
    )
    hits = 0.0
    start = time.perf_counter()
    for t, i in enumerate(order):
        x = dict(ds.X[i])
        if with_id:
            x["user"] = f"u{ids[t]}"
        decision = booster.decide_one(x)
        reward = float(decision.action == int(ds.y[i]))
        hits += reward
        booster.learn_one(x, decision, reward=reward)
    seconds = time.perf_counter() - start
    return {
        "accuracy": hits / len(order),
        "rounds_per_s": len(order) / seconds,
        "pickle_mb": len(pickle.dumps(booster)) / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--dup", type=int, default=6)
    parser.add_argument("--river", action="store_true", help="also River's leaves with the id")
    parser.add_argument("--results", action="store_true", help="write into RESULTS.md")
    args = parser.parse_args()
    shapes = [("Car", False, True, "compiled"), ("Car + id", True, True, "compiled")]
    if args.river:
        shapes += [("Car + id, River's trees (array leaves)", True, True, "river"),
                   ("Car + id, River's leaves", True, False, "river")]
    rows = {name: [] for name, *_ in shapes}
    for seed in args.seeds:
        for name, with_id, fast, core in shapes:
            result = run(seed, args.dup, with_id, fast, tree_core=core)
            rows[name].append(result)
            print(seed, name, result, file=sys.stderr, flush=True)
    base = {k: median(r[k] for r in rows["Car"]) for k in rows["Car"][0]}
    lines = [
        "Command: `python -m benchmarks.paper.high_cardinality "
        + " ".join(a for a in sys.argv[1:] if a != "--results") + " --results` (compiled trees, "
        "the default; `--river` adds River's trees).",
        "",
        f"AdaBandit N = 20, rho = 0.01, Car x{args.dup} ({len(args.seeds)} seeds "
        f"{args.seeds}; medians), a 5,000-value random id `user` added:",
        "",
        "| stream | accuracy | drop | rounds/s | slowdown | pickle MB |",
        "|---|---|---|---|---|---|",
    ]
    for name, results in rows.items():
        med = {k: median(r[k] for r in results) for k in results[0]}
        per_seed = ", ".join(f"{r['accuracy']:.3f}" for r in results)
        lines.append(
            f"| {name} | {med['accuracy']:.3f} ({per_seed}) | "
            f"{base['accuracy'] - med['accuracy']:+.3f} | {med['rounds_per_s']:.0f} | "
            f"{base['rounds_per_s'] / med['rounds_per_s']:.2f}x | {med['pickle_mb']:.1f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.results:
        replace_block("high-cardinality", text)


if __name__ == "__main__":
    main()
