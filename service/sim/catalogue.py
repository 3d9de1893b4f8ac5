"""The rotating catalogue: a seeded stream of rounds whose candidates are described by features
and whose item ids keep changing (Personalizer's and VW's action-feature case).

A live pool of 30 items, 5 in each of 6 categories; every round, with probability ``churn``,
one pool item is replaced by a new item of the same category with a new id, so ids never seen
before keep arriving. An item has an ``id``, a ``cat`` (string), a ``price`` and a ``quality``
(uniform in [0, 1]). A round shows ``K = 4`` items of 4 distinct categories; the user's context
is ``pref`` (the category of one of the 4, drawn uniformly) and ``budget`` (uniform, noise). The
reward is Bernoulli: 0.9 for the item of the preferred category, ``0.1 * quality`` for the
others (uniform random: about 0.26; the best fixed rule: 0.9).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CATEGORIES", "K", "PER_CATEGORY", "Round", "catalogue_stream"]

CATEGORIES = 6
PER_CATEGORY = 5
K = 4


@dataclass(frozen=True)
class Round:
    """One round: the context, the candidates and the reward each would get."""

    context: dict
    actions: list[dict]
    rewards: np.ndarray


def _item(rng: np.random.Generator, serial: int, cat: int) -> dict:
    return {"id": f"item{serial}", "cat": f"c{cat}",
            "price": round(float(rng.random()), 4), "quality": round(float(rng.random()), 4)}


def catalogue_stream(rounds: int, seed: int, churn: float = 0.05) -> list[Round]:
    """``rounds`` rounds of the rotating catalogue, drawn by ``seed``.

    >>> stream = catalogue_stream(100, seed=0)
    >>> len(stream[0].actions), sorted(stream[0].context)
    (4, ['budget', 'pref'])
    >>> len({a["id"] for r in stream for a in r.actions}) > 30     # new ids arrived
    True
    """
    rng = np.random.default_rng(seed)
    pool = [[_item(rng, c * PER_CATEGORY + j, c) for j in range(PER_CATEGORY)]
            for c in range(CATEGORIES)]
    serial = CATEGORIES * PER_CATEGORY
    stream = []
    for _ in range(rounds):
        if rng.random() < churn:
            c, j = int(rng.integers(CATEGORIES)), int(rng.integers(PER_CATEGORY))
            pool[c][j], serial = _item(rng, serial, c), serial + 1
        cats = rng.choice(CATEGORIES, size=K, replace=False)
        actions = [pool[c][int(rng.integers(PER_CATEGORY))] for c in cats]
        pref = int(cats[rng.integers(K)])
        context = {"pref": f"c{pref}", "budget": round(float(rng.random()), 4)}
        p = np.array([0.9 if c == pref else 0.1 * a["quality"] for c, a in zip(cats, actions)])
        stream.append(Round(context, actions, (rng.random(K) < p).astype(float)))
    return stream
