"""Cost vector -> (label, importance weight) for a weak learner that takes weighted labels.

More: docs/boosters.md, "learners/reduction.py".

>>> import numpy as np
>>> costs = np.array([[0.5, -0.2, 0.1], [1.0, 1.0, -3.0]])
>>> labels, weights = cost_to_label_weight(costs, u=np.zeros((2, 3)))
>>> labels.tolist(), weights.round(2).tolist()
([1, 2], [1.0, 8.0])
"""

from __future__ import annotations

from functools import cache

import numpy as np

__all__ = ["cost_to_label_weight", "pick_among", "argmax_random_ties", "ties_loop"]


def argmax_random_ties(values: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Row-wise argmax of ``values`` (N, k), ties broken uniformly at random.

    ``u`` (N, k) holds independent uniform draws in [0, 1): among the maximal entries of a row the
    one with the largest draw wins, which is a uniform choice among them. Two array operations,
    whatever the number of ties.

    >>> v = np.array([[1.0, 3.0, 3.0], [0.0, 0.0, 0.0]])
    >>> argmax_random_ties(v, np.array([[0.9, 0.1, 0.2], [0.3, 0.8, 0.5]])).tolist()
    [2, 1]
    """
    if (type(values) is np.ndarray and type(u) is np.ndarray and values.ndim == 2
            and values.shape == u.shape and values.shape[1] > 0
            and values.dtype == np.float64 and u.dtype == np.float64):
        return _compiled_ties()(values, u)  # a few rows: the array operations' overhead
    return np.argmax(np.where(values == values.max(axis=1, keepdims=True), u, -1.0), axis=1)


def ties_loop(values: np.ndarray, u: np.ndarray) -> np.ndarray:
    """:func:`argmax_random_ties` in loops, with its answers: a row holding a NaN is all
    "not maximal" (0), and the first NaN draw among the maximal entries wins, as ``np.argmax``
    would have it.

    >>> v = np.array([[1.0, 3.0, 3.0], [0.0, np.nan, 0.0], [2.0, 2.0, 1.0]])
    >>> ties_loop(v, np.array([[0.9, 0.1, 0.2], [0.3, 0.8, 0.5], [0.4, np.nan, 0.1]])).tolist()
    [2, 0, 1]
    """
    n, k = values.shape
    out = np.zeros(n, dtype=np.int64)
    for r in range(n):
        top = values[r, 0]
        for c in range(k):
            x = values[r, c]
            if x != x:
                top = x
                break
            if x > top:
                top = x
        if top != top:  # np.max is NaN: no entry equals it, every one reads -1
            continue
        best = u[r, 0] if values[r, 0] == top else -1.0
        at = 0
        for c in range(1, k):
            if best != best:
                break
            w = u[r, c] if values[r, c] == top else -1.0
            if w != w or w > best:
                best, at = w, c
        out[r] = at
    return out


@cache
def _compiled_ties():
    """:func:`ties_loop` compiled (:mod:`learners.round_loops`, imported when first needed)."""
    from learners.round_loops import ties

    return ties


def pick_among(mask: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Row-wise uniform choice among the True entries of ``mask`` (N, k), driven by ``u`` in [0, 1).

    Every row must have at least one True entry.

    >>> pick_among(np.array([[True, False, True], [False, True, False]]), np.array([0.9, 0.1]))
    array([2, 1])
    """
    counts = mask.sum(axis=1)
    target = np.minimum((u * counts).astype(np.int64), counts - 1)  # 0-based rank among ties
    return np.argmax(np.cumsum(mask, axis=1) > target[:, None], axis=1)


#: ``10.0 ** decimals`` as ``np.round`` takes it, for the decimals the compiled reduction takes
_POWERS_OF_TEN = (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8)


def _reduction_compiles(c, u, true_label, decimals, order) -> bool:
    """Whether the compiled :func:`cost_to_label_weight` (:func:`learners.round_loops.
    label_weight`, the same floats) applies: the reference order, float costs and draws of one
    shape, at most 128 actions, a true label among them, at most 8 decimals."""
    return (order == "reference" and c.ndim == 2 and type(u) is np.ndarray
            and u.dtype == np.float64 and u.shape == c.shape and 0 < c.shape[1] <= 128
            and (decimals is None or type(decimals) is int and 0 <= decimals < 9)
            and (true_label is None
                 or type(true_label) in (int, np.int64) and 0 <= true_label < c.shape[1]))


def cost_to_label_weight(
    costs: np.ndarray,
    u: np.ndarray,
    true_label: int | None = None,
    *,
    clip: float | None = 100.0,
    decimals: int | None = 2,
    scale: float = 1.0,
    weight_floor: float = 1e-10,
    order: str = "reference",
) -> tuple[np.ndarray, np.ndarray]:
    """Labels (N,) and importance weights (N,) for cost vectors ``costs`` (N, k).

    ``true_label`` is the label known to be correct this round (bandit: the played action when
    the feedback said "correct"; full information: the label), or ``None``.
    """
    c = np.asarray(costs, dtype=float)
    if c.ndim == 1:
        c = c[None, :]
    if order not in ("reference", "paper"):
        raise ValueError(f"order must be 'reference' or 'paper', got {order!r}")
    if _reduction_compiles(c, u, true_label, decimals, order):
        from learners.round_loops import label_weight

        return label_weight(c, u, -1 if true_label is None else true_label,
                            np.inf if clip is None else float(clip),
                            -1.0 if decimals is None else _POWERS_OF_TEN[decimals],
                            float(scale), float(weight_floor))
    lab = c if clip is None else np.minimum(np.maximum(c, -clip), clip)
    if order == "reference":
        if decimals is not None:
            lab = np.round(lab, decimals)
        shifted = c - c.min(axis=1, keepdims=True)
        if decimals is not None:
            shifted = np.round(shifted, decimals, out=shifted)
        if clip is not None:
            np.minimum(shifted, clip, out=shifted)  # after the shift only the upper bound bites
    lowest = lab.min(axis=1, keepdims=True)
    if order == "paper":
        shifted = lab - lowest
    weights = shifted.sum(axis=1)
    ties = lab == lowest
    labels = np.argmax(np.where(ties, np.asarray(u, dtype=float).reshape(lab.shape), -1.0), axis=1)
    if true_label is not None:
        labels[ties[:, true_label]] = true_label
    if scale != 1.0:
        weights /= scale
    return labels, np.maximum(weights, weight_floor, out=weights)
