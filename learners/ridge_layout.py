"""The ridge reward model's path for contexts of one numeric layout: the layout remembered,
its features standardised in array operations, and, once every product of the layout has its
coordinate, the whole map in one compiled call (:mod:`learners._ridge_core`) over a table of
the layout's products. Every path
gives the floats of the feature-by-feature one (tests/learners/test_ridge.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from learners.linear import PAIR_CLIP, PAIR_FEATURES

__all__ = ["MAX_TABLE", "NumericLayout"]

#: the most features of a numeric layout whose products get a table (``n^2`` entries)
MAX_TABLE = 256
#: the product tables of a model without products
_NO_TABLE = (np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0)))


def _or_negative(weight: float | None) -> float:
    """A weight for the compiled map, where -1 stands for None."""
    return -1.0 if weight is None else weight


class RidgeState:
    """The state of :class:`learners.ridge.RidgeRewards` its mixins read, declared for the type
    checker (annotations only: the model sets every one of them)."""

    n_actions: int
    dim: int
    used: int
    quadratic: bool
    nominal_attributes: frozenset
    slots: dict
    local_index: dict
    moments: np.ndarray
    weights: np.ndarray
    pair_keys: np.ndarray
    pair_coords: np.ndarray
    offset_features: int
    offset_l2: float
    feature_weight: float | None
    pair_weight: float | None

    if TYPE_CHECKING:
        def _grow(self, d: int) -> None: ...
        def _pair_slots(self, a: np.ndarray, b: np.ndarray, learn: bool) -> tuple: ...


class NumericLayout(RidgeState):
    """The numeric-layout methods of :class:`learners.ridge.RidgeRewards` (a mixin)."""

    def _remember_layout(self, x: dict) -> None:
        """Keep ``x``'s layout for :meth:`_numeric_features` when every feature is numeric with
        a coordinate of its own and its place in the offsets' reading is settled."""
        slots, places = [], []
        settled = len(self.local_index) >= self.offset_features
        for name, value in x.items():
            if isinstance(value, str) or name in self.nominal_attributes:
                return
            slot = self.slots.get(name)
            if slot is None or not (settled or name in self.local_index):
                return
            slots.append(slot)
            places.append(self.local_index.get(name, 0))
        self._layout = [tuple(x), np.array(slots, dtype=np.int64),
                        np.array(places, dtype=np.int64), None, -1]

    def _numeric_features(self, x: dict, learn: bool):
        """:meth:`_features_one_by_one` in array operations for a context of the last numeric
        layout (the same floats: Welford's update and the standardisation in the same order);
        None where it does not apply."""
        layout = getattr(self, "_layout", None)
        if layout is None or layout[0] != tuple(x):
            return None
        v = np.array(list(x.values()))
        if v.dtype.kind not in "fiub":  # a string, a None, an int past float range: one by one
            return None
        v = v.astype(float)
        slots, places = layout[1], layout[2]
        n, mean, m2 = self.moments[slots].T
        if learn:
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow keeps the moments
                n1, delta = n + 1.0, v - mean
                mean1 = mean + delta / n1
                m21 = m2 + delta * (v - mean1)
            ok = np.isfinite(v) & np.isfinite(mean1) & np.isfinite(m21)
            n, mean, m2 = (np.where(ok, a, b) for a, b in ((n1, n), (mean1, mean), (m21, m2)))
            self.moments[slots] = np.stack([n, mean, m2], axis=1)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            sd = np.sqrt(np.where(n > 1.0, m2 / np.where(n > 1.0, n, 1.0), 0.0))
            z = np.where(sd > 0.0, (v - mean) / np.where(sd > 0.0, sd, 1.0), 0.0)
        z = np.clip(np.where(np.isnan(z), 0.0, z), -PAIR_CLIP, PAIR_CLIP)
        local = np.zeros(self.offset_features + 1)
        local[0] = 1.0
        placed = places > 0
        local[places[placed]] = z[placed]
        keep = z != 0.0
        return slots[keep].tolist(), z[keep].tolist(), [], local, []

    def _encode_compiled(self, x: dict, learn: bool) -> tuple | None:
        """:meth:`_encode` in one compiled call (the same floats) for a context of the last
        numeric layout once its products have a table (or without products); else None."""
        found = self._layout_values(x)
        if found is None:
            return None
        width = self.weights.shape[1]
        if learn and self.used > width:
            self._grow(min(self.dim, max(self.used, 2 * width)))
        from learners._ridge_core import encode_numeric

        layout, table, v = found
        phi, local = encode_numeric(
            v, layout[1], layout[2], self.moments, learn, *table, *self._map_settings())
        return phi, [], local, []

    def _encode_both(self, x: dict) -> tuple | None:
        """:meth:`_encode_compiled` of ``x`` for predicting and, at once, what learning ``x``
        next encodes: ``(phi, local, learned)``, ``learned`` for :meth:`_learned`; None where
        the one-call path does not apply, or learning would widen the model first."""
        found = None if self.used > self.weights.shape[1] else self._layout_values(x)
        if found is None:
            return None
        from learners._ridge_core import encode_numeric_both

        layout, table, v = found
        phi, local, *learned = encode_numeric_both(
            v, layout[1], layout[2], self.moments, *table, *self._map_settings())
        return phi, local, (layout[1], *learned)

    def _layout_values(self, x: dict) -> tuple | None:
        """``(layout, product table, values as floats)`` of a context of the last numeric
        layout once its products have a table (or without products); else None."""
        layout = self.__dict__.get("_layout")
        if layout is None or layout[0] != tuple(x):
            return None
        table = self._pair_table(layout) if self.quadratic else _NO_TABLE
        v = np.array(list(x.values()))
        if table is None or v.dtype.kind not in "fiub":
            return None
        return layout, table, v.astype(float)

    def _map_settings(self) -> tuple:
        """The compiled map's arguments after the context's: products, weights (-1: None),
        clip, how many features pair, width, offsets' reading length."""
        return (self.quadratic, _or_negative(self.feature_weight),
                _or_negative(self.pair_weight), PAIR_CLIP, PAIR_FEATURES,
                self.weights.shape[1], self.offset_features + 1)

    def _learned(self, learned: tuple) -> tuple[np.ndarray, np.ndarray]:
        """Learning's ``phi`` and ``local`` from :meth:`_encode_both`, the moments moved as
        encoding with ``learn=True`` moves them (the same floats)."""
        slots, phi, local, moments = learned
        self.moments[slots] = moments
        return phi, local

    def _pair_table(self, layout: list) -> tuple[np.ndarray, np.ndarray] | None:
        """The coordinates and signs of the products of every two features of a numeric
        ``layout`` (``[a, b]`` for its ``a``-th and ``b``-th features), made once each has its
        coordinate (given out, or hashed in a full map: either way it stays); None before (looked
        at again once the model has given out more coordinates), or for a layout of more than
        ``MAX_TABLE`` features."""
        if layout[3] is None and layout[4] != self.used and len(layout[0]) <= MAX_TABLE:
            n = len(layout[0])
            a = np.repeat(layout[1], n)
            coords, signs = self._pair_slots(a, np.tile(layout[1], n), learn=False)
            if (coords >= 0).all():
                layout[3] = coords.reshape(n, n), signs.reshape(n, n)
            else:  # a product without its coordinate yet
                layout[4] = self.used
        return layout[3]

