"""Supervised-to-bandit simulation (Zhang et al. 2019, Sec. 4).

The rows of a classification dataset are duplicated ``dup`` times, the duplicated list is
shuffled once with ``numpy.random.default_rng(seed).permutation`` and streamed once. Every round
is predict-then-update: the booster decides an action for the context, the round is scored on
the *played* action (exploration included), and the booster learns from the bandit reward
(1 if the played action is the true class, else 0) or, for full-information boosters, from the
true label.

>>> from boosters.registry import make_booster
>>> from service.sim.datasets import load_dataset
>>> ds = load_dataset("balance")
>>> result = simulate(make_booster("uniform", n_actions=ds.n_classes, seed=0), ds, dup=2, seed=0)
>>> result.rounds
1250
>>> 0.25 < result.accuracy < 0.42
True
>>> steps, curve = result.moving_average()
>>> int(steps[0]), len(curve)
(250, 1001)
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from boosters.base import OnlineBooster
from service.formats.progress import shows
from service.sim.datasets import Dataset

__all__ = ["SimulationResult", "shuffled_order", "simulate"]


@dataclass
class SimulationResult:
    """Per-round correctness of one simulated stream, and its summaries.

    ``accuracy`` is over the whole stream (Table 2, "total accuracy"); ``last20_accuracy`` over
    the last ``rounds - int(0.8 * rounds)`` rounds (Table 1, "asymptotic performance").

    >>> r = SimulationResult.from_correct(np.array([0, 0, 1, 1, 1], dtype=bool), seconds=0.5)
    >>> r.rounds, r.accuracy, r.last20_accuracy, r.rounds_per_second
    (5, 0.6, 1.0, 10.0)
    >>> r.moving_average(window=2)
    (array([2, 3, 4, 5]), array([0. , 0.5, 1. , 1. ]))
    """

    correct: np.ndarray
    rounds: int
    seconds: float
    accuracy: float
    last20_accuracy: float
    rounds_per_second: float

    @classmethod
    def from_correct(cls, correct: np.ndarray, seconds: float) -> SimulationResult:
        """Build the result (and its summaries) from the per-round correctness."""
        correct = np.asarray(correct, dtype=bool)
        rounds = int(correct.size)
        if rounds == 0:
            raise ValueError("a simulation result needs at least one round")
        tail = rounds - int(0.8 * rounds)
        return cls(
            correct=correct,
            rounds=rounds,
            seconds=float(seconds),
            accuracy=float(correct.mean()),
            last20_accuracy=float(correct[-tail:].mean()),
            rounds_per_second=rounds / max(float(seconds), 1e-9),
        )

    def default_window(self) -> int:
        """``int(0.2 * rounds)``, at least 1: the last-20% window of Zhang et al. 2019's Table 1."""
        return max(1, int(0.2 * self.rounds))

    def moving_average(self, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Moving-average accuracy over the last ``window`` rounds, as ``(round, value)``.

        ``window`` defaults to :meth:`default_window`. The curve starts at ``round = window``
        (1-based: the value at round ``t`` is the accuracy over rounds ``t - window + 1 .. t``)
        and ends at ``round = rounds``.
        """
        if window is None:
            window = self.default_window()
        if isinstance(window, bool) or not isinstance(window, int | np.integer):
            raise TypeError(f"window must be an integer, got {window!r}")
        if not 1 <= window <= self.rounds:
            raise ValueError(f"window must be in 1..{self.rounds}, got {window}")
        window = int(window)
        cumulative = np.concatenate(([0], np.cumsum(self.correct, dtype=np.int64)))
        values = (cumulative[window:] - cumulative[:-window]) / window
        return np.arange(window, self.rounds + 1), values

    def summary(self) -> dict[str, float | int]:
        """JSON-ready scalar summaries (without the per-round array)."""
        return {
            "rounds": self.rounds,
            "accuracy": self.accuracy,
            "last20_accuracy": self.last20_accuracy,
            "seconds": self.seconds,
            "rounds_per_second": self.rounds_per_second,
        }


def shuffled_order(n_rows: int, dup: int, seed: int) -> np.ndarray:
    """Row indices of the stream: ``dup`` copies of ``0 .. n_rows-1``, one seeded permutation.

    As in ref-code, the row list is duplicated (``rows * dup``) and the whole list is then
    permuted once.

    >>> shuffled_order(3, 2, seed=0).tolist()
    [0, 2, 2, 1, 0, 1]
    >>> sorted(shuffled_order(3, 2, seed=0).tolist())
    [0, 0, 1, 1, 2, 2]
    """
    if isinstance(dup, bool) or not isinstance(dup, int | np.integer) or dup < 1:
        raise ValueError(f"dup must be an integer >= 1, got {dup!r}")
    duplicated = np.tile(np.arange(n_rows), int(dup))
    return duplicated[np.random.default_rng(seed).permutation(duplicated.size)]


def simulate(
    booster: OnlineBooster,
    dataset: Dataset,
    dup: int,
    seed: int,
    progress: bool | None = False,
) -> SimulationResult:
    """Stream ``dataset`` (duplicated ``dup`` times, shuffled with ``seed``) through ``booster``.

    ``progress=True`` shows a tqdm bar on stderr, ``False`` none, ``None`` one only when stderr
    is a terminal. The timed loop holds only the two booster calls and the bookkeeping;
    ``seconds`` covers the loop alone (not the shuffle).
    """
    if booster.n_actions != dataset.n_classes:
        raise ValueError(
            f"the booster has {booster.n_actions} actions but {dataset.name!r} has "
            f"{dataset.n_classes} classes"
        )
    order = shuffled_order(len(dataset), dup, seed).tolist()
    rounds = len(order)
    X = dataset.X
    labels = dataset.y.tolist()
    decide = booster.decide_one
    learn = booster.learn_one
    full_information = bool(booster.full_information)
    correct = bytearray(rounds)

    progress = shows(progress)
    stream = (
        tqdm(order, total=rounds, file=sys.stderr, unit="round", desc=dataset.name)
        if progress
        else order
    )

    start = time.perf_counter()
    if full_information:
        for t, i in enumerate(stream):
            x = X[i]
            label = labels[i]
            decision = decide(x)
            correct[t] = decision.action == label
            learn(x, decision, label=label)
    else:
        for t, i in enumerate(stream):
            x = X[i]
            decision = decide(x)
            hit = decision.action == labels[i]
            correct[t] = hit
            learn(x, decision, reward=1.0 if hit else 0.0)
    seconds = time.perf_counter() - start
    if progress:
        stream.close()

    return SimulationResult.from_correct(np.frombuffer(correct, dtype=bool).copy(), seconds)
