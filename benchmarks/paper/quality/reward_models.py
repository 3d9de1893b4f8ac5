"""The boosters' reward models alone on the quality benchmark's streams.

Each model (:class:`learners.linear.LinearRewards`, :class:`learners.ridge.RidgeRewards`)
decides by itself: its best action, or with probability ``epsilon`` a uniform one, and learns
from the played action's 0/1 reward. A cell is the accuracy of its best action over the last 20%
of rounds, the median over the seeds. It measures the weak link of the doubly robust estimate and
of the reward-model experts (docs/boosters.md, "learners/linear.py", "learners/ridge.py"):

    python -m benchmarks.paper.quality.reward_models            # linear, quadratic, ridge
    python -m benchmarks.paper.quality.reward_models --protocol duplicated --max-rows 500
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from learners.linear import LinearRewards
from learners.ridge import RidgeRewards
from service.sim.loop import shuffled_order
from service.sim.streams import STREAMS, dup_of, load_stream

#: model name -> (class, keyword arguments besides n_actions)
MODELS = {
    "linear": (LinearRewards, {}),
    "quadratic-normalized": (
        LinearRewards, {"quadratic": True, "normalized": True, "learning_rate": 2.0}
    ),
    "ridge": (RidgeRewards, {}),
    "ridge-uncapped": (RidgeRewards, {"max_values": 2**62}),  # every id value a coordinate
    "ridge-hits": (RidgeRewards, {"hits_teach_all": True}),  # a hit teaches every action
    "ridge-unscaled": (RidgeRewards, {"pair_weight": None}),  # products unscaled (earlier)
}


def last20(stream: str, seed: int, spec: tuple, epsilon: float, max_rows: int,
           protocol: str = "plain") -> float:
    """Accuracy of the model's best action over the last 20% of one pass of ``stream`` (each row
    once, or the duplicated protocol's copies)."""
    data = load_stream(stream, max_rows)
    cls, kwargs = spec
    model = cls(data.n_classes, **kwargs)
    rng = np.random.default_rng(seed)
    hits = []
    dup = 1 if protocol == "plain" else dup_of(stream)
    for i in shuffled_order(len(data), dup, seed).tolist():
        x, y = data.X[i], int(data.y[i])
        best = int(model.predict_one(x).argmax())
        action = best if rng.random() >= epsilon else int(rng.integers(data.n_classes))
        model.learn_one(x, action, action == y)
        hits.append(best == y)
    return float(np.mean(hits[int(0.8 * len(hits)) :]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", nargs="+", default=list(STREAMS), choices=STREAMS)
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--epsilon", type=float, default=0.05)
    p.add_argument("--max-rows", type=int, default=1000)
    p.add_argument("--protocol", default="plain", choices=("plain", "duplicated"))
    p.add_argument("--models", nargs="+", default=["linear", "quadratic-normalized", "ridge"],
                   choices=list(MODELS))
    args = p.parse_args(argv)
    print("| model | " + " | ".join(args.streams) + " |")
    print("|---" * (len(args.streams) + 1) + "|")
    for name in args.models:
        cells = [
            statistics.median(
                last20(s, seed, MODELS[name], args.epsilon, args.max_rows, args.protocol)
                for seed in args.seeds
            )
            for s in args.streams
        ]
        print(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
