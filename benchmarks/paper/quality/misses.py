"""Where a booster's misses in the last 20% of a quality cell come from: exploration or the vote.

A round of the last 20% that plays a wrong action is an *exploration* miss when the booster's
most probable action (its prediction, ``1 - rho`` for the bandit boosters; the lowest index
among ties, as of ``egreedy_tree``'s greedy set) was the row's class
and the draw took another, and a *prediction* miss when the most probable action was wrong
itself. The expected number of exploration misses is printed beside the count: the sum over the
last 20% of the probability of drawing anything else when the prediction was right.

    python -m benchmarks.paper.quality.misses --stream wine --duplicated --seeds 1 2 3
    python -m benchmarks.paper.quality.misses --stream wine --duplicated --param rho_floor=0.005
"""

from __future__ import annotations

import argparse

from benchmarks.paper.quality.__main__ import parse_param
from boosters.registry import make_booster
from service.sim.loop import shuffled_order
from service.sim.streams import STREAMS, dup_of, load_stream


def misses(stream: str, seed: int, booster: str = "adabandit", params: dict | None = None,
           duplicated: bool = False, max_rows: int | None = None) -> dict:
    """One seed of a quality cell: its last-20% rounds, exploration and prediction misses, and
    the exploration misses expected (500 rows duplicated, else up to 1,000 once, as the quality
    benchmark's cells)."""
    data = load_stream(stream, max_rows or (500 if duplicated else 1000))
    model = make_booster(booster, n_actions=data.n_classes, seed=seed, **(params or {}))
    order = shuffled_order(len(data), dup_of(stream) if duplicated else 1, seed).tolist()
    start = int(0.8 * len(order))  # the last 20% as service.sim.loop's results count it
    explored = predicted = 0
    expected = 0.0
    for t, i in enumerate(order):
        x, y = data.X[i], int(data.y[i])
        d = model.decide_one(x)
        if t >= start:
            right = int(d.probabilities.argmax()) == y
            expected += (1.0 - float(d.probabilities[y])) if right else 0.0
            if d.action != y:
                explored += right
                predicted += not right
        model.learn_one(x, d, reward=float(d.action == y))
    return {"seed": seed, "rounds": len(order) - start, "exploration": explored,
            "prediction": predicted, "expected_exploration": round(expected, 2)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stream", required=True, choices=STREAMS)
    p.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 10)))
    p.add_argument("--booster", default="adabandit")
    p.add_argument("--param", type=parse_param, action="append", default=[])
    p.add_argument("--duplicated", action="store_true")
    args = p.parse_args(argv)
    total = {"exploration": 0, "prediction": 0, "expected_exploration": 0.0}
    for seed in args.seeds:
        row = misses(args.stream, seed, args.booster, dict(args.param), args.duplicated)
        print(row, flush=True)
        for key in total:
            total[key] += row[key]
    total["expected_exploration"] = round(total["expected_exploration"], 2)
    print("total", total)


if __name__ == "__main__":
    main()
