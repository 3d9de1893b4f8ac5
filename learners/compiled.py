"""The compiled tree core: N Hoeffding trees in flat arrays, read in one call, taught in three.

More: docs/boosters.md, "The compiled core". River's ``HoeffdingTreeClassifier`` is the
reference; :mod:`learners._core`, :mod:`learners._core_learn` and :mod:`learners._core_split`
hold the compiled loops, imported on the first call that needs them (help and the CLI commands
that do not learn never load numba); :mod:`learners._layout` names the arrays' columns.

>>> import numpy as np
>>> trees = TreeEnsemble(n_trees=2, n_classes=2, grace_periods=[10, 20], deltas=[0.1, 0.1])
>>> for i in range(200):
...     x = trees.features.transform({"v": float(i % 10), "c": "pq"[i % 2]}, learn=True)
...     _ = trees.learn(x, np.array([int(i % 10 > 4)] * 2), np.ones(2))
>>> trees.n_leaves().tolist()
[2, 2]
>>> trees.predict_proba(trees.features.transform({"v": 8.0, "c": "p"})).argmax(axis=1).tolist()
[1, 1]
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from learners._layout import (
    BINARY,
    CHILD0,
    CHILD1,
    DELTA,
    DEPTH,
    FEAT,
    GRACE,
    KIND,
    MAX_ACTIVE,
    MCC,
    N_ACTIVE,
    N_BFREE,
    N_EDGES,
    N_FREE,
    N_NODES,
    NBC,
    NOMW,
    NUM2,
    ROOT,
    SLOT,
    TAU,
    THR,
    TREE,
)
from learners.compiled_state import (
    blocks_from_state,
    counts_state,
    dense_counts,
    dense_stat,
    empty_blocks,
    grow,
    index_from_state,
    index_state,
    ranks,
    small,
    stat_state,
)
from learners.features import NOMINAL, FeatureIndex
from learners.split_search import Searcher, sharing_every_search

__all__ = ["FORMAT", "TreeEnsemble", "from_state", "warm_up"]

#: the version of :meth:`TreeEnsemble.__getstate__`'s data-only form
FORMAT = 1
#: River's defaults the ensemble shares (``max_size`` in MB per tree, as River's)
N_SPLITS = 10
_KERNELS = None


def kernels() -> SimpleNamespace:
    """The compiled kernels, imported (and numba with them) on first use."""
    global _KERNELS
    if _KERNELS is None:
        from learners._core import predict_all
        from learners._core_learn import learn_round, learn_splits, undo_multiway
        from learners._core_search import refine, search_share
        _KERNELS = SimpleNamespace(predict_all=predict_all, learn_round=learn_round,
                                   search_share=search_share, refine=refine,
                                   learn_splits=learn_splits, undo_multiway=undo_multiway)
    return _KERNELS


class TreeEnsemble:
    """``n_trees`` Hoeffding tree classifiers over ``n_classes`` labels, in flat arrays.

    Tree ``t`` has its own grace period, split confidence and tie threshold; they share the
    feature index (:class:`learners.features.FeatureIndex`), the leaf prediction (``"mc"``:
    majority class; ``"nba"``: adaptive naive Bayes) and River's other settings. ``grace_by``:
    ``"weight"`` (River: a split attempt after ``grace_period`` more weight) or ``"count"``
    (after ``grace_period`` more examples, whatever their weights).

    The arrays: nodes (kind, feature, children, depth, statistics slot, tree, parent; threshold,
    subtree weight, last attempt, the adaptive rule's scores, examples learned; class weights),
    multiway edges (value row, child, next), per statistics slot (one per active leaf) the order
    its classes came and a block per class it has seen (``block_of``; the others read block 0,
    which holds nothing), and a pool of blocks (``stat_blocks``, ``count_blocks``): a class's
    weighted mean, variance, min and max per numeric feature and weights per nominal value row.
    Memory follows the (leaf, class) pairs seen, as River's leaves' dicts.
    """

    def __init__(
        self,
        n_trees: int,
        n_classes: int,
        grace_periods=200.0,
        deltas=1e-7,
        taus=0.05,
        nominal_attributes: list | None = None,
        leaf_prediction: str = "mc",
        max_depth: int | None = None,
        min_branch_fraction: float = 0.01,
        max_share_to_split: float = 0.99,
        merit_preprune: bool = True,
        binary_split: bool = False,
        max_size: float = 100.0,
        max_nominal_values: int | None = 64,
        max_multiway_values: int | None = 32,
        grace_by: str = "weight",
    ):
        if leaf_prediction not in ("mc", "nba"):
            raise ValueError(f"leaf_prediction must be 'mc' or 'nba', got {leaf_prediction!r}")
        if grace_by not in ("weight", "count"):
            raise ValueError(f"grace_by must be 'weight' or 'count', got {grace_by!r}")
        if n_trees < 1 or n_classes < 2:
            raise ValueError(f"need n_trees >= 1 and n_classes >= 2, got {n_trees}, {n_classes}")
        self.n_trees, self.n_classes = int(n_trees), int(n_classes)
        self.leaf_prediction, self.grace_by = leaf_prediction, grace_by
        self.max_depth, self.max_size = max_depth, float(max_size)
        self.features = FeatureIndex(nominal_attributes, max_nominal_values, max_multiway_values)
        tree_f = np.empty((self.n_trees, 3))
        for column, values in ((GRACE, grace_periods), (DELTA, deltas), (TAU, taus)):
            tree_f[:, column] = np.broadcast_to(np.asarray(values, dtype=float), (self.n_trees,))
        grace, delta, tau = tree_f.T
        if not ((grace > 0).all() and ((delta > 0) & (delta < 1)).all() and (tau >= 0).all()):
            raise ValueError("need grace_period > 0, 0 < delta < 1, tau >= 0 for every tree")
        self.tree_f = tree_f
        self.cfg = np.array([
            min_branch_fraction, max_share_to_split,
            math.inf if max_depth is None else float(max_depth),
            float(leaf_prediction == "nba"), float(merit_preprune), float(N_SPLITS),
            float(grace_by == "count"), float(binary_split),
        ])
        self.tree_i = np.zeros((self.n_trees, 4), dtype=np.int64)
        self.tree_i[:, ROOT] = -1
        c = self.n_classes
        self.ni = np.zeros((0, 8), dtype=np.int64)
        self.nf = np.zeros((0, 8))
        self.cls = np.zeros((0, c))
        self.present = np.zeros((0, c), dtype=np.int32)  # ranks: 1 + the order classes came
        self.edges = np.zeros((0, 3), dtype=np.int64)
        self.stat_blocks = empty_blocks(1, 0)  # block 0: EMPTY, the block of classes unseen
        self.count_blocks = np.zeros((1, 0))
        self.block_free = np.zeros(1, dtype=np.int64)
        self.seen = np.zeros((0, c), dtype=np.int32)
        self.block_of = np.zeros((0, c), dtype=np.int64)
        self.free = np.zeros(0, dtype=np.int64)
        self.ctr = np.zeros(4, dtype=np.int64)
        self._buffers()
        self._sync_features()

    # ---- arrays -------------------------------------------------------------------------------

    def _buffers(self) -> None:
        """The kernels' scratch and the prediction memo's version and memo (never saved)."""
        self._scratch = np.zeros(self.n_classes)
        self._dists = np.zeros((2, self.n_classes))
        self._version = np.zeros(1, dtype=np.int64)
        self._memo = _memo(self.n_trees, self.n_classes, 0)
        self._searcher = Searcher(self.n_trees, 0, self.n_classes, 2)

    def _sync_features(self) -> None:
        """Feature arrays and statistics sized to the index (new features and value rows)."""
        index = self.features
        f, r = index.n_features, index.n_rows
        self.kinds = np.array(index.kinds, dtype=np.int64)
        self.row_other = np.array(index.row_other, dtype=np.uint8)
        width = max([len(v) + 1 for v in index.values] + [1])
        self.feat_rows = np.full((f, width), -1, dtype=np.int64)
        self.feat_nrows = np.zeros(f, dtype=np.int64)
        for row, column in enumerate(index.row_feature):
            self.feat_rows[column, self.feat_nrows[column]] = row
            self.feat_nrows[column] += 1
        self.multi_ok = np.array(
            [k == NOMINAL and index.multiway_allowed(j) for j, k in enumerate(index.kinds)],
            dtype=np.uint8,
        )
        width = self.stat_blocks.shape[2]
        if width < f:
            grown = empty_blocks(self.stat_blocks.shape[0], max(f, 2 * width))
            grown[:, :, :width] = self.stat_blocks
            self.stat_blocks = grown
        self.count_blocks = grow(self.count_blocks, r, axis=1)
        multi = self.feat_nrows[self.multi_ok.astype(bool)]
        self._max_children = 2 if self.cfg[BINARY] or not multi.size else max(2, int(multi.max()))
        branches = max(2, int(self.feat_nrows.max()) if f else 2)  # a split's branches, at most
        if self._dists.shape[0] < branches:
            self._dists = np.zeros((branches, self.n_classes))
        if not self._searcher.fits(f, branches):
            self._searcher = Searcher(self.n_trees, f, self.n_classes, branches)
        self._update_active_limit()
        self._seen_shape = (f, r)

    def _update_active_limit(self) -> None:
        """River's ``max_size`` (MB per tree) as a number of active leaves for these arrays
        (a leaf's statistics as if it had seen every class: the bound is kept as it was)."""
        width, rows = self.stat_blocks.shape[2], self.count_blocks.shape[1]
        per_leaf = 8.0 * self.n_classes * (5 * width + rows + 24)
        self.tree_i[:, MAX_ACTIVE] = max(1, int(self.max_size * 2**20 / per_leaf))

    def _make_room(self, nodes: int, blocks: int = 0) -> None:
        """Room for ``nodes`` more nodes, slots and edges, and ``blocks`` more blocks."""
        if self.ctr[N_BFREE] < blocks:
            self._more_blocks(blocks)
        n, e = self.ctr[N_NODES] + nodes, self.ctr[N_EDGES] + nodes
        if n <= self.ni.shape[0] and e <= self.edges.shape[0] and self.ctr[N_FREE] >= nodes:
            return
        self.ni = grow(self.ni, n)
        self.nf = grow(self.nf, n)
        self.cls = grow(self.cls, n)
        self.present = grow(self.present, n)
        self.edges = grow(self.edges, e)
        if self.ctr[N_FREE] < nodes:
            old = self.seen.shape[0]
            self.seen = grow(self.seen, old + nodes - self.ctr[N_FREE])
            new = self.seen.shape[0]
            self.block_of = grow(self.block_of, new)  # EMPTY
            self.free = grow(self.free, new)
            added = np.arange(old, new, dtype=np.int64)
            self.free[self.ctr[N_FREE] : self.ctr[N_FREE] + added.size] = added
            self.ctr[N_FREE] += added.size

    def _more_blocks(self, blocks: int) -> None:
        """At least ``blocks`` free blocks: the pool grown by half (the new blocks are cleared
        when taken; zeroed memory is not resident until then)."""
        old = self.stat_blocks.shape[0]
        new = max(old + blocks - int(self.ctr[N_BFREE]), old + old // 2, 16)
        for name in ("stat_blocks", "count_blocks", "block_free"):
            have = getattr(self, name)
            grown = np.zeros((new, *have.shape[1:]), dtype=have.dtype)
            grown[:old] = have
            setattr(self, name, grown)
        free = int(self.ctr[N_BFREE])
        self.block_free[free : free + new - old] = np.arange(old, new, dtype=np.int64)
        self.ctr[N_BFREE] += new - old

    # ---- learning and predicting --------------------------------------------------------------

    def transform(self, x: dict, learn: bool = False) -> np.ndarray:
        """``x`` through the feature index (see :class:`learners.features.FeatureIndex`)."""
        return self.features.transform(x, learn=learn)

    def learn(self, x: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> int:
        """Tree ``t`` learns label ``labels[t]`` with weight ``weights[t]`` for the vector ``x``
        (from :meth:`transform` with ``learn=True``): the leaves learn, the leaves due a split
        attempt are searched, the attempts are made; one compiled call, three where a helper
        thread shares a long search (:mod:`learners.split_search`). Returns the splits. The
        compiled calls release the GIL: nothing may read the ensemble while it learns."""
        if self.frozen:
            raise RuntimeError("a serving copy only predicts; learn on the model it came from")
        labels, weights = np.asarray(labels, dtype=np.int64), np.asarray(weights, dtype=float)
        if labels.shape != (self.n_trees,) or weights.shape != (self.n_trees,):
            raise ValueError(f"need one label and one weight per tree ({self.n_trees})")
        listed = labels.tolist()
        if min(listed) < 0 or max(listed) >= self.n_classes:
            raise ValueError(f"labels must be in 0..{self.n_classes - 1}")
        index = self.features
        if (index.n_features, index.n_rows) != self._seen_shape or index.crossed:
            self._version[0] += 1  # the trees may change here: a prediction's memo is stale
            self._sync_features()
            if index.crossed:
                self._undo_crossed()
        x = self._fit(x)
        self._make_room(self.n_trees * (self._max_children + 1), self.n_trees)
        k, search = kernels(), self._searcher
        tables = (self.ni, self.nf, self.cls, self.present, self.stat_blocks, self.count_blocks,
                  self.seen, self.block_of, self.block_free, self.kinds, self.feat_rows,
                  self.feat_nrows)
        trees = (self.cfg, self.edges, self.tree_i, self.tree_f, self.free, self.ctr)
        found = (search.merits, search.values, search.flags)
        done = k.learn_round(*tables, self.row_other, self.multi_ok, *trees, x, labels, weights,
                             self._scratch, self._version, *self._memo, search.nodes,
                             search.claimed, *found, search.dists, self._dists,
                             search.min_shared())
        if done >= 0:
            return done
        search.search(k.search_share, k.refine, self, -done)  # shared with a helper thread
        return k.learn_splits(*tables, *trees, search.nodes, -done, *found,
                              self._dists, self._version)

    def _undo_crossed(self) -> None:
        """Undo the multiway splits on features that passed ``max_multiway_values``."""
        k = kernels()
        for column in self.features.crossed:
            nodes = self.ni[: self.ctr[N_NODES]]
            n_multi = int(((nodes[:, KIND] == NOMW) & (nodes[:, FEAT] == column)).sum())
            if n_multi:
                self._make_room(n_multi)
                k.undo_multiway(self.ni, self.nf, self.cls, self.present, self.seen,
                                self.block_of, self.block_free, self.edges, self.tree_i,
                                self.free, self.ctr, column)
        self.features.crossed.clear()

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Every tree's class probabilities for the vector ``x`` (trees, classes); one compiled
        call. An untrained tree gives a row of zeros. Kept until anything learns: learning the
        same ``x`` next reads its naive-Bayes leaves' probabilities from it."""
        out = np.empty((self.n_trees, self.n_classes))
        x = self._fit(x)
        if self._memo[1].shape[0] < x.shape[0] and not self.frozen:  # a copy never learns
            self._memo = _memo(self.n_trees, self.n_classes, 2 * x.shape[0])
        kernels().predict_all(
            self.ni, self.nf, self.cls, self.present, self.stat_blocks, self.count_blocks,
            self.seen, self.block_of, self.kinds, self.feat_rows, self.feat_nrows, self.cfg,
            self.edges, self.tree_i, x, out, self._version, *self._memo,
        )
        return out

    def _fit(self, x: np.ndarray) -> np.ndarray:
        """``x`` padded with NaN to the arrays' features (a vector read before the index grew)."""
        n = self.kinds.shape[0]
        if x.shape[0] >= n:
            return x if x.shape[0] == n else x[:n]
        return np.concatenate([x, np.full(n - x.shape[0], np.nan)])

    # ---- inspection ---------------------------------------------------------------------------

    def trained(self) -> np.ndarray:
        """Whether each tree has learned anything (N,)."""
        return self.tree_i[:, ROOT] >= 0

    def n_leaves(self) -> np.ndarray:
        """Leaves per tree (N,)."""
        nodes = self.ni[: self.ctr[N_NODES]]
        return np.bincount(nodes[nodes[:, KIND] == 0, TREE], minlength=self.n_trees)

    @property
    def stat(self) -> np.ndarray:
        """The slots' statistics as one (slots, fields, features, classes) array, made on each
        read (inspection and tests; the kernels read the pool)."""
        return dense_stat(self.stat_blocks, self.block_of)

    @property
    def counts(self) -> np.ndarray:
        """The slots' nominal counts as one (slots, value rows, classes) array (as ``stat``)."""
        return dense_counts(counts_state(self.count_blocks, self.block_of,
                                         np.arange(self.seen.shape[0])))

    def n_blocks(self) -> int:
        """Statistics blocks in use: the (active leaf, class) pairs the leaves have seen."""
        return int(self.stat_blocks.shape[0] - 1 - self.ctr[N_BFREE])

    def n_active_leaves(self) -> np.ndarray:
        """Active leaves (those that keep split statistics) per tree (N,)."""
        return self.tree_i[:, N_ACTIVE].copy()

    def splits(self, t: int) -> list[tuple]:
        """Tree ``t``'s branches, depth first: (depth, feature name, kind, threshold or value)."""
        names = {column: name for name, column in self.features.columns.items()}
        values = {row: v for column in self.features.values for v, row in column.items()}
        out = []
        stack = [int(self.tree_i[t, ROOT])] if self.tree_i[t, ROOT] >= 0 else []
        while stack:
            node = stack.pop()
            kind = int(self.ni[node, KIND])
            if kind == 0:
                continue
            feature = names[int(self.ni[node, FEAT])]
            thr = float(self.nf[node, THR])
            test = thr if kind == NUM2 else ("multiway" if kind == NOMW else values.get(int(thr)))
            out.append((int(self.ni[node, DEPTH]), feature, kind, test))
            if kind == NOMW:
                e, kids = int(self.ni[node, CHILD0]), []
                while e >= 0:
                    kids.append(int(self.edges[e, 1]))
                    e = int(self.edges[e, 2])
                stack.extend(reversed(kids))
            else:
                stack.extend([int(self.ni[node, CHILD1]), int(self.ni[node, CHILD0])])
        return out

    # ---- pickling: a data-only form -----------------------------------------------------------

    def __getstate__(self) -> dict:
        """Plain data: numbers, strings, lists and arrays (no code), the statistics of active
        leaves only (of a serving copy, the three fields naive Bayes reads), and the slots
        renumbered."""
        n = int(self.ctr[N_NODES])
        ni = self.ni[:n].copy()
        used = ni[:, SLOT] >= 0
        slots = ni[used, SLOT]
        ni[used, SLOT] = np.arange(slots.size)
        return {
            "format": FORMAT,
            "params": {
                "n_trees": self.n_trees, "n_classes": self.n_classes,
                "leaf_prediction": self.leaf_prediction, "grace_by": self.grace_by,
                "max_depth": self.max_depth, "max_size": self.max_size, "frozen": self.frozen,
            },
            "features": index_state(self.features),
            "cfg": self.cfg.copy(), "tree_i": self.tree_i.copy(), "tree_f": self.tree_f.copy(),
            "ni": ni, "nf": self.nf[:n].copy(), "cls": self.cls[:n].copy(),
            "present": small(self.present[:n]),
            "edges": self.edges[: int(self.ctr[N_EDGES])].copy(),
            **self._stat_state(slots, 3 if self.frozen else 5),
        }

    def _stat_state(self, slots: np.ndarray, fields: int) -> dict:
        """The statistics, counts and rank table of ``slots`` in the saved form (see
        :func:`learners.compiled_state.stat_state`)."""
        return {**stat_state(self.stat_blocks, self.block_of, self.seen, self.kinds, slots,
                             fields),
                "counts": counts_state(self.count_blocks, self.block_of, slots),
                "seen": small(self.seen[slots])}

    def __setstate__(self, state: dict) -> None:
        if state.get("format") != FORMAT:
            raise ValueError(f"unknown tree ensemble format {state.get('format')!r}")
        p, f = state["params"], state["features"]
        self.n_trees, self.n_classes = p["n_trees"], p["n_classes"]
        self.leaf_prediction, self.grace_by = p["leaf_prediction"], p["grace_by"]
        self.max_depth, self.max_size = p["max_depth"], p["max_size"]
        self.frozen = bool(p.get("frozen", False))
        self.features = index_from_state(f)
        self.cfg, self.tree_i, self.tree_f = state["cfg"], state["tree_i"], state["tree_f"]
        self.ni, self.nf, self.cls = state["ni"], state["nf"], state["cls"]
        self.present, self.edges = ranks(state["present"]), state["edges"]
        self.stat_blocks, self.count_blocks, self.block_of, self.seen = blocks_from_state(
            state, len(f["kinds"]))
        self.block_free = np.zeros(self.stat_blocks.shape[0], dtype=np.int64)
        self.free = np.zeros(self.seen.shape[0], dtype=np.int64)
        self.ctr = np.array([self.ni.shape[0], self.edges.shape[0], 0, 0], dtype=np.int64)
        self._buffers()
        self._sync_features()

    def serving_copy(self) -> TreeEnsemble:
        """A copy that predicts exactly as this one and keeps only what predicting reads: the
        statistics of the naive-Bayes leaves that predict with them, none with ``"mc"``."""
        state = self.__getstate__()
        ni, nf = state["ni"], state["nf"]
        active = ni[:, SLOT] >= 0
        # the leaves that predict with naive Bayes (the adaptive rule of _core._leaf_proba)
        keep = active & (nf[:, NBC] >= nf[:, MCC]) & (self.leaf_prediction == "nba")
        ni[active & ~keep, SLOT] = -2  # active, statistics dropped: predicts the majority class
        ni[keep, SLOT] = np.arange(int(keep.sum()))
        state.update(self._stat_state(self.ni[: len(ni)][keep, SLOT], 3))
        state["params"]["frozen"] = True
        return from_state(state)

    frozen = False


def warm_up() -> None:
    """Compile every kernel now (numba writes them to its on-disk cache): an image built with
    this step starts deciding without compiling."""
    trees = TreeEnsemble(1, 2, grace_periods=1.0, deltas=0.5, taus=1.0, max_size=0.0001,
                         leaf_prediction="nba", max_multiway_values=2)
    with sharing_every_search():  # the shared search's kernels too
        for i in range(12):  # a multiway split on "c", then a third value undoes it
            x = trees.transform({"v": float(i), "c": "abc"[i % 2 + (i > 9)]}, learn=True)
            trees.learn(x, np.array([i % 2]), np.ones(1))
            trees.predict_proba(x)
    trees._searcher.refine(kernels().refine, trees, 0)  # called alone after a late helper
    from learners.round_loops import warm_up as round_kernels  # a boosting round's small loops
    round_kernels()
    from learners.ridge import RidgeRewards  # the reward model's maps (numeric, mixed)

    model = RidgeRewards(2, quadratic=True)
    for i in range(6):
        for context in ({"a": float(i), "b": 1.0 - i}, {"a": float(i), "s": "xy"[i % 2]}):
            model.predict_one(context)
            model.learn_one(context, i % 2, i % 3 == 0)
    model.learn_one({"a": 1.0, "b": 2.0}, 0, True)  # learned without its prediction


def _memo(n_trees: int, n_classes: int, width: int) -> tuple:
    """An empty memo of a prediction (:func:`learners._core.predict_all`): its version and
    width, ``x``, the naive-Bayes leaves and their probabilities. A new memo replaces the old
    one whole, so a call reads one consistent memo."""
    meta = np.array([-1, 0], dtype=np.int64)
    leaves = np.full(n_trees, -1, dtype=np.int64)
    return meta, np.zeros(width), leaves, np.zeros((n_trees, n_classes))


def from_state(state: dict) -> TreeEnsemble:
    """A :class:`TreeEnsemble` from its data-only form (:meth:`TreeEnsemble.__getstate__`)."""
    trees = TreeEnsemble.__new__(TreeEnsemble)
    trees.__setstate__(state)
    return trees
