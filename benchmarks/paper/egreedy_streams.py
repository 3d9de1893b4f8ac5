"""``egreedy_tree`` on numeric and nominal streams: last-20% and whole-stream accuracy of the
played action, mean over seeds (the before/after table of docs/boosters.md, "egreedy_tree").

    python -m benchmarks.paper.egreedy_streams [--streams balance,car,...] [--seeds 0,1,2]

The bundled sets use the paper's duplication (balance x10, mice x8, car x6) or each row once
(``balance1``...); ``rbf4``/``rbf26`` are River's RandomRBF (10 features, 50 centroids, model and
sample seed 7), each row once. The "before" column was measured by the same command run from a
checkout of the earlier version (``PYTHONPATH=<checkout>``).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from boosters.registry import make_booster
from service.sim.datasets import Dataset, load_dataset
from service.sim.loop import simulate


def rbf(n_classes: int, n: int, seed: int = 7) -> Dataset:
    """``n`` rows of River's RandomRBF with ``n_classes`` classes."""
    from river.datasets import synth

    gen = synth.RandomRBF(seed_model=seed, seed_sample=seed, n_classes=n_classes,
                          n_features=10, n_centroids=50)
    X, y = [], []
    for x, c in gen.take(n):
        X.append({str(k): float(v) for k, v in x.items()})
        y.append(c)
    return Dataset(f"rbf{n_classes}", X, np.array(y), [str(c) for c in range(n_classes)], [])


STREAMS = {  # name -> (dataset, dup)
    "balance": (lambda: load_dataset("balance"), 10),
    "mice": (lambda: load_dataset("mice"), 8),
    "car": (lambda: load_dataset("car"), 6),
    "balance1": (lambda: load_dataset("balance"), 1),
    "mice1": (lambda: load_dataset("mice"), 1),
    "car1": (lambda: load_dataset("car"), 1),
    "rbf4": (lambda: rbf(4, 10000), 1),
    "rbf26": (lambda: rbf(26, 20000), 1),
}


def run(name: str, seeds: list[int], params: dict) -> str:
    """One stream's line: last-20% / whole accuracy (mean over seeds), rounds per second."""
    make, dup = STREAMS[name]
    data = make()
    majority = np.bincount(data.y).max() / len(data.y)
    rows, start = [], time.perf_counter()
    for seed in seeds:
        booster = make_booster("egreedy_tree", n_actions=data.n_classes, seed=seed,
                               nominal_attributes=data.nominal or None, **params)
        result = simulate(booster, data, dup=dup, seed=seed)
        rows.append((result.last20_accuracy, result.accuracy))
    last20, whole = np.mean(rows, axis=0)
    rate = len(data) * dup * len(seeds) / (time.perf_counter() - start)
    return (f"{name:8s} k={data.n_classes:2d} dup={dup:2d} majority={majority:.3f} "
            f"last20={last20:.3f} whole={whole:.3f} rounds/s={rate:,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default=",".join(STREAMS), help="comma-separated names")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=JSON",
                        help="an egreedy_tree parameter (repeatable)")
    args = parser.parse_args()
    params = {k: json.loads(v) for k, _, v in (p.partition("=") for p in args.param)}
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in args.streams.split(","):
        print(run(name, seeds, params), flush=True)


if __name__ == "__main__":
    main()
