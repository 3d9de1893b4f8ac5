"""The compiled learning kernels of :mod:`learners.compiled`: one example into every tree in two
halves around the split search (the leaf update, the grace period, the depth limit, new branches
of multiway splits; then the split attempts and the active-leaf bound of ``max_size``), and the
undoing of multiway splits on a feature with too many values."""

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
    deactivate,
    free_slot,
    most_common,
    naive_bayes,
    new_block,
    new_node,
    rank_order,
    recall,
    route,
    work_buffer,
)
from learners._core_search import search_share
from learners._core_split import attempt_finish, attempt_gate
from learners._layout import (
    CHILD0,
    CHILD1,
    DEAD,
    DEPTH,
    EMPTY,
    FEAT,
    GRACE,
    GRACE_BY_COUNT,
    KIND,
    LAST,
    LEAF,
    MAX_ACTIVE,
    MAX_DEPTH,
    MCC,
    N_ACTIVE,
    N_FREE,
    N_INACTIVE,
    N_NODES,
    NBA,
    NBC,
    NLEARN,
    NOMW,
    NSEEN,
    ROOT,
    SLOT,
    SMAX,
    SMEAN,
    SMIN,
    SS,
    SW,
    TREE,
    WLEARN,
)

# ---- learning ----------------------------------------------------------------------------------


@njit(cache=True)
def _update_slot(stat, counts, seen, block, bfree, ctr, kinds, s, x, y, w):
    """River's splitter updates: weighted Welford statistics per (numeric feature, class),
    weights per (nominal value, class), in the block of class ``y`` at slot ``s`` (a new one
    for its first example there); missing values are skipped."""
    b = block[s, y]
    if b == EMPTY:
        b = new_block(stat, counts, block, bfree, ctr, s, y)
    add_rank(seen, s, y)
    for j in range(kinds.shape[0]):
        v = x[j]
        if math.isnan(v):
            continue
        if kinds[j] == 0:
            n = stat[b, SW, j] + w
            old = stat[b, SMEAN, j]
            mean = old + (w / n) * (v - old)
            stat[b, SS, j] += w * (v - old) * (v - mean)
            stat[b, SW, j] = n
            stat[b, SMEAN, j] = mean
            if v < stat[b, SMIN, j]:
                stat[b, SMIN, j] = v
            if v > stat[b, SMAX, j]:
                stat[b, SMAX, j] = v
        elif kinds[j] == 1 and v >= 0.0:
            counts[b, int(v)] += w


@njit(cache=True)
def _first_argmax(values, ranks_row):
    """The class of the largest value among a rank table's row, the first inserted on a tie
    (River's ``max(stats, key=stats.get)``)."""
    order = np.empty(values.shape[0], np.int64)
    best, top = -1, -np.inf
    for a in range(rank_order(ranks_row, order)):
        if values[order[a]] > top:
            best, top = order[a], values[order[a]]
    return best


@njit(cache=True)
def _leaf_learn(ni, nf, cls, present, stat, counts, seen, block, bfree, ctr, kinds, feat_rows,
                feat_nrows, cfg, node, x, y, w, scratch, work, memo_out, memo_row):
    """The leaf update: the adaptive rule's scores first (naive-Bayes leaves; ``memo_row >=
    0``: ``memo_out[memo_row]`` holds the leaf's probabilities for ``x`` as it is), then the
    class weight and, while active, the split statistics."""
    s = ni[node, SLOT]
    if s >= 0 and cfg[NBA] > 0:
        has = False
        for c in range(cls.shape[1]):
            has = has or present[node, c] != 0
        if not has or _first_argmax(cls[node], present[node]) == y:
            nf[node, MCC] += w
        if memo_row >= 0:
            for c in range(cls.shape[1]):
                scratch[c] = memo_out[memo_row, c]
        if memo_row >= 0 or naive_bayes(ni, nf, cls, present, stat, counts, seen, block, kinds,
                                        feat_rows, feat_nrows, node, x, scratch, work):
            if _first_argmax(scratch, present[node]) == y:
                nf[node, NBC] += w
    cls[node, y] += w
    add_rank(present, node, y)
    nf[node, NSEEN] += 1.0
    add_weight(ni, nf, node, w)
    if s >= 0:
        _update_slot(stat, counts, seen, block, bfree, ctr, kinds, s, x, y, w)
        nf[node, NLEARN] += 1.0
        nf[node, WLEARN] += w


@njit(cache=True, nogil=True)
def learn_round(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds, feat_rows,
                feat_nrows, row_other, multi_ok, cfg, edges, ti, tf, free, ctr, x, labels,
                weights, scratch, version, memo_meta, memo_x, memo_leaf, memo_out, nodes,
                claimed, merits, values, flags, search_dists, dists, min_shared):
    """A whole round in one call: :func:`learn_leaves`, the search of the leaves it lists in
    this thread, :func:`learn_splits`; returns the splits made. Where the search's work
    (leaves x features x classes) reaches ``min_shared``, returns ``-n`` after the first half
    instead: the caller shares the search of the ``n`` leaves among threads
    (:mod:`learners.split_search`) and finishes the round with :func:`learn_splits`."""
    n_att = learn_leaves(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds,
                         feat_rows, feat_nrows, cfg, edges, ti, tf, free, ctr, x, labels,
                         weights, scratch, version, memo_meta, memo_x, memo_leaf, memo_out,
                         nodes)
    if n_att * kinds.shape[0] * cls.shape[1] >= min_shared > 0:
        return -n_att
    if n_att:
        claimed[: n_att * kinds.shape[0]] = 0
        search_share(ni, cls, present, stat, counts, seen, block, kinds, feat_rows, feat_nrows,
                     row_other, multi_ok, cfg, nodes, n_att, True, claimed, merits, values,
                     flags, search_dists[0], np.zeros(3, np.int64))
    return learn_splits(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds,
                        feat_rows, feat_nrows, cfg, edges, ti, tf, free, ctr, nodes,
                        n_att, merits, values, flags, dists, version)


@njit(cache=True)
def learn_leaves(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds, feat_rows,
                 feat_nrows, cfg, edges, ti, tf, free, ctr, x, labels, weights, scratch,
                 version, memo_meta, memo_x, memo_leaf, memo_out, nodes):
    """The first half of a round: tree ``t`` learns ``(x, labels[t])`` with weight
    ``weights[t]`` at its leaf, for every tree; a leaf past its grace period whose split
    attempt needs its features searched goes into ``nodes``, in tree order; returns how many.
    :func:`search_share` searches them and :func:`learn_splits` finishes the round. The caller
    has checked the labels and made room for every tree to split once and for one new block per
    tree. A memo of ``x`` from :func:`~learners._core.predict_all` with nothing learned since
    gives the naive-Bayes leaves' probabilities; ``version`` moves."""
    n_att = 0
    work = work_buffer(cls, kinds)
    fresh = recall(version, memo_meta, memo_x, x)
    version[0] += 1
    for t in range(ti.shape[0]):
        row = t if fresh and memo_leaf[t] >= 0 else -1
        node = _learn_tree(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds,
                           feat_rows, feat_nrows, cfg, edges, ti, tf, free, ctr, t, x,
                           labels[t], weights[t], scratch, work, memo_leaf, memo_out, row)
        if node >= 0:
            nodes[n_att] = node
            n_att += 1
    return n_att


@njit(cache=True, nogil=True)
def learn_splits(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds, feat_rows,
                 feat_nrows, cfg, edges, ti, tf, free, ctr, nodes, n_att, merits, values, flags,
                 dists, version):
    """The second half of a round: the split attempts of :func:`learn_leaves`' leaves, in tree
    order, from their searched features (:func:`search_share`); then a tree past its bound of
    active leaves deactivates the least promising ones (:func:`enforce_active_limit`;
    ``version`` moves first, and again before the bound). Returns the number of splits made.

    Tree by tree, a round is River's: a tree's leaf update, then its split attempt. Only the
    order of the pools' allocations across trees differs from learning one tree after the
    other (a node's place in its own tree's order is the same)."""
    version[0] += 1  # a prediction made during a shared search (without the GIL) is stale now
    splits = 0
    for a in range(n_att):
        node = nodes[a]
        t = ni[node, TREE]
        if attempt_finish(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds,
                          feat_rows, feat_nrows, cfg, edges, ti, tf, free, ctr, t, node,
                          merits[a], values[a], flags[a], dists):
            splits += 1
        else:
            nf[node, LAST] = _seen_now(nf, cls, present, cfg, node)
    over = False
    for t in range(ti.shape[0]):
        if ti[t, N_ACTIVE] > ti[t, MAX_ACTIVE]:  # a split, a new branch
            if not over:
                version[0] += 1
                over = True
            enforce_active_limit(ni, nf, cls, seen, block, bfree, ti, free, ctr, t)
    return splits


@njit(cache=True)
def _seen_now(nf, cls, present, cfg, node):
    """What a leaf's grace period counts: examples (``grace_by="count"``) or weight."""
    return nf[node, NSEEN] if cfg[GRACE_BY_COUNT] > 0 else class_total(cls, present, node)


@njit(cache=True)
def _learn_tree(ni, nf, cls, present, stat, counts, seen, block, bfree, kinds, feat_rows,
                feat_nrows, cfg, edges, ti, tf, free, ctr, t, x, y, w, scratch, work, memo_leaf,
                memo_out, memo_row):
    """Tree ``t`` learns at its leaf; returns the leaf if its split attempt needs a search."""
    if w <= 0.0:
        return -1
    if ti[t, ROOT] < 0:
        ti[t, ROOT] = new_node(ni, nf, cls, present, seen, block, bfree, free, ctr, t, -1, 0)
        ti[t, N_ACTIVE] = 1
    node = ti[t, ROOT]
    while ni[node, KIND] != LEAF:
        child = route(ni, nf, edges, node, x)
        if child < 0:
            break
        node = child
    if ni[node, KIND] != LEAF:  # a branch that cannot route x: River's _leaf_for_unroutable
        node = _leaf_for_unroutable(ni, nf, cls, present, seen, block, bfree, edges, ti, free,
                                    ctr, t, node, x)
        _leaf_learn(ni, nf, cls, present, stat, counts, seen, block, bfree, ctr, kinds,
                    feat_rows, feat_nrows, cfg, node, x, y, w, scratch, work, memo_out, -1)
        return -1
    if memo_row >= 0 and memo_leaf[memo_row] != node:
        memo_row = -1
    _leaf_learn(ni, nf, cls, present, stat, counts, seen, block, bfree, ctr, kinds, feat_rows,
                feat_nrows, cfg, node, x, y, w, scratch, work, memo_out, memo_row)
    if ni[node, SLOT] < 0:
        return -1
    if ni[node, DEPTH] >= cfg[MAX_DEPTH]:
        deactivate(ni, nf, seen, block, bfree, ti, free, ctr, t, node)
        return -1
    seen_now = _seen_now(nf, cls, present, cfg, node)
    if seen_now - nf[node, LAST] < tf[t, GRACE]:
        return -1
    if attempt_gate(ni, nf, cls, present, seen, block, bfree, ctr, cfg, node):
        return node
    nf[node, LAST] = seen_now
    return -1


@njit(cache=True)
def _leaf_for_unroutable(ni, nf, cls, present, seen, block, bfree, edges, ti, free, ctr, t,
                         node, x):
    """A new branch for an unseen value of a multiway split, else the most traversed path."""
    while True:
        if ni[node, KIND] == NOMW and not math.isnan(x[ni[node, FEAT]]):
            leaf = new_node(ni, nf, cls, present, seen, block, bfree, free, ctr, t, node,
                            ni[node, DEPTH] + 1)
            add_edge(ni, edges, ctr, node, x[ni[node, FEAT]], leaf)
            ti[t, N_ACTIVE] += 1
            return leaf
        node = most_common(ni, nf, edges, node)
        while ni[node, KIND] != LEAF:
            child = route(ni, nf, edges, node, x)
            if child < 0:
                break
            node = child
        if ni[node, KIND] == LEAF:
            return node


# ---- limits ------------------------------------------------------------------------------------


@njit(cache=True)
def enforce_active_limit(ni, nf, cls, seen, block, bfree, ti, free, ctr, t):
    """Deactivate tree ``t``'s least promising active leaves (least weight outside their
    majority class, River's ``calculate_promise``) until at most ``MAX_ACTIVE`` are active."""
    while ti[t, MAX_ACTIVE] > 0 and ti[t, N_ACTIVE] > ti[t, MAX_ACTIVE]:
        worst, worst_promise = -1, np.inf
        for node in range(ctr[N_NODES]):
            if ni[node, TREE] != t or ni[node, KIND] != LEAF or ni[node, SLOT] < 0:
                continue
            total = 0.0
            top = 0.0
            for c in range(cls.shape[1]):
                total += cls[node, c]
                top = max(top, cls[node, c])
            promise = total - top
            if promise < worst_promise:
                worst, worst_promise = node, promise
        if worst < 0:
            return
        deactivate(ni, nf, seen, block, bfree, ti, free, ctr, t, worst)


@njit(cache=True)
def undo_multiway(ni, nf, cls, present, seen, block, bfree, edges, ti, free, ctr, j):
    """Replace every multiway split on feature ``j`` by one active leaf holding its subtree's
    class weights (the feature has shown too many values for one branch each)."""
    merged = 0
    for node in range(ctr[N_NODES]):
        if ni[node, KIND] != NOMW or ni[node, FEAT] != j:
            continue
        t = ni[node, TREE]
        stack = [node]
        cls[node, :] = 0.0
        first = True
        while stack:
            m = stack.pop()
            kind = ni[m, KIND]
            if kind == LEAF:
                for c in range(cls.shape[1]):
                    cls[node, c] += cls[m, c]
                if ni[m, SLOT] >= 0:
                    ti[t, N_ACTIVE] -= 1
                else:
                    ti[t, N_INACTIVE] -= 1
                free_slot(ni, nf, seen, block, bfree, free, ctr, m)
            elif kind == NOMW:
                e = ni[m, CHILD0]
                while e >= 0:
                    stack.append(edges[e, 1])
                    e = edges[e, 2]
            else:
                stack.append(ni[m, CHILD0])
                stack.append(ni[m, CHILD1])
            if not first:
                ni[m, KIND] = DEAD
            first = False
        ctr[N_FREE] -= 1
        s = free[ctr[N_FREE]]
        clear_slot(seen, block, bfree, ctr, s)
        ni[node, KIND] = LEAF
        ni[node, SLOT] = s
        ni[node, CHILD0] = -1
        ni[node, CHILD1] = -1
        ni[node, FEAT] = -1
        present[node, :] = 0
        for c in range(cls.shape[1]):
            if cls[node, c] > 0.0:
                add_rank(present, node, c)
        nf[node, LAST] = class_total(cls, present, node)
        nf[node, MCC] = 0.0
        nf[node, NBC] = 0.0
        ti[t, N_ACTIVE] += 1
        merged += 1
    return merged
