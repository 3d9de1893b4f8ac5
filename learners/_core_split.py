"""The compiled split attempt of :mod:`learners.compiled`: River's ``_attempt_to_split`` (its
start, and its end from the features :mod:`learners._core_search` searched: the best two
suggestions, the Hoeffding bound, the tie threshold, pre-pruning, the split), and River's
information gain and branch weights, which the search shares."""

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
    CHILD0,
    CHILD1,
    DELTA,
    DEPTH,
    FEAT,
    GRACE_BY_COUNT,
    KIND,
    LAST,
    MAX_SHARE,
    N_ACTIVE,
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
def entropy(dist, order, k):
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
def split_merit(pre, dists, n_branches, min_frac, order, k):
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
        post += _branch_sum(dists, b, order, k) * entropy(dists[b], order, k)
    return pre - post / total


@njit(cache=True)
def _branch_sum(dists, b, order, k):
    sb = 0.0
    for a in range(k):
        sb += dists[b, order[a]]
    return sb


# ---- split attempts ----------------------------------------------------------------------------


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
def nominal_dists(counts, block, feat_rows, feat_nrows, s, j, row, dists):
    """Class weights of value row ``row`` (branch 0) and of the feature's other rows (1)."""
    dists[0, :] = 0.0
    dists[1, :] = 0.0
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        b = 0 if r == row else 1
        for c in range(dists.shape[1]):
            dists[b, c] += counts[block[s, c], r]


@njit(cache=True)
def row_used(counts, block, s, r):
    for c in range(block.shape[1]):
        if counts[block[s, c], r] > 0.0:
            return True
    return False


@njit(cache=True)
def multiway_dists(counts, block, feat_rows, feat_nrows, s, j, dists):
    """One branch per value row the leaf has seen; returns how many."""
    b = 0
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        if row_used(counts, block, s, r):
            for c in range(dists.shape[1]):
                dists[b, c] = counts[block[s, c], r]
            b += 1
    return b


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
        nominal_dists(counts, block, feat_rows, feat_nrows, s, j, int(value), dists)
        n_b = 2
    else:
        n_b = multiway_dists(counts, block, feat_rows, feat_nrows, s, j, dists)
    children = np.empty(n_b, np.int64)
    rows = np.empty(n_b, np.int64)
    b = 0
    for i in range(feat_nrows[j] if kinds[j] == 1 and value < 0 else 0):
        r = feat_rows[j, i]
        if row_used(counts, block, s, r):
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
