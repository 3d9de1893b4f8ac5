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
    FEAT,
    KIND,
    LEAF,
    MCC,
    N_ACTIVE,
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
def naive_bayes(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, node, x,
                out):
    """The leaf's naive-Bayes probabilities in ``out``; False when it has no class weight.

    :class:`learners.nb_leaf.NaiveBayesLeaf`'s rule: log prior plus a Gaussian per (class,
    numeric feature) shrunk to the pooled variance with the weight of one average example, and
    Laplace-smoothed frequencies per (class, nominal feature).
    """
    n_classes = out.shape[0]
    order = np.empty(n_classes, np.int64)
    total = 0.0
    for a in range(rank_order(present[node], order)):  # the leaf's dict order, as the River path
        if cls[node, order[a]] > 0.0:
            total += cls[node, order[a]]
    if total <= 0.0:
        return False
    logv = np.full(n_classes, -np.inf)
    for c in range(n_classes):
        if cls[node, c] > 0.0:
            logv[c] = math.log(cls[node, c] / total)
    s = ni[node, SLOT]
    if s >= 0 and nf[node, NLEARN] > 0:
        prior = nf[node, WLEARN] / nf[node, NLEARN]
        terms = np.empty(n_classes)
        for j in range(kinds.shape[0]):
            v = x[j]
            if math.isnan(v):
                continue
            if kinds[j] == 0:
                ok = _numeric_terms(stat, cls, s, j, node, v, prior, terms)
            elif kinds[j] == 1:
                ok = _nominal_terms(cls, counts, seen, feat_rows, feat_nrows, s, j, node, v,
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
def _numeric_terms(stat, cls, s, j, node, v, prior, terms):
    """Each class's Gaussian log density of ``v`` on feature ``j``; False: no vote."""
    n_classes = terms.shape[0]
    weight = 0.0
    wmean = 0.0
    for c in range(n_classes):
        weight += stat[s, SW, j, c]
        wmean += stat[s, SW, j, c] * stat[s, SMEAN, j, c]
    if weight <= 0.0:
        return False
    pooled_mean = wmean / weight
    spread = 0.0
    for c in range(n_classes):
        d = stat[s, SMEAN, j, c] - pooled_mean
        spread += stat[s, SS, j, c] + stat[s, SW, j, c] * d * d
    pooled_var = spread / weight
    if not (pooled_var > 1e-12 * (1.0 + pooled_mean * pooled_mean)) or not math.isfinite(
        pooled_var
    ):
        return False
    for c in range(n_classes):
        if cls[node, c] <= 0.0:
            continue
        w = stat[s, SW, j, c]
        mean = stat[s, SMEAN, j, c] if w > 0.0 else pooled_mean
        var = (stat[s, SS, j, c] + prior * pooled_var) / (w + prior)
        if not (math.isfinite(mean) and math.isfinite(var)):
            return False
        half_precision = 0.5 / var
        d = v - mean
        terms[c] = 0.5 * math.log(half_precision / math.pi) - d * d * half_precision
        if not math.isfinite(terms[c]):
            return False
    return True


@njit(cache=True)
def _nominal_terms(cls, counts, seen, feat_rows, feat_nrows, s, j, node, v, prior, terms):
    """Each class's smoothed log frequency of value row ``v`` of feature ``j``; False: no vote."""
    n_classes = terms.shape[0]
    n_values = 1.0
    own = -1
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        for c in range(n_classes):
            if counts[s, r, c] > 0.0:
                n_values += 1.0
                if r == v:
                    own = r
                break
    if n_values == 1.0:
        return False
    for c in range(n_classes):
        if cls[node, c] <= 0.0:
            continue
        pooled = seen[s, c] == 0  # a class without statistics here reads the pooled column
        tot = 0.0
        cnt = 0.0
        for i in range(feat_nrows[j]):
            r = feat_rows[j, i]
            if pooled:
                row = 0.0
                for k in range(n_classes):
                    row += counts[s, r, k]
            else:
                row = counts[s, r, c]
            tot += row
            if r == own:
                cnt = row
        denominator = math.log(tot + prior * n_values)
        if own >= 0:
            terms[c] = math.log(cnt + prior) - denominator
        else:
            terms[c] = math.log(prior) - denominator
    return True


@njit(cache=True)
def _leaf_proba(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg,
                node, x, out):
    """The leaf's prediction: naive Bayes where the adaptive rule says so, else the majority."""
    if (
        cfg[NBA] > 0
        and ni[node, SLOT] >= 0
        and nf[node, NBC] >= nf[node, MCC]
        and naive_bayes(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows,
                         node, x, out)
    ):
        return
    _majority(cls, present, node, out)


@njit(cache=True)
def predict_all(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg,
                edges, ti, x, out):
    """Every tree's class probabilities for ``x`` into ``out`` (trees, classes); an untrained
    tree gives a row of zeros."""
    for t in range(ti.shape[0]):
        root = ti[t, ROOT]
        if root < 0:
            out[t, :] = 0.0
            continue
        leaf = _leaf_of(ni, nf, edges, root, x)
        _leaf_proba(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg,
                    leaf, x, out[t])


# ---- nodes and slots ---------------------------------------------------------------------------


@njit(cache=True)
def clear_slot(stat, counts, seen, s):
    stat[s, SW] = 0.0
    stat[s, SMEAN] = 0.0
    stat[s, SS] = 0.0
    stat[s, SMIN] = np.inf
    stat[s, SMAX] = -np.inf
    counts[s] = 0.0
    seen[s] = 0


@njit(cache=True)
def new_node(ni, nf, cls, present, stat, counts, seen, free, ctr, t, parent, depth):
    """A fresh active leaf (empty class weights) with a cleared statistics slot."""
    node = ctr[N_NODES]
    ctr[N_NODES] += 1
    ctr[N_FREE] -= 1
    s = free[ctr[N_FREE]]
    clear_slot(stat, counts, seen, s)
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
def free_slot(ni, nf, free, ctr, node):
    s = ni[node, SLOT]
    if s >= 0:
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
def deactivate(ni, nf, ti, free, ctr, t, node):
    free_slot(ni, nf, free, ctr, node)
    ti[t, N_ACTIVE] -= 1
    ti[t, N_INACTIVE] += 1
