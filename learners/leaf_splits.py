"""How an :class:`learners.array_leaf.ArrayLeaf` scores its candidate splits.

A split attempt scores *all* candidates of *all* features in one vectorised pass (the same
``n_splits`` candidate points per numeric feature, the same Gaussian class distributions, the same
information gain, the same binary and multiway nominal candidates). The few candidates within
:data:`EXACT_BAND` of the top two features are then scored again exactly, by River's own formulas
in River's own order, so the tree installs River's split at River's example (docs/boosters.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
from river.tree.splitter.nominal_splitter_classif import NominalSplitterClassif
from river.tree.utils import BranchFactory
from river.utils.math import norm_cdf
from scipy.special import erf

__all__ = [
    "EXACT_BAND",
    "NOMINAL",
    "NUMERIC",
    "SHARE_BAND",
    "SplitScoring",
    "branch_merits",
    "near_min_fraction",
    "split_merits",
    "xlogx",
]

#: Candidates whose vectorised merit is within this of the top are re-scored exactly.
EXACT_BAND = 1e-9
#: A branch share this close (relatively) to ``min_branch_fraction`` makes an attempt exact.
SHARE_BAND = 1e-9
SQRT2 = math.sqrt(2.0)
#: the kinds of a leaf's feature slot
NUMERIC, NOMINAL = 0, 1
OTHER = object()  # the key of the values past a leaf's cap (never equal to a real value)


def xlogx(d: np.ndarray) -> np.ndarray:
    """``d * log2(d)``, 0 where ``d <= 0`` (River's entropy skips those terms)."""
    return d * np.log2(np.where(d > 0.0, d, 1.0))


def split_merits(pre_entropy: float, dists: np.ndarray, min_frac: float, leaf=None):
    """Information gain of splits given as class weights ``dists`` (..., branches, classes).

    ``-inf`` where fewer than two branches hold more than ``min_frac`` of the weight (River's
    ``InfoGainSplitCriterion.merit_of_split``).
    """
    sums = dists.sum(axis=-1)
    inner = (xlogx(sums) - xlogx(dists).sum(axis=-1)).sum(axis=-1)
    branches = np.moveaxis(sums, -1, 0)
    return branch_merits(pre_entropy, inner, sums.sum(axis=-1), branches, min_frac, leaf)


def branch_merits(pre, inner, total, branch_sums, min_frac, leaf=None) -> np.ndarray:
    """``pre - inner / total``, or ``-inf`` with fewer than two branches over ``min_frac``.

    ``branch_sums`` (branches, ...) are the branches' weights; ``leaf`` (optional) is told
    when a share is within rounding of ``min_frac`` (``SplitScoring._note_uncertain``).
    """
    some = total > 0
    safe = np.where(some, total, 1.0)  # no error-state context on the hot path: no 0 / 0
    shares = branch_sums / safe
    big = (shares > min_frac).sum(axis=0)
    raw = pre - inner / safe
    if leaf is not None:
        leaf._note_uncertain(near_min_fraction(shares, min_frac).any(axis=0) & some, raw)
    return np.where((big >= 2) & some, raw, -np.inf)


def near_min_fraction(shares: np.ndarray, min_frac: float) -> np.ndarray:
    """Shares within rounding of ``min_frac``: River's sums may fall on the other side."""
    return np.abs(shares - min_frac) <= SHARE_BAND * max(min_frac, 1e-300)


class SplitScoring:
    """The split evaluation of :class:`learners.array_leaf.ArrayLeaf` (a mixin over its arrays).

    Candidate merits in one vectorised pass, then River's exact formulas for the few candidates
    that can be among the two best.
    """

    # the host leaf's state (set by ArrayLeaf._reset and River's leaf), declared for the checker
    stats: dict
    total_weight: float
    n_splits: int
    _disabled_attrs: set
    _slots: dict
    _labels: list
    _num_names: list
    _num_order: list[list[int]]
    _w: np.ndarray
    _mean: np.ndarray
    _s: np.ndarray
    _min: np.ndarray
    _max: np.ndarray
    _nom_names: list
    _rows: list[dict]
    _values: list[set]
    _occ: list[list]
    _other: list
    _counts: list[list[float]]
    _row_feature: list[int]
    _tree_values: Any
    _uncertain: float

    def best_split_suggestions(self, criterion, tree) -> list[BranchFactory]:
        """River's suggestions (null split first, one per feature in River's order) for the
        features that can be among the two best; their merits and child statistics exact.
        Statistics past float range (a feature of 1e308) are inf or NaN as in River, whose
        Python floats overflow silently: NumPy is told not to warn of them."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return self._suggestions(criterion, tree)

    def _suggestions(self, criterion, tree) -> list[BranchFactory]:
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
            merits = split_merits(pre, num_dists, min_frac, self)
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
        inner = xlogx(sums) - xlogx(rows).sum(axis=1)  # per row: its weighted entropy
        totals = np.zeros((n_features, rows.shape[1]))
        np.add.at(totals, feature_of, rows)  # per feature: class weights
        total = totals.sum(axis=1)[feature_of]  # per row: its feature's weight
        rest = totals[feature_of] - rows
        rest_sums = total - sums
        rest_inner = xlogx(rest_sums) - xlogx(rest).sum(axis=1)
        branches = np.stack([sums, rest_sums])
        binary = branch_merits(pre, inner + rest_inner, total, branches, min_frac, self)
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
        near = np.bincount(feature_of, weights=near_min_fraction(share, min_frac), minlength=n) > 0
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
        cdf = np.where(spread, 0.5 * (1.0 + erf(z / SQRT2)), 0.0)
        left = np.where(p < lo, 0.0, np.where(p >= hi, w, cdf * w))
        dists = np.stack([left, w - left], axis=-1)  # (features, classes, points, 2)
        return np.moveaxis(dists, 1, -1), valid

    def _split_values(self) -> tuple[np.ndarray, np.ndarray]:
        """River's candidate points (features, n_splits) and which of them are proposed."""
        n, c = len(self._num_names), len(self._labels)
        lo = self._min[:c, :n].min(axis=0)
        hi = self._max[:c, :n].max(axis=0)
        size = (hi - lo) / (self.n_splits + 1.0)
        points = lo[:, None] + size[:, None] * np.arange(1, self.n_splits + 1, dtype=np.float64)
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
        if kind == NUMERIC:
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
        per_class: defaultdict = defaultdict(dict)
        values_of = {row: value for value, row in self._rows[i].items()}
        values_of[self._other[i]] = OTHER  # past the cap: weight on the "not equal" side only
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
        # first-seen order, the same in every process: River iterates a set of the values,
        # whose order for strings follows the process's hash seed, and two binary splits of a
        # two-valued feature tie exactly (the first one met wins)
        for value, row in self._rows[i].items():
            if binary[row] < floor:
                continue
            post = splitter._class_dist_from_binary_split(value)
            merit = criterion.merit_of_split(pre, post)
            if merit > suggestion.merit:
                suggestion = BranchFactory(merit, name, value, post, False, False)
        return suggestion
