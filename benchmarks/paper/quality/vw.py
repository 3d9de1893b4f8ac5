"""Vowpal Wabbit's contextual bandit on a quality-benchmark stream: the small grid of the issue.

Every round VW gets the context as text: numeric features standardised with running statistics
(Welford's mean and variance over the rows seen so far, the current row included; no label is
used) in namespace ``n``, string features as indicator features ``name=value`` in namespace ``s``.
VW returns a distribution over the ``k`` actions; the harness samples the played action from it
with ``numpy.random.default_rng(seed)`` and teaches VW ``action:cost:probability`` with cost 0 if
the action is the row's class, else 1 (the reward 1 or 0 of the simulation). ``--cb_explore k``
(one regressor per action) is used for the epsilon-greedy, bagging and cover configurations;
``--squarecb`` exists only with ``--cb_explore_adf``, where each action is an example with the
feature ``A a<i>`` crossed with every context namespace (``-q A:``).

>>> from service.sim.datasets import load_dataset
>>> result = run_vw(load_dataset("balance"), "eps0.1", dup=1, seed=0)
>>> result.rounds, 0.4 < result.accuracy < 1.0
(625, True)
"""

from __future__ import annotations

import math
import time

import numpy as np

from service.sim.datasets import Dataset
from service.sim.loop import SimulationResult, shuffled_order

__all__ = ["GRID", "run_vw"]

#: configuration name -> VW arguments (``{k}`` is the number of actions)
GRID = {
    "eps0.01": "--cb_explore {k} --epsilon 0.01",
    "eps0.1": "--cb_explore {k} --epsilon 0.1",
    "eps0.01-q": "--cb_explore {k} --epsilon 0.01 -q ::",
    "eps0.1-q": "--cb_explore {k} --epsilon 0.1 -q ::",
    "bag5": "--cb_explore {k} --bag 5",
    "cover5": "--cb_explore {k} --cover 5",
    "squarecb": "--cb_explore_adf --squarecb -q A:",
}


def _clean(text: str) -> str:
    return text.replace(" ", "_").replace(":", "_").replace("|", "_")


class RunningScaler:
    """Standardise numeric features with running means and variances (Welford).

    >>> s = RunningScaler()
    >>> s.transform("a", 1.0), s.transform("a", 3.0)
    (0.0, 1.0)
    """

    def __init__(self) -> None:
        self.stats: dict[str, list[float]] = {}

    def transform(self, name: str, value: float) -> float:
        n, mean, m2 = self.stats.get(name, (0, 0.0, 0.0))
        n += 1
        delta = value - mean
        mean += delta / n
        m2 += delta * (value - mean)
        self.stats[name] = [n, mean, m2]
        std = math.sqrt(m2 / n) if n > 1 else 0.0
        return (value - mean) / std if std > 0 else 0.0


def context_text(x: dict, scaler: RunningScaler) -> str:
    """``|n name:z ... |s name=value ...`` with standardised numbers."""
    numbers, strings = [], []
    for name, value in x.items():
        key = _clean(str(name))
        if isinstance(value, str):
            strings.append(f"{key}={_clean(value)}")
        elif value == value:  # NaN: missing, left out
            numbers.append(f"{key}:{scaler.transform(key, float(value)):.6g}")
    return f"|n {' '.join(numbers)} |s {' '.join(strings)}"


def run_vw(dataset: Dataset, config: str, dup: int, seed: int) -> SimulationResult:
    """Stream ``dataset`` (``dup`` copies, shuffled by ``seed``) through VW configuration
    ``config``."""
    from vowpalwabbit import Workspace

    k = dataset.n_classes
    adf = "cb_explore_adf" in GRID[config]
    vw = Workspace(f"{GRID[config].format(k=k)} --quiet --random_seed {seed}")
    rng = np.random.default_rng(seed)
    scaler = RunningScaler()
    order = shuffled_order(len(dataset), dup, seed).tolist()
    labels = dataset.y.tolist()
    actions = [f"|A a{a}" for a in range(k)]
    correct = bytearray(len(order))
    start = time.perf_counter()
    for t, i in enumerate(order):
        text = context_text(dataset.X[i], scaler)
        example = [f"shared {text}", *actions] if adf else text
        pmf = np.asarray(vw.predict(example), dtype=float)
        action = int(rng.choice(k, p=pmf / pmf.sum()))
        hit = action == labels[i]
        correct[t] = hit
        label = f"{action + 1 if not adf else 0}:{0.0 if hit else 1.0}:{pmf[action]:.6g}"
        if adf:
            example = list(example)
            example[action + 1] = f"{label} {actions[action]}"
            vw.learn(example)
        else:
            vw.learn(f"{label} {text}")
    seconds = time.perf_counter() - start
    vw.finish()
    return SimulationResult.from_correct(np.frombuffer(correct, dtype=bool).copy(), seconds)
