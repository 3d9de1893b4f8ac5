"""The ridge reward model's path for contexts of one layout, numeric or mixed (numeric features
and nominal ones, such as strings): the layout remembered per feature names (and which of them
are nominal), and the whole map in one compiled call that looks up the products' coordinates,
once every feature, nominal value and product of the context has its coordinate (or the map is
full). A numeric layout takes it until each of its products has a coordinate (then
:mod:`learners.ridge_layout`'s table is the shorter way). It gives the floats of
the feature-by-feature path (:meth:`learners.ridge.RidgeRewards._features_one_by_one`, then
:meth:`~learners.ridge.RidgeRewards._encode`; tests/learners/test_ridge.py).

Its conditions: every nominal value has a coordinate of its own (a value past its feature's cap
has offsets, and takes the feature-by-feature path), every numeric feature too, with its place
in what an offset reads settled. They hold for good once they hold (coordinates and places are
never taken back), so a layout checked once is kept; one that fails is checked again only after
the model has given out coordinates or places. A nominal value without its coordinate sends
that context (only) the feature-by-feature way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from learners._ridge_core import assemble, moved
from learners.linear import PAIR_CLIP, PAIR_FEATURES, PAIR_HASH
from learners.ridge_layout import RidgeState

__all__ = ["MAX_MIXED", "MixedLayout", "encode_mixed"]

#: the most mixed layouts a model remembers (then it forgets them all and starts again)
MAX_MIXED = 256
#: the most features of a mixed layout (its products' table has ``n^2`` entries)
MAX_MIXED_FEATURES = 256


@njit(cache=True)
def _pair_coordinate(a, b, pair_keys, pair_coords, dim, full):
    """The coordinate and sign of the product of the features at coordinates ``a`` and ``b``
    (:meth:`learners.ridge.RidgeRewards._pair_slots` without giving any out): the one given
    out, else (a full map) its signed hash, else -1."""
    lo, hi = min(a, b), max(a, b)
    key = lo * dim + hi
    at = np.searchsorted(pair_keys, key)
    if at < pair_keys.shape[0] and pair_keys[at] == key:
        return pair_coords[at], 1.0
    if not full:
        return -1, 1.0
    m = np.uint64(0xFFFFFFFF)
    h = (np.uint64(lo) * np.uint64(PAIR_HASH) + np.uint64(hi)) & m
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & m
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & m
    h ^= h >> np.uint64(16)
    return 1 + np.int64(h % np.uint64(dim - 1)), 1.0 if h & np.uint64(0x80000000) else -1.0


@njit(cache=True)
def encode_mixed(values, fixed, slots, places, moments, learn, pair_keys, pair_coords, dim,
                 full, quadratic, feature_weight, pair_weight, clip, max_pairs, width, n_local):
    """``(phi(x) over width coordinates, what an offset reads of x, done)`` for a context of
    a mixed layout: feature ``a`` at coordinate ``slots[a]`` is ``fixed[a]`` (a nominal value:
    1) unless that is NaN, then the next of ``values`` standardised (a numeric feature); its
    products' coordinates and signs are looked up in ``pair_keys`` / ``pair_coords`` (the
    model's, :func:`_pair_coordinate`). Not done (and nothing written) where a product it needs
    has no coordinate yet. The rest as :func:`learners._ridge_core.encode_numeric`. Weights of
    None are negative."""
    m = slots.shape[0]
    z = np.empty(m)
    moments1 = np.empty((m, 3))
    kept = np.empty(m, np.int64)
    local = np.zeros(n_local)
    local[0] = 1.0
    k = 0
    v = 0
    for a in range(m):
        if fixed[a] == fixed[a]:
            z[a] = fixed[a]
        else:
            z[a], moments1[a, 0], moments1[a, 1], moments1[a, 2] = moved(
                moments, slots[a], values[v], learn, clip)
            v += 1
            if places[a] > 0:
                local[places[a]] = z[a]
        if z[a] != 0.0:
            kept[k] = a
            k += 1
    p = min(k, max_pairs) if quadratic else 0
    coords = np.empty((p, p), np.int64)  # by place among the kept features
    signs = np.ones((p, p))
    for i in range(p):
        for j in range(i, p):
            coords[i, j], signs[i, j] = _pair_coordinate(
                slots[kept[i]], slots[kept[j]], pair_keys, pair_coords, dim, full)
            if coords[i, j] < 0:
                return np.zeros(0), local, False
    if learn:
        for a in range(m):
            if fixed[a] != fixed[a]:
                moments[slots[a], 0], moments[slots[a], 1] = moments1[a, 0], moments1[a, 1]
                moments[slots[a], 2] = moments1[a, 2]
    zk, sk = z[kept[:k]], slots[kept[:k]]
    phi = assemble(zk, np.arange(k), k, p, sk, coords, signs, feature_weight, pair_weight,
                   width)
    return phi, local, True


def _weight(weight: float | None) -> float:
    """A weight for the compiled map, where -1 stands for None."""
    return -1.0 if weight is None else weight


class MixedLayout(RidgeState):
    """The mixed-layout methods of :class:`learners.ridge.RidgeRewards` (a mixin)."""

    _mixed: dict[tuple, list[Any]]

    def _encode_mixed(self, x: dict, learn: bool) -> tuple | None:
        """:meth:`_encode` in one compiled call (the same floats) for a context (mixed, or
        numeric before its layout's table) whose layout meets the conditions (module
        docstring); else None. A layout is
        the feature names and which are nominal; its nominal values' coordinates are looked
        up for each context."""
        nominal = self.nominal_attributes
        kinds = tuple([isinstance(value, str) or name in nominal for name, value in x.items()])
        key = (tuple(x), kinds)
        cache = self.__dict__.get("_mixed")
        if cache is None:
            cache = self._mixed = {}
        entry: list[Any] | None = cache.get(key)
        if entry is None:
            if len(cache) >= MAX_MIXED:
                cache.clear()
            entry = [None, None]  # layout, when it last failed
            cache[key] = entry
        if entry[0] is None:
            stamp = (self.used, len(self.local_index))
            if entry[1] == stamp:
                return None
            entry[0] = self._mixed_layout(x, kinds)
            if entry[0] is None:
                entry[1] = stamp
                return None
        numeric, nominals, slots, places, fixed = entry[0]
        values = list(x.values())
        slots = slots.copy()
        for i in nominals:
            slot = self.slots.get(("=", key[0][i], values[i]))
            if slot is None:  # a value without its coordinate: one by one
                return None
            slots[i] = slot
        try:
            v = np.array([values[i] for i in numeric]) if numeric else np.zeros(0)
        except (TypeError, ValueError):  # not numbers: the feature-by-feature path says why
            return None
        if v.dtype.kind not in "fiub" or v.ndim != 1:  # a None, an int past float range...
            return None
        width = self.weights.shape[1]
        if learn and self.used > width:
            self._grow(min(self.dim, max(self.used, 2 * width)))
        phi, local, done = encode_mixed(
            v.astype(float, copy=False), fixed, slots, places, self.moments, learn,
            self.pair_keys, self.pair_coords, self.dim, self.used >= self.dim, self.quadratic,
            _weight(self.feature_weight), _weight(self.pair_weight), PAIR_CLIP, PAIR_FEATURES,
            self.weights.shape[1], self.offset_features + 1,
        )
        return (phi, [], local, []) if done else None

    def _mixed_layout(self, x: dict, kinds: tuple) -> tuple | None:
        """``(numeric places in x, nominal places in x, coordinates (a nominal feature's: -1,
        looked up per context), places in the offsets' reading, fixed values)`` of ``x``'s
        layout; None where a numeric feature fails a condition (module docstring)."""
        if len(x) > MAX_MIXED_FEATURES:
            return None
        settled = len(self.local_index) >= self.offset_features
        numeric, nominals, slots, places, fixed = [], [], [], [], []
        slot: int | None
        for i, (name, nominal) in enumerate(zip(x, kinds, strict=True)):
            if nominal:
                slot, place, value = -1, 0, 1.0
                nominals.append(i)
            else:
                slot, place, value = self.slots.get(name), self.local_index.get(name, 0), math.nan
                if slot is None or not (settled or place):
                    return None
                numeric.append(i)
            slots.append(slot)
            places.append(place)
            fixed.append(value)
        return (numeric, nominals, np.array(slots, dtype=np.int64),
                np.array(places, dtype=np.int64), np.array(fixed))
