"""The compiled kernels of :mod:`learners.compiled`: N Hoeffding trees in flat arrays.

Numba functions over the arrays a :class:`learners.compiled.TreeEnsemble` owns (their layout is
documented there): learn one example in every tree, predict every tree's class probabilities,
undo multiway splits. The algorithm is River's Hoeffding tree classifier (information gain,
Gaussian numeric splitters with ``n_splits`` candidate points, binary and multiway nominal
splits, the Hoeffding bound and tie threshold, grace period, depth limit, pre-pruning) with the
project's adaptive naive-Bayes leaves (:mod:`learners.nb_leaf`); docs/boosters.md, "The compiled
core", lists where it differs from River. Compiled once, cached on disk (``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# node kinds
LEAF, NUM2, NOM2, NOMW, DEAD = 0, 1, 2, 3, -1
# columns of the integer node table
KIND, FEAT, CHILD0, CHILD1, DEPTH, SLOT, TREE, PARENT = range(8)
# columns of the float node table
THR, WEIGHT, LAST, MCC, NBC, NLEARN, WLEARN, NSEEN = range(8)
# columns of the per-tree integer table; of the per-tree float table
ROOT, N_ACTIVE, N_INACTIVE, MAX_ACTIVE = range(4)
GRACE, DELTA, TAU = range(3)
# columns of the configuration vector
MIN_FRAC, MAX_SHARE, MAX_DEPTH, NBA, PREPRUNE, N_SPLITS, GRACE_BY_COUNT, BINARY = range(8)
# columns of the counters vector
N_NODES, N_EDGES, N_FREE = range(3)
# statistics of a (slot, feature, class): weight, mean, sum of squares, min, max
SW, SMEAN, SS, SMIN, SMAX = range(5)
LOG2 = math.log(2.0)


@njit(cache=True)
def _xlog(v):
    return v * math.log(v) / LOG2 if v > 0.0 else 0.0


@njit(cache=True)
def _entropy_term(dist):
    """``xlogx(sum) - sum xlogx(d)``: the weighted entropy of one branch (bits)."""
    total = 0.0
    inner = 0.0
    for c in range(dist.shape[0]):
        total += dist[c]
        inner += _xlog(dist[c])
    return _xlog(total) - inner


@njit(cache=True)
def _merit(pre, dists, n_branches, min_frac):
    """Information gain of the branches ``dists[:n_branches]`` (River's ``merit_of_split``)."""
    total = 0.0
    for b in range(n_branches):
        for c in range(dists.shape[1]):
            total += dists[b, c]
    if total <= 0.0:
        return -np.inf
    big = 0
    post = 0.0
    for b in range(n_branches):
        s = 0.0
        for c in range(dists.shape[1]):
            s += dists[b, c]
        if s / total > min_frac:
            big += 1
        post += _entropy_term(dists[b])
    if big < 2:
        return -np.inf
    return pre - post / total


# ---- routing -----------------------------------------------------------------------------------


@njit(cache=True)
def _route(ni, nf, edges, node, x):
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
def _most_common(ni, nf, edges, node):
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
        child = _route(ni, nf, edges, node, x)
        node = child if child >= 0 else _most_common(ni, nf, edges, node)
    return node


# ---- leaf predictions --------------------------------------------------------------------------


@njit(cache=True)
def _majority(cls, node, out):
    total = 0.0
    for c in range(out.shape[0]):
        total += cls[node, c]
    for c in range(out.shape[0]):
        out[c] = cls[node, c] / total if total > 0.0 else cls[node, c]


@njit(cache=True)
def _naive_bayes(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, node, x, out):
    """The leaf's naive-Bayes probabilities in ``out``; False when it has no class weight.

    :class:`learners.nb_leaf.NaiveBayesLeaf`'s rule: log prior plus a Gaussian per (class,
    numeric feature) shrunk to the pooled variance with the weight of one average example, and
    Laplace-smoothed frequencies per (class, nominal feature).
    """
    n_classes = out.shape[0]
    total = 0.0
    for c in range(n_classes):
        if cls[node, c] > 0.0:
            total += cls[node, c]
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
def _leaf_proba(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg, node, x,
                out):
    """The leaf's prediction: naive Bayes where the adaptive rule says so, else the majority."""
    if (
        cfg[NBA] > 0
        and ni[node, SLOT] >= 0
        and nf[node, NBC] >= nf[node, MCC]
        and _naive_bayes(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, node,
                         x, out)
    ):
        return
    _majority(cls, node, out)


@njit(cache=True)
def predict_all(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg, edges,
                ti, x, out):
    """Every tree's class probabilities for ``x`` into ``out`` (trees, classes); an untrained
    tree gives a row of zeros."""
    for t in range(ti.shape[0]):
        root = ti[t, ROOT]
        if root < 0:
            out[t, :] = 0.0
            continue
        leaf = _leaf_of(ni, nf, edges, root, x)
        _leaf_proba(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg, leaf, x,
                    out[t])


@njit(cache=True)
def predict_many(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg, edges,
                 ti, xs, out):
    """:func:`predict_all` for each row of ``xs`` into ``out`` (rows, trees, classes)."""
    for i in range(xs.shape[0]):
        predict_all(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg, edges,
                    ti, xs[i], out[i])


# ---- nodes and slots ---------------------------------------------------------------------------


@njit(cache=True)
def _clear_slot(stat, counts, seen, s):
    stat[s, SW] = 0.0
    stat[s, SMEAN] = 0.0
    stat[s, SS] = 0.0
    stat[s, SMIN] = np.inf
    stat[s, SMAX] = -np.inf
    counts[s] = 0.0
    seen[s] = 0


@njit(cache=True)
def _new_node(ni, nf, cls, present, stat, counts, seen, free, ctr, t, parent, depth):
    """A fresh active leaf (empty class weights) with a cleared statistics slot."""
    node = ctr[N_NODES]
    ctr[N_NODES] += 1
    ctr[N_FREE] -= 1
    s = free[ctr[N_FREE]]
    _clear_slot(stat, counts, seen, s)
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
def _free_slot(ni, nf, free, ctr, node):
    s = ni[node, SLOT]
    if s >= 0:
        free[ctr[N_FREE]] = s
        ctr[N_FREE] += 1
        ni[node, SLOT] = -1
    nf[node, NLEARN] = 0.0
    nf[node, WLEARN] = 0.0


@njit(cache=True)
def _add_weight(ni, nf, node, w):
    """``w`` more weight at ``node`` and every branch above it (River sums children)."""
    while node >= 0:
        nf[node, WEIGHT] += w
        node = ni[node, PARENT]


# ---- learning ----------------------------------------------------------------------------------


@njit(cache=True)
def _update_slot(stat, counts, seen, kinds, s, x, y, w):
    """River's splitter updates: weighted Welford statistics per (numeric feature, class),
    weights per (nominal value, class); missing values are skipped."""
    seen[s, y] = 1
    for j in range(kinds.shape[0]):
        v = x[j]
        if math.isnan(v):
            continue
        if kinds[j] == 0:
            n = stat[s, SW, j, y] + w
            old = stat[s, SMEAN, j, y]
            mean = old + (w / n) * (v - old)
            stat[s, SS, j, y] += w * (v - old) * (v - mean)
            stat[s, SW, j, y] = n
            stat[s, SMEAN, j, y] = mean
            if v < stat[s, SMIN, j, y]:
                stat[s, SMIN, j, y] = v
            if v > stat[s, SMAX, j, y]:
                stat[s, SMAX, j, y] = v
        elif kinds[j] == 1 and v >= 0.0:
            counts[s, int(v), y] += w


@njit(cache=True)
def _first_argmax(values, mask):
    best, top = -1, -np.inf
    for c in range(values.shape[0]):
        if mask[c] and values[c] > top:
            best, top = c, values[c]
    return best


@njit(cache=True)
def _leaf_learn(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg,
                node, x, y, w, scratch):
    """The leaf update: the adaptive rule's scores first (naive-Bayes leaves), then the class
    weight and, while active, the split statistics."""
    s = ni[node, SLOT]
    if s >= 0 and cfg[NBA] > 0:
        has = False
        for c in range(cls.shape[1]):
            has = has or present[node, c] != 0
        if not has or _first_argmax(cls[node], present[node] != 0) == y:
            nf[node, MCC] += w
        if _naive_bayes(ni, nf, cls, stat, counts, seen, kinds, feat_rows, feat_nrows, node, x,
                        scratch):
            if _first_argmax(scratch, cls[node] > 0.0) == y:
                nf[node, NBC] += w
    cls[node, y] += w
    present[node, y] = 1
    nf[node, NSEEN] += 1.0
    _add_weight(ni, nf, node, w)
    if s >= 0:
        _update_slot(stat, counts, seen, kinds, s, x, y, w)
        nf[node, NLEARN] += 1.0
        nf[node, WLEARN] += w


@njit(cache=True)
def learn_all(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, row_other,
              multi_ok, cfg, edges, ti, tf, free, ctr, x, labels, weights, scratch, dists):
    """Tree ``t`` learns ``(x, labels[t])`` with weight ``weights[t]``, for every tree; returns
    the number of splits made. The caller has made room for every tree to split once."""
    splits = 0
    for t in range(ti.shape[0]):
        splits += _learn_tree(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows,
                              feat_nrows, row_other, multi_ok, cfg, edges, ti, tf, free, ctr, t,
                              x, labels[t], weights[t], scratch, dists)
    return splits


@njit(cache=True)
def _learn_tree(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows,
                row_other, multi_ok, cfg, edges, ti, tf, free, ctr, t, x, y, w, scratch, dists):
    if w <= 0.0:
        return 0
    if ti[t, ROOT] < 0:
        ti[t, ROOT] = _new_node(ni, nf, cls, present, stat, counts, seen, free, ctr, t, -1, 0)
        ti[t, N_ACTIVE] = 1
    node = ti[t, ROOT]
    while ni[node, KIND] != LEAF:
        child = _route(ni, nf, edges, node, x)
        if child < 0:
            break
        node = child
    if ni[node, KIND] != LEAF:  # a branch that cannot route x: River's _leaf_for_unroutable
        node = _leaf_for_unroutable(ni, nf, cls, present, stat, counts, seen, edges, ti, free,
                                    ctr, t, node, x)
        _leaf_learn(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg,
                    node, x, y, w, scratch)
        return 0
    _leaf_learn(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg,
                node, x, y, w, scratch)
    if ni[node, SLOT] < 0:
        return 0
    if ni[node, DEPTH] >= cfg[MAX_DEPTH]:
        _deactivate(ni, nf, ti, free, ctr, t, node)
        return 0
    seen_now = nf[node, NSEEN] if cfg[GRACE_BY_COUNT] > 0 else nf[node, WEIGHT]
    if seen_now - nf[node, LAST] >= tf[t, GRACE]:
        split = _attempt_split(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows,
                               feat_nrows, row_other, multi_ok, cfg, edges, ti, tf, free, ctr, t,
                               node, dists)
        if split:
            return 1
        nf[node, LAST] = seen_now
    return 0


@njit(cache=True)
def _leaf_for_unroutable(ni, nf, cls, present, stat, counts, seen, edges, ti, free, ctr, t,
                         node, x):
    """A new branch for an unseen value of a multiway split, else the most traversed path."""
    while True:
        if ni[node, KIND] == NOMW and not math.isnan(x[ni[node, FEAT]]):
            leaf = _new_node(ni, nf, cls, present, stat, counts, seen, free, ctr, t, node,
                             ni[node, DEPTH] + 1)
            _add_edge(ni, edges, ctr, node, x[ni[node, FEAT]], leaf)
            ti[t, N_ACTIVE] += 1
            return leaf
        node = _most_common(ni, nf, edges, node)
        while ni[node, KIND] != LEAF:
            child = _route(ni, nf, edges, node, x)
            if child < 0:
                break
            node = child
        if ni[node, KIND] == LEAF:
            return node


@njit(cache=True)
def _add_edge(ni, edges, ctr, node, row, child):
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
def _deactivate(ni, nf, ti, free, ctr, t, node):
    _free_slot(ni, nf, free, ctr, node)
    ti[t, N_ACTIVE] -= 1
    ti[t, N_INACTIVE] += 1


# ---- split attempts ----------------------------------------------------------------------------


@njit(cache=True)
def _numeric_best(stat, s, j, pre, n_splits, min_frac, dists):
    """(best merit, its point) of numeric feature ``j`` over River's candidate points."""
    n_classes = dists.shape[1]
    lo, hi = np.inf, -np.inf
    for c in range(n_classes):
        if stat[s, SW, j, c] > 0.0:
            lo = min(lo, stat[s, SMIN, j, c])
            hi = max(hi, stat[s, SMAX, j, c])
    best, best_point = -np.inf, np.nan
    if not lo < np.inf:
        return best, best_point, False
    size = (hi - lo) / (n_splits + 1.0)
    for i in range(n_splits):
        point = lo + size * (i + 1)
        if not (lo < point < hi):
            continue
        _numeric_dists(stat, s, j, point, dists)
        merit = _merit(pre, dists, 2, min_frac)
        if merit > best:
            best, best_point = merit, point
    return best, best_point, True


@njit(cache=True)
def _numeric_dists(stat, s, j, point, dists):
    """River's ``GaussianSplitter`` class weights left (``<=``) and right of ``point``."""
    for c in range(dists.shape[1]):
        dists[0, c] = 0.0
        dists[1, c] = 0.0
        n = stat[s, SW, j, c]
        if n <= 0.0:
            continue
        if point < stat[s, SMIN, j, c]:
            dists[1, c] = n
        elif point >= stat[s, SMAX, j, c]:
            dists[0, c] = n
        else:
            var = stat[s, SS, j, c] / (n - 1.0) if n > 1.0 else 0.0
            sd = math.sqrt(var) if var > 0.0 else 0.0
            cdf = 0.5 * (1.0 + math.erf((point - stat[s, SMEAN, j, c]) / sd / math.sqrt(2.0))) \
                if sd > 0.0 else 0.0
            dists[0, c] = cdf * n
            dists[1, c] = n - cdf * n


@njit(cache=True)
def _nominal_dists(counts, feat_rows, feat_nrows, s, j, row, dists):
    """Class weights of value row ``row`` (branch 0) and of the feature's other rows (1)."""
    dists[0, :] = 0.0
    dists[1, :] = 0.0
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        b = 0 if r == row else 1
        for c in range(dists.shape[1]):
            dists[b, c] += counts[s, r, c]


@njit(cache=True)
def _row_used(counts, s, r):
    for c in range(counts.shape[2]):
        if counts[s, r, c] > 0.0:
            return True
    return False


@njit(cache=True)
def _multiway_dists(counts, feat_rows, feat_nrows, s, j, dists):
    """One branch per value row the leaf has seen; returns how many."""
    b = 0
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        if _row_used(counts, s, r):
            dists[b, :] = counts[s, r, :]
            b += 1
    return b


@njit(cache=True)
def _nominal_best(counts, feat_rows, feat_nrows, row_other, multiway, s, j, pre, min_frac,
                  dists):
    """(best merit, its row or -1 for the multiway split, a suggestion exists) of feature
    ``j`` (River's ``NominalSplitterClassif``: the multiway split first, then each value)."""
    best, best_row, real = -np.inf, -2, False
    used = 0
    for i in range(feat_nrows[j]):
        used += _row_used(counts, s, feat_rows[j, i])
    if used == 0:
        return best, best_row, False
    if multiway:
        b = _multiway_dists(counts, feat_rows, feat_nrows, s, j, dists)
        best, best_row, real = _merit(pre, dists, b, min_frac), -1, True
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        if row_other[r] or not _row_used(counts, s, r):
            continue
        _nominal_dists(counts, feat_rows, feat_nrows, s, j, r, dists)
        merit = _merit(pre, dists, 2, min_frac)
        if merit > best:
            best, best_row, real = merit, r, True
    return best, best_row, real


@njit(cache=True)
def _multiway_allowed(counts, feat_rows, feat_nrows, row_other, multi_ok, cfg, s, j):
    if cfg[BINARY] > 0 or multi_ok[j] == 0:
        return False
    for i in range(feat_nrows[j]):
        r = feat_rows[j, i]
        if row_other[r] and _row_used(counts, s, r):
            return False
    return True


@njit(cache=True)
def _attempt_split(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows,
                   row_other, multi_ok, cfg, edges, ti, tf, free, ctr, t, node, dists):
    """River's ``_attempt_to_split``: the best two suggestions, the Hoeffding bound, the tie
    threshold; a winning null split (pre-pruning) clears the leaf's statistics. True: split."""
    n_classes = cls.shape[1]
    n_pos = 0
    total = 0.0
    top_class = 0.0
    n_present = 0
    for c in range(n_classes):
        total += cls[node, c]
        top_class = max(top_class, cls[node, c])
        n_pos += cls[node, c] != 0.0
        n_present += present[node, c]
    if n_pos < 2:
        return False
    s = ni[node, SLOT]
    min_frac = cfg[MIN_FRAC]
    if top_class > 0.0 and top_class / total > cfg[MAX_SHARE]:
        _null_wins(stat, counts, seen, nf, s, node)
        return False
    pre = _entropy_term(cls[node]) / total
    n_sugg = 1 if cfg[PREPRUNE] > 0 else 0
    top, second = -np.inf, -np.inf
    best_feat, best_value, best_real = -1, np.nan, False
    for j in range(kinds.shape[0]):
        if kinds[j] == 0:
            merit, value, has = _numeric_best(stat, s, j, pre, int(cfg[N_SPLITS]), min_frac,
                                              dists)
            real = merit > -np.inf
        elif kinds[j] == 1:
            multiway = _multiway_allowed(counts, feat_rows, feat_nrows, row_other, multi_ok, cfg,
                                         s, j)
            merit, row, has = _nominal_best(counts, feat_rows, feat_nrows, row_other, multiway, s,
                                            j, pre, min_frac, dists)
            value = float(row)
            real = has and (merit > -np.inf or row == -1)
        else:
            continue
        if not has:
            continue
        n_sugg += 1
        if merit >= top or (top == -np.inf and merit == -np.inf):  # stable sort: last of ties
            second = top
            top = merit
            best_feat, best_value, best_real = j, value, real
        elif merit > second:
            second = merit
    if n_sugg < 2:
        should = n_sugg > 0
    else:
        r = math.log(max(n_present, 2)) / LOG2
        bound = math.sqrt(r * r * math.log(1.0 / tf[t, DELTA]) / (2.0 * total))
        should = (top - second > bound) or (bound < tf[t, TAU])
    if not should:
        return False
    if best_feat < 0 or not best_real:
        _null_wins(stat, counts, seen, nf, s, node)
        return False
    _split(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg, edges,
           ti, free, ctr, t, node, best_feat, best_value, dists)
    return True


@njit(cache=True)
def _null_wins(stat, counts, seen, nf, s, node):
    """River deactivates the leaf and (its memory allowing) activates it again: fresh
    statistics, the class weights and the adaptive rule's scores kept."""
    _clear_slot(stat, counts, seen, s)
    nf[node, NLEARN] = 0.0
    nf[node, WLEARN] = 0.0


@njit(cache=True)
def _split(ni, nf, cls, present, stat, counts, seen, kinds, feat_rows, feat_nrows, cfg, edges,
           ti, free, ctr, t, node, j, value, dists):
    """Turn leaf ``node`` into a branch on feature ``j`` (threshold or value row ``value``,
    -1: multiway) with one new leaf per branch holding its class weights."""
    s = ni[node, SLOT]
    depth = ni[node, DEPTH] + 1
    n_classes = cls.shape[1]
    if kinds[j] == 0:
        _numeric_dists(stat, s, j, value, dists)
        n_b = 2
    elif value >= 0:
        _nominal_dists(counts, feat_rows, feat_nrows, s, j, int(value), dists)
        n_b = 2
    else:
        n_b = _multiway_dists(counts, feat_rows, feat_nrows, s, j, dists)
    children = np.empty(n_b, np.int64)
    rows = np.empty(n_b, np.int64)
    b = 0
    for i in range(feat_nrows[j] if kinds[j] == 1 and value < 0 else 0):
        r = feat_rows[j, i]
        if _row_used(counts, s, r):
            rows[b] = r
            b += 1
    new_weight = 0.0
    for b in range(n_b):
        child = _new_node(ni, nf, cls, present, stat, counts, seen, free, ctr, t, node, depth)
        children[b] = child
        for c in range(n_classes):
            cls[child, c] = dists[b, c]
            present[child, c] = _child_has(stat, counts, feat_rows, feat_nrows, kinds, s, j,
                                           value, b, c, dists)
            nf[child, WEIGHT] += dists[b, c]
        nf[child, LAST] = nf[child, WEIGHT] if cfg[GRACE_BY_COUNT] == 0 else 0.0
        new_weight += nf[child, WEIGHT]
    _free_slot(ni, nf, free, ctr, node)
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
            _add_edge(ni, edges, ctr, node, rows[b], children[b])
    if ni[node, KIND] != NOMW:
        ni[node, CHILD0] = children[0]
        ni[node, CHILD1] = children[1]
    _add_weight(ni, nf, node, new_weight - nf[node, WEIGHT])
    ti[t, N_ACTIVE] += n_b - 1


@njit(cache=True)
def _child_has(stat, counts, feat_rows, feat_nrows, kinds, s, j, value, b, c, dists):
    """Whether class ``c`` is a key of branch ``b``'s class weights in River's split (it counts
    for the range of the merit)."""
    if kinds[j] == 0:
        if stat[s, SW, j, c] <= 0.0:
            return 0
        if b == 0:
            return 1 if value >= stat[s, SMIN, j, c] else 0
        return 1 if value < stat[s, SMAX, j, c] else 0
    return 1 if dists[b, c] > 0.0 else 0


# ---- limits ------------------------------------------------------------------------------------


@njit(cache=True)
def enforce_active_limit(ni, nf, cls, ti, free, ctr, t):
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
        _deactivate(ni, nf, ti, free, ctr, t, worst)


@njit(cache=True)
def undo_multiway(ni, nf, cls, present, stat, counts, seen, edges, ti, free, ctr, j):
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
                _free_slot(ni, nf, free, ctr, m)
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
        _clear_slot(stat, counts, seen, s)
        ni[node, KIND] = LEAF
        ni[node, SLOT] = s
        ni[node, CHILD0] = -1
        ni[node, CHILD1] = -1
        ni[node, FEAT] = -1
        total = 0.0
        for c in range(cls.shape[1]):
            present[node, c] = 1 if cls[node, c] > 0.0 else 0
            total += cls[node, c]
        nf[node, LAST] = total
        nf[node, MCC] = 0.0
        nf[node, NBC] = 0.0
        ti[t, N_ACTIVE] += 1
        merged += 1
    return merged
