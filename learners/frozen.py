"""Read-only serving copies of Hoeffding trees, and a pickler that writes models with them.

A grown River ``HoeffdingTreeClassifier`` is mostly learning state: every leaf keeps one
attribute observer per feature (per-value class counts for nominal features, per-class Gaussian
estimators for numeric ones) to find its next split. Deciding needs none of it. With the
majority-class leaves our boosters use (spec §7.5 mapping to River, :func:`learners.hoeffding.
make_vfdt`), a prediction is the path of branch tests from the root to a leaf plus that leaf's
class counts, normalised.

:class:`FrozenHoeffdingTree` keeps exactly that: River's own branch nodes (their tests and the
weights River's ``most_common_path`` reads when a feature is missing or a nominal value is new)
and, in place of each leaf, a :class:`FrozenLeaf` with a copy of its class counts. Its
``predict_proba_one`` is River's, step for step, so it returns the same numbers for every input;
it cannot learn. :func:`dumps_serving` pickles any object graph (a whole booster) with every
such tree replaced by its frozen copy: an API replica that only decides loads that in a few
milliseconds instead of unpickling every observer (about a second, holding the GIL, for an
AdaBandit of 20 grown trees; benchmarks/RESULTS.md, "Service load").

>>> from learners.hoeffding import make_vfdt
>>> tree = make_vfdt(5.0, 0.1, 0.05, nominal_attributes=["c"])
>>> for i in range(300):
...     c, v = "pq"[i % 2], float(i % 7)
...     tree.learn_one({"c": c, "v": v}, int(c == "p") + int(v > 3), w=1.0 + i % 4)
>>> frozen = freeze(tree)
>>> x = {"c": "p", "v": 5.0}
>>> frozen.predict_proba_one(x) == tree.predict_proba_one(x)
True
>>> frozen.predict_one({"v": 1.0}) == tree.predict_one({"v": 1.0})  # missing feature
True
>>> len(dumps_serving(tree)) < len(pickle.dumps(tree)) / 3
True
>>> frozen.learn_one(x, 1)
Traceback (most recent call last):
...
RuntimeError: a frozen Hoeffding tree only predicts; learn on the full model it was copied from
"""

from __future__ import annotations

import copy
import io
import pickle
from typing import Any

from river.tree import HoeffdingTreeClassifier
from river.tree.nodes.branch import DTBranch
from river.utils.norm import normalize_values_in_dict

from learners.vfdt import FastHoeffdingTreeClassifier

__all__ = ["FrozenHoeffdingTree", "FrozenLeaf", "dumps_serving", "freeze"]

#: tree classes whose predictions :func:`freeze` reproduces exactly (with ``"mc"`` leaves)
FREEZABLE = (HoeffdingTreeClassifier, FastHoeffdingTreeClassifier)


class FrozenLeaf:
    """A leaf reduced to its class counts (River's majority-class leaf, without observers)."""

    __slots__ = ("stats", "depth")

    def __init__(self, stats: dict, depth: int) -> None:
        self.stats = stats
        self.depth = depth

    @property
    def total_weight(self) -> float:
        """Sum of the class counts (what River's ``most_common_path`` compares)."""
        return sum(self.stats.values()) if self.stats else 0

    def walk(self, x: dict, until_leaf: bool = True):
        """The end of a path (River's ``Leaf.walk``)."""
        yield self

    def prediction(self, x: dict, *, tree: Any = None) -> dict:
        """River's majority-class leaf prediction: the class counts, normalised."""
        return normalize_values_in_dict(self.stats, inplace=False)

    def __getstate__(self) -> tuple[dict, int]:
        return self.stats, self.depth

    def __setstate__(self, state: tuple[dict, int]) -> None:
        self.stats, self.depth = state


def _freeze_node(node: Any) -> Any:
    if isinstance(node, DTBranch):
        branch = copy.copy(node)  # the test, its stats and depth; children replaced below
        branch.children = [None if c is None else _freeze_node(c) for c in node.children]
        return branch
    return FrozenLeaf(dict(node.stats), node.depth)


class FrozenHoeffdingTree:
    """The predicting part of a Hoeffding tree classifier with majority-class leaves.

    Build one with :func:`freeze`. ``predict_proba_one`` and ``predict_one`` give River's
    numbers; ``learn_one`` raises.
    """

    __slots__ = ("classes", "_root")

    def __init__(self, classes: set, root: Any) -> None:
        self.classes = classes
        self._root = root

    def predict_proba_one(self, x: dict) -> dict:
        """Class probabilities for ``x`` (River's ``HoeffdingTreeClassifier.predict_proba_one``)."""
        proba = {c: 0.0 for c in sorted(self.classes)}
        root = self._root
        if root is not None:
            leaf = root.traverse(x, until_leaf=True) if isinstance(root, DTBranch) else root
            proba.update(leaf.prediction(x, tree=self))
        return proba

    def predict_one(self, x: dict) -> Any:
        """The most probable class (River's ``Classifier.predict_one``), None when untrained."""
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.get) if proba else None

    def learn_one(self, *args: Any, **kwargs: Any) -> None:
        """Refused: a frozen copy has no learning state."""
        raise RuntimeError(
            "a frozen Hoeffding tree only predicts; learn on the full model it was copied from"
        )

    def __getstate__(self) -> tuple[set, Any]:
        return self.classes, self._root

    def __setstate__(self, state: tuple[set, Any]) -> None:
        self.classes, self._root = state


def freeze(tree: HoeffdingTreeClassifier) -> FrozenHoeffdingTree:
    """A read-only copy of ``tree`` that predicts exactly as it does (majority-class leaves).

    >>> freeze(HoeffdingTreeClassifier(leaf_prediction="nb"))
    Traceback (most recent call last):
    ...
    ValueError: only trees with majority-class leaves can be frozen, got leaf_prediction='nb'
    """
    if type(tree) not in FREEZABLE:
        raise TypeError(f"cannot freeze a {type(tree).__name__}")
    if tree.leaf_prediction != "mc":
        raise ValueError(
            "only trees with majority-class leaves can be frozen, "
            f"got leaf_prediction={tree.leaf_prediction!r}"
        )
    root = None if tree._root is None else _freeze_node(tree._root)
    return FrozenHoeffdingTree(set(tree.classes), root)


def _thaw(blob: bytes) -> FrozenHoeffdingTree:
    return pickle.loads(blob)


class _ServingPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) in FREEZABLE and obj.leaf_prediction == "mc":
            # each tree is a pickle of its own, loaded by a Python-level call: between two trees
            # the interpreter may hand the GIL to another thread (a replica loading a snapshot
            # in the background never holds it for longer than one tree takes)
            return _thaw, (pickle.dumps(freeze(obj), protocol=self._protocol),)
        return NotImplemented


def dumps_serving(obj: Any, protocol: int = 5) -> bytes:
    """Pickle ``obj`` with every freezable Hoeffding tree in it replaced by :func:`freeze` of it.

    Objects that share a tree still share its frozen copy after loading (pickle's memo is
    keyed on the original tree). Trees that cannot be frozen are pickled whole.

    >>> from learners.hoeffding import make_vfdt
    >>> trees = [make_vfdt(5.0, 0.1, 0.05)] * 2
    >>> a, b = pickle.loads(dumps_serving({"trees": trees}))["trees"]
    >>> type(a).__name__, a is b
    ('FrozenHoeffdingTree', True)
    """
    buffer = io.BytesIO()
    pickler = _ServingPickler(buffer, protocol=protocol)
    pickler._protocol = protocol
    pickler.dump(obj)
    return buffer.getvalue()
