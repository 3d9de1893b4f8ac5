"""Permutation feature importance of a policy: which context features its choices depend on.

For a sample of logged contexts and one feature at a time, the feature's values are shuffled
across the sample (a seeded permutation: each context gets another context's value, or loses
the feature where that one had none), and the score is the share of contexts whose choice
changes. A feature the policy ignores scores 0 whatever its values; one that decides every
choice scores up to 1 - 1/k. Model-agnostic: ``choose`` is any function of a context.

>>> def choose(x, i):  # plays action 1 when "segment" is "b", ignores "hour"
...     return int(x.get("segment") == "b")
>>> sample = [{"segment": s, "hour": h} for s, h in zip("abab" * 25, range(100))]
>>> scores = permutation_importance(choose, sample, seed=0)
>>> scores["hour"], 0.3 < scores["segment"] < 0.7
(0.0, True)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["feature_names", "permutation_importance"]

_MISSING = object()


def feature_names(contexts: Sequence[dict[str, Any]], limit: int | None = None) -> list[str]:
    """The features of ``contexts``, most frequent first (ties by name), at most ``limit``.

    >>> feature_names([{"a": 1, "b": 2}, {"b": 3}], limit=1)
    ['b']
    """
    counts = Counter(name for x in contexts for name in x)
    ranked = sorted(counts, key=lambda n: (-counts[n], n))
    return ranked if limit is None else ranked[:limit]


def _permuted(contexts: Sequence[dict[str, Any]], name: str, order: np.ndarray
              ) -> list[dict[str, Any]]:
    """The contexts with the values of ``name`` taken from the contexts at ``order``."""
    values = [x.get(name, _MISSING) for x in contexts]
    out = []
    for x, j in zip(contexts, order, strict=True):
        y = dict(x)
        value = values[int(j)]
        if value is _MISSING:
            y.pop(name, None)
        else:
            y[name] = value
        out.append(y)
    return out


def permutation_importance(
    choose: Callable[[dict[str, Any], int], int],
    contexts: Sequence[dict[str, Any]],
    names: Sequence[str] | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """For each feature of ``names`` (default: every feature of ``contexts``), the share of
    ``contexts`` whose choice ``choose(context, index)`` changes when that feature's values
    are shuffled across them (one permutation per feature from a generator seeded ``seed``)."""
    names = feature_names(contexts) if names is None else list(names)
    n = len(contexts)
    if n == 0:
        return {name: 0.0 for name in names}
    base = [choose(x, i) for i, x in enumerate(contexts)]
    rng = np.random.default_rng(seed)
    scores = {}
    for name in names:
        order = rng.permutation(n)
        shuffled = _permuted(contexts, name, order)
        changed = sum(choose(y, i) != base[i] for i, y in enumerate(shuffled))
        scores[name] = changed / n
    return scores
