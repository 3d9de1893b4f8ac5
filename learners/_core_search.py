"""The compiled split search of :mod:`learners.compiled`: each listed leaf's best split per
feature (River's ``GaussianSplitter`` candidate points for a numeric feature, the binary and
multiway splits of its ``NominalSplitterClassif`` for a nominal one), read from the trees without
the GIL and shared by two threads (:mod:`learners.split_search`); :mod:`learners._core_split`
makes the attempts from what it finds."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from learners._approx import CDF_ERROR, normal_cdf
from learners._atomics import atomic_load, atomic_store
from learners._core import rank_order
from learners._core_split import entropy, multiway_dists, nominal_dists, row_used, split_merit
from learners._layout import BINARY, MIN_FRAC, N_SPLITS, SLOT, SMAX, SMEAN, SMIN, SS, SW

#: the rows of a numeric split search's scratch (``work``): per class seen at the feature, its
#: weight, mean, deviation, range, its ``n log2 n`` (its entropy term in a branch holding all of
#: it), and its weight left and right of the point at hand; by the class's place in the slot's
#: order, the last weight and ``n log2 n`` gathered (a class usually has the same weight at every
#: feature: one logarithm per attempt, not one per feature). Read in place, and the merit of each
#: point computed in the loop: a row view or an array argument costs two atomic reference counts
#: in compiled code, per candidate point (a tenth of a Mice run's compiled time). Last, the
#: deviation's reciprocal, by which the screen multiplies (a division per class and point costs
#: about 3% of the search).
_N, _MEAN, _SD, _LO, _HI, _FULL, _LEFT, _RIGHT, _LAST_N, _LAST_FULL, _INV = range(11)
_WORK_ROWS = 11


@njit(cache=True)
def _gather_classes(stat, block, s, j, work, slot_order, n_slot):
    """(k, lo, hi): the ``k`` classes the slot has seen at numeric feature ``j`` into ``work``'s
    rows, in the order they arrived (River's splitter dict: the sums and their floats follow
    it), and the feature's range over them."""
    lo, hi = np.inf, -np.inf
    k = 0
    for a in range(n_slot):
        b = block[s, slot_order[a]]
        w = stat[b, SW, j]
        if w > 0.0:
            work[_N, k] = w
            work[_MEAN, k] = stat[b, SMEAN, j]
            var = stat[b, SS, j] / (w - 1.0) if w > 1.0 else 0.0
            work[_SD, k] = math.sqrt(var) if var > 0.0 else 0.0
            work[_INV, k] = 1.0 / work[_SD, k] if var > 0.0 else 0.0
            work[_LO, k] = stat[b, SMIN, j]
            work[_HI, k] = stat[b, SMAX, j]
            if w != work[_LAST_N, a]:  # the same floats as computing it again
                work[_LAST_N, a], work[_LAST_FULL, a] = w, w * math.log2(w)
            work[_FULL, k] = work[_LAST_FULL, a]
            lo = min(lo, work[_LO, k])
            hi = max(hi, work[_HI, k])
            k += 1
    return k, lo, hi


@njit(cache=True)
def _one_side_dominates(work, k, min_frac):
    """Whether every candidate point fails the branch-fraction test: a class that lies on one
    side of any point (no spread, or one value) holds so much of the weight that the other
    side holds less than ``min_frac`` of it (with a margin far above rounding), wherever the
    point lies. The merit is then ``-inf`` at every point, as the search would find."""
    total, top, spread = 0.0, 0.0, True
    for a in range(k):
        total += work[_N, a]
        if work[_N, a] > top:
            top = work[_N, a]
            spread = work[_SD, a] > 0.0 and work[_LO, a] < work[_HI, a]
    return not spread and total - top < min_frac * total * (1.0 - 1e-9)


#: the flags of a searched (leaf, feature) beyond "a suggestion exists" (1) and "a real split"
#: (2): the merit is the screen's (:func:`_numeric_best` with ``tabled``), and the screen is
#: unsure of it
SCREENED, UNSURE = 4, 8
#: a screened merit is within this of the exact search's, per class seen at the feature
#: (:func:`refine`; docs/internals.md, "The screen")
EPS_PER_CLASS = 1e-7
_EPS_FLOOR = 1e-10  # the two searches' own rounding
_FRAC_MARGIN = 2.0 * CDF_ERROR  # a screened branch's share of the weight is within this
_BOUND_ROUNDING = 1e-12  # :func:`_gain_bound`'s and :func:`_merit`'s own rounding
_LN2 = math.log(2.0)


@njit(cache=True)
def _screen_error(n_classes):
    """How far a screened merit may lie from the exact search's (``EPS_PER_CLASS`` per class
    of the ensemble, and the two searches' own rounding)."""
    return EPS_PER_CLASS * n_classes + _EPS_FLOOR


@njit(cache=True)
def _numeric_best(stat, block, s, j, pre, n_splits, min_frac, work, slot_order, n_slot,
                  tabled, floor):
    """(best merit, its point, unsure, a suggestion exists, exact) of numeric feature ``j``
    over River's candidate points (:func:`_gather_classes`' classes).

    A point's merit is :func:`~learners._core_split.split_merit` of its two branches in the same
    floats, a class's term ``d log2 d`` read from row ``_FULL`` where its branch holds all of its
    weight (``d == n``), without the logarithm there. A point whose branches weigh exactly what
    the last weighed point's did (no class's range or spread between them) has that point's
    merit, which is no better: it is skipped.

    ``tabled`` (the screen): the normal CDF read from a table
    (:func:`learners._approx.normal_cdf`) instead of ``erf``; the merit is then within
    ``EPS_PER_CLASS`` per class of the exact one, and unsure where a point's lighter branch lies
    within the CDF's error of ``min_frac`` (whether the point counts is not known). The screen
    skips a point whose gain bound (:func:`_gain_bound`) lies below both the feature's best so
    far and ``floor`` (a lower bound of the leaf's second best merit, minus the error bound):
    it cannot be one of the leaf's best two. ``exact``: the screen's best point uses no CDF and
    every other point lies below it by more than the error bound, so the merit and point are
    the exact search's (always False for the exact search itself)."""
    k, lo, hi = _gather_classes(stat, block, s, j, work, slot_order, n_slot)
    for a in range(k):
        work[_LEFT, a] = np.nan  # no point weighed yet
    best, best_point, unsure = -np.inf, np.nan, False
    if not lo < np.inf:
        return best, best_point, unsure, False, False
    if _one_side_dominates(work, k, min_frac):
        return best, best_point, unsure, True, False
    margin = _FRAC_MARGIN if tabled else 0.0
    eps = _screen_error(work.shape[1])
    rival, best_free = -np.inf, False
    size = (hi - lo) / (n_splits + 1.0)
    for i in range(n_splits):
        point = lo + size * (i + 1)
        if not (lo < point < hi):
            continue
        sum_l, sum_r, same, free = 0.0, 0.0, True, True
        for a in range(k):  # zeros add nothing: the sums of River's class order
            n = work[_N, a]
            if point < work[_LO, a]:
                left = 0.0
            elif point >= work[_HI, a]:
                left = n
            else:
                left = _cdf(point, work[_MEAN, a], work[_SD, a], work[_INV, a], tabled) * n
                free = free and not work[_SD, a] > 0.0
                if tabled and left != left:
                    unsure, left = True, 0.0
            right = n - left  # so the same left weight leaves the same right one
            same = same and left == work[_LEFT, a]
            work[_LEFT, a], work[_RIGHT, a] = left, right
            sum_l += left
            sum_r += right
        if same:  # the branches of the last point weighed: the same merit, not a better one
            continue
        total = 0.0 + sum_l + sum_r
        if not total > 0.0:
            continue
        share = min(sum_l, sum_r) / total  # both branches over min_frac: the lighter one
        if not share > min_frac - margin:
            continue
        if share <= min_frac + margin:  # exact (no margin): share > min_frac, never here
            unsure = True
            continue
        cut = max(best, floor)
        if tabled and cut > -np.inf:
            bound = _gain_bound(work, k, pre, sum_l, sum_r, total, cut) + _BOUND_ROUNDING
            if bound < cut:
                rival = max(rival, bound + eps)
                continue
        merit = _merit(work, k, pre, sum_l, sum_r, total)
        if not free:
            rival = max(rival, merit + eps)
        if merit > best:
            best, best_point, best_free = merit, point, free
    return best, best_point, unsure, True, tabled and best_free and rival < best and not unsure


@njit(cache=True)
def _cdf(point, mean, sd, inv_sd, tabled):
    """River's ``GaussianSplitter`` CDF of a class at ``point`` (0 without spread); the screen
    (``tabled``) multiplies by ``inv_sd = 1 / sd`` instead of dividing (within an ulp)."""
    if not sd > 0.0:
        return 0.0
    if tabled:
        return normal_cdf((point - mean) * inv_sd)
    return 0.5 * (1.0 + math.erf((point - mean) / sd / math.sqrt(2.0)))


@njit(cache=True)
def _gain_bound(work, k, pre, sum_l, sum_r, total, cut):
    """An upper bound of :func:`_merit` at the branches in ``work`` without a logarithm per
    class: a branch's entropy is at least its collision (Renyi-2) entropy ``log2(W^2 / S)``
    (``S`` the sum of its classes' squared weights), which is at least ``(1 - S / W^2) / ln 2``.
    The second bound, without logarithms, where it is already below ``cut``; else the first."""
    sq_l, sq_r = 0.0, 0.0
    for a in range(k):
        sq_l += work[_LEFT, a] * work[_LEFT, a]
        sq_r += work[_RIGHT, a] * work[_RIGHT, a]
    gini = 0.0
    if sum_l > 0.0:
        gini += sum_l - sq_l / sum_l
    if sum_r > 0.0:
        gini += sum_r - sq_r / sum_r
    bound = pre - gini / (total * _LN2)
    if bound < cut:
        return bound
    post = 0.0
    if sum_l > 0.0:
        post += sum_l * math.log2(sum_l * sum_l / sq_l)
    if sum_r > 0.0:
        post += sum_r * math.log2(sum_r * sum_r / sq_r)
    return pre - post / total


@njit(cache=True)
def _merit(work, k, pre, sum_l, sum_r, total):
    """The information gain of the branches in ``work``'s rows ``_LEFT`` and ``_RIGHT``."""
    ent_l, sums_l, ent_r, sums_r = 0.0, 0.0, 0.0, 0.0
    for a in range(k):
        n = work[_N, a]
        d = work[_LEFT, a]
        if d > 0.0:
            ent_l -= work[_FULL, a] if d == n else d * math.log2(d)
            sums_l += d
        d = work[_RIGHT, a]
        if d > 0.0:
            ent_r -= work[_FULL, a] if d == n else d * math.log2(d)
            sums_r += d
    e_l = (ent_l + sums_l * math.log2(sums_l)) / sums_l if sums_l > 0.0 else 0.0
    e_r = (ent_r + sums_r * math.log2(sums_r)) / sums_r if sums_r > 0.0 else 0.0
    post = 0.0 + sum_l * e_l + sum_r * e_r
    return pre - post / total


@njit(cache=True)
def _nominal_best(counts, block, feat_rows, feat_nrows, row_other, multiway, s, j, pre,
                  min_frac, dists, identity, slot_order, n_slot):
    """(best merit, its row or -1 for the multiway split, a suggestion exists) of feature
    ``j`` (River's ``NominalSplitterClassif``: the multiway split first, then each value)."""
    best, best_row, real = -np.inf, -2, False
    used = 0
    for i in range(feat_nrows[j]):
        used += row_used(counts, block, s, feat_rows[j, i])
    if used == 0:
        return best, best_row, False
    if multiway:
        b = multiway_dists(counts, block, feat_rows, feat_nrows, s, j, dists)
        best = split_merit(pre, dists, b, min_frac, identity, dists.shape[1])  # River sorts classes
        best_row, real = -1, True
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        if row_other[r] or not row_used(counts, block, s, r):
            continue
        nominal_dists(counts, block, feat_rows, feat_nrows, s, j, r, dists)
        merit = split_merit(pre, dists, 2, min_frac, slot_order, n_slot)
        if merit > best:
            best, best_row, real = merit, r, True
    return best, best_row, real


@njit(cache=True)
def _best_two(first, second, low):
    """The best two of ``first >= second`` and ``low``."""
    if low >= first:
        return low, first
    return first, low if low > second else second


@njit(cache=True)
def _multiway_allowed(multi_ok, cfg, j):
    """Whether feature ``j`` may split one branch per value: no binary-only setting, and the
    feature index allows it (:meth:`learners.features.FeatureIndex.multiway_allowed`)."""
    return cfg[BINARY] == 0 and multi_ok[j] != 0


#: the entries of a shared search's ``state``: the helper has entered, the helper is done, the
#: caller is done (no helper may start); and how long the caller spins for a helper to finish
ENTERED, EXITED, CLOSED = 0, 1, 2
SPIN_LIMIT = 10_000_000


@njit(cache=True, nogil=True)
def search_share(ni, cls, present, stat, counts, seen, block, kinds, feat_rows, feat_nrows,
                 row_other, multi_ok, cfg, nodes, n_att, forward, claimed, merits, values, flags,
                 dists, state):
    """The best split of each leaf ``nodes[a]`` on each feature ``j``: its merit, value
    (threshold, value row, -1 for multiway) and flags (1: a suggestion exists, 2: a real split)
    at ``[a, j]`` of ``merits``, ``values``, ``flags``: a numeric feature screened first
    (:func:`_numeric_best` with a tabled CDF, the floor of its points the second best lower
    bound of the leaf's features this thread has searched so far), then searched exactly where
    the attempt may read it (:func:`refine`, the caller's once the helper is done).

    Two threads may share the work (``dists`` is each one's scratch): the caller takes the
    (leaf, feature) pairs from the first, the helper (``forward`` False) from the last, each
    marking a pair in ``claimed`` before it searches it and stopping at a pair the other has
    marked (a pair both happen to take is searched twice, each thread pruning by its own floor:
    the two results differ only below the leaf's second best, and each writes its flags in one
    store). The caller then closes ``state`` and, if the helper had entered, waits for it to
    finish its pair, spinning, so that nothing wakes it: returns 1 if the helper is still at
    work after ``SPIN_LIMIT`` spins (the caller waits for it, then runs :func:`refine`), else
    0. A helper that finds ``state`` closed does nothing. Reads the trees only, without the
    GIL."""
    if not forward:
        atomic_store(state, ENTERED, 1)
        if atomic_load(state, CLOSED):
            atomic_store(state, EXITED, 1)
            return 0
    n_classes, n_feat = cls.shape[1], kinds.shape[0]
    order = np.empty(n_classes, np.int64)
    identity = np.arange(n_classes)
    slot_order = np.empty(n_classes, np.int64)
    work = np.empty((_WORK_ROWS, n_classes))
    work[_LAST_N] = -1.0  # keyed by the weight: right for any leaf
    min_frac = cfg[MIN_FRAC]
    eps = _screen_error(n_classes)
    last, s, pre, n_slot = -1, -1, 0.0, 0
    first, second = -np.inf, -np.inf  # the best two lower bounds of the leaf's pairs so far
    for i in range(n_att * n_feat):
        task = i if forward else n_att * n_feat - 1 - i
        if claimed[task]:
            break
        claimed[task] = 1
        a, j = task // n_feat, task % n_feat
        if a != last:
            last, s = a, ni[nodes[a], SLOT]
            pre = entropy(cls[nodes[a]], order, rank_order(present[nodes[a]], order))
            n_slot = rank_order(seen[s], slot_order)
            first, second = -np.inf, -np.inf
        screened = kinds[j] == 0
        unsure = False
        if screened:
            merit, value, unsure, has, exact = _numeric_best(
                stat, block, s, j, pre, int(cfg[N_SPLITS]), min_frac, work, slot_order, n_slot,
                True, second - eps)
            screened = not exact
            real = merit > -np.inf
        elif kinds[j] == 1:
            merit, row, has = _nominal_best(counts, block, feat_rows, feat_nrows, row_other,
                                            _multiway_allowed(multi_ok, cfg, j), s, j, pre,
                                            min_frac, dists, identity, slot_order, n_slot)
            value = float(row)
            real = has and (merit > -np.inf or row == -1)
        else:
            has, real, merit, value = False, False, -np.inf, np.nan
        merits[a, j], values[a, j] = merit, value
        flags[a, j] = ((1 if has else 0) + (2 if real else 0)
                       + ((SCREENED + (UNSURE if unsure else 0)) if screened else 0))
        if has and not unsure:
            first, second = _best_two(first, second, merit - eps if screened else merit)
    if not forward:
        atomic_store(state, EXITED, 1)
        return 0
    atomic_store(state, CLOSED, 1)
    if atomic_load(state, ENTERED):
        for _ in range(SPIN_LIMIT):
            if atomic_load(state, EXITED):
                break
        else:
            return 1
    refine(ni, cls, present, stat, seen, block, kinds, cfg, nodes, n_att, merits, values, flags)
    return 0


@njit(cache=True, nogil=True)
def refine(ni, cls, present, stat, seen, block, kinds, cfg, nodes, n_att, merits, values,
           flags):
    """After the screen (:func:`search_share`): the exact search of each screened feature that
    may be one of its leaf's best two or tie with them (its merit's upper bound reaches the
    second best lower bound) or whose screen was unsure; the others keep merits under the
    second best, which therefore cannot change the attempt's decision
    (:func:`~learners._core_split.attempt_finish`: the best two merits and the best feature,
    the last of equal merits)."""
    n_classes, n_feat = cls.shape[1], kinds.shape[0]
    eps = _screen_error(n_classes)
    order = np.empty(n_classes, np.int64)
    slot_order = np.empty(n_classes, np.int64)
    work = np.empty((_WORK_ROWS, n_classes))
    work[_LAST_N] = -1.0  # keyed by the weight: right for any leaf
    min_frac, n_splits = cfg[MIN_FRAC], int(cfg[N_SPLITS])
    for a in range(n_att):
        first, second = -np.inf, -np.inf  # the best two lower bounds
        for j in range(n_feat):
            f = flags[a, j]
            if f & 1 == 0 or f & UNSURE:
                continue
            first, second = _best_two(first, second,
                                      merits[a, j] - (eps if f & SCREENED else 0.0))
        pre, s, n_slot = 0.0, -1, 0
        for j in range(n_feat):
            f = flags[a, j]
            if f & SCREENED == 0:
                continue
            if f & UNSURE == 0 and not (merits[a, j] > -np.inf and merits[a, j] + eps >= second):
                continue
            if s < 0:
                s = ni[nodes[a], SLOT]
                pre = entropy(cls[nodes[a]], order, rank_order(present[nodes[a]], order))
                n_slot = rank_order(seen[s], slot_order)
            merit, value, _, has, _ = _numeric_best(stat, block, s, j, pre, n_splits, min_frac,
                                                 work, slot_order, n_slot, False, -np.inf)
            merits[a, j], values[a, j] = merit, value
            flags[a, j] = (1 if has else 0) + (2 if merit > -np.inf else 0)
