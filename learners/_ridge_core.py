"""The compiled loops of :mod:`learners.ridge`: the feature map of a context of the model's last
numeric layout, and the rank-one update of an inverse Gram matrix. Both give the floats of the
NumPy code they replace (the same operations in the same order; tests/learners/test_ridge.py)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _scale(weight, n):
    """:meth:`learners.ridge.RidgeRewards._scale` (a negative ``weight`` stands for None)."""
    return 1.0 if weight < 0.0 or n == 0 else min(1.0, math.sqrt(weight / n))


@njit(cache=True)
def moved(moments, slot, value, learn, clip):
    """``(z, n, mean, m2)``: Welford's update of ``moments[slot]`` if ``learn`` (not taken when
    it would not stay finite), then ``value`` standardised and clipped (0 without spread, and
    for a NaN), with the moments it leaves; nothing is written."""
    n, mean, m2 = moments[slot, 0], moments[slot, 1], moments[slot, 2]
    if learn:
        n1 = n + 1.0
        delta = value - mean
        mean1 = mean + delta / n1
        m21 = m2 + delta * (value - mean1)
        if math.isfinite(value) and math.isfinite(mean1) and math.isfinite(m21):
            n, mean, m2 = n1, mean1, m21
    sd = math.sqrt(m2 / n) if n > 1.0 else 0.0
    z = (value - mean) / sd if sd > 0.0 else 0.0
    if z != z:
        return 0.0, n, mean, m2
    return min(max(z, -clip), clip), n, mean, m2


@njit(cache=True)
def assemble(z, kept, k, p, slots, coords, signs, feature_weight, pair_weight, width):
    """``phi(x)`` over ``width`` coordinates from the standardised features ``z``: the ``k``
    non-zero ones (``kept``) at their ``slots``, and the products of the first ``p`` of them at
    ``coords`` with ``signs`` (a coordinate past ``width`` or negative is left out)."""
    phi = np.zeros(width)
    phi[0] += 1.0
    scale = _scale(feature_weight, k)
    for i in range(k):
        if slots[kept[i]] < width:
            phi[slots[kept[i]]] += scale * z[kept[i]]
    if p > 0:
        factor = _scale(pair_weight, p) / scale
        for i in range(p):
            a = kept[i]
            vi = scale * z[a]
            for j in range(i, p):
                b = kept[j]
                c = coords[a, b]
                if 0 <= c < width:
                    phi[c] += factor * signs[a, b] * vi * (scale * z[b])
    return phi


@njit(cache=True)
def encode_numeric(values, slots, places, moments, learn, coords, signs, quadratic,
                   feature_weight, pair_weight, clip, max_pairs, width, n_local):
    """``phi(x)`` over ``width`` coordinates and what an offset reads of ``x``, for a context
    of a numeric layout (``slots``, ``places``) whose products' coordinates and signs are the
    tables ``coords`` and ``signs`` (``[a, b]``: the layout's ``a``-th and ``b``-th features).
    Weights of None are negative."""
    z, moved_to, local = _standardised(values, slots, places, moments, learn, clip, n_local)
    if learn:
        for a in range(slots.shape[0]):
            moments[slots[a]] = moved_to[a]
    return _assembled(z, slots, coords, signs, quadratic, feature_weight, pair_weight,
                      max_pairs, width), local


@njit(cache=True)
def encode_numeric_both(values, slots, places, moments, coords, signs, quadratic,
                        feature_weight, pair_weight, clip, max_pairs, width, n_local):
    """:func:`encode_numeric` of one context for predicting and for learning, in one call:
    ``(phi, local, phi_learned, local_learned, moments_learned)``, the last three what learning
    it next would encode and the moments its features would have then (rows of ``slots``,
    which are distinct in a numeric layout); nothing is written."""
    z, _, local = _standardised(values, slots, places, moments, False, clip, n_local)
    z1, moved_to, local1 = _standardised(values, slots, places, moments, True, clip, n_local)
    phi = _assembled(z, slots, coords, signs, quadratic, feature_weight, pair_weight, max_pairs,
                     width)
    phi1 = _assembled(z1, slots, coords, signs, quadratic, feature_weight, pair_weight,
                      max_pairs, width)
    return phi, local, phi1, local1, moved_to


@njit(cache=True)
def _standardised(values, slots, places, moments, learn, clip, n_local):
    """Each feature standardised (:func:`moved`), the moments it leaves (rows of ``slots``)
    and what an offset reads of the context; nothing is written."""
    m = values.shape[0]
    z = np.empty(m)
    moved_to = np.empty((m, 3))
    local = np.zeros(n_local)
    local[0] = 1.0
    for a in range(m):
        z[a], moved_to[a, 0], moved_to[a, 1], moved_to[a, 2] = moved(
            moments, slots[a], values[a], learn, clip)
        if places[a] > 0:
            local[places[a]] = z[a]
    return z, moved_to, local


@njit(cache=True)
def _assembled(z, slots, coords, signs, quadratic, feature_weight, pair_weight, max_pairs,
               width):
    """:func:`assemble` of the non-zero ones of ``z`` (and products of the first
    ``max_pairs`` of them)."""
    m = z.shape[0]
    kept = np.empty(m, np.int64)
    k = 0
    for a in range(m):
        if z[a] != 0.0:
            kept[k] = a
            k += 1
    p = min(k, max_pairs) if quadratic else 0
    return assemble(z, kept, k, p, slots, coords, signs, feature_weight, pair_weight, width)
