"""The cost of a decision and its learning per candidate: the action-feature booster
(``boosters/online/adf.py``, which scores each of a request's candidates from its features)
against the fixed-action AdaBandit (the default booster, which scores every one of its actions),
both with their defaults, on the same contexts of the rotating catalogue
(:func:`benchmarks.paper.rotating_catalogue.catalogue_stream`: ``pref`` and ``budget``; the
candidates' ``cat``, ``price``, ``quality`` and ``id`` for the action-feature booster, the
category as the fixed action for AdaBandit).

Each row: microseconds of ``decide`` + ``learn`` per event and per candidate, over ``--rounds``
rounds after the same rounds of warm-up; the median of ``--repeats`` alternating runs.

    python -m benchmarks.speed.candidates --rounds 500 --repeats 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.stats import median
from boosters.online.adf import ActionFeatureBooster
from boosters.registry import make_booster
from service.sim.catalogue import CATEGORIES, K, Round, catalogue_stream

__all__ = ["adabandit_seconds", "adf_seconds"]


def adf_seconds(stream: list[Round], warm: int, seed: int) -> float:
    """Seconds of decide + learn over ``stream[warm:]`` after learning ``stream[:warm]``."""
    booster = ActionFeatureBooster(seed=seed)
    start = 0.0
    for t, r in enumerate(stream):
        if t == warm:
            start = time.perf_counter()
        decision = booster.decide(r.context, r.actions)
        booster.learn(r.context, r.actions, decision, float(r.rewards[decision.action]))
    return time.perf_counter() - start


def adabandit_seconds(stream: list[Round], warm: int, seed: int) -> float:
    """The same for the default AdaBandit over the catalogue's categories as fixed actions (the
    offered ones allowed, the others excluded)."""
    booster = make_booster("adabandit", n_actions=CATEGORIES, seed=seed)
    start = 0.0
    for t, r in enumerate(stream):
        if t == warm:
            start = time.perf_counter()
        cats = [int(a["cat"][1:]) for a in r.actions]
        decision = booster.decide_one(r.context, allowed=cats)
        reward = float(r.rewards[cats.index(decision.action)])
        booster.learn_one(r.context, decision, reward=reward)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    stream = catalogue_stream(2 * args.rounds, args.seed)
    runs: dict[str, list[float]] = {"adf": [], "adabandit": []}
    for _ in range(args.repeats):  # alternating
        runs["adf"].append(adf_seconds(stream, args.rounds, args.seed))
        runs["adabandit"].append(adabandit_seconds(stream, args.rounds, args.seed))
    print("| booster | µs per event | µs per event and candidate |")
    print("|---|---|---|")
    for name, seconds in runs.items():
        per_event = 1e6 * median(seconds) / args.rounds
        print(f"| {name} | {per_event:.0f} | {per_event / K:.0f} |")
    ratio = np.median(runs["adf"]) / np.median(runs["adabandit"])
    print(f"\nadf / adabandit: {ratio:.2f} (K = {K} candidates per event)")


if __name__ == "__main__":  # pragma: no cover
    main()
