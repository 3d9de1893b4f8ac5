"""The ridge reward model's path for contexts of one mixed layout (numeric features and nominal
ones, such as strings): the layout remembered per feature names and nominal values, and the
whole map in one compiled call over a table of the layout's products, once every feature and
every product of the layout has its coordinate (or the map is full). It gives the floats of
the feature-by-feature path (:meth:`learners.ridge.RidgeRewards._features_one_by_one`, then
:meth:`~learners.ridge.RidgeRewards._encode`; tests/test_ridge.py).

Its conditions: every nominal value has a coordinate of its own (a value past its feature's cap
has offsets, and takes the feature-by-feature path), every numeric feature too, with its place
in what an offset reads settled. They hold for good once they hold (coordinates and places are
never taken back), so a layout checked once is kept; one that fails is checked again only after
the model has given out coordinates or places.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from learners._ridge_core import assemble, moved
from learners.linear import PAIR_CLIP, PAIR_FEATURES

__all__ = ["MAX_MIXED", "MixedLayout", "encode_mixed"]

#: the kind of a numeric feature in a mixed layout's key (a nominal one's: its value)
_NUMERIC = object()
#: the most mixed layouts a model remembers (then it forgets them all and starts again)
MAX_MIXED = 256
#: the most features of a mixed layout (its products' table has ``n^2`` entries)
MAX_MIXED_FEATURES = 256


@njit(cache=True)
def encode_mixed(values, fixed, slots, places, moments, learn, coords, signs, quadratic,
                 feature_weight, pair_weight, clip, max_pairs, width, n_local):
    """``(phi(x) over width coordinates, what an offset reads of x, done)`` for a context of
    a mixed layout: feature ``a`` at coordinate ``slots[a]`` is ``fixed[a]`` (a nominal value:
    1) unless that is NaN, then the next of ``values`` standardised (a numeric feature); its
    products' coordinates and signs are ``coords`` and ``signs`` (-1: a product without its
    coordinate yet). Not done (and nothing written) where a product it needs has none. The
    rest as :func:`learners._ridge_core.encode_numeric`. Weights of None are negative."""
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
    for i in range(p):
        for j in range(i, p):
            if coords[kept[i], kept[j]] < 0:
                return np.zeros(0), local, False
    if learn:
        for a in range(m):
            if fixed[a] != fixed[a]:
                moments[slots[a], 0], moments[slots[a], 1] = moments1[a, 0], moments1[a, 1]
                moments[slots[a], 2] = moments1[a, 2]
    phi = assemble(z, kept, k, p, slots, coords, signs, feature_weight, pair_weight, width)
    return phi, local, True


def _weight(weight: float | None) -> float:
    """A weight for the compiled map, where -1 stands for None."""
    return -1.0 if weight is None else weight


class MixedLayout:
    """The mixed-layout methods of :class:`learners.ridge.RidgeRewards` (a mixin)."""

    def _encode_mixed(self, x: dict, learn: bool) -> tuple | None:
        """:meth:`_encode` in one compiled call (the same floats) for a context with a nominal
        feature whose layout meets the conditions (module docstring); else None."""
        nominal = self.nominal_attributes
        kinds = tuple([value if isinstance(value, str) or name in nominal else _NUMERIC
                       for name, value in x.items()])
        key = (tuple(x), kinds)
        cache = self.__dict__.get("_mixed")
        if cache is None:
            cache = self._mixed = {}
        entry = cache.get(key)
        if entry is None:
            if len(cache) >= MAX_MIXED:
                cache.clear()
            entry = cache[key] = [None, None, None]  # layout, when it last failed, table
        if entry[0] is None:
            stamp = (self.used, len(self.local_index))
            if entry[1] == stamp or all(kind is _NUMERIC for kind in kinds):
                return None
            entry[0] = self._mixed_layout(x)
            if entry[0] is None:
                entry[1] = stamp
                return None
        numeric, slots, places, fixed = entry[0]
        table = entry[2]
        if table is None or (table[2] and table[3] != self.used):  # products given out since
            table = entry[2] = self._mixed_table(slots)
        values = list(x.values())
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
            v.astype(float, copy=False), fixed, slots, places, self.moments, learn, table[0],
            table[1], self.quadratic, _weight(self.feature_weight), _weight(self.pair_weight),
            PAIR_CLIP, PAIR_FEATURES, self.weights.shape[1], self.offset_features + 1,
        )
        return (phi, [], local, []) if done else None

    def _mixed_layout(self, x: dict) -> tuple | None:
        """``(numeric places in x, coordinates, places in the offsets' reading, fixed values)``
        of ``x``'s layout; None where a condition fails (module docstring)."""
        if len(x) > MAX_MIXED_FEATURES:
            return None
        settled = len(self.local_index) >= self.offset_features
        numeric, slots, places, fixed = [], [], [], []
        for i, (name, value) in enumerate(x.items()):
            if isinstance(value, str) or name in self.nominal_attributes:
                slot, place, value = self.slots.get(("=", name, value)), 0, 1.0
            else:
                slot, place, value = self.slots.get(name), self.local_index.get(name, 0), math.nan
                if not (settled or place):
                    return None
                numeric.append(i)
            if slot is None:
                return None
            slots.append(slot)
            places.append(place)
            fixed.append(value)
        return (numeric, np.array(slots, dtype=np.int64), np.array(places, dtype=np.int64),
                np.array(fixed))

    def _mixed_table(self, slots: np.ndarray) -> tuple:
        """``(coordinates, signs, some missing, used)`` of the products of the features at
        ``slots`` (``[a, b]``: of the ``a``-th and ``b``-th; -1: none yet, while the map has
        room), and the coordinates given out when it was made."""
        if not self.quadratic:
            return np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0)), False, self.used
        n = slots.size
        coords, signs = self._pair_slots(np.repeat(slots, n), np.tile(slots, n), learn=False)
        missing = bool((coords < 0).any())
        return coords.reshape(n, n), signs.reshape(n, n), missing, self.used
