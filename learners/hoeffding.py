"""Multiclass weak learner over River's Hoeffding tree, with per-tree random hyperparameters.

More: docs/boosters.md, "learners/hoeffding.py".

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> tree = CostSensitiveTree(n_classes=3, **sample_tree_params("bandit", rng))
>>> tree.predict_one({"a": 1.0}, u=0.5)          # untrained: uniform over all 3 labels
1
>>> for _ in range(30):
...     tree.learn_cost_one({"a": 1.0}, np.array([1.0, 0.0, 1.0]), u=rng.random(3))
>>> tree.predict_one({"a": 1.0}, u=0.5)
1
"""

from __future__ import annotations

import math

import numpy as np
from river.tree import HoeffdingTreeClassifier

from learners.compiled import TreeEnsemble
from learners.reduction import cost_to_label_weight
from learners.vfdt import ArrayHoeffdingTreeClassifier, FastHoeffdingTreeClassifier

__all__ = [
    "GRACE_BY",
    "LEAF_PREDICTIONS",
    "TREE_CORES",
    "TREE_PROFILES",
    "CostSensitiveTree",
    "sample_tree_params",
    "argmax_label",
    "cost_sensitive_trees",
    "make_vfdt",
    "proba_matrix",
]

#: The trees' leaf predictions: majority class (the authors' VFDT) or adaptive naive Bayes.
LEAF_PREDICTIONS = ("mc", "nba")

#: The trees: the compiled core (:mod:`learners.compiled`) or River's (:class:`CostSensitiveTree`).
TREE_CORES = ("compiled", "river")
#: What a split attempt waits for: more weight (River's rule) or more examples (compiled only).
GRACE_BY = ("weight", "count")

#: Ranges of the authors' code: grace period U[a, b]; tie threshold tau and split confidence delta
#: log-uniform on [a, b].
TREE_PROFILES: dict[str, dict[str, tuple[float, float]]] = {
    # OptBandit, AdaBandit on Balance/Car/Nursery/Movement
    "bandit": {"grace_period": (5.0, 20.0), "tau": (0.01, 0.9), "delta": (0.01, 0.9)},
    # OptBandit, AdaBandit on Mice/Isolet (many numeric features)
    "numeric": {"grace_period": (300.0, 301.0), "tau": (0.7, 0.8), "delta": (1e-11, 1e-10)},
    # OptFull, AdaFull, BinBandit
    "full": {"grace_period": (50.0, 200.0), "tau": (0.01, 0.9), "delta": (1e-11, 0.9)},
}


def sample_tree_params(
    profile: str, rng: np.random.Generator, fixed: bool = False
) -> dict[str, float]:
    """Draw one tree's hyperparameters from ``profile`` (authors' code).

    With ``fixed=True`` no randomness is used: the grace period is the middle of its range and
    tau, delta the geometric middle of theirs.

    >>> sample_tree_params("full", np.random.default_rng(0), fixed=True)["grace_period"]
    125.0
    """
    try:
        ranges = TREE_PROFILES[profile]
    except KeyError:
        raise ValueError(
            f"unknown tree profile {profile!r}; choose from: {', '.join(TREE_PROFILES)}"
        ) from None
    (g_lo, g_hi), (t_lo, t_hi), (d_lo, d_hi) = (
        ranges["grace_period"],
        ranges["tau"],
        ranges["delta"],
    )
    if fixed:
        return {
            "grace_period": (g_lo + g_hi) / 2,
            "tau": math.sqrt(t_lo * t_hi),
            "delta": math.sqrt(d_lo * d_hi),
        }
    draws = rng.random(3)
    return {
        "grace_period": g_lo + (g_hi - g_lo) * draws[0],
        "tau": 10 ** (math.log10(t_lo) + (math.log10(t_hi) - math.log10(t_lo)) * draws[1]),
        "delta": 10 ** (math.log10(d_lo) + (math.log10(d_hi) - math.log10(d_lo)) * draws[2]),
    }


def argmax_label(proba: dict, n_classes: int, u: float) -> int:
    """Argmax of a River class-probability dict, uniform ties driven by ``u`` in [0, 1).

    Classes missing from the dict count as probability 0; an empty dict (untrained tree) or an
    all-zero one makes every class a tie, so labels never seen are still predictable.

    >>> argmax_label({0: 0.2, 2: 0.8}, 3, 0.1), argmax_label({}, 3, 0.99)
    (2, 2)
    """
    if proba:
        best = max(proba.values())
        if best > 0.0:
            ties = [c for c, p in proba.items() if p == best]
            if len(ties) == 1:
                return ties[0]
            ties.sort()
            return ties[int(u * len(ties))]
    return min(int(u * n_classes), n_classes - 1)


def make_vfdt(
    grace_period: float,
    delta: float,
    tau: float,
    nominal_attributes: list | None = None,
    fast_trees: bool = True,
    leaf_prediction: str = "mc",
) -> HoeffdingTreeClassifier:
    """River's Hoeffding tree set up as the authors' VFDT: information gain,
    majority-class leaves, the given grace period, split confidence and tie threshold.

    ``leaf_prediction="nba"``: adaptive naive-Bayes leaves instead
    (:class:`learners.nb_leaf.NaiveBayesLeaf`; River's own with ``fast_trees=False``).

    ``fast_trees=True`` (default): leaves with array statistics and vectorised split evaluation
    (:class:`learners.vfdt.ArrayHoeffdingTreeClassifier`), the same trees; ``False``: River's own
    leaves, the reference (with the cheaper, exactly equivalent memory check of
    :mod:`learners.vfdt`).

    >>> make_vfdt(10.0, 0.1, 0.05).leaf_prediction
    'mc'
    >>> type(make_vfdt(10.0, 0.1, 0.05, fast_trees=False)).__name__
    'FastHoeffdingTreeClassifier'
    """
    if leaf_prediction not in LEAF_PREDICTIONS:
        raise ValueError(
            f"leaf_prediction must be one of {', '.join(LEAF_PREDICTIONS)}, got {leaf_prediction!r}"
        )
    if not (grace_period > 0 and 0 < delta < 1 and tau >= 0):
        raise ValueError(
            f"need grace_period > 0, 0 < delta < 1, tau >= 0; got {grace_period}, {delta}, {tau}"
        )
    cls = ArrayHoeffdingTreeClassifier if fast_trees else FastHoeffdingTreeClassifier
    return cls(
        grace_period=grace_period,  # type: ignore[arg-type]  # River counts it as a float
        delta=delta,
        tau=tau,
        split_criterion="info_gain",
        leaf_prediction=leaf_prediction,
        nominal_attributes=nominal_attributes,
    )


def proba_matrix(trees: list, x: dict, n_classes: int) -> np.ndarray:
    """Class probabilities of several River classifiers for ``x`` as an (N, k) array.

    Classes a tree has not seen count as 0; an untrained tree gives a row of zeros, which an
    argmax with random ties (:func:`learners.reduction.argmax_random_ties`) reads as "all tie".

    >>> proba_matrix([HoeffdingTreeClassifier()], {"a": 1.0}, 2).tolist()
    [[0.0, 0.0]]
    """
    classes = range(n_classes)
    flat = [p.get(c, 0.0) for p in [t.predict_proba_one(x) for t in trees] for c in classes]
    return np.array(flat).reshape(len(trees), n_classes)


class CostSensitiveTree:
    """A cost-sensitive multiclass online learner: one Hoeffding tree on weighted labels.

    It predicts one label in ``0 .. n_classes - 1`` and learns from a full cost vector through
    the (label, weight) reduction of App. B.3 (:func:`learners.reduction.cost_to_label_weight`).
    The tree uses information gain and majority-class leaves (the authors' VFDT in River) or,
    with ``leaf_prediction="nba"``, adaptive naive-Bayes leaves.
    """

    def __init__(
        self,
        n_classes: int,
        grace_period: float = 200.0,
        delta: float = 1e-7,
        tau: float = 0.05,
        nominal_attributes: list | None = None,
        clip: float | None = 100.0,
        decimals: int | None = 2,
        scale: float = 1.0,
        order: str = "reference",
        fast_trees: bool = True,
        leaf_prediction: str = "mc",
    ):
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        self.tree = make_vfdt(
            grace_period, delta, tau, nominal_attributes, fast_trees, leaf_prediction
        )
        self.fast_trees = fast_trees
        self.n_classes = n_classes
        self.grace_period = grace_period
        self.delta = delta
        self.tau = tau
        self.nominal_attributes = nominal_attributes
        self.clip = clip
        self.decimals = decimals
        self.scale = scale
        self.order = order

    def predict_proba(self, x: dict) -> np.ndarray:
        """Class probabilities as a length-``n_classes`` array (uniform when untrained)."""
        proba = self.tree.predict_proba_one(x)
        out = np.zeros(self.n_classes)
        if not proba:
            out[:] = 1.0 / self.n_classes
            return out
        for c, p in proba.items():
            out[c] = p
        return out

    def predict_one(self, x: dict, u: float) -> int:
        """Argmax label, ties broken by the uniform draw ``u``."""
        return argmax_label(self.tree.predict_proba_one(x), self.n_classes, u)

    def learn_one(self, x: dict, label: int, w: float = 1.0) -> None:
        """Plain weighted-label update."""
        self.tree.learn_one(x, label, w=w)

    def learn_cost_one(
        self, x: dict, cost: np.ndarray, u: np.ndarray, true_label: int | None = None
    ) -> None:
        """Learn from one cost vector (length ``n_classes``) through the reduction of App. B.3.

        ``u`` holds one uniform draw per label, for the random tie rule.
        """
        labels, weights = cost_to_label_weight(
            cost[None, :],
            np.asarray(u, dtype=float).reshape(1, self.n_classes),
            true_label,
            clip=self.clip,
            decimals=self.decimals,
            scale=self.scale,
            order=self.order,
        )
        self.tree.learn_one(x, int(labels[0]), w=float(weights[0]))


def cost_sensitive_trees(
    core: str,
    n_classes: int,
    params: list[dict],
    nominal_attributes: list | None = None,
    leaf_prediction: str = "mc",
    fast_trees: bool = True,
    grace_by: str = "weight",
) -> tuple[TreeEnsemble | None, list[CostSensitiveTree]]:
    """One multiclass tree per hyperparameter draw of ``params``
    (:func:`sample_tree_params`): the compiled core's ensemble and no River trees, or no
    ensemble and River's trees (``core``, one of :data:`TREE_CORES`).

    >>> params = [sample_tree_params("bandit", np.random.default_rng(0))] * 2
    >>> forest, trees = cost_sensitive_trees("compiled", 3, params)
    >>> forest.n_trees, trees
    (2, [])
    >>> cost_sensitive_trees("river", 3, params, grace_by="count")
    Traceback (most recent call last):
    ...
    ValueError: grace_by="count" needs the compiled trees
    """
    if core == "compiled":
        forest = TreeEnsemble(
            len(params), n_classes,
            grace_periods=[p["grace_period"] for p in params],
            deltas=[p["delta"] for p in params], taus=[p["tau"] for p in params],
            nominal_attributes=nominal_attributes, leaf_prediction=leaf_prediction,
            grace_by=grace_by,
        )
        return forest, []
    if grace_by != "weight":
        raise ValueError(f'grace_by="{grace_by}" needs the compiled trees')
    return None, [
        CostSensitiveTree(n_classes, nominal_attributes=nominal_attributes,
                          fast_trees=fast_trees, leaf_prediction=leaf_prediction, **p)
        for p in params
    ]
