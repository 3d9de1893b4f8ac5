"""A Hoeffding-tree leaf whose split statistics live in NumPy arrays.

More: docs/boosters.md, "learners/array_leaf.py".
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from river.tree.nodes.htc_nodes import LeafMajorityClass

from learners.leaf_splits import NOMINAL, NUMERIC, SplitScoring

__all__ = ["ArrayLeaf", "NominalValues"]

_EMPTY = np.zeros((0, 0))  # shared by fresh leaves; arrays are replaced, never written, at size 0


class NominalValues:
    """The distinct values of each nominal feature a tree has seen, counted up to ``limit + 1``.

    Shared by a tree and its leaves. A feature whose count passes ``limit`` is queued in
    ``crossed`` for the tree, which then undoes its multiway splits on that feature.

    >>> seen = NominalValues(limit=2)
    >>> for v in "abcd":
    ...     seen.add("user", v)
    >>> seen.allows_multiway("user"), seen.crossed
    (False, ['user'])
    """

    def __init__(self, limit: int | None):
        self.limit = limit
        self.values: dict = {}
        self.crossed: list = []

    def add(self, name, value) -> None:
        """Count ``value`` for feature ``name`` (up to ``limit + 1`` values)."""
        limit = self.limit
        if limit is None:  # no bound: nothing to count
            return
        seen = self.values.get(name)
        if seen is None:
            seen = self.values[name] = set()
        if value in seen or len(seen) > limit:
            return
        seen.add(value)
        if len(seen) == limit + 1:
            self.crossed.append(name)

    def allows_multiway(self, name) -> bool:
        """Whether ``name`` has shown at most ``limit`` distinct values."""
        return self.limit is None or len(self.values.get(name, ())) <= self.limit


def _grow(a: np.ndarray, rows: int, cols: int, fill: float) -> np.ndarray:
    """``a`` padded with ``fill`` to at least (rows, cols), doubling to keep growth amortised."""
    r, c = a.shape
    if rows <= r and cols <= c:
        return a
    shape = (r if rows <= r else max(rows, 2 * r), c if cols <= c else max(cols, 2 * c))
    out = np.full(shape, fill, dtype=a.dtype)
    out[:r, :c] = a
    return out


class ArrayLeaf(SplitScoring, LeafMajorityClass):
    """River's majority-class leaf with array statistics and vectorised split evaluation."""

    def __init__(
        self,
        stats,
        depth,
        splitter,
        max_nominal_values: int | None = None,
        tree_values: NominalValues | None = None,
        **kwargs,
    ):
        super().__init__(stats, depth, splitter, **kwargs)
        self.n_splits = splitter.n_splits
        self.max_nominal_values = max_nominal_values
        self._tree_values = tree_values  # the tree's distinct values per feature (shared)
        self._reset()

    # ---- state --------------------------------------------------------------------------------

    def _reset(self) -> None:
        self._slots: dict = {}  # feature -> (kind, index); insertion order = River's splitters
        self._cols: dict = {}  # class label -> column
        self._labels: list = []
        self._layout = None  # (keys, numeric positions, numeric indices, nominal (pos, index))
        # numeric: (feature, class) statistics
        self._num_names: list = []
        self._w = self._mean = self._s = self._min = self._max = _EMPTY
        self._num_order: list[list[int]] = []  # per feature: class columns, first-seen order
        # nominal: one row per (feature, value); "other" rows collect values past the cap
        self._nom_names: list = []
        self._rows: list[dict] = []  # per feature: value -> row
        self._values: list[set] = []  # per feature: River's set of values (same insertion order)
        self._occ: list[list] = []  # per feature: (row, column) in first-seen order
        self._other: list = []  # per feature: the "other" row, or None
        self._counts: list[list[float]] = []  # per row: class weights (Python floats, as River)
        self._row_feature: list[int] = []
        self._uncertain = -np.inf  # best merit of a candidate whose validity is on the edge

    def activate(self):
        """River's activation: fresh (empty) split statistics."""
        if not self.is_active():
            super().activate()
            self._reset()

    def deactivate(self):
        """River's deactivation: the split statistics are dropped."""
        super().deactivate()
        self._reset()

    def disable_attribute(self, att_id):
        """River's ``remove_poor_attrs``: the feature is neither updated nor proposed again."""
        if att_id in self._slots and att_id not in self._disabled_attrs:
            self._disabled_attrs.add(att_id)
            self._layout = None

    # ---- learning -----------------------------------------------------------------------------

    def update_splitters(self, x, y, w, nominal_attributes):
        """Learn ``x`` for class ``y`` with weight ``w`` (River's per-feature splitter updates).

        The layout of ``x`` (which features are numeric, their slots) is cached on its keys;
        an ``x`` holding a ``None`` gets a layout of its own (River skips the value).
        """
        col = self._cols.get(y)
        if col is None:
            col = self._add_class(y)
        keys = tuple(x)
        layout = self._layout
        if layout is None or layout[0] != keys or None in x.values():
            layout = self._make_layout(x, keys, nominal_attributes)
            self._layout = layout if layout[0] is not None else self._layout
        _, num_pos, num_idx, nominal = layout
        if num_pos:
            if num_pos is True:  # every feature numeric, in slot order
                vals = np.fromiter(x.values(), float, len(keys))
            else:
                values = list(x.values())
                vals = np.array([values[p] for p in num_pos], dtype=float)
            self._update_numeric(num_idx, vals, col, w)
        if nominal:
            self._update_nominal([(i, x[keys[pos]]) for pos, i in nominal], col, w)

    def _add_class(self, y) -> int:
        col = self._cols[y] = len(self._labels)
        self._labels.append(y)
        for row in self._counts:
            row.append(0.0)
        if self._num_names:
            self._fit_arrays()
        return col

    def _fit_arrays(self) -> None:
        """Grow the arrays to the features, rows and classes seen (amortised doubling)."""
        c, n = max(len(self._labels), 1), len(self._num_names)  # class-major: one row a class
        self._w = _grow(self._w, c, n, 0.0)
        self._mean = _grow(self._mean, c, n, 0.0)
        self._s = _grow(self._s, c, n, 0.0)
        self._min = _grow(self._min, c, n, np.inf)
        self._max = _grow(self._max, c, n, -np.inf)

    def _make_layout(self, x, keys, nominal_attributes):
        """(keys or None if not cacheable, numeric positions, numeric slots, nominal slots).

        A feature first seen here gets River's splitter kind: nominal if declared so or if its
        value is not a number (a ``None`` included, as River decides).
        """
        num_pos, num_idx, nominal = [], [], []
        for pos, (name, value) in enumerate(x.items()):
            if name in self._disabled_attrs:
                continue
            slot = self._slots.get(name)
            if slot is None:
                nominal_kind = (
                    nominal_attributes is not None and name in nominal_attributes
                ) or not isinstance(value, numbers.Number)
                slot = self._add_feature(name, NOMINAL if nominal_kind else NUMERIC)
            if slot[0] == NUMERIC:
                if value is None:
                    continue  # River's Gaussian splitter ignores it
                num_pos.append(pos)
                num_idx.append(slot[1])
            else:
                nominal.append((pos, slot[1]))
        if num_idx:
            self._fit_arrays()
        if num_idx == list(range(len(self._num_names))):
            num_idx = slice(0, len(num_idx))  # every numeric feature in slot order: views
            if num_pos and num_pos == list(range(len(x))):
                num_pos = True  # and nothing else: the values are x's values
        else:
            num_idx = np.array(num_idx, dtype=np.intp)
        cacheable = None not in x.values()
        return (keys if cacheable else None, num_pos, num_idx, nominal)

    def _add_feature(self, name, kind):
        if kind == NUMERIC:
            slot = self._slots[name] = (NUMERIC, len(self._num_names))
            self._num_names.append(name)
            self._num_order.append([])
        else:
            slot = self._slots[name] = (NOMINAL, len(self._nom_names))
            self._nom_names.append(name)
            self._rows.append({})
            self._values.append(set())
            self._occ.append([])
            self._other.append(None)
        return slot

    def _update_numeric(self, idx, vals: np.ndarray, col: int, w: float) -> None:
        """River's Gaussian update of class ``col`` on the features ``idx`` (slice or indices).

        n += w; mean += (w / n) * (x - mean); S += w * (x - old mean) * (x - new mean). Past
        float range (a feature of 1e308) they are inf or NaN as in River, whose Python floats
        overflow silently: NumPy is told not to warn of them.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            self._gaussian_update(idx, vals, col, w)

    def _gaussian_update(self, idx, vals: np.ndarray, col: int, w: float) -> None:
        if isinstance(idx, slice):  # in place on contiguous views of the class's rows
            weights, mean, var = self._w[col, idx], self._mean[col, idx], self._s[col, idx]
            if not weights.all():
                self._first_seen(idx, weights, col)
            delta = vals - mean
            weights += w
            mean += (w / weights) * delta
            var += w * delta * (vals - mean)
            np.minimum(self._min[col, idx], vals, out=self._min[col, idx])
            np.maximum(self._max[col, idx], vals, out=self._max[col, idx])
            return
        weights = self._w[col, idx]
        if not weights.all():
            self._first_seen(idx, weights, col)
        n = weights + w
        old = self._mean[col, idx]
        mean = old + (w / n) * (vals - old)
        self._s[col, idx] += w * (vals - old) * (vals - mean)
        self._w[col, idx] = n
        self._mean[col, idx] = mean
        self._min[col, idx] = np.minimum(self._min[col, idx], vals)
        self._max[col, idx] = np.maximum(self._max[col, idx], vals)

    def _first_seen(self, idx, weights: np.ndarray, col: int) -> None:
        """Record class ``col`` for the features where it has no weight yet (River's dict order)."""
        slots = np.arange(len(self._num_names))[idx]
        for i in slots[weights == 0.0].tolist():
            if col not in self._num_order[i]:
                self._num_order[i].append(col)

    def _update_nominal(self, pairs: list, col: int, w: float) -> None:
        """``pairs``: (nominal feature index, value) of one example."""
        counts = self._counts
        for index, value in pairs:
            if value is None:  # River counts it as missing weight, which no split uses
                continue
            row = self._rows[index].get(value)
            if row is None:
                row = self._add_value(index, value)
            cell = counts[row]
            if cell[col] == 0.0:  # first weight (a repeat after a zero weight is harmless)
                self._occ[index].append((row, col))
            cell[col] += w

    def _add_value(self, index: int, value) -> int:
        rows = self._rows[index]
        cap = self.max_nominal_values
        if cap is not None and len(rows) >= cap:
            other = self._other[index]
            if other is None:
                other = self._other[index] = self._new_row(index)
            return other
        row = rows[value] = self._new_row(index)
        self._values[index].add(value)
        if self._tree_values is not None:
            self._tree_values.add(self._nom_names[index], value)
        return row

    def _new_row(self, index: int) -> int:
        self._row_feature.append(index)
        self._counts.append([0.0] * len(self._labels))
        return len(self._row_feature) - 1

    # ---- prediction ---------------------------------------------------------------------------

    def prediction(self, x, *, tree=None):
        """The class weights normalised, as River's majority-class leaf computes them."""
        # River's normalize_values_in_dict(stats, inplace=False) without its deep copy
        total = sum(self.stats.values())
        if total == 0 or math.isnan(total):
            return dict(self.stats)
        scale = 1 / total
        return {label: weight * scale for label, weight in self.stats.items()}
