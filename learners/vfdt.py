"""River's Hoeffding tree classifier with a cheaper, exactly equivalent memory check.

More: docs/boosters.md, "learners/vfdt.py".

>>> tree = FastHoeffdingTreeClassifier(grace_period=5, delta=0.1, nominal_attributes=["c"])
>>> for i in range(300):
...     c, v = "pq"[i % 2], float(i % 7)
...     tree.learn_one({"c": c, "v": v}, int(c == "p") + int(v > 3), w=1.0 + i % 4)
>>> tree.summary["n_leaves"] > 1
True
>>> tree.predict_one({"c": "p", "v": 5.0}), tree.predict_one({"c": "q", "v": 1.0})
(2, 0)
"""

from __future__ import annotations

from river.tree import HoeffdingTreeClassifier
from river.tree.nodes.branch import DTBranch, NominalMultiwayBranch
from river.tree.nodes.leaf import HTLeaf
from river.tree.splitter import GaussianSplitter

from learners.array_leaf import ArrayLeaf, NominalValues
from learners.nb_leaf import NaiveBayesLeaf

__all__ = ["ArrayHoeffdingTreeClassifier", "FastHoeffdingTreeClassifier"]


class FastHoeffdingTreeClassifier(HoeffdingTreeClassifier):
    """``river.tree.HoeffdingTreeClassifier`` with the shortcut described in the module."""

    def _enforce_size_limit(self) -> None:
        if self.stop_mem_management:  # River's routine may stop growth here: keep it exact
            return super()._enforce_size_limit()
        n_leaves = self._n_active_leaves + self._n_inactive_leaves
        overhead = self._size_estimate_overhead_fraction
        active, inactive = self._active_leaf_size_estimate, self._inactive_leaf_size_estimate
        # River's loop stops at the first m in 1..n_leaves with size(m) > max_size, where
        # size(m) = (m * active + (n_leaves - m) * inactive) * overhead is linear in m: it never
        # stops (every leaf may stay active) iff both ends fit
        fits = (
            n_leaves >= 1
            and (active + (n_leaves - 1) * inactive) * overhead <= self._max_byte_size
            and n_leaves * active * overhead <= self._max_byte_size
        )
        if not fits:
            return super()._enforce_size_limit()
        if self._n_inactive_leaves == 0:
            return None  # nothing to deactivate, nothing to re-activate
        for leaf in self._inactive_candidates():
            if not leaf.is_active() and leaf.depth < self.max_depth:
                leaf.activate()
                self._n_active_leaves += 1
                self._n_inactive_leaves -= 1
        return None

    def _inactive_candidates(self) -> list:
        """Leaves that may be inactive (every leaf; a subclass may know better)."""
        return self._find_leaves()


def _descend(node, x, until_leaf: bool):
    """(parent, last node) of the path of ``x`` from ``node``, as River's ``Branch.walk``.

    A branch that cannot route ``x`` (its feature missing, or a value it has no branch for)
    ends the path there, or with ``until_leaf`` continues down its most traversed child.
    """
    parent = None
    while isinstance(node, DTBranch):
        try:
            child = node.next(x)
        except KeyError:
            if not until_leaf:
                return parent, node
            child = node.most_common_path()[1]
        parent, node = node, child
    return parent, node


class ArrayHoeffdingTreeClassifier(FastHoeffdingTreeClassifier):
    """River's Hoeffding tree whose leaves keep array statistics (:mod:`learners.array_leaf`).

    It grows River's trees, split for split, with River's branch nodes: ``summary``, ``draw``
    and pickling are River's; ``learn_one`` and ``predict_proba_one`` follow River's exactly
    with a loop in place of River's recursive generators. Majority-class leaves and adaptive
    naive-Bayes leaves (``leaf_prediction="nba"``, :class:`learners.nb_leaf.NaiveBayesLeaf`: the
    project's own naive Bayes, not River's) with the information-gain criterion and a Gaussian
    splitter are array leaves; any other setting falls back to River's leaves.

    Nominal features with many values are bounded: a leaf tracks at most ``max_nominal_values``
    values of a feature (the rest share an "other" row), and a feature that has shown more than
    ``max_multiway_values`` distinct values to the tree is only split in two ("x == v" or not).
    ``None`` for either turns it off.

    >>> tree = ArrayHoeffdingTreeClassifier(grace_period=5, delta=0.1, nominal_attributes=["c"])
    >>> for i in range(300):
    ...     c, v = "pq"[i % 2], float(i % 7)
    ...     tree.learn_one({"c": c, "v": v}, int(c == "p") + int(v > 3), w=1.0 + i % 4)
    >>> tree.summary["n_leaves"] > 1
    True
    >>> tree.predict_one({"c": "p", "v": 5.0}), tree.predict_one({"c": "q", "v": 1.0})
    (2, 0)
    """

    def __init__(
        self,
        grace_period: int = 200,
        max_depth: int | None = None,
        split_criterion: str = "info_gain",
        delta: float = 1e-7,
        tau: float = 0.05,
        leaf_prediction: str = "mc",
        nb_threshold: int = 0,
        nominal_attributes: list | None = None,
        splitter=None,
        binary_split: bool = False,
        min_branch_fraction: float = 0.01,
        max_share_to_split: float = 0.99,
        max_size: float = 100.0,
        memory_estimate_period: int = 1000000,
        stop_mem_management: bool = False,
        remove_poor_attrs: bool = False,
        merit_preprune: bool = True,
        max_nominal_values: int | None = 64,
        max_multiway_values: int | None = 32,
    ):
        super().__init__(
            grace_period=grace_period,
            max_depth=max_depth,
            split_criterion=split_criterion,
            delta=delta,
            tau=tau,
            leaf_prediction=leaf_prediction,
            nb_threshold=nb_threshold,
            nominal_attributes=nominal_attributes,
            splitter=splitter,
            binary_split=binary_split,
            min_branch_fraction=min_branch_fraction,
            max_share_to_split=max_share_to_split,
            max_size=max_size,
            memory_estimate_period=memory_estimate_period,
            stop_mem_management=stop_mem_management,
            remove_poor_attrs=remove_poor_attrs,
            merit_preprune=merit_preprune,
        )
        for name, value in (
            ("max_nominal_values", max_nominal_values),
            ("max_multiway_values", max_multiway_values),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name} must be None or an integer >= 1, got {value!r}")
        self.max_nominal_values = max_nominal_values
        self.max_multiway_values = max_multiway_values
        self._tree_values = NominalValues(max_multiway_values)
        self._splitting = None  # the leaf of the split attempt under way

    def learn_one(self, x, y, *, w=1.0):
        """River's ``learn_one`` with a loop instead of its recursive generators for the path."""
        self.classes.add(y)
        self._train_weight_seen_by_model += w
        if self._root is None:
            self._root = self._new_leaf()
            self._n_active_leaves = 1
        parent, node = _descend(self._root, x, until_leaf=False)
        if isinstance(node, HTLeaf):
            node.learn_one(x, y, w=w, tree=self)
            if self._growth_allowed and node.is_active():
                self._after_leaf_update(node, parent, x)
        else:  # the path stopped at a branch that cannot route x
            node = self._leaf_for_unroutable(node, x)
            node.learn_one(x, y, w=w, tree=self)
        if self._train_weight_seen_by_model % self.memory_estimate_period == 0:
            self._estimate_model_size()
        self._undo_crossed()

    def _after_leaf_update(self, leaf, parent, x) -> None:
        """River's growth step after a leaf learned: depth limit, then a split attempt once the
        leaf has seen ``grace_period`` more weight."""
        if leaf.depth >= self.max_depth:
            leaf.deactivate()
            self._n_active_leaves -= 1
            self._n_inactive_leaves += 1
            return
        weight_seen = leaf.total_weight
        if weight_seen - leaf.last_split_attempt_at >= self.grace_period:
            branch = parent.branch_no(x) if isinstance(parent, DTBranch) else None
            self._attempt_to_split(leaf, parent, branch)
            leaf.last_split_attempt_at = weight_seen

    def _leaf_for_unroutable(self, node, x):
        """River's rule: a new branch for an unseen value of a multiway split, else the most
        traversed path, until a leaf."""
        while True:
            if node.max_branches() == -1 and node.feature in x:
                leaf = self._new_leaf(parent=node)
                node.add_child(x[node.feature], leaf)
                self._n_active_leaves += 1
                return leaf
            _, node = node.most_common_path()
            if isinstance(node, DTBranch):
                node = _descend(node, x, until_leaf=False)[1]
            if isinstance(node, HTLeaf):
                return node

    def predict_proba_one(self, x):
        proba = {c: 0.0 for c in sorted(self.classes)}
        if self._root is not None:
            proba.update(_descend(self._root, x, until_leaf=True)[1].prediction(x, tree=self))
        return proba

    def _undo_crossed(self) -> None:
        """Undo the multiway splits on features that just passed ``max_multiway_values``."""
        if self._tree_values.crossed:
            for name in self._tree_values.crossed:
                self._undo_multiway(name)
            self._tree_values.crossed.clear()

    def _undo_multiway(self, feature) -> None:
        """Replace every multiway split on ``feature`` by one leaf holding its subtree's counts.

        Called once a feature has shown more than ``max_multiway_values`` distinct values: a
        split with one branch per value of an id fragments the data for good (and grows a branch
        for every new value). Such splits can only have been made early, on few values.
        """
        if isinstance(self._root, NominalMultiwayBranch) and self._root.feature == feature:
            self._root = self._merged_leaf(self._root, None)
            return
        stack = [self._root] if isinstance(self._root, DTBranch) else []
        while stack:
            node = stack.pop()
            for i, child in enumerate(node.children):
                if isinstance(child, NominalMultiwayBranch) and child.feature == feature:
                    node.children[i] = self._merged_leaf(child, node)
                elif isinstance(child, DTBranch):
                    stack.append(child)

    def _merged_leaf(self, branch, parent):
        """A fresh leaf at ``branch``'s depth holding its leaves' class weights (counters kept)."""
        stats: dict = {}
        for leaf in branch.iter_leaves():
            for label, weight in leaf.stats.items():
                stats[label] = stats.get(label, 0.0) + weight
            if leaf.is_active():
                self._n_active_leaves -= 1
            else:
                self._n_inactive_leaves -= 1
        self._n_active_leaves += 1
        leaf = self._new_leaf(stats, parent)
        leaf.depth = branch.depth
        return leaf

    def _attempt_to_split(self, leaf, parent, parent_branch, **kwargs):
        self._splitting = leaf
        try:
            super()._attempt_to_split(leaf, parent, parent_branch, **kwargs)
        finally:
            self._splitting = None

    def _inactive_candidates(self) -> list:
        # the usual inactive leaf: the one pre-pruned by this very split attempt ("null wins"),
        # which River re-activates at once; any other case walks the tree
        leaf = self._splitting
        if self._n_inactive_leaves == 1 and leaf is not None and not leaf.is_active():
            return [leaf]
        return self._find_leaves()

    def _array_leaves(self) -> bool:
        return (
            self._leaf_prediction in (self._MAJORITY_CLASS, self._NAIVE_BAYES_ADAPTIVE)
            and self._split_criterion == self._INFO_GAIN_SPLIT
            and type(self.splitter) is GaussianSplitter
        )

    def _new_leaf(self, initial_stats=None, parent=None):
        """An array leaf (River's leaf where the settings need River's splitters)."""
        if not self._array_leaves():
            return super()._new_leaf(initial_stats, parent)
        leaf = NaiveBayesLeaf if self._leaf_prediction == self._NAIVE_BAYES_ADAPTIVE else ArrayLeaf
        return leaf(
            {} if initial_stats is None else initial_stats,
            0 if parent is None else parent.depth + 1,
            self.splitter,
            max_nominal_values=self.max_nominal_values,
            tree_values=self._tree_values,
        )
