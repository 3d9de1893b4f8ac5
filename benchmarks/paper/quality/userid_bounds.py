"""Two reference players of the id stream played once: what a per-user table gets, and what
knowing the stream's rule gets.

The id stream's class is ``(g(u) + [x1 > 0.5] + [x2 > 0.5]) mod 4`` (streams.py). Both players
see the same rows in the same order as the quality benchmark's plain protocol, play one action a
round and learn from its reward alone:

- ``table``: a table of each user's hit rate per action (shrunk towards 0.5 with one pseudo-count),
  greedy with 1% uniform exploration. It ignores the numbers: the best a model of the user alone
  can do, whose best constant action (``g + 1``, right when exactly one number is above 0.5) is
  right half the time.
- ``rule``: knows the rule and keeps, per user, the offsets ``g`` its rewards have not ruled
  out, playing ``g + s(x)`` for one of them drawn at random: a ceiling for any learner.

    python -m benchmarks.paper.quality.userid_bounds --seeds 1 2 3

>>> [round(x, 3) for x in play("rule", seeds=[1])]
[0.655, 0.655]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from service.sim.loop import SimulationResult, shuffled_order
from service.sim.streams import load_stream

__all__ = ["PLAYERS", "play"]

PLAYERS = ("table", "rule")


def _shift(x: dict) -> int:
    return int(x["x1"] > 0.5) + int(x["x2"] > 0.5)


def _table_action(hits: np.ndarray, plays: np.ndarray, rng: np.random.Generator, epsilon: float):
    """The table player's action: uniform with probability ``epsilon``, else the best hit rate
    (shrunk towards 0.5), ties drawn at random."""
    if rng.random() < epsilon:
        return int(rng.integers(hits.size))
    mean = (hits + 0.5) / (plays + 1.0)
    return int(rng.choice(np.flatnonzero(mean == mean.max())))


def _rule_action(left: list[int], x: dict, rng: np.random.Generator, k: int) -> tuple[int, int]:
    """The rule player's offset (drawn among those not ruled out) and action."""
    g = left[int(rng.integers(len(left)))]
    return g, (g + _shift(x)) % k


def _last20(player: str, data, seed: int, epsilon: float) -> float:
    k, rng, state, hits = data.n_classes, np.random.default_rng(seed), {}, []
    for i in shuffled_order(len(data), 1, seed).tolist():
        x, label = data.X[i], int(data.y[i])
        if player == "table":
            wins, plays = state.setdefault(x["user"], (np.zeros(k), np.zeros(k)))
            action = _table_action(wins, plays, rng, epsilon)
            wins[action] += action == label
            plays[action] += 1
        else:
            left = state.setdefault(x["user"], list(range(k)))
            g, action = _rule_action(left, x, rng, k)
            state[x["user"]] = [g] if action == label else [v for v in left if v != g]
        hits.append(action == label)
    return SimulationResult.from_correct(np.array(hits), 0.0).last20_accuracy


def play(player: str, seeds=range(1, 28), max_rows: int = 1000, epsilon: float = 0.01):
    """Median and mean last-20% accuracy of ``player`` over ``seeds``."""
    if player not in PLAYERS:
        raise ValueError(f"player must be one of {PLAYERS}, got {player!r}")
    data = load_stream("userid", max_rows)
    values = [_last20(player, data, seed, epsilon) for seed in seeds]
    return statistics.median(values), statistics.fmean(values)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 28)))
    p.add_argument("--max-rows", type=int, default=1000)
    args = p.parse_args(argv)
    for player in PLAYERS:
        median, mean = play(player, args.seeds, args.max_rows)
        print(f"{player}: median {median:.3f}, mean {mean:.3f} over {len(args.seeds)} seeds")


if __name__ == "__main__":
    main()
