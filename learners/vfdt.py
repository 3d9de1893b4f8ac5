"""River's Hoeffding tree classifier with a cheaper, exactly equivalent memory check.

River's ``HoeffdingTreeClassifier`` calls ``_enforce_size_limit`` after *every* split. That
routine walks every leaf, computes each one's split promise, sorts them, and then finds how many
leaves may stay active within ``max_size``: the first ``len(leaves) - max_active`` (the least
promising) are deactivated, and every other inactive leaf above ``max_depth`` is re-activated.
Profiling the boosters of seed 001 (importance-weighted samples make the trees split often)
shows this routine at ~80% of a tree's learning time.

When every leaf fits as an active leaf (the usual case: the trees stay far below River's default
100 MB), ``max_active`` is the number of leaves, nothing is deactivated, and the routine's only
effect is the re-activation. :class:`FastHoeffdingTreeClassifier` checks that case from the
tree's own counters and size estimates and then re-activates directly, skipping the promises
and the sort (and the walk when no leaf is inactive); in every other case it runs River's
routine. The trees it grows are River's, split for split (tested against River's class on
weighted streams with pre-pruning, a depth limit and a memory limit).

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

__all__ = ["FastHoeffdingTreeClassifier"]


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
        for leaf in self._find_leaves():
            if not leaf.is_active() and leaf.depth < self.max_depth:
                leaf.activate()
                self._n_active_leaves += 1
                self._n_inactive_leaves -= 1
        return None
