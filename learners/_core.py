"""The compiled kernels of :mod:`learners.compiled` that read the trees: routing, the leaves'
predictions (majority class, the adaptive naive Bayes of :mod:`learners.nb_leaf`), and the node
and slot bookkeeping the learning kernels share.

The trees are River's Hoeffding tree classifier (:mod:`learners._core_learn` learns them,
:mod:`learners._core_split` attempts their splits); docs/boosters.md, "The compiled core", lists
where they differ from River. Numba functions over the arrays a
:class:`learners.compiled.TreeEnsemble` owns (:mod:`learners._layout`), compiled once and cached
on disk (``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from learners._layout import (
    CHILD0,
    CHILD1,
    DEPTH,
    EMPTY,
    FEAT,
    KIND,
    LEAF,
    MCC,
    N_ACTIVE,
    N_BFREE,
    N_EDGES,
    N_FREE,
    N_INACTIVE,
    N_NODES,
    NBA,
    NBC,
    NLEARN,
    NOM2,
    NOMW,
    NUM2,
    PARENT,
    ROOT,
    SLOT,
    SMAX,
    SMEAN,
    SMIN,
    SS,
    SW,
    THR,
    TREE,
    WEIGHT,
    WLEARN,
)

# ---- routing -----------------------------------------------------------------------------------


@njit(cache=True)
def route(ni, nf, edges, node, x):
    """The child of branch ``node`` that ``x`` goes to, or -1 where the test cannot be made."""
    v = x[ni[node, FEAT]]
    if math.isnan(v):
        return -1
    kind = ni[node, KIND]
    if kind == NUM2:
        return ni[node, CHILD0] if v <= nf[node, THR] else ni[node, CHILD1]
    if kind == NOM2:
        return ni[node, CHILD0] if v == nf[node, THR] else ni[node, CHILD1]
    e = ni[node, CHILD0]
    while e >= 0:
        if edges[e, 0] == v:
            return edges[e, 1]
        e = edges[e, 2]
    return -1


@njit(cache=True)
def most_common(ni, nf, edges, node):
    """River's ``most_common_path``: the child with the most weight (the first on a tie)."""
    if ni[node, KIND] != NOMW:
        left, right = ni[node, CHILD0], ni[node, CHILD1]
        return right if nf[left, WEIGHT] < nf[right, WEIGHT] else left
    best, best_w = -1, -np.inf
    e = ni[node, CHILD0]
    while e >= 0:
        child = edges[e, 1]
        if nf[child, WEIGHT] > best_w:
            best, best_w = child, nf[child, WEIGHT]
        e = edges[e, 2]
    return best


@njit(cache=True)
def _leaf_of(ni, nf, edges, root, x):
    """The leaf ``x`` reaches, a branch that cannot route it taking its most common path."""
    node = root
    while ni[node, KIND] != LEAF:
        child = route(ni, nf, edges, node, x)
        node = child if child >= 0 else most_common(ni, nf, edges, node)
    return node


# ---- leaf predictions --------------------------------------------------------------------------


@njit(cache=True)
def _majority(cls, present, node, out):
    """River's majority-class prediction: the class weights times one over their sum, summed in
    the order the classes came (``normalize_values_in_dict``)."""
    order = np.empty(out.shape[0], np.int64)
    total = 0.0
    for a in range(rank_order(present[node], order)):
        total += cls[node, order[a]]
    scale = 1.0 / total if total > 0.0 else 1.0
    for c in range(out.shape[0]):
        out[c] = cls[node, c] * scale


@njit(cache=True)
def naive_bayes(ni, nf, cls, present, stat, counts, seen, block, kinds, feat_rows, feat_nrows,
                node, x, out, work):
    """The leaf's naive-Bayes probabilities in ``out``; False when it has no class weight.

    :class:`learners.nb_leaf.NaiveBayesLeaf`'s rule: log prior plus a Gaussian per (class,
    numeric feature) shrunk to the pooled variance with the weight of one average example, and
    Laplace-smoothed frequencies per (class, nominal feature). ``work``: scratch of
    :func:`work_buffer`'s shape.
    """
    n_classes = out.shape[0]
    order = np.empty(n_classes, np.int64)
    total = 0.0
    for a in range(rank_order(present[node], order)):  # the leaf's dict order, as the River path
        if cls[node, order[a]] > 0.0:
            total += cls[node, order[a]]
    if total <= 0.0:
        return False
    logv, terms = work[n_classes + 5], work[n_classes + 4]
    logv[:] = -np.inf
    for c in range(n_classes):
        if cls[node, c] > 0.0:
            logv[c] = math.log(cls[node, c] / total)
    s = ni[node, SLOT]
    if s >= 0 and nf[node, NLEARN] > 0:
        prior = nf[node, WLEARN] / nf[node, NLEARN]
        n_numeric = 0
        for j in range(kinds.shape[0]):
            n_numeric += kinds[j] == 0
        if n_numeric:
            _numeric_terms(stat, block, cls, s, node, kinds, x, prior, work)
        for j in range(kinds.shape[0]):
            v = x[j]
            if math.isnan(v):
                continue
            if kinds[j] == 0:
                ok = work[n_classes + 3, j] > 0.0
                if ok:
                    for c in range(n_classes):
                        terms[c] = work[c, j]
            elif kinds[j] == 1:
                ok = _nominal_terms(cls, counts, seen, block, feat_rows, feat_nrows, s, j, node, v,
                                    prior, terms)
            else:
                ok = False
            if ok:
                for c in range(n_classes):
                    if cls[node, c] > 0.0:
                        logv[c] += terms[c]
    top = -np.inf
    for c in range(n_classes):
        if cls[node, c] > 0.0 and logv[c] > top:
            top = logv[c]
    norm = 0.0
    for c in range(n_classes):
        out[c] = math.exp(logv[c] - top) if cls[node, c] > 0.0 else 0.0
        norm += out[c]
    for c in range(n_classes):
        out[c] /= norm
    return True


@njit(cache=True)
def _numeric_terms(stat, block, cls, s, node, kinds, x, prior, work):
    """Each class's Gaussian log density of ``x[j]`` on every numeric feature ``j`` it has, in
    ``work[c, j]``; ``work[-1, j] > 0``: the feature votes. Per feature, the sums over the
    classes run in class order (a class's block, read a feature after another, is contiguous);
    a class the slot has not seen reads the empty block, which adds nothing."""
    n_classes, n_f = cls.shape[1], kinds.shape[0]
    weight, pooled_mean = work[n_classes], work[n_classes + 1]
    pooled_var, vote = work[n_classes + 2], work[n_classes + 3]
    weight[:] = 0.0
    pooled_mean[:] = 0.0
    pooled_var[:] = 0.0
    for c in range(n_classes):
        b = block[s, c]
        for j in range(n_f):
            weight[j] += stat[b, SW, j]
            pooled_mean[j] += stat[b, SW, j] * stat[b, SMEAN, j]  # the weighted sum first
    for j in range(n_f):
        pooled_mean[j] = pooled_mean[j] / weight[j] if weight[j] > 0.0 else 0.0
    for c in range(n_classes):
        b = block[s, c]
        for j in range(n_f):
            d = stat[b, SMEAN, j] - pooled_mean[j]
            pooled_var[j] += stat[b, SS, j] + stat[b, SW, j] * d * d  # the spread first
    for j in range(n_f):
        vote[j] = 0.0
        if kinds[j] != 0 or math.isnan(x[j]) or not weight[j] > 0.0:
            continue
        var = pooled_var[j] = pooled_var[j] / weight[j]
        if var > 1e-12 * (1.0 + pooled_mean[j] * pooled_mean[j]) and math.isfinite(var):
            vote[j] = 1.0
    for c in range(n_classes):
        if cls[node, c] <= 0.0:
            continue
        b = block[s, c]
        for j in range(n_f):
            if vote[j] <= 0.0:
                continue
            w = stat[b, SW, j]
            mean = stat[b, SMEAN, j] if w > 0.0 else pooled_mean[j]
            var = (stat[b, SS, j] + prior * pooled_var[j]) / (w + prior)
            if not (math.isfinite(mean) and math.isfinite(var)):
                vote[j] = 0.0
                continue
            half_precision = 0.5 / var
            d = x[j] - mean
            work[c, j] = 0.5 * math.log(half_precision / math.pi) - d * d * half_precision
            if not math.isfinite(work[c, j]):
                vote[j] = 0.0


@njit(cache=True)
def _nominal_terms(cls, counts, seen, block, feat_rows, feat_nrows, s, j, node, v, prior, terms):
    """Each class's smoothed log frequency of value row ``v`` of feature ``j``; False: no vote."""
    n_classes = cls.shape[1]
    n_values = 1.0
    own = -1
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        for c in range(n_classes):
            if counts[block[s, c], r] > 0.0:
                n_values += 1.0
                if r == v:
                    own = r
                break
    if n_values == 1.0:
        return False
    pooled_tot, pooled_cnt = -1.0, 0.0  # the rows summed over the classes, once needed
    for c in range(n_classes):
        if cls[node, c] <= 0.0:
            continue
        if seen[s, c] == 0 and pooled_tot < 0.0:  # a class without statistics here
            pooled_tot = 0.0
            for i in range(feat_nrows[j]):
                r = feat_rows[j, i]
                row = 0.0
                for k in range(n_classes):
                    row += counts[block[s, k], r]
                pooled_tot += row
                if r == own:
                    pooled_cnt = row
        tot, cnt = pooled_tot, pooled_cnt
        if seen[s, c] != 0:
            b = block[s, c]
            tot = 0.0
            cnt = 0.0
            for i in range(feat_nrows[j]):
                r = feat_rows[j, i]
                tot += counts[b, r]
                if r == own:
                    cnt = counts[b, r]
        denominator = math.log(tot + prior * n_values)
        if own >= 0:
            terms[c] = math.log(cnt + prior) - denominator
        else:
            terms[c] = math.log(prior) - denominator
    return True


@njit(cache=True)
def _leaf_proba(ni, nf, cls, present, stat, counts, seen, block, kinds, feat_rows, feat_nrows,
                cfg, node, x, out, work):
    """The leaf's prediction: naive Bayes where the adaptive rule says so (True), else the
    majority."""
    if (
        cfg[NBA] > 0
        and ni[node, SLOT] >= 0
        and nf[node, NBC] >= nf[node, MCC]
        and naive_bayes(ni, nf, cls, present, stat, counts, seen, block, kinds, feat_rows,
                         feat_nrows, node, x, out, work)
    ):
        return True
    _majority(cls, present, node, out)
    return False


@njit(cache=True)
def predict_all(ni, nf, cls, present, stat, counts, seen, block, kinds, feat_rows, feat_nrows,
                cfg, edges, ti, x, out, version, memo_meta, memo_x, memo_leaf, memo_out):
    """Every tree's class probabilities for ``x`` into ``out`` (trees, classes); an untrained
    tree gives a row of zeros. The memo (:func:`recall`) keeps ``x``, the ensemble's
    ``version``, and the leaf and probabilities of every tree that predicted with naive Bayes
    (learning at that leaf computes them again for the adaptive rule)."""
    work = work_buffer(cls, kinds)
    memo_meta[0] = -1
    for t in range(ti.shape[0]):
        memo_leaf[t] = -1
        root = ti[t, ROOT]
        if root < 0:
            out[t, :] = 0.0
            continue
        leaf = _leaf_of(ni, nf, edges, root, x)
        if _leaf_proba(ni, nf, cls, present, stat, counts, seen, block, kinds, feat_rows,
                       feat_nrows, cfg, leaf, x, out[t], work):
            memo_leaf[t] = leaf
            for c in range(out.shape[1]):
                memo_out[t, c] = out[t, c]
    if x.shape[0] <= memo_x.shape[0]:
        memo_x[: x.shape[0]] = x
        memo_meta[0], memo_meta[1] = version[0], x.shape[0]


@njit(cache=True)
def recall(version, memo_meta, memo_x, x):
    """Whether the memo of :func:`predict_all` is of ``x`` (equal values, NaN where NaN) and of
    the ensemble as it is: nothing learned since (every change moves ``version``)."""
    if memo_meta[0] != version[0] or memo_meta[1] != x.shape[0]:
        return False
    for j in range(x.shape[0]):
        a, b = x[j], memo_x[j]
        if not (a == b or (math.isnan(a) and math.isnan(b))):
            return False
    return True


@njit(cache=True)
def work_buffer(cls, kinds):
    """Scratch for :func:`naive_bayes`, made once a call of the kernels: per class the numeric
    terms (a row each), the per-feature sums and votes of :func:`_numeric_terms`, then the
    nominal terms and the log probabilities."""
    return np.empty((cls.shape[1] + 6, max(kinds.shape[0], cls.shape[1])))


# ---- nodes and slots ---------------------------------------------------------------------------


@njit(cache=True)
def clear_slot(seen, block, bfree, ctr, s):
    """Slot ``s`` without statistics: its blocks back to the pool, no class seen."""
    for c in range(block.shape[1]):
        b = block[s, c]
        if b != EMPTY:
            bfree[ctr[N_BFREE]] = b
            ctr[N_BFREE] += 1
            block[s, c] = EMPTY
    seen[s] = 0


@njit(cache=True)
def new_block(stat, counts, block, bfree, ctr, s, c):
    """An empty block from the pool for class ``c`` at slot ``s`` (no weight, mean and sum of
    squares 0, min +inf, max -inf, no counts); the caller has made room."""
    ctr[N_BFREE] -= 1
    b = bfree[ctr[N_BFREE]]
    stat[b, SW] = 0.0
    stat[b, SMEAN] = 0.0
    stat[b, SS] = 0.0
    stat[b, SMIN] = np.inf
    stat[b, SMAX] = -np.inf
    counts[b] = 0.0
    block[s, c] = b
    return b


@njit(cache=True)
def new_node(ni, nf, cls, present, seen, block, bfree, free, ctr, t, parent, depth):
    """A fresh active leaf (empty class weights) with a cleared statistics slot."""
    node = ctr[N_NODES]
    ctr[N_NODES] += 1
    ctr[N_FREE] -= 1
    s = free[ctr[N_FREE]]
    clear_slot(seen, block, bfree, ctr, s)
    ni[node, KIND] = LEAF
    ni[node, FEAT] = -1
    ni[node, CHILD0] = -1
    ni[node, CHILD1] = -1
    ni[node, DEPTH] = depth
    ni[node, SLOT] = s
    ni[node, TREE] = t
    ni[node, PARENT] = parent
    nf[node, :] = 0.0
    cls[node, :] = 0.0
    present[node, :] = 0
    return node


@njit(cache=True)
def free_slot(ni, nf, seen, block, bfree, free, ctr, node):
    """The leaf's slot, and its blocks, back to their pools."""
    s = ni[node, SLOT]
    if s >= 0:
        clear_slot(seen, block, bfree, ctr, s)
        free[ctr[N_FREE]] = s
        ctr[N_FREE] += 1
        ni[node, SLOT] = -1
    nf[node, NLEARN] = 0.0
    nf[node, WLEARN] = 0.0


@njit(cache=True)
def add_rank(ranks, i, c):
    """Class ``c`` joins row ``i`` of a rank table (``present``: a node's class weights;
    ``seen``: a slot's statistics) after the classes already there: River's dicts keep their
    keys in insertion order, and its sums and ties follow that order."""
    if ranks[i, c] == 0:
        n = 0
        for k in range(ranks.shape[1]):
            n += ranks[i, k] != 0
        ranks[i, c] = n + 1


@njit(cache=True)
def rank_order(ranks_row, order):
    """The classes of a rank table's row in insertion order into ``order``; returns how many."""
    n = 0
    for c in range(ranks_row.shape[0]):
        if ranks_row[c] > 0:
            order[ranks_row[c] - 1] = c
            n += 1
    return n


@njit(cache=True)
def class_total(cls, present, node):
    """River's ``total_weight`` of a leaf: its class weights summed afresh in insertion order
    (a running sum rounds differently, and the grace period compares it exactly)."""
    order = np.empty(cls.shape[1], np.int64)
    total = 0.0
    for a in range(rank_order(present[node], order)):
        total += cls[node, order[a]]
    return total


@njit(cache=True)
def add_weight(ni, nf, node, w):
    """``w`` more weight at ``node`` and every branch above it (River sums children)."""
    while node >= 0:
        nf[node, WEIGHT] += w
        node = ni[node, PARENT]


@njit(cache=True)
def add_edge(ni, edges, ctr, node, row, child):
    """Append ``row -> child`` to multiway branch ``node``'s children (in order)."""
    e = ctr[N_EDGES]
    ctr[N_EDGES] += 1
    edges[e, 0] = int(row)
    edges[e, 1] = child
    edges[e, 2] = -1
    last = ni[node, CHILD0]
    if last < 0:
        ni[node, CHILD0] = e
        return
    while edges[last, 2] >= 0:
        last = edges[last, 2]
    edges[last, 2] = e


@njit(cache=True)
def deactivate(ni, nf, seen, block, bfree, ti, free, ctr, t, node):
    free_slot(ni, nf, seen, block, bfree, free, ctr, node)
    ti[t, N_ACTIVE] -= 1
    ti[t, N_INACTIVE] += 1
