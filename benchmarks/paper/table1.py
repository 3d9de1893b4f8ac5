"""Reproduce Tables 1 and 2 of Zhang et al. 2019 (Sec. 4 and App. B; docs/papers.md).

Runs OptBandit (BanditBBM), AdaBandit, OptFull (OnlineMBBM) and AdaFull (Adaboost.OLM) on Balance,
Car, Nursery and Mice with the paper's settings (Table 4: N and rho; gamma = 0.1; duplication
x10, x6, x4, x8; seeds 4..23 as in the authors' code) and appends one JSON line per run to
benchmarks/out/table1.jsonl (runs already there are skipped, so an interrupted run resumes).
Learning curves (moving average, window 0.2 x rounds) are kept for Car in benchmarks/out/curves/
(generated, not in git).

    python -m benchmarks.paper.table1 --seeds 20 --jobs 2
    python -m benchmarks.paper.table1_report          # writes the tables into benchmarks/RESULTS.md

Other registered boosters can be added as columns with the same protocol and seeds; they get
AdaBandit's N and rho and the bandit tree profile (:func:`config`). The extension's column, the OCO
bandit booster (an extension beyond the papers, boosters/online/oco_bandit.py), was run with

    python -m benchmarks.paper.table1 --seeds 20 --jobs 2 --datasets balance car --boosters oco \
        --out benchmarks/out/table1-oco.jsonl
    python -m benchmarks.paper.table1 --seeds 5 --jobs 2 --datasets nursery mice --boosters oco \
        --out benchmarks/out/table1-oco.jsonl
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import ROOT
from boosters.registry import booster_params, make_booster
from service.sim.datasets import load_dataset
from service.sim.loop import simulate
from service.sim.paper import DATASETS, paper_config

OUT = ROOT / "benchmarks" / "out"

BOOSTERS = ["banditbbm", "adabandit", "onlinembbm", "adaboostolm"]
#: the paper's settings per dataset and booster: service/sim/paper.py (``simulate --paper``)
config = paper_config


def run_one(job: tuple[str, str, int, bool]) -> dict:
    dataset, booster, seed, fast_trees = job
    data = load_dataset(dataset)
    dup = DATASETS[dataset][0]
    params = config(dataset, booster)
    if not fast_trees:  # River's own leaves (the reference); the default is the array leaves
        params["fast_trees"] = False
    if "nominal_attributes" in booster_params(booster):
        params["nominal_attributes"] = data.nominal or None
    model = make_booster(booster, n_actions=data.n_classes, seed=seed, **params)
    start = time.perf_counter()
    result = simulate(model, data, dup=dup, seed=seed)
    row = {
        "dataset": dataset,
        "booster": booster,
        "seed": seed,
        "dup": dup,
        "params": {k: v for k, v in params.items() if k != "nominal_attributes"},
        "trees": "array" if fast_trees else "river",
        "rounds": result.rounds,
        "accuracy": result.accuracy,
        "last20_accuracy": result.last20_accuracy,
        "seconds": time.perf_counter() - start,
    }
    if dataset == "car":
        (OUT / "curves").mkdir(parents=True, exist_ok=True)
        np.save(OUT / "curves" / f"{dataset}-{booster}-{seed}.npy", np.packbits(result.correct))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds, starting at 4")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--boosters", nargs="*", default=BOOSTERS)
    parser.add_argument("--out", type=Path, default=OUT / "table1.jsonl")
    parser.add_argument(
        "--river-trees",
        action="store_true",
        help="fast_trees=False: River's own Hoeffding-tree leaves (the reference)",
    )
    parser.add_argument("--seed-list", type=int, nargs="*", help="these seeds instead of --seeds")
    args = parser.parse_args()

    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            done.add((row["dataset"], row["booster"], row["seed"]))
    seeds = args.seed_list if args.seed_list else range(4, 4 + args.seeds)
    jobs = [
        (d, b, s, not args.river_trees)
        for s in seeds
        for d in args.datasets
        for b in args.boosters
        if (d, b, s) not in done
    ]
    # seed by seed (cells fill evenly if stopped early), longest first within a seed
    weight = {"mice": 4, "nursery": 3, "car": 2, "balance": 1}
    jobs.sort(key=lambda j: (j[2], -weight.get(j[0], 0)))
    print(
        f"{len(jobs)} runs to do ({len(done)} done) on {platform.machine()}, "
        f"{'River' if args.river_trees else 'array (fast)'} trees",
        file=sys.stderr,
    )
    with mp.Pool(args.jobs, maxtasksperchild=1) as pool, args.out.open("a") as out:
        for i, row in enumerate(pool.imap_unordered(run_one, jobs), 1):
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(
                f"[{i}/{len(jobs)}] {row['dataset']:8s} {row['booster']:12s} seed {row['seed']:2d} "
                f"last20 {row['last20_accuracy']:.3f} total {row['accuracy']:.3f} "
                f"({row['seconds']:.0f} s)",
                file=sys.stderr,
            )


if __name__ == "__main__":
    main()
