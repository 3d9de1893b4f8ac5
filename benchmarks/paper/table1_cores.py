"""Zhang et al. 2019's Table 1 runs on River's trees and on the compiled core, seed by seed.

Each run of :mod:`benchmarks.paper.table1` (the paper's per-dataset settings: duplication, rho,
N, tree profile, majority-class leaves) is made twice, with ``tree_core="river"`` and with the
compiled core, and the final accuracies compared: the compiled core leaves a Table 1 cell as it
was when the runs agree.

    python -m benchmarks.paper.table1_cores --datasets balance car --seeds 4 5 6
"""

from __future__ import annotations

import argparse

from benchmarks.paper.table1 import BOOSTERS, DATASETS, config
from boosters.registry import make_booster
from learners.compiled import warm_up
from service.sim.datasets import load_dataset
from service.sim.loop import simulate


def run(dataset: str, booster: str, seed: int, tree_core: str) -> float:
    """The run's final accuracy."""
    ds = load_dataset(dataset)
    params = {**config(dataset, booster), "tree_core": tree_core}
    model = make_booster(booster, n_actions=ds.n_classes, seed=seed, **params)
    return simulate(model, ds, dup=DATASETS[dataset][0], seed=seed).accuracy


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["balance", "car"], choices=list(DATASETS))
    p.add_argument("--boosters", nargs="+", default=BOOSTERS)
    p.add_argument("--seeds", nargs="+", type=int, default=[4, 5, 6])
    args = p.parse_args(argv)
    warm_up()
    same, runs, worst = 0, 0, 0.0
    print("| dataset | booster | seed | River's trees | compiled |\n|---|---|---|---|---|")
    for dataset in args.datasets:
        for booster in args.boosters:
            for seed in args.seeds:
                river, compiled = (run(dataset, booster, seed, core)
                                   for core in ("river", "compiled"))
                runs += 1
                same += river == compiled
                worst = max(worst, abs(river - compiled))
                print(f"| {dataset} | {booster} | {seed} | {river:.4f} | {compiled:.4f} |",
                      flush=True)
    print(f"\n{same} of {runs} runs end with the same accuracy; the largest difference {worst:.4f}")


if __name__ == "__main__":
    main()
