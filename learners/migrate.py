"""Old River-based trees (``tree_core="river"``) as one compiled :class:`TreeEnsemble`.

:func:`ensemble_from_river` turns the N trees a model pickled before the compiled core kept (a
list of :class:`learners.hoeffding.CostSensitiveTree` or bare River trees: array leaves,
:mod:`learners.array_leaf` and :mod:`learners.nb_leaf`, or River's own leaves) into the same N
trees in flat arrays (:mod:`learners.compiled`), so that old snapshots and model files load and
go on learning.

>>> import numpy as np
>>> from learners.hoeffding import CostSensitiveTree
>>> old = [CostSensitiveTree(3, grace_period=10, delta=0.1, nominal_attributes=["c"])
...        for _ in range(2)]
>>> for i in range(200):
...     for tree in old:
...         tree.learn_one({"v": float(i % 7), "c": "pq"[i % 2]}, (i % 7 > 3) + i % 2)
>>> trees = ensemble_from_river(old, 3, ["c"])
>>> x = {"v": 5.0, "c": "q"}
>>> bool(np.allclose(trees.predict_proba(trees.transform(x)), [t.predict_proba(x) for t in old]))
True

Carried over exactly: each tree's structure (numeric and nominal binary branches, nominal
multiway branches with their children in order), thresholds, depths, leaf class weights (and
the order classes came to a leaf and to its statistics), the branches' weights (their most
common paths), active and inactive leaves, the split statistics of active leaves (per feature
and class: Gaussian weight, mean, sum of squared deviations ``S``, min and max; per nominal
value and class: weights), the last split attempt, the adaptive rule's counters, grace period,
delta and tau per tree, and the model-wide settings read from the first tree (depth limit,
branch fraction, share to split, pre-pruning, binary splits, ``max_size``, the nominal caps).
Majority-class leaves and the array naive-Bayes leaves predict the same to rounding.

Approximate (docs/boosters.md, "The compiled core", lists the compiled core's own differences):

- the feature index is built from the features and values the trees have seen (branches and
  leaf statistics): features in the leaves' order, each nominal feature's values sorted (first
  seen where they do not sort), all of them with rows whatever ``max_nominal_values`` (later
  values obey the cap); the model-wide index replaces the per-leaf cap, so the weights an array
  leaf put in its "other" row go to the feature's "other" row, and a value the leaf lumped
  there is read as unseen by naive Bayes; whether a feature may split multiway follows the
  values of all trees, not of each tree, and no multiway split is undone on loading; the
  sorted rows order the binary candidates of a nominal feature, River's leaves their set of
  values (only exact ties between candidates can go the other way);
- a feature is nominal if declared, split on as nominal, or held by a leaf with a value that is
  not a number; a leaf's statistics of the other kind for it are dropped;
- River's own adaptive naive-Bayes leaves (``fast_trees=False``) keep their counters but predict
  with the project's naive Bayes (:mod:`learners.nb_leaf`), not River's; their prior (the weight
  of one average example) takes 1, as they do not count their examples (nor does any leaf but
  the array naive-Bayes one: the example counts used by ``grace_by="count"`` start there);
- River's memory estimate is not carried: ``max_size`` bounds the active leaves for the arrays'
  size (:class:`TreeEnsemble`), which may deactivate leaves at the next update, and inactive
  leaves are never activated again.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any

import numpy as np
from river.tree.nodes.branch import DTBranch, NominalBinaryBranch, NominalMultiwayBranch
from river.tree.nodes.branch import NumericBinaryBranch as _NumericBinary

from learners._layout import (
    CHILD0,
    CHILD1,
    DEPTH,
    FEAT,
    KIND,
    LAST,
    LEAF,
    MCC,
    N_ACTIVE,
    N_INACTIVE,
    NBC,
    NLEARN,
    NOM2,
    NOMW,
    NSEEN,
    NUM2,
    PARENT,
    ROOT,
    SLOT,
    SMAX,
    SMIN,
    THR,
    TREE,
    WEIGHT,
    WLEARN,
)
from learners.compiled import TreeEnsemble, from_state
from learners.compiled_state import sparse_counts
from learners.features import NOMINAL, NUMERIC, FeatureIndex

__all__ = ["ensemble_from_river"]

_OTHER = object()  # the key of an array leaf's "other" row (values past its cap)


def ensemble_from_river(
    trees: list, n_classes: int, nominal_attributes: list | None = None,
    leaf_prediction: str = "mc",
) -> TreeEnsemble:
    """The River-based ``trees`` (wrappers with a ``.tree`` or bare trees) as one ensemble of
    the same trees over ``n_classes`` labels (see the module)."""
    rivers = [getattr(t, "tree", t) for t in trees]
    if not rivers:
        raise ValueError("need at least one tree")
    first = rivers[0]
    if nominal_attributes is None:
        nominal_attributes = first.nominal_attributes
    walks = [_walk(tree._root) for tree in rivers]
    leaves = {id(n): _leaf_stats(n) for walk in walks for n, _ in walk if _active_leaf(n)}
    ensemble = TreeEnsemble(
        len(rivers), n_classes,
        grace_periods=[t.grace_period for t in rivers], deltas=[t.delta for t in rivers],
        taus=[t.tau for t in rivers], nominal_attributes=nominal_attributes,
        leaf_prediction=leaf_prediction,
        max_depth=None if first.max_depth >= sys.getrecursionlimit() - 20 else first.max_depth,
        min_branch_fraction=first.min_branch_fraction,
        max_share_to_split=first.max_share_to_split, merit_preprune=first.merit_preprune,
        binary_split=first.binary_split, max_size=first.max_size,
        max_nominal_values=getattr(first, "max_nominal_values", None),
        max_multiway_values=getattr(first, "max_multiway_values", None),
    )
    ensemble.features = _index(ensemble.features, walks, leaves)
    state = ensemble.__getstate__()
    state.update(_arrays(walks, leaves, ensemble.features, n_classes, state["tree_i"]))
    state.pop("stat_features")  # the statistics are whole: every feature, every field
    return from_state(state)


# ---- reading the River trees -------------------------------------------------------------------


def _walk(root) -> list[tuple]:
    """(node, parent position) of a tree's nodes in pre-order (children in order)."""
    out, stack = [], [(root, -1)] if root is not None else []
    while stack:
        node, parent = stack.pop()
        out.append((node, parent))
        if isinstance(node, DTBranch):
            stack.extend((child, len(out) - 1) for child in reversed(node.children))
    return out


def _active_leaf(node) -> bool:
    return not isinstance(node, DTBranch) and node.is_active()


def _leaf_stats(leaf) -> dict:
    """An active leaf's statistics in one form for both leaf kinds: the features in the leaf's
    order, numeric {name: {class: (w, mean, S, min, max)}}, nominal {name: {value: {class: w}}},
    the classes learned, examples and weight learned (estimated where not counted), counters."""
    out: dict[str, Any] = {"numeric": {}, "nominal": {}, "order": []}
    if hasattr(leaf, "_slots"):
        _array_leaf(leaf, out)
    else:
        _river_leaf(leaf, out)
    weights = [sum(w[0] for w in d.values()) for d in out["numeric"].values()]
    weights += [sum(sum(c.values()) for c in d.values()) for d in out["nominal"].values()]
    out["w_learned"] = getattr(leaf, "_w_learned", max(weights, default=0.0))
    out["n_learned"] = getattr(leaf, "_n_learned", out["w_learned"])
    out["mcc"] = getattr(leaf, "mc_correct", getattr(leaf, "_mc_correct_weight", 0.0))
    out["nbc"] = getattr(leaf, "nb_correct", getattr(leaf, "_nb_correct_weight", 0.0))
    return out


def _array_leaf(leaf, out: dict) -> None:
    """:class:`learners.array_leaf.ArrayLeaf`'s arrays."""
    labels = leaf._labels
    out["order"] = list(leaf._slots)
    out["seen"] = list(labels)
    for i, name in enumerate(leaf._num_names):
        out["numeric"][name] = {
            y: (leaf._w[c, i], leaf._mean[c, i], leaf._s[c, i], leaf._min[c, i], leaf._max[c, i])
            for c, y in enumerate(labels) if leaf._w[c, i] > 0.0
        }
    for i, name in enumerate(leaf._nom_names):
        rows = [(value, row) for value, row in leaf._rows[i].items()]
        if leaf._other[i] is not None:
            rows.append((_OTHER, leaf._other[i]))
        out["nominal"][name] = {
            value: {y: leaf._counts[row][c] for c, y in enumerate(labels) if leaf._counts[row][c]}
            for value, row in rows
        }


def _river_leaf(leaf, out: dict) -> None:
    """River's own splitters: ``GaussianSplitter`` and ``NominalSplitterClassif``."""
    out["order"] = list(leaf.splitters)
    seen = out["seen"] = {}  # the classes in the order the splitters met them
    for name, splitter in leaf.splitters.items():
        dists = splitter._att_dist_per_class
        seen.update(dict.fromkeys(dists))
        if hasattr(splitter, "_min_per_class"):
            out["numeric"][name] = {
                y: (g._var.mean.n, g._var.mean._mean, g._var._S, splitter._min_per_class[y],
                    splitter._max_per_class[y])
                for y, g in dists.items() if g._var.mean.n > 0.0
            }
            continue
        values: dict = {}
        out["nominal"][name] = values
        for y, dist in dists.items():
            for value, w in dist.items():
                values.setdefault(value, {})[y] = w


# ---- the feature index -------------------------------------------------------------------------


def _merge(order: list, names) -> None:
    """Insert the ``names`` missing from ``order`` after their predecessor in ``names``."""
    at = 0
    for name in names:
        if name in order:
            at = order.index(name) + 1
        else:
            order.insert(at, name)
            at += 1


def _index(empty: FeatureIndex, walks: list, leaves: dict) -> FeatureIndex:
    """The feature index of what the trees have seen (see the module)."""
    order: list = []
    values: dict = {}
    nominal, other = set(empty.nominal_attributes), set()
    for walk in walks:
        for node, _ in walk:
            if id(node) in leaves:
                _merge(order, leaves[id(node)]["order"])
    for walk in walks:
        for node, _ in walk:
            if isinstance(node, DTBranch):
                feature = node.feature  # type: ignore[attr-defined]  # River's branches have one
                if feature not in order:  # a feature no active leaf holds: last
                    order.append(feature)
                seen = values.setdefault(feature, [])
                if isinstance(node, NominalBinaryBranch):
                    nominal.add(feature)
                    seen.append(node.value)
                elif isinstance(node, NominalMultiwayBranch):
                    nominal.add(feature)
                    seen.extend(node._mapping)
            elif id(node) in leaves:
                stats = leaves[id(node)]
                for name, rows in stats["nominal"].items():
                    if any(not isinstance(v, numbers.Number) for v in rows if v is not _OTHER):
                        nominal.add(name)
                    values.setdefault(name, []).extend(v for v in rows if v is not _OTHER)
                    if _OTHER in rows:
                        other.add(name)
    index = FeatureIndex(empty.nominal_attributes, empty.max_nominal_values,
                         empty.max_multiway_values)
    for name in order:
        column = index._add_column(name, NOMINAL if name in nominal else NUMERIC)
        if name not in nominal:
            continue
        for value in _sorted(dict.fromkeys(values.get(name, ()))):
            index.values[column][value] = index._new_row(column, other=False)
            index.distinct[column] += 1
        if name in other:
            index.other[column] = index._new_row(column, other=True)
    return index


def _sorted(values) -> list:
    try:
        return sorted(values)
    except TypeError:  # values of several types: first seen first
        return list(values)


# ---- the arrays --------------------------------------------------------------------------------


def _arrays(walks: list, leaves: dict, index: FeatureIndex, k: int, tree_i: np.ndarray) -> dict:
    """The node, edge and slot arrays of :meth:`TreeEnsemble.__getstate__` for the trees."""
    n = sum(len(walk) for walk in walks)
    ni = np.full((n, 8), -1, dtype=np.int64)
    nf, cls = np.zeros((n, 8)), np.zeros((n, k))
    present = np.zeros((n, k), dtype=np.int32)  # 1 + the order classes came; 0: absent
    stat = np.zeros((len(leaves), 5, index.n_features, k))
    stat[:, SMIN], stat[:, SMAX] = np.inf, -np.inf
    counts = np.zeros((len(leaves), index.n_rows, k))
    seen = np.zeros((len(leaves), k), dtype=np.int32)
    edges: list[list[int]] = []
    tree_i[:, ROOT] = -1
    start, slot = 0, 0
    for t, walk in enumerate(walks):
        if walk:
            tree_i[t, ROOT] = start
        for i, (node, parent) in enumerate(walk):
            at = start + i
            ni[at, [DEPTH, TREE, PARENT]] = node.depth, t, start + parent if parent >= 0 else -1
            for rank, (y, w) in enumerate(node.stats.items(), 1):
                _check_class(y, k)
                cls[at, y], present[at, y] = w, rank
            nf[at, WEIGHT] = node.total_weight
            if isinstance(node, DTBranch):
                _branch(node, at, walk, start, ni, nf, edges, index)
                continue
            ni[at, KIND] = LEAF
            nf[at, LAST] = node.last_split_attempt_at
            active = id(node) in leaves
            tree_i[t, N_ACTIVE if active else N_INACTIVE] += 1
            if active:
                _slot(leaves[id(node)], slot, at, ni, nf, stat, counts, seen, index)
                slot += 1
        start += len(walk)
    return {"ni": ni, "nf": nf, "cls": cls, "present": present, "tree_i": tree_i,
            "edges": np.array(edges, dtype=np.int64).reshape(-1, 3), "stat": stat,
            "counts": sparse_counts(counts), "seen": seen}


def _check_class(y, k: int) -> None:
    if not (isinstance(y, numbers.Integral) and 0 <= int(y) < k):
        raise ValueError(f"class {y!r} is not one of 0..{k - 1}")


def _branch(node, at: int, walk: list, start: int, ni, nf, edges: list, index) -> None:
    """Branch ``node`` at row ``at``: kind, feature, test and children (positions in ``walk``:
    a child's parent is ``at - start``, in order)."""
    column = index.columns[node.feature]
    kids = [start + i for i, (_, parent) in enumerate(walk) if parent == at - start]
    ni[at, FEAT] = column
    if isinstance(node, _NumericBinary):
        ni[at, KIND], nf[at, THR] = NUM2, node.threshold
    elif isinstance(node, NominalBinaryBranch):
        ni[at, KIND], nf[at, THR] = NOM2, index.values[column][node.value]
    elif isinstance(node, NominalMultiwayBranch):
        ni[at, KIND], nf[at, THR] = NOMW, -1.0
        ni[at, CHILD0] = len(edges)
        for b, child in enumerate(kids):
            row = index.values[column][node._r_mapping[b]]
            edges.append([row, child, len(edges) + 1 if b + 1 < len(kids) else -1])
        return
    else:
        raise ValueError(f"cannot migrate a {type(node).__name__}")
    ni[at, CHILD0], ni[at, CHILD1] = kids


def _slot(stats: dict, s: int, at: int, ni, nf, stat, counts, seen, index) -> None:
    """An active leaf's statistics into slot ``s`` (features of the other kind dropped)."""
    ni[at, SLOT] = s
    nf[at, [MCC, NBC]] = stats["mcc"], stats["nbc"]
    nf[at, [NLEARN, WLEARN, NSEEN]] = stats["n_learned"], stats["w_learned"], stats["n_learned"]
    for rank, y in enumerate(stats["seen"], 1):
        seen[s, y] = rank
    for name, by_class in stats["numeric"].items():
        j = index.columns[name]
        if index.kinds[j] == NUMERIC:
            for y, values in by_class.items():
                stat[s, :, j, y] = values
    for name, by_value in stats["nominal"].items():
        j = index.columns[name]
        if index.kinds[j] != NOMINAL:
            continue
        for value, by_class in by_value.items():
            row = index.other[j] if value is _OTHER else index.values[j][value]
            for y, w in by_class.items():
                counts[s, row, y] += w
