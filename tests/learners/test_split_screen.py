"""The split search's screen: numeric features ranked with a tabled normal CDF, the features
that may be a leaf's best two searched again exactly; the attempts decide as the exact search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learners import split_search
from learners._approx import CDF_ERROR, normal_cdf
from learners._core import rank_order
from learners._core_search import (
    _LAST_N,
    _LEFT,
    _N,
    _RIGHT,
    _WORK_ROWS,
    SCREENED,
    _gain_bound,
    _merit,
    _numeric_best,
)
from learners._core_split import entropy
from learners._layout import MIN_FRAC, N_SPLITS, SLOT
from learners.compiled import TreeEnsemble
from learners.split_search import helper_on, set_helper


def test_the_tabled_cdf_is_within_its_bound_of_erf():
    """A dense grid over and past the table's range, and the values that end it."""
    grid = np.concatenate([np.linspace(-9.5, 9.5, 400_001), [-8.5, 8.5, 0.0, -1e-300]])
    exact = np.array([0.5 * (1.0 + math.erf(u / math.sqrt(2.0))) for u in grid])
    approx = np.array([normal_cdf(u) for u in grid])
    assert np.abs(approx - exact).max() < 2e-10 < CDF_ERROR
    assert math.isnan(normal_cdf(float("nan")))


def _stream(n, seed=0, features=12, classes=6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, features))
    for _ in range(n):
        y = int(rng.integers(classes))
        x = centres[y] + rng.normal(scale=1.2, size=features)
        x[:2] = np.round(x[:2])  # a few values only: exact ties between features
        yield {f"f{j}": float(v) for j, v in enumerate(x)}, y, float(rng.choice([1.0, 7.0, 60.0]))


def _decision(merits, values, flags):
    """What an attempt reads of its leaf's search (attempt_finish): the suggestions, the best
    two merits, the best feature (the last of equal merits), its value and whether it is real."""
    n, top, second, best = 0, -math.inf, -math.inf, -1
    for j in range(merits.size):
        if flags[j] & 1:
            n += 1
            if merits[j] >= top:
                second, top, best = top, merits[j], j
            elif merits[j] > second:
                second = merits[j]
    if best < 0:
        return n, top, second, best
    return n, top, second, best, repr(float(values[best])), bool(flags[best] & 2)


def _exact(trees, node):
    """Every numeric feature of leaf ``node`` searched exactly."""
    n_classes, n_feat = trees.n_classes, trees.kinds.shape[0]
    order, slot_order = np.empty(n_classes, np.int64), np.empty(n_classes, np.int64)
    work = np.empty((_WORK_ROWS, n_classes))
    work[_LAST_N] = -1.0
    s = trees.ni[node, SLOT]
    pre = entropy(trees.cls[node], order, rank_order(trees.present[node], order))
    n_slot = rank_order(trees.seen[s], slot_order)
    merits, values, flags = np.empty(n_feat), np.empty(n_feat), np.zeros(n_feat, np.int8)
    for j in range(n_feat):
        merit, value, _, has, _ = _numeric_best(trees.stat_blocks, trees.block_of, s, j, pre,
                                                int(trees.cfg[N_SPLITS]), trees.cfg[MIN_FRAC],
                                                work, slot_order, n_slot, False, -math.inf)
        merits[j], values[j], flags[j] = merit, value, int(has) + 2 * (merit > -math.inf)
    return merits, values, flags


@pytest.fixture
def shared_always():
    before, floor = helper_on(), split_search.MIN_SHARED_WORK
    set_helper(True)
    split_search.MIN_SHARED_WORK = 1
    yield
    set_helper(before)
    split_search.MIN_SHARED_WORK = floor


def test_screened_attempts_decide_as_the_exact_search(monkeypatch, shared_always):
    """Each searched leaf of a weighted stream: the screened and refined search gives the
    attempt the exact search's suggestions, best two merits, best feature and value, every
    feature it does not mark screened has the exact search's merit and value; and the screen
    spared most features their exact search."""
    original = split_search.Searcher.search
    seen = {"leaves": 0, "spared": 0, "pairs": 0}

    def checked(self, kernel, refine, trees, n_att):
        original(self, kernel, refine, trees, n_att)
        for a in range(n_att):
            merits, values, flags = _exact(trees, self.nodes[a])
            assert _decision(self.merits[a], self.values[a], self.flags[a]) == _decision(
                merits, values, flags)
            exact = (self.flags[a] & SCREENED == 0) & (trees.kinds == 0)
            assert np.array_equal(self.merits[a][exact], merits[exact])
            assert np.array_equal(self.values[a][exact], values[exact], equal_nan=True)
            seen["leaves"] += 1
            seen["spared"] += int((self.flags[a] & SCREENED != 0).sum())
            seen["pairs"] += merits.size

    monkeypatch.setattr(split_search.Searcher, "search", checked)
    trees = TreeEnsemble(4, 6, grace_periods=[5, 10, 20, 8], deltas=[0.5, 0.1, 0.01, 0.3],
                         taus=[0.05, 0.3, 0.9, 0.01], leaf_prediction="nba")
    for x, y, w in _stream(600):
        trees.learn(trees.transform(x, learn=True), np.full(4, y), np.full(4, w))
    assert seen["leaves"] > 300 and trees.n_leaves().min() > 3
    assert seen["spared"] > seen["pairs"] / 2


def test_the_screen_is_unsure_near_the_branch_share_bound():
    """A point whose lighter branch holds ``min_frac`` of the weight to within the CDF's error
    is neither counted nor dropped: the screen is unsure and the feature is searched again
    exactly. Here class 1 (one value) holds exactly 1% right of class 0's range."""
    trees = TreeEnsemble(1, 2, grace_periods=[1e9], leaf_prediction="mc")
    for v, y, w in [(0.0, 0, 50.0), (1.0, 0, 49.0), (5.0, 1, 1.0)]:
        trees.learn(trees.transform({"a": v}, learn=True), np.array([y]), np.array([w]))
    node = trees.tree_i[0, 0]
    s = trees.ni[node, SLOT]
    order, slot_order = np.empty(2, np.int64), np.empty(2, np.int64)
    work = np.empty((_WORK_ROWS, 2))
    work[_LAST_N] = -1.0
    pre = entropy(trees.cls[node], order, rank_order(trees.present[node], order))
    n_slot = rank_order(trees.seen[s], slot_order)
    args = (trees.stat_blocks, trees.block_of, s, 0, pre, 10, 0.01, work, slot_order, n_slot)
    merit, _, _, has, _ = _numeric_best(*args, False, -math.inf)
    screened, _, unsure, screened_has, exact = _numeric_best(*args, True, -math.inf)
    assert has and screened_has and unsure and not exact
    assert merit > -math.inf and abs(screened - merit) < 1e-6  # the points clear of the bound


def test_the_gain_bound_is_never_below_the_merit():
    """The bounds of a point's gain over random branches of 1-8 classes (some empty, some a
    class's whole weight): the merit <= the collision-entropy bound <= the one without
    logarithms <= the entropy before."""
    rng = np.random.default_rng(5)
    for _ in range(3000):
        k = int(rng.integers(1, 9))
        work = np.zeros((_WORK_ROWS, k))
        n = rng.choice([1.0, 3.0, 60.0, 700.0], size=k) * rng.random(k)
        left = n * rng.choice([0.0, 1.0, 0.5], size=k) * rng.random(k)
        left[rng.random(k) < 0.3] = 0.0
        work[_N], work[_LEFT], work[_RIGHT] = n, left, n - left
        work[5] = n * np.log2(n)  # _FULL
        p = n / n.sum()
        pre = float(-(p * np.log2(p)).sum())
        sum_l, sum_r = float(left.sum()), float((n - left).sum())
        if not (sum_l > 0 and sum_r > 0):
            continue
        total = sum_l + sum_r
        merit = _merit(work, k, pre, sum_l, sum_r, total)
        collision = _gain_bound(work, k, pre, sum_l, sum_r, total, -math.inf)
        quadratic = _gain_bound(work, k, pre, sum_l, sum_r, total, math.inf)
        assert merit <= collision + 1e-12 and collision <= quadratic + 1e-12
        assert quadratic <= pre + 1e-12


def _one_leaf(rows, n_classes):
    trees = TreeEnsemble(1, n_classes, grace_periods=[1e9], leaf_prediction="mc")
    for v, y, w in rows:
        trees.learn(trees.transform({"a": v}, learn=True), np.array([y]), np.array([w]))
    node = trees.tree_i[0, 0]
    s = trees.ni[node, SLOT]
    order, slot_order = np.empty(n_classes, np.int64), np.empty(n_classes, np.int64)
    work = np.empty((_WORK_ROWS, n_classes))
    work[_LAST_N] = -1.0
    pre = entropy(trees.cls[node], order, rank_order(trees.present[node], order))
    n_slot = rank_order(trees.seen[s], slot_order)
    return (trees.stat_blocks, trees.block_of, s, 0, pre, 10, 0.01, work, slot_order, n_slot)


def test_a_separating_point_is_exact_in_the_screen_and_the_floor_prunes():
    """Three classes with disjoint ranges: the best point separates two of them without a CDF,
    so the screen marks it exact (the exact search's merit and point); a floor above every
    point's bound leaves no merit, one below changes nothing; overlapping classes are not
    exact."""
    rows = [(v + c * 10.0, c, 1.0 + c) for c in range(3) for v in (0.0, 0.5, 1.0, 1.5, 2.0)]
    args = _one_leaf(rows, 3)
    merit, point, _, _, _ = _numeric_best(*args, False, -math.inf)
    screened, screened_point, unsure, has, exact = _numeric_best(*args, True, -math.inf)
    assert has and exact and not unsure and (screened, screened_point) == (merit, point)
    assert _numeric_best(*args, True, merit - 1e-3)[:2] == (merit, point)
    assert _numeric_best(*args, True, 5.0)[0] == -math.inf  # above the leaf's entropy
    mixed = [(v + c * 0.3, c, 1.0) for c in range(3) for v in (0.0, 0.5, 1.0, 1.5, 2.0)]
    merit, point, _, _, _ = _numeric_best(*_one_leaf(mixed, 3), False, -math.inf)
    screened, _, _, _, exact = _numeric_best(*_one_leaf(mixed, 3), True, -math.inf)
    assert not exact and abs(screened - merit) < 1e-6


def test_a_point_next_to_a_saturated_cdf_is_not_exact():
    """Class 1's CDF at the point before the separating one rounds to 1 with erf but not with
    the table: the exact search's best is that earlier point (equal merit, first), the screen's
    the separating one, which uses no CDF; the screen must not call it exact."""
    args = _one_leaf([(0.0, 1, 83.45), (5.5, 1, 1.0), (11.0, 0, 50.0)], 2)
    merit, point, _, _, _ = _numeric_best(*args, False, -math.inf)
    screened, screened_point, _, _, exact = _numeric_best(*args, True, -math.inf)
    assert (point, screened_point) == (5.0, 6.0) and screened == merit  # the configuration
    assert not exact
