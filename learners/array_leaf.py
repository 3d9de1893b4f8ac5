"""A Hoeffding-tree leaf whose split statistics live in NumPy arrays.

River's majority-class leaf keeps one splitter object per feature: a ``GaussianSplitter`` (one
``Gaussian`` per class) for a numeric feature, a ``NominalSplitterClassif`` (a dict per class)
for a nominal one, and evaluates every candidate split of every feature in pure Python.
:class:`ArrayLeaf` keeps the same sufficient statistics in arrays:

- numeric features: per (feature, class) the weight, the weighted Welford mean and sum of squares,
  the minimum and the maximum, updated with the same floating-point operations River performs, so
  the statistics are bit for bit River's;
- nominal features: one row of class weights per (feature, value), in a shared table.

A split attempt scores *all* candidates of *all* features in one vectorised pass (the same
``n_splits`` candidate points per numeric feature, the same Gaussian class distributions, the
same information gain, the same binary and multiway nominal candidates). The few candidates
within ``1e-9`` of the top two features are then scored again exactly, by River's own formulas
in River's own order, and the suggestions returned to River's ``_attempt_to_split`` carry those
exact merits and class distributions. Vectorised arithmetic rounds differently from River's
scalar loops by ~1e-15, far below the 1e-9 band, so the tree installs River's split, at River's
example, with River's child statistics.

High-cardinality nominal features (an id with thousands of values) get a bounded
representation: at most ``max_nominal_values`` values of a feature are tracked per leaf (the
rest share one "other" row that takes part in no binary candidate), and multiway splits are only
proposed for features with at most ``max_multiway_values`` distinct values in the whole tree
(the tree keeps that count; see :mod:`learners.vfdt`). Below both thresholds nothing changes.

The leaf is created by :class:`learners.vfdt.ArrayHoeffdingTreeClassifier`; it needs the tree's
Gaussian splitter settings (``n_splits``) and the information-gain criterion.
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict

import numpy as np
from river.tree.nodes.htc_nodes import LeafMajorityClass
from river.tree.splitter.nominal_splitter_classif import NominalSplitterClassif
from river.tree.utils import BranchFactory
from river.utils.math import norm_cdf
from scipy.special import erf

__all__ = ["ArrayLeaf", "EXACT_BAND", "NominalValues"]

#: Candidates whose vectorised merit is within this of the top are re-scored exactly.
EXACT_BAND = 1e-9
#: A branch share this close (relatively) to ``min_branch_fraction`` makes an attempt exact.
_SHARE_BAND = 1e-9
_SQRT2 = math.sqrt(2.0)
_NUMERIC, _NOMINAL = 0, 1
_EMPTY = np.zeros((0, 0))  # shared by fresh leaves; arrays are replaced, never written, at size 0
_OTHER = object()  # the key of the values past a leaf's cap (never equal to a real value)


def _xlogx(d: np.ndarray) -> np.ndarray:
    """``d * log2(d)``, 0 where ``d <= 0`` (River's entropy skips those terms)."""
    return d * np.log2(np.where(d > 0.0, d, 1.0))


def _split_merits(pre_entropy: float, dists: np.ndarray, min_frac: float, leaf=None):
    """Information gain of splits given as class weights ``dists`` (..., branches, classes).

    ``-inf`` where fewer than two branches hold more than ``min_frac`` of the weight (River's
    ``InfoGainSplitCriterion.merit_of_split``).
    """
    sums = dists.sum(axis=-1)
    inner = (_xlogx(sums) - _xlogx(dists).sum(axis=-1)).sum(axis=-1)
    branches = np.moveaxis(sums, -1, 0)
    return _merits(pre_entropy, inner, sums.sum(axis=-1), branches, min_frac, leaf)


def _merits(pre, inner, total, branch_sums, min_frac, leaf=None) -> np.ndarray:
    """``pre - inner / total``, or ``-inf`` with fewer than two branches over ``min_frac``.

    ``branch_sums`` (branches, ...) are the branches' weights; ``leaf`` (optional) is told
    when a share is within rounding of ``min_frac`` (``ArrayLeaf._mark_uncertain``).
    """
    some = total > 0
    safe = np.where(some, total, 1.0)  # no error-state context on the hot path: no 0 / 0
    shares = branch_sums / safe
    big = (shares > min_frac).sum(axis=0)
    raw = pre - inner / safe
    if leaf is not None:
        leaf._note_uncertain(_near(shares, min_frac).any(axis=0) & some, raw)
    return np.where((big >= 2) & some, raw, -np.inf)


def _near(shares: np.ndarray, min_frac: float) -> np.ndarray:
    """Shares within rounding of ``min_frac``: River's sums may fall on the other side."""
    return np.abs(shares - min_frac) <= _SHARE_BAND * max(min_frac, 1e-300)


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
        seen = self.values.get(name)
        if seen is None:
            if self.limit is None:
                return
            seen = self.values[name] = set()
        if value in seen or len(seen) > self.limit:
            return
        seen.add(value)
        if len(seen) == self.limit + 1:
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


class ArrayLeaf(LeafMajorityClass):
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
                slot = self._add_feature(name, _NOMINAL if nominal_kind else _NUMERIC)
            if slot[0] == _NUMERIC:
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
        if kind == _NUMERIC:
            slot = self._slots[name] = (_NUMERIC, len(self._num_names))
            self._num_names.append(name)
            self._num_order.append([])
        else:
            slot = self._slots[name] = (_NOMINAL, len(self._nom_names))
            self._nom_names.append(name)
            self._rows.append({})
            self._values.append(set())
            self._occ.append([])
            self._other.append(None)
        return slot

    def _update_numeric(self, idx, vals: np.ndarray, col: int, w: float) -> None:
        """River's Gaussian update of class ``col`` on the features ``idx`` (slice or indices).

        n += w; mean += (w / n) * (x - mean); S += w * (x - old mean) * (x - new mean).
        """
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

    # ---- split evaluation ---------------------------------------------------------------------

    def best_split_suggestions(self, criterion, tree) -> list[BranchFactory]:
        """River's suggestions (null split first, one per feature in River's order) for the
        features that can be among the two best; their merits and child statistics exact."""
        maj_class = max(self.stats.values())
        if maj_class and maj_class / self.total_weight > tree.max_share_to_split:
            return [BranchFactory()]
        suggestions = [BranchFactory()] if tree.merit_preprune else []
        names = [n for n in self._slots if n not in self._disabled_attrs]
        if not names:
            return suggestions
        pre = criterion.compute_entropy(self.stats)
        self._uncertain = -np.inf
        scores = self._approximate(pre, criterion.min_branch_fraction, tree.binary_split)
        best = np.array([scores[n][0] for n in names])
        second = np.partition(best, -2)[-2] if len(best) > 1 else -np.inf
        if self._uncertain >= second - EXACT_BAND:  # an edge case could reach the top two
            scores = {n: (-np.inf, score[1]) for n, score in scores.items()}  # all exactly
            keep = names
        elif tree.remove_poor_attrs or len(names) <= 2:
            keep = names
        else:
            order = np.argsort(best, kind="stable")
            second, first = best[order[-2]], best[order[-1]]
            if self._surely_no_split(first, second, criterion, tree):
                # River will not split on these merits nor on the exact ones: no exact pass
                return [*suggestions, BranchFactory(second), BranchFactory(first)]
            keep = [n for n, b in zip(names, best.tolist()) if b >= second - EXACT_BAND]
        for name in keep:
            suggestions.append(self._exact(name, scores[name], criterion, tree.binary_split))
        return suggestions

    def _surely_no_split(self, first: float, second: float, criterion, tree) -> bool:
        """Whether River's split test fails for every merits within the band of these."""
        if second == -np.inf:  # River splits (or pre-prunes) for sure: exact pass
            return False
        bound = tree._hoeffding_bound(
            criterion.range_of_merit(self.stats), tree.delta, self.total_weight
        )
        return bound >= tree.tau and first - second < bound - 3 * EXACT_BAND

    def _approximate(self, pre: float, min_frac: float, binary_only: bool) -> dict:
        """feature -> (best vectorised merit, its candidates' merits), all in one pass.

        A numeric feature's candidates are its ``n_splits`` points; a nominal feature's are
        its multiway split (``None`` when not proposed) and one binary split per row.
        """
        out = {}
        if self._num_names:
            num_dists, valid = self._numeric_dists()
            merits = _split_merits(pre, num_dists, min_frac, self)
            num = np.where(valid, merits, -np.inf)
            for name, m, b in zip(self._num_names, num, num.max(axis=1).tolist()):
                out[name] = (b, m)
        if self._row_feature:
            binary, multi, best = self._nominal_merits(pre, min_frac, binary_only)
            for i, name in enumerate(self._nom_names):
                m = multi[i]
                out[name] = (best[i] if m is None else max(m, best[i]), (m, binary))
        return out

    def _nominal_merits(self, pre: float, min_frac: float, binary_only: bool):
        """Binary merits per row, multiway merit per feature (or ``None``), best per feature.

        One row's class weights are the "equal" side of its binary split and one branch of its
        feature's multiway split, so both share the per-row entropy terms.
        """
        n_rows, n_features = len(self._row_feature), len(self._nom_names)
        rows = np.array(self._counts).reshape(n_rows, len(self._labels))
        feature_of = np.array(self._row_feature, dtype=np.intp)
        sums = rows.sum(axis=1)
        inner = _xlogx(sums) - _xlogx(rows).sum(axis=1)  # per row: its weighted entropy
        totals = np.zeros((n_features, rows.shape[1]))
        np.add.at(totals, feature_of, rows)  # per feature: class weights
        total = totals.sum(axis=1)[feature_of]  # per row: its feature's weight
        rest = totals[feature_of] - rows
        rest_sums = total - sums
        rest_inner = _xlogx(rest_sums) - _xlogx(rest).sum(axis=1)
        branches = np.stack([sums, rest_sums])
        binary = _merits(pre, inner + rest_inner, total, branches, min_frac, self)
        for row in self._other:
            if row is not None:
                binary[row] = -np.inf  # "other" is no value to test for
        best = np.full(n_features, -np.inf)
        np.maximum.at(best, feature_of, binary)
        allowed = [not binary_only and self._multiway_allowed(i) for i in range(n_features)]
        multi = [None] * n_features
        if any(allowed):
            merits = self._multiway(pre, feature_of, sums, inner, total, min_frac).tolist()
            multi = [m if a else None for m, a in zip(merits, allowed)]
        return binary, multi, best.tolist()

    def _multiway(self, pre, feature_of, sums, inner, total, min_frac) -> np.ndarray:
        """Merit of each nominal feature's multiway split from its rows' terms."""
        n = len(self._nom_names)
        feature_total = np.bincount(feature_of, weights=sums, minlength=n)
        post = np.bincount(feature_of, weights=inner, minlength=n)
        share = sums / np.where(total > 0, total, 1.0)
        big = np.bincount(feature_of, weights=share > min_frac, minlength=n)
        some = feature_total > 0
        raw = pre - post / np.where(some, feature_total, 1.0)
        near = np.bincount(feature_of, weights=_near(share, min_frac), minlength=n) > 0
        self._note_uncertain(near & some, raw)
        return np.where((big >= 2) & some, raw, -np.inf)

    def _note_uncertain(self, near: np.ndarray, raw: np.ndarray) -> None:
        """Keep the best merit a candidate would have if its validity test, on the edge in
        this pass, went the other way in River's summation order (see best_split_suggestions)."""
        if near.any():
            self._uncertain = max(self._uncertain, float(raw[near].max()))

    def _numeric_dists(self) -> tuple[np.ndarray, np.ndarray]:
        """Class weights left/right of every candidate point (features, points, 2, classes)."""
        n, c = len(self._num_names), len(self._labels)
        w, mean = self._w[:c, :n].T[:, :, None], self._mean[:c, :n].T[:, :, None]
        lo, hi = self._min[:c, :n].T[:, :, None], self._max[:c, :n].T[:, :, None]
        points, valid = self._split_values()
        p = points[:, None, :]
        several = w > 1.0
        var = np.where(several, self._s[:c, :n].T[:, :, None] / np.where(several, w - 1.0, 1.0), 0)
        sigma = np.sqrt(np.maximum(var, 0.0))
        spread = sigma > 0.0
        z = (p - mean) / np.where(spread, sigma, 1.0)
        cdf = np.where(spread, 0.5 * (1.0 + erf(z / _SQRT2)), 0.0)
        left = np.where(p < lo, 0.0, np.where(p >= hi, w, cdf * w))
        dists = np.stack([left, w - left], axis=-1)  # (features, classes, points, 2)
        return np.moveaxis(dists, 1, -1), valid

    def _split_values(self) -> tuple[np.ndarray, np.ndarray]:
        """River's candidate points (features, n_splits) and which of them are proposed."""
        n, c = len(self._num_names), len(self._labels)
        lo = self._min[:c, :n].min(axis=0)
        hi = self._max[:c, :n].max(axis=0)
        size = (hi - lo) / (self.n_splits + 1.0)
        points = lo[:, None] + size[:, None] * np.arange(1, self.n_splits + 1, dtype=float)
        valid = (lo[:, None] < points) & (points < hi[:, None])
        return points, valid

    def _multiway_allowed(self, i: int) -> bool:
        if self._other[i] is not None:
            return False
        return self._tree_values is None or self._tree_values.allows_multiway(self._nom_names[i])

    # ---- exact re-scoring (River's formulas, River's order) ------------------------------------

    def _exact(self, name, score, criterion, binary_only) -> BranchFactory:
        kind, i = self._slots[name]
        best, merits = score
        if kind == _NUMERIC:
            near = np.ones(len(merits), bool) if best == -np.inf else merits >= best - EXACT_BAND
            return self._exact_numeric(name, i, np.flatnonzero(near), criterion)
        return self._exact_nominal(name, i, best, merits, criterion)

    def _exact_numeric(self, name, i, candidates, criterion) -> BranchFactory:
        points, valid = self._split_values()
        suggestion = BranchFactory()
        pre = self.stats
        for j in candidates.tolist():
            if not valid[i, j]:
                continue
            value = float(points[i, j])
            post = self._gaussian_dists(i, value)
            merit = criterion.merit_of_split(pre, post)
            if merit > suggestion.merit:
                suggestion = BranchFactory(merit, name, value, post)
        return suggestion

    def _gaussian_dists(self, i: int, value: float) -> list[dict]:
        """River's ``GaussianSplitter._class_dists_from_binary_split`` on feature ``i``."""
        left, right = {}, {}
        for col in self._num_order[i]:
            label, n = self._labels[col], float(self._w[col, i])
            if value < self._min[col, i]:
                right[label] = n
            elif value >= self._max[col, i]:
                left[label] = n
            else:
                var = float(self._s[col, i]) / (n - 1.0) if n > 1.0 else 0.0
                try:
                    cdf = norm_cdf((value - float(self._mean[col, i])) / var**0.5)
                except ZeroDivisionError:
                    cdf = 0.0
                left[label] = cdf * n
                right[label] = n - left[label]
        return [left, right]

    def _river_nominal(self, i: int) -> NominalSplitterClassif:
        """River's splitter for nominal feature ``i``, dicts filled in River's insertion order."""
        splitter = NominalSplitterClassif()
        per_class = defaultdict(dict)
        values_of = {row: value for value, row in self._rows[i].items()}
        values_of[self._other[i]] = _OTHER  # past the cap: weight on the "not equal" side only
        for row, col in self._occ[i]:
            per_class[self._labels[col]][values_of[row]] = self._counts[row][col]
        splitter._att_dist_per_class = per_class
        splitter._att_values = self._values[i]
        return splitter

    def _exact_nominal(self, name, i, best, merits, criterion) -> BranchFactory:
        multi, binary = merits
        floor = -np.inf if best == -np.inf else best - EXACT_BAND
        splitter = self._river_nominal(i)
        pre = self.stats
        suggestion = BranchFactory()
        if multi is not None:
            post = splitter._class_dist_from_multiway_split()
            merit = criterion.merit_of_split(pre, post)
            values = sorted(self._values[i])
            suggestion = BranchFactory(merit, name, values, post, False, True)
        rows = self._rows[i]
        for value in list(self._values[i]):
            if binary[rows[value]] < floor:
                continue
            post = splitter._class_dist_from_binary_split(value)
            merit = criterion.merit_of_split(pre, post)
            if merit > suggestion.merit:
                suggestion = BranchFactory(merit, name, value, post, False, False)
        return suggestion

    # ---- prediction ---------------------------------------------------------------------------

    def prediction(self, x, *, tree=None):
        """The class weights normalised, as River's majority-class leaf computes them."""
        # River's normalize_values_in_dict(stats, inplace=False) without its deep copy
        total = sum(self.stats.values())
        if total == 0 or math.isnan(total):
            return dict(self.stats)
        scale = 1 / total
        return {label: weight * scale for label, weight in self.stats.items()}
