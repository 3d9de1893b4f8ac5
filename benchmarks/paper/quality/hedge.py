"""AdaBandit's Hedge on one quality stream: which expert it plays and how right each is.

Every 100 rounds (or ``--every``) one line: the played action's accuracy, that of the vote of all
N trees, of the best single tree expert and of the reward model's expert (the last), how often
the reward model's expert was played, and the spread of the Hedge's log-weights between the
best tree expert and the reward model's. It shows the Hedge's losses at work
(docs/boosters.md, "The Hedge's losses"):

    python -m benchmarks.paper.quality.hedge --stream rbf26 --seed 2 --param hedge_weight=null
    python -m benchmarks.paper.quality.hedge --stream rbf26 --seed 2    # the defaults
    python -m benchmarks.paper.quality.hedge --stream car --seed 1 --duplicated --every 600

``--duplicated`` plays the stream's duplicated protocol (500 rows, the stream's duplication),
as the quality benchmark does; without it each of up to 1,000 rows once.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.paper.quality.__main__ import parse_param
from boosters.registry import make_booster
from service.sim.loop import shuffled_order
from service.sim.streams import STREAMS, dup_of, load_stream


def trace(
    stream: str,
    seed: int,
    params: dict,
    every: int = 100,
    duplicated: bool = False,
    max_rows: int | None = None,
) -> list:
    """One dict per ``every`` rounds of ``stream`` played by AdaBandit(``params``): each of up to
    ``max_rows`` (1,000) rows once, or with ``duplicated`` the quality benchmark's duplicated
    protocol (500 rows by default)."""
    data = load_stream(stream, max_rows or (500 if duplicated else 1000))
    dup = dup_of(stream) if duplicated else 1
    booster = make_booster("adabandit", n_actions=data.n_classes, seed=seed, **params)
    n, m = booster.n_learners, booster.log_v.size
    if m == n:
        raise ValueError("this AdaBandit has no reward model's expert (guess_expert)")
    hits, played, model_played, rows = np.zeros(m), 0, 0, []
    for t, i in enumerate(shuffled_order(len(data), dup, seed).tolist(), start=1):
        x, y = data.X[i], int(data.y[i])
        d = booster.decide_one(x)
        hits += np.asarray(d.internals["experts"])[:m] == y
        played += d.action == y
        model_played += d.internals["expert"] >= n
        booster.learn_one(x, d, reward=float(d.action == y))
        if t % every == 0:
            rows.append({
                "round": t, "played": played / every, "vote": hits[n - 1] / every,
                "best_tree": hits[:n].max() / every, "model": hits[n] / every,
                "model_played": model_played / every,
                "log_weight_gap": float(booster.log_v[n] - booster.log_v[:n].max()),
            })
            hits[:], played, model_played = 0.0, 0, 0
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stream", default="rbf26", choices=STREAMS)
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--param", action="append", type=parse_param, default=[], metavar="NAME=VALUE")
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--duplicated", action="store_true", help="the duplicated protocol")
    args = p.parse_args(argv)
    print("| rounds | played | vote of N | best tree | reward model | model played | "
          "log-weight gap |")
    print("|---|---|---|---|---|---|---|")
    for r in trace(args.stream, args.seed, dict(args.param), args.every, args.duplicated):
        print(f"| {r['round'] - args.every + 1}-{r['round']} | {r['played']:.2f} | "
              f"{r['vote']:.2f} | {r['best_tree']:.2f} | {r['model']:.2f} | "
              f"{r['model_played']:.2f} | {r['log_weight_gap']:+.1f} |", flush=True)


if __name__ == "__main__":
    main()
