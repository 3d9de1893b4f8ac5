"""Reproduce Tables 1 and 2 of Zhang et al. 2019 (Sec. 4 and App. B; docs/papers.md).

Runs OptBandit (BanditBBM), AdaBandit, the BinBandit baseline (Chen et al. 2014), OptFull
(OnlineMBBM) and AdaFull (Adaboost.OLM) on Balance, Car, Nursery and Mice with the paper's
settings (Table 4: N and rho; gamma = 0.1; duplication x10, x6, x4, x8; seeds 4..23 as in the
authors' code; service/sim/paper.py) and appends one JSON line per run to
benchmarks/out/table1-<core>.jsonl (runs already there are skipped, so an interrupted run
resumes). Learning curves (correct or not, per round) are kept for every dataset in
benchmarks/out/curves/<core>/ (generated, not in git).

    python -m benchmarks.paper.table1 --seeds 20 --jobs 2                 # the compiled core
    python -m benchmarks.paper.table1_report          # the tables and the learning-curve figures

``--tree-core river`` runs River's trees, the reference (the earlier recorded runs:
benchmarks/out/table1.jsonl and table1-nm.jsonl). Other registered boosters can be added as
columns with the same protocol and seeds; they get AdaBandit's N and rho and the bandit tree
profile (:func:`config`): the extension's column, the OCO bandit booster
(boosters/online/oco_bandit.py), with ``--boosters oco``.
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

BOOSTERS = ["banditbbm", "adabandit", "binbandit", "onlinembbm", "adaboostolm"]
#: the paper's settings per dataset and booster: service/sim/paper.py (``simulate --paper``)
config = paper_config


def run_one(job: tuple[str, str, int, bool, str]) -> dict:
    dataset, booster, seed, fast_trees, core = job
    data = load_dataset(dataset)
    dup = DATASETS[dataset][0]
    params = {**config(dataset, booster), "tree_core": core}
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
        "trees": core if core == "compiled" else ("array" if fast_trees else "river"),
        "rounds": result.rounds,
        "accuracy": result.accuracy,
        "last20_accuracy": result.last20_accuracy,
        "seconds": time.perf_counter() - start,
    }
    curves = OUT / "curves" / core
    curves.mkdir(parents=True, exist_ok=True)
    np.save(curves / f"{dataset}-{booster}-{seed}.npy", np.packbits(result.correct))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds, starting at 4")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--boosters", nargs="*", default=BOOSTERS)
    parser.add_argument("--out", type=Path, help="default: benchmarks/out/table1-<core>.jsonl")
    parser.add_argument("--tree-core", choices=["compiled", "river"], default="compiled")
    parser.add_argument(
        "--river-trees",
        action="store_true",
        help="fast_trees=False: River's own Hoeffding-tree leaves (the reference)",
    )
    parser.add_argument("--seed-list", type=int, nargs="*", help="these seeds instead of --seeds")
    args = parser.parse_args()
    args.out = args.out or OUT / f"table1-{args.tree_core}.jsonl"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            done.add((row["dataset"], row["booster"], row["seed"]))
    seeds = args.seed_list if args.seed_list else range(4, 4 + args.seeds)
    jobs = [
        (d, b, s, not args.river_trees, args.tree_core)
        for s in seeds
        for d in args.datasets
        for b in args.boosters
        if (d, b, s) not in done
    ]
    # seed by seed (cells fill evenly if stopped early), longest first within a seed
    weight = {"nursery": 4, "mice": 3, "car": 2, "balance": 1}
    jobs.sort(key=lambda j: (j[2], -weight.get(j[0], 0)))
    print(
        f"{len(jobs)} runs to do ({len(done)} done) on {platform.machine()}, "
        f"{args.tree_core} trees{' (River leaves)' if args.river_trees else ''}",
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
