"""The compiled split attempt of :mod:`learners.compiled`: River's ``_attempt_to_split`` with
information gain over Gaussian numeric splitters (``n_splits`` candidate points) and binary and
multiway nominal splits, the Hoeffding bound, the tie threshold and pre-pruning."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from learners._core import (
    add_edge,
    add_rank,
    add_weight,
    class_total,
    clear_slot,
    free_slot,
    new_node,
    rank_order,
)
from learners._layout import (
    BINARY,
    CHILD0,
    CHILD1,
    DELTA,
    DEPTH,
    FEAT,
    GRACE_BY_COUNT,
    KIND,
    LAST,
    MAX_SHARE,
    MIN_FRAC,
    N_ACTIVE,
    N_SPLITS,
    NLEARN,
    NOM2,
    NOMW,
    NUM2,
    PREPRUNE,
    SLOT,
    SMAX,
    SMEAN,
    SMIN,
    SS,
    SW,
    TAU,
    THR,
    WEIGHT,
    WLEARN,
)


@njit(cache=True)
def _entropy(dist, order, k):
    """River's ``_compute_entropy_dict`` (bits) of the classes ``order[:k]`` of ``dist``, in its
    arithmetic and their order."""
    entropy = 0.0
    sums = 0.0
    for a in range(k):
        d = dist[order[a]]
        if d > 0.0:
            entropy -= d * math.log2(d)
            sums += d
    return (entropy + sums * math.log2(sums)) / sums if sums > 0.0 else 0.0


@njit(cache=True)
def _merit(pre, dists, n_branches, min_frac, order, k):
    """Information gain of the branches ``dists[:n_branches]`` over the classes ``order[:k]``
    in the arithmetic of River's ``InfoGainSplitCriterion.merit_of_split`` (``-inf`` unless two
    branches each hold more than ``min_frac`` of the weight). Equal branch lists give equal
    floats in any order of the branches."""
    total = 0.0
    for b in range(n_branches):
        total += _branch_sum(dists, b, order, k)
    big = 0
    for b in range(n_branches):
        if total > 0.0 and _branch_sum(dists, b, order, k) / total > min_frac:
            big += 1
    if big < 2:
        return -np.inf
    post = 0.0
    for b in range(n_branches):
        post += _branch_sum(dists, b, order, k) * _entropy(dists[b], order, k)
    return pre - post / total


@njit(cache=True)
def _branch_sum(dists, b, order, k):
    sb = 0.0
    for a in range(k):
        sb += dists[b, order[a]]
    return sb


# ---- split attempts ----------------------------------------------------------------------------


#: the rows of a numeric split search's scratch (``work``): per class seen at the feature, its
#: weight, mean, deviation, range, its ``n log2 n`` (its entropy term in a branch holding all of
#: it), and its weight left and right of the point at hand; by the class's place in the slot's
#: order, the last weight and ``n log2 n`` gathered (a class usually has the same weight at every
#: feature: one logarithm per attempt, not one per feature). Read in place, and the merit of each
#: point computed in the loop: a row view or an array argument costs two atomic reference counts
#: in compiled code, per candidate point (a tenth of a Mice run's compiled time).
_N, _MEAN, _SD, _LO, _HI, _FULL, _LEFT, _RIGHT, _LAST_N, _LAST_FULL = range(10)
_WORK_ROWS = 10


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


@njit(cache=True)
def _numeric_best(stat, block, s, j, pre, n_splits, min_frac, work, slot_order, n_slot):
    """(best merit, its point, a suggestion exists) of numeric feature ``j`` over River's
    candidate points (:func:`_gather_classes`' classes).

    A point's merit is :func:`_merit` of its two branches in the same floats, a class's term
    ``d log2 d`` read from row ``_FULL`` where its branch holds all of its weight (``d == n``),
    without the logarithm there. A point whose branches weigh exactly what the last weighed
    point's did (no class's range or spread between them) has that point's merit, which is no
    better: it is skipped."""
    k, lo, hi = _gather_classes(stat, block, s, j, work, slot_order, n_slot)
    for a in range(k):
        work[_LEFT, a] = np.nan  # no point weighed yet
    best, best_point = -np.inf, np.nan
    if not lo < np.inf:
        return best, best_point, False
    if _one_side_dominates(work, k, min_frac):
        return best, best_point, True
    size = (hi - lo) / (n_splits + 1.0)
    for i in range(n_splits):
        point = lo + size * (i + 1)
        if not (lo < point < hi):
            continue
        sum_l, sum_r, same = 0.0, 0.0, True
        for a in range(k):  # zeros add nothing: the sums of River's class order
            n = work[_N, a]
            if point < work[_LO, a]:
                left = 0.0
            elif point >= work[_HI, a]:
                left = n
            else:
                sd = work[_SD, a]
                cdf = 0.5 * (1.0 + math.erf((point - work[_MEAN, a]) / sd / math.sqrt(2.0))) \
                    if sd > 0.0 else 0.0
                left = cdf * n
            right = n - left
            same = same and left == work[_LEFT, a] and right == work[_RIGHT, a]
            work[_LEFT, a], work[_RIGHT, a] = left, right
            sum_l += left
            sum_r += right
        if same:  # the branches of the last point weighed: the same merit, not a better one
            continue
        total = 0.0 + sum_l + sum_r
        if not (total > 0.0 and sum_l / total > min_frac and sum_r / total > min_frac):
            continue
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
        merit = pre - post / total
        if merit > best:
            best, best_point = merit, point
    return best, best_point, True


@njit(cache=True)
def _numeric_dists(stat, block, s, j, point, dists):
    """River's ``GaussianSplitter`` class weights left (``<=``) and right of ``point``."""
    for c in range(dists.shape[1]):
        dists[0, c] = 0.0
        dists[1, c] = 0.0
        b = block[s, c]
        n = stat[b, SW, j]
        if n <= 0.0:
            continue
        if point < stat[b, SMIN, j]:
            dists[1, c] = n
        elif point >= stat[b, SMAX, j]:
            dists[0, c] = n
        else:
            var = stat[b, SS, j] / (n - 1.0) if n > 1.0 else 0.0
            sd = math.sqrt(var) if var > 0.0 else 0.0
            cdf = 0.5 * (1.0 + math.erf((point - stat[b, SMEAN, j]) / sd / math.sqrt(2.0))) \
                if sd > 0.0 else 0.0
            dists[0, c] = cdf * n
            dists[1, c] = n - cdf * n


@njit(cache=True)
def _nominal_dists(counts, block, feat_rows, feat_nrows, s, j, row, dists):
    """Class weights of value row ``row`` (branch 0) and of the feature's other rows (1)."""
    dists[0, :] = 0.0
    dists[1, :] = 0.0
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        b = 0 if r == row else 1
        for c in range(dists.shape[1]):
            dists[b, c] += counts[block[s, c], r]


@njit(cache=True)
def _row_used(counts, block, s, r):
    for c in range(block.shape[1]):
        if counts[block[s, c], r] > 0.0:
            return True
    return False


@njit(cache=True)
def _multiway_dists(counts, block, feat_rows, feat_nrows, s, j, dists):
    """One branch per value row the leaf has seen; returns how many."""
    b = 0
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        if _row_used(counts, block, s, r):
            for c in range(dists.shape[1]):
                dists[b, c] = counts[block[s, c], r]
            b += 1
    return b


@njit(cache=True)
def _nominal_best(counts, block, feat_rows, feat_nrows, row_other, multiway, s, j, pre,
                  min_frac, dists, identity, slot_order, n_slot):
    """(best merit, its row or -1 for the multiway split, a suggestion exists) of feature
    ``j`` (River's ``NominalSplitterClassif``: the multiway split first, then each value)."""
    best, best_row, real = -np.inf, -2, False
    used = 0
    for i in range(feat_nrows[j]):
        used += _row_used(counts, block, s, feat_rows[j, i])
    if used == 0:
        return best, best_row, False
    if multiway:
        b = _multiway_dists(counts, block, feat_rows, feat_nrows, s, j, dists)
        best = _merit(pre, dists, b, min_frac, identity, dists.shape[1])  # River sorts classes
        best_row, real = -1, True
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        if row_other[r] or not _row_used(counts, block, s, r):
            continue
        _nominal_dists(counts, block, feat_rows, feat_nrows, s, j, r, dists)
        merit = _merit(pre, dists, 2, min_frac, slot_order, n_slot)
        if merit > best:
            best, best_row, real = merit, r, True
    return best, best_row, real


@njit(cache=True)
def _multiway_allowed(multi_ok, cfg, j):
    """Whether feature ``j`` may split one branch per value: no binary-only setting, and the
    feature index allows it (:meth:`learners.features.FeatureIndex.multiway_allowed`)."""
    return cfg[BINARY] == 0 and multi_ok[j] != 0


@njit(cache=True)
def attempt_gate(ni, nf, cls, present, seen, block, bfree, ctr, cfg, node):
    """The start of River's ``_attempt_to_split``: False where no split can come of it (fewer
    than two classes), or where the majority's share passes ``MAX_SHARE`` (a winning null split,
    :func:`_null_wins`); True: the leaf's features are searched (:func:`search_share`)."""
    n_pos = 0
    top_class = 0.0
    for c in range(cls.shape[1]):
        top_class = max(top_class, cls[node, c])
        n_pos += cls[node, c] != 0.0
    if n_pos < 2:
        return False
    if top_class > 0.0 and top_class / class_total(cls, present, node) > cfg[MAX_SHARE]:
        _null_wins(seen, block, bfree, ctr, nf, ni[node, SLOT], node)
        return False
    return True


@njit(cache=True, nogil=True)
def search_share(ni, cls, present, stat, counts, seen, block, kinds, feat_rows, feat_nrows,
                 row_other, multi_ok, cfg, nodes, n_att, forward, claimed, merits, values, flags,
                 dists):
    """The best split of each leaf ``nodes[a]`` on each feature ``j``: its merit, value
    (threshold, value row, -1 for multiway) and flags (1: a suggestion exists, 2: a real split)
    at ``[a, j]`` of ``merits``, ``values``, ``flags``.

    Two threads may share the work (``dists`` is each one's scratch): one takes the (leaf,
    feature) pairs from the first, the other (``forward`` False) from the last, each marking a
    pair in ``claimed`` before it searches it and stopping at a pair the other has marked. A
    pair both happen to take gets the same floats twice. Reads the trees only, without the GIL.
    """
    n_classes, n_feat = cls.shape[1], kinds.shape[0]
    order = np.empty(n_classes, np.int64)
    identity = np.arange(n_classes)
    slot_order = np.empty(n_classes, np.int64)
    work = np.empty((_WORK_ROWS, n_classes))
    work[_LAST_N] = -1.0  # keyed by the weight: right for any leaf
    min_frac = cfg[MIN_FRAC]
    last, s, pre, n_slot = -1, -1, 0.0, 0
    for i in range(n_att * n_feat):
        task = i if forward else n_att * n_feat - 1 - i
        if claimed[task]:
            return
        claimed[task] = 1
        a, j = task // n_feat, task % n_feat
        if a != last:
            last, s = a, ni[nodes[a], SLOT]
            pre = _entropy(cls[nodes[a]], order, rank_order(present[nodes[a]], order))
            n_slot = rank_order(seen[s], slot_order)
        if kinds[j] == 0:
            merit, value, has = _numeric_best(stat, block, s, j, pre, int(cfg[N_SPLITS]),
                                              min_frac, work, slot_order, n_slot)
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
        flags[a, j] = (1 if has else 0) + (2 if real else 0)


@njit(cache=True)
def attempt_finish(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds, feat_rows,
                   feat_nrows, cfg, edges, ti, tf, free, ctr, t, node, merits, values, flags,
                   dists):
    """The end of River's ``_attempt_to_split`` from the leaf's searched features (row of
    :func:`search_share`): the best two suggestions, the Hoeffding bound, the tie threshold; a
    winning null split (pre-pruning) clears the leaf's statistics. True: split."""
    n_sugg = 1 if cfg[PREPRUNE] > 0 else 0
    top, second = -np.inf, -np.inf
    best_feat, best_value, best_real = -1, np.nan, False
    for j in range(kinds.shape[0]):
        if flags[j] & 1 == 0:
            continue
        merit = merits[j]
        n_sugg += 1
        if merit >= top:  # River sorts stably: the last of equal merits is the best
            second = top
            top = merit
            best_feat, best_value, best_real = j, values[j], flags[j] & 2 != 0
        elif merit > second:
            second = merit
    if n_sugg < 2:
        should = n_sugg > 0
    else:
        n_present = 0
        for c in range(cls.shape[1]):
            n_present += present[node, c] != 0
        r = math.log2(max(n_present, 2))
        total = class_total(cls, present, node)
        bound = math.sqrt(r * r * math.log(1.0 / tf[t, DELTA]) / (2.0 * total))
        should = (top - second > bound) or (bound < tf[t, TAU])
    if not should:
        return False
    if best_feat < 0 or not best_real:
        _null_wins(seen, block, bfree, ctr, nf, ni[node, SLOT], node)
        return False
    _split(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds, feat_rows, feat_nrows,
           cfg, edges, ti, free, ctr, t, node, best_feat, best_value, dists)
    return True


@njit(cache=True)
def _null_wins(seen, block, bfree, ctr, nf, s, node):
    """River deactivates the leaf and (its memory allowing) activates it again: fresh
    statistics, the class weights and the adaptive rule's scores kept."""
    clear_slot(seen, block, bfree, ctr, s)
    nf[node, NLEARN] = 0.0
    nf[node, WLEARN] = 0.0


@njit(cache=True)
def _split(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds, feat_rows, feat_nrows,
           cfg, edges, ti, free, ctr, t, node, j, value, dists):
    """Turn leaf ``node`` into a branch on feature ``j`` (threshold or value row ``value``,
    -1: multiway) with one new leaf per branch holding its class weights."""
    s = ni[node, SLOT]
    depth = ni[node, DEPTH] + 1
    n_classes = cls.shape[1]
    if kinds[j] == 0:
        _numeric_dists(stat, block, s, j, value, dists)
        n_b = 2
    elif value >= 0:
        _nominal_dists(counts, block, feat_rows, feat_nrows, s, j, int(value), dists)
        n_b = 2
    else:
        n_b = _multiway_dists(counts, block, feat_rows, feat_nrows, s, j, dists)
    children = np.empty(n_b, np.int64)
    rows = np.empty(n_b, np.int64)
    b = 0
    for i in range(feat_nrows[j] if kinds[j] == 1 and value < 0 else 0):
        r = feat_rows[j, i]
        if _row_used(counts, block, s, r):
            rows[b] = r
            b += 1
    order = np.arange(n_classes)  # a multiway split's branches list their classes sorted
    n_order = n_classes
    if kinds[j] == 0 or value >= 0:  # the others, in the order the splitter saw them
        n_order = rank_order(seen[s], order)
    new_weight = 0.0
    for b in range(n_b):
        child = new_node(ni, nf, cls, present, seen, block, bfree, free, ctr, t, node, depth)
        children[b] = child
        for c in range(n_classes):
            cls[child, c] = dists[b, c]
            nf[child, WEIGHT] += dists[b, c]
        for a in range(n_order):
            if _child_has(stat, block, kinds, s, j, value, b, order[a], dists):
                add_rank(present, child, order[a])
        nf[child, LAST] = class_total(cls, present, child) if cfg[GRACE_BY_COUNT] == 0 else 0.0
        new_weight += nf[child, WEIGHT]
    free_slot(ni, nf, seen, block, bfree, free, ctr, node)
    ni[node, FEAT] = j
    nf[node, THR] = value
    if kinds[j] == 0:
        ni[node, KIND] = NUM2
    elif value >= 0:
        ni[node, KIND] = NOM2
    else:
        ni[node, KIND] = NOMW
        ni[node, CHILD0] = -1
        for b in range(n_b):
            add_edge(ni, edges, ctr, node, rows[b], children[b])
    if ni[node, KIND] != NOMW:
        ni[node, CHILD0] = children[0]
        ni[node, CHILD1] = children[1]
    add_weight(ni, nf, node, new_weight - nf[node, WEIGHT])
    ti[t, N_ACTIVE] += n_b - 1


@njit(cache=True)
def _child_has(stat, block, kinds, s, j, value, b, c, dists):
    """Whether class ``c`` is a key of branch ``b``'s class weights in River's split (it counts
    for the range of the merit)."""
    if kinds[j] == 0:
        k = block[s, c]
        if stat[k, SW, j] <= 0.0:
            return 0
        if b == 0:
            return 1 if value >= stat[k, SMIN, j] else 0
        return 1 if value < stat[k, SMAX, j] else 0
    return 1 if dists[b, c] > 0.0 else 0
