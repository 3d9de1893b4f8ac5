"""Read-only serving copies of Hoeffding trees, and a pickler that writes models with them.

More: docs/boosters.md, "learners/frozen.py".

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

import io
import math
import pickle
from typing import Any

from river.tree import HoeffdingTreeClassifier
from river.tree.nodes.branch import (
    DTBranch,
    NominalBinaryBranch,
    NominalMultiwayBranch,
    NumericBinaryBranch,
    NumericMultiwayBranch,
)
from river.utils.norm import normalize_values_in_dict

from learners.compiled import TreeEnsemble, from_state
from learners.linear import LinearRewards
from learners.nb_leaf import NaiveBayes, NaiveBayesLeaf
from learners.ridge import RidgeRewards
from learners.vfdt import ArrayHoeffdingTreeClassifier, FastHoeffdingTreeClassifier

__all__ = ["FrozenHoeffdingTree", "dumps_serving", "freeze", "release"]

#: tree classes whose predictions :func:`freeze` reproduces exactly (with ``"mc"`` leaves)
FREEZABLE = (HoeffdingTreeClassifier, FastHoeffdingTreeClassifier, ArrayHoeffdingTreeClassifier)


def freezable(tree: Any) -> bool:
    """Whether :func:`freeze` copies ``tree``: majority-class leaves, or the array tree's
    adaptive naive-Bayes leaves (:mod:`learners.nb_leaf`; River's own are not frozen)."""
    if type(tree) not in FREEZABLE:
        return False
    if tree.leaf_prediction == "mc":
        return True
    return tree.leaf_prediction == "nba" and type(tree) is ArrayHoeffdingTreeClassifier

# node kinds of the flat encoding (see FrozenHoeffdingTree)
_LEAF, _NUM2, _NOM2, _NOMW, _NUMW = range(5)


def _encode(node: Any, nodes: list[tuple]) -> tuple[int, float]:
    """Append ``node`` (and, depth first, its subtree) to ``nodes``.

    Returns its index and its ``total_weight`` as River computes it (a leaf: the sum of its
    class counts; a branch: the sum over its children, in their order), bottom up.
    """
    index = len(nodes)
    if not isinstance(node, DTBranch):
        # River's majority-class leaf predicts its class counts normalised, by this function
        # (on a shallow copy: the counts are floats, so River's deep copy would change nothing)
        # a naive-Bayes leaf keeps its terms instead, where it predicts with them
        terms: Any = node.frozen() if isinstance(node, NaiveBayesLeaf) else None
        if terms is None:
            terms = normalize_values_in_dict(dict(node.stats), inplace=True)
        nodes.append((_LEAF, terms))
        return index, sum(node.stats.values()) if node.stats else 0
    if any(child is None for child in node.children):
        raise ValueError("cannot freeze a branch with an empty child")
    nodes.append(())  # reserved: filled once the children are encoded
    kids, weights = zip(*(_encode(child, nodes) for child in node.children))
    # the child River walks into when the test cannot be made (missing feature, unseen value):
    # its most_common_path(), on weights that never change once frozen
    if isinstance(node, NumericBinaryBranch | NominalBinaryBranch):
        default = kids[1] if weights[0] < weights[1] else kids[0]
    else:
        default = kids[max(range(len(kids)), key=weights.__getitem__)]
    if isinstance(node, NumericBinaryBranch):
        nodes[index] = (_NUM2, node.feature, node.threshold, kids[0], kids[1], default)
    elif isinstance(node, NominalBinaryBranch):
        nodes[index] = (_NOM2, node.feature, node.value, kids[0], kids[1], default)
    elif isinstance(node, NominalMultiwayBranch):
        nodes[index] = (_NOMW, node.feature, dict(node._mapping), kids, default)
    elif isinstance(node, NumericMultiwayBranch):
        nodes[index] = (_NUMW, node.feature, node.radius, dict(node._mapping), kids, default)
    else:
        raise ValueError(f"cannot freeze a {type(node).__name__}")
    return index, sum(weights)


class FrozenHoeffdingTree:
    """The predicting part of a Hoeffding tree classifier (majority-class or naive-Bayes leaves).

    Build one with :func:`freeze`. The tree is a flat tuple of nodes, the root first: a leaf is
    ``(0, probabilities)``, or ``(0, terms)`` for a naive-Bayes leaf that predicts with its
    :class:`learners.nb_leaf.NaiveBayes` terms; a branch holds its feature,
    its test (threshold, value or value -> child mapping, as River's branch classes), the indices
    of its children and the index of the child taken when the test cannot be made.
    ``predict_proba_one`` and ``predict_one`` give the tree's numbers; ``learn_one`` raises.
    """

    __slots__ = ("classes", "nodes")

    def __init__(self, classes: tuple, nodes: tuple) -> None:
        self.classes = classes
        self.nodes = nodes

    def _leaf(self, x: dict) -> dict | NaiveBayes:
        nodes = self.nodes
        node = nodes[0]
        while node[0]:
            kind = node[0]
            try:  # River: Branch.walk, next() raising KeyError -> most_common_path()
                if kind == _NUM2:
                    node = nodes[node[3] if x[node[1]] <= node[2] else node[4]]
                elif kind == _NOM2:
                    node = nodes[node[3] if x[node[1]] == node[2] else node[4]]
                elif kind == _NOMW:
                    node = nodes[node[3][node[2][x[node[1]]]]]
                else:
                    node = nodes[node[4][node[3][math.floor(x[node[1]] / node[2])]]]
            except KeyError:
                node = nodes[node[-1]]
        return node[1]

    def predict_proba_one(self, x: dict) -> dict:
        """Class probabilities for ``x`` (River's ``HoeffdingTreeClassifier.predict_proba_one``)."""
        proba = dict.fromkeys(self.classes, 0.0)
        if self.nodes:
            leaf = self._leaf(x)
            proba.update(leaf if isinstance(leaf, dict) else leaf.predict(x))
        return proba

    def predict_one(self, x: dict) -> Any:
        """The most probable class (River's ``Classifier.predict_one``), None when untrained."""
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.__getitem__) if proba else None

    def learn_one(self, *args: Any, **kwargs: Any) -> None:
        """Refused: a frozen copy has no learning state."""
        raise RuntimeError(
            "a frozen Hoeffding tree only predicts; learn on the full model it was copied from"
        )

    def __getstate__(self) -> tuple[tuple, tuple]:
        return self.classes, self.nodes

    def __setstate__(self, state: tuple[tuple, tuple]) -> None:
        self.classes, self.nodes = state


def freeze(tree: HoeffdingTreeClassifier) -> FrozenHoeffdingTree:
    """A read-only copy of ``tree`` that predicts exactly as it does (majority-class leaves,
    or the array tree's adaptive naive-Bayes leaves).

    >>> freeze(HoeffdingTreeClassifier(leaf_prediction="nb"))
    Traceback (most recent call last):
    ...
    ValueError: majority-class or array naive-Bayes leaves only, got leaf_prediction='nb'
    """
    if type(tree) not in FREEZABLE:
        raise TypeError(f"cannot freeze a {type(tree).__name__}")
    if not freezable(tree):
        raise ValueError(
            "majority-class or array naive-Bayes leaves only, "
            f"got leaf_prediction={tree.leaf_prediction!r}"
        )
    nodes: list[tuple] = []
    if tree._root is not None:
        _encode(tree._root, nodes)
    return FrozenHoeffdingTree(tuple(sorted(tree.classes)), tuple(nodes))


def _thaw(blob: bytes) -> FrozenHoeffdingTree:
    return pickle.loads(blob)


def _predictor(cls: type[Any], state: dict) -> Any:
    """A reward model rebuilt from its serving state (it predicts; it cannot learn)."""
    model = cls.__new__(cls)  # type: ignore[call-overload]  # any class of the allow-list
    restore = getattr(model, "__setstate__", None)
    if restore is None:  # a class without one of its own
        model.__dict__.update(state)
    else:
        restore(state)
    return model


class _ServingPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, protocol: int) -> None:
        super().__init__(file, protocol=protocol)
        self._protocol = protocol  # for the trees' own pickles

    def reducer_override(self, obj: Any) -> Any:
        if freezable(obj):
            # each tree is a pickle of its own, loaded by a Python-level call: between two trees
            # the interpreter may hand the GIL to another thread (a replica loading a snapshot
            # in the background never holds it for longer than one tree takes)
            try:
                frozen = freeze(obj)
            except ValueError:  # a node River may add one day: pickled whole, still exact
                return NotImplemented
            return _thaw, (pickle.dumps(frozen, protocol=self._protocol),)
        if isinstance(obj, TreeEnsemble) and not obj.frozen:  # the compiled core's copy
            return from_state, (obj.serving_copy().__getstate__(),)
        if isinstance(obj, LinearRewards | RidgeRewards):  # without its learning state
            return _predictor, (type(obj), obj.serving_state())
        return NotImplemented


def dumps_serving(obj: Any, protocol: int = 5) -> bytes:
    """Pickle ``obj`` with every freezable Hoeffding tree in it replaced by :func:`freeze` of it,
    and every reward model (:class:`learners.linear.LinearRewards`,
    :class:`learners.ridge.RidgeRewards`) without its learning state.

    Objects that share a tree still share its frozen copy after loading (pickle's memo is
    keyed on the original tree). Trees that cannot be frozen are pickled whole.

    >>> from learners.hoeffding import make_vfdt
    >>> trees = [make_vfdt(5.0, 0.1, 0.05)] * 2
    >>> a, b = pickle.loads(dumps_serving({"trees": trees}))["trees"]
    >>> type(a).__name__, a is b
    ('FrozenHoeffdingTree', True)
    """
    buffer = io.BytesIO()
    _ServingPickler(buffer, protocol).dump(obj)
    return buffer.getvalue()


def release(obj: Any) -> int:
    """Empty the frozen trees reachable from ``obj`` one at a time; returns how many it emptied.

    Dropping the last reference to a booster frees all of its trees in one cascade of deallocations
    that no other thread can interrupt (benchmarks/RESULTS.md, "Size limits", has the cost).
    Emptying the trees one by one from Python code lets other threads run in between, a tree's work
    at a time. Only for a booster nothing uses any more: its frozen trees predict nothing
    afterwards. Lists, tuples, dicts and instance attributes are followed; anything else is left to
    reference counting.

    >>> from learners.hoeffding import make_vfdt
    >>> tree = make_vfdt(5.0, 0.1, 0.05)
    >>> tree.learn_one({"v": 1.0}, 0)
    >>> old = pickle.loads(dumps_serving({"trees": [tree, tree], "n": 2}))
    >>> release(old), old["trees"][0].nodes
    (1, ())
    """
    seen: set[int] = set()
    stack = [obj]
    emptied = 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, FrozenHoeffdingTree):
            if item.nodes:
                item.nodes = ()  # this tree's nodes are freed here, and only here
                emptied += 1
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif not isinstance(item, type) and hasattr(item, "__dict__"):
            stack.extend(vars(item).values())
    return emptied
