"""One Table 1 cell with the array leaves and with River's leaves, in the same process.

River's nominal splitter proposes binary splits in the iteration order of a ``set`` of strings,
which depends on the process's string hashing (``PYTHONHASHSEED``): when two such splits tie
exactly, River's own runs differ from process to process. In one process both tree kinds see the
same order, so the two runs must be identical round for round; this prints both and says so.

    python -m benchmarks.paper.table1_same_process car adabandit 5
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks.paper.table1 import DATASETS, config
from boosters.registry import booster_params, make_booster
from service.sim.datasets import load_dataset
from service.sim.loop import simulate


def run(dataset: str, booster: str, seed: int, fast: bool):
    data = load_dataset(dataset)
    params = {**config(dataset, booster), "fast_trees": fast}
    if "nominal_attributes" in booster_params(booster):
        params["nominal_attributes"] = data.nominal or None
    model = make_booster(booster, n_actions=data.n_classes, seed=seed, **params)
    start = time.perf_counter()
    result = simulate(model, data, dup=DATASETS[dataset][0], seed=seed)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("booster")
    parser.add_argument("seed", type=int)
    args = parser.parse_args()
    results = {}
    for fast in (True, False):
        result, seconds = run(args.dataset, args.booster, args.seed, fast)
        results[fast] = result
        print(
            f"{args.dataset} {args.booster} seed {args.seed} {'array' if fast else 'river'} "
            f"accuracy {result.accuracy:.6f} last20 {result.last20_accuracy:.6f} {seconds:.1f}s"
        )
    a, b = results[True].correct, results[False].correct
    same = np.array_equal(a, b)
    print("identical, round for round" if same else f"differ from {np.flatnonzero(a != b)[0]}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
