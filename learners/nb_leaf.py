"""An array leaf that predicts with naive Bayes where that has predicted better (adaptive NB).

More: docs/boosters.md, "learners/nb_leaf.py".

>>> from learners.vfdt import ArrayHoeffdingTreeClassifier
>>> tree = ArrayHoeffdingTreeClassifier(grace_period=100, leaf_prediction="nba")
>>> for i in range(40):  # one leaf; the classes differ in the mean of "v" only
...     tree.learn_one({"v": float(i % 2) + 0.1 * (i % 3), "c": "ab"[i % 3 == 0]}, i % 2)
>>> leaf = tree._root
>>> p = leaf.naive_bayes({"v": 0.95, "c": "a"})
>>> round(p[1], 3), leaf.nb_correct > leaf.mc_correct
(1.0, True)
>>> tree.predict_proba_one({"v": 0.95, "c": "a"}) == p
True
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from learners.array_leaf import ArrayLeaf

__all__ = ["NaiveBayes", "NaiveBayesLeaf"]


class NaiveBayesLeaf(ArrayLeaf):
    """:class:`~learners.array_leaf.ArrayLeaf` with a naive-Bayes prediction over its statistics.

    The leaf already keeps, for its split decisions, each class's weighted mean and variance of
    every numeric feature and its weighted counts of every nominal value. Naive Bayes reads them:
    ``log P(c) + sum_j log p(x_j | c)`` with a Gaussian per (class, numeric feature) and a smoothed
    frequency per (class, nominal feature). The prior is one average example: a class's variance
    is shrunk towards the leaf's pooled variance of the feature with the weight of one average
    example, and a nominal frequency gets that weight per value (Laplace). A class without
    statistics for a feature (new in the leaf) gets the pooled density, which favours no class.

    Adaptive (as Gama et al.'s NBAdaptive and River's ``leaf_prediction="nba"``): before each
    update the leaf scores both rules on the example; it predicts with naive Bayes while that
    has been right with at least the weight of the majority class, else with the majority class.
    """

    def __init__(self, stats, depth, splitter, **kwargs):
        super().__init__(stats, depth, splitter, **kwargs)
        self.mc_correct = 0.0
        self.nb_correct = 0.0

    def _reset(self) -> None:
        super()._reset()
        self._n_learned = 0
        self._w_learned = 0.0
        self._model: NaiveBayes | None = None  # the naive-Bayes terms, rebuilt after an update

    def __getstate__(self) -> dict:
        """The state without the cached naive-Bayes terms: a prediction (which may build them)
        leaves the leaf's state as it was, and pickles stay small."""
        state = self.__dict__.copy()
        state["_model"] = None
        return state

    # ---- learning -----------------------------------------------------------------------------

    def learn_one(self, x, y, *, w=1.0, tree=None):
        """Score both rules on ``(x, y)``, then learn it (River's leaf update)."""
        if self.is_active():
            stats = self.stats
            if not stats or max(stats, key=stats.get) == y:
                self.mc_correct += w
            votes = self.naive_bayes(x)
            if votes and max(votes, key=votes.get) == y:
                self.nb_correct += w
        super().learn_one(x, y, w=w, tree=tree)
        if self.is_active():
            self._n_learned += 1
            self._w_learned += w
            self._model = None

    # ---- prediction ---------------------------------------------------------------------------

    def _predicts_with_naive_bayes(self) -> bool:
        """The adaptive rule: naive Bayes while it has been right at least as often as the
        majority class (an inactive leaf has no statistics: majority class)."""
        return self.is_active() and self.nb_correct >= self.mc_correct

    def prediction(self, x, *, tree=None):
        """Naive Bayes or the majority class, by the adaptive rule."""
        if self._predicts_with_naive_bayes():
            votes = self.naive_bayes(x)
            if votes:
                return votes
        return super().prediction(x, tree=tree)

    def naive_bayes(self, x) -> dict:
        """Class probabilities by naive Bayes over the leaf's statistics ({} when it has none)."""
        model = self._model or self._build()
        return {} if model is None else model.predict(x)

    def frozen(self) -> NaiveBayes | None:
        """What this leaf predicts with, for a read-only copy: its naive-Bayes terms, or None
        where it predicts the majority class (:mod:`learners.frozen`)."""
        return (self._model or self._build()) if self._predicts_with_naive_bayes() else None

    def _build(self) -> NaiveBayes | None:
        """The naive-Bayes terms of the statistics now; cached until the next update."""
        labels = [c for c, weight in self.stats.items() if weight > 0]
        if not labels:
            return None
        total = sum(self.stats[c] for c in labels)
        model = NaiveBayes(labels, np.log(np.array([self.stats[c] / total for c in labels])))
        if self._n_learned:
            prior = self._w_learned / self._n_learned  # the weight of one average example
            cols = np.array([self._cols.get(c, -1) for c in labels])
            self._numeric_terms(model, prior, cols)
            self._nominal_terms(model, prior, cols)
        self._model = model
        return model

    def _numeric_terms(self, model: NaiveBayes, prior: float, cols: np.ndarray) -> None:
        """Each class's Gaussian per numeric feature (column -1: the pooled one)."""
        c, n = len(self._labels), len(self._num_names)
        if not n:
            return
        w, mean, s = self._w[:c, :n], self._mean[:c, :n], self._s[:c, :n]
        weight = w.sum(axis=0)
        safe = np.where(weight > 0, weight, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):  # statistics past float range
            pooled_mean = (w * mean).sum(axis=0) / safe
            pooled_var = (s.sum(axis=0) + (w * (mean - pooled_mean) ** 2).sum(axis=0)) / safe
            informative = pooled_var > 1e-12 * (1.0 + pooled_mean**2)  # else 0: no vote
            means = np.vstack([np.where(w > 0, mean, pooled_mean), pooled_mean])[cols]
            var = np.vstack([(s + prior * pooled_var) / (w + prior), pooled_var])[cols]
        # nor has a feature whose statistics overflowed
        informative &= np.isfinite(means).all(axis=0) & np.isfinite(var).all(axis=0)
        half_precision = np.where(informative, 0.5 / np.where(informative, var, 1.0), 0.0)
        model.set_numeric(tuple(self._num_names), np.where(informative, means, 0.0), half_precision)

    def _nominal_terms(self, model: NaiveBayes, prior: float, cols: np.ndarray) -> None:
        """Each class's smoothed value frequencies per nominal feature (column -1: pooled)."""
        if not self._counts:
            return
        counts = np.array(self._counts)[:, : len(self._labels)]
        counts = np.hstack([counts, counts.sum(axis=1, keepdims=True)])
        features = np.array(self._row_feature)
        totals = np.zeros((len(self._nom_names), counts.shape[1]))
        np.add.at(totals, features, counts)
        n_values = np.bincount(features, minlength=len(self._nom_names)) + 1.0
        denominator = np.log(totals + prior * n_values[:, None])
        log_rows = np.log(counts + prior) - denominator[features]
        log_unseen = math.log(prior) - denominator
        nominal = [
            (name, dict(self._rows[i]), self._other[i]) for i, name in enumerate(self._nom_names)
        ]
        model.set_nominal(nominal, log_rows[:, cols], log_unseen[:, cols])


class NaiveBayes:
    """A leaf's naive-Bayes terms at one moment: what predicting needs, nothing to learn from.

    Built by :meth:`NaiveBayesLeaf._build` (and kept by a frozen serving copy of the tree). Per
    class, in the order of ``labels``: the log prior; per numeric feature the Gaussian's mean and
    ``1 / (2 var)`` (0 for a feature that votes for no class), from which ``log_norm``,
    ``-log(2 pi var) / 2``, is derived (and not pickled); per nominal feature the log frequency of
    each known value row and of an unseen value.
    """

    __slots__ = (
        "labels", "log_prior", "num_names", "means", "half_precision", "nominal", "log_rows",
        "log_unseen", "log_norm",
    )
    # the arrays are None until set_numeric / set_nominal gives them (read only after)
    means: Any
    half_precision: Any
    log_norm: Any
    log_rows: Any
    log_unseen: Any

    def __init__(self, labels: list, log_prior: np.ndarray) -> None:
        self.labels = labels
        self.log_prior = log_prior
        self.num_names: tuple = ()
        self.means = self.half_precision = self.log_norm = None
        self.nominal: list = []  # per nominal feature: (name, value -> row, "other" row or None)
        self.log_rows = self.log_unseen = None

    def set_numeric(self, names: tuple, means: np.ndarray, half_precision: np.ndarray) -> None:
        self.num_names, self.means, self.half_precision = names, means, half_precision
        positive = half_precision > 0
        self.log_norm = np.where(
            positive, 0.5 * np.log(np.where(positive, half_precision, 1.0) / math.pi), 0.0
        )

    def set_nominal(self, nominal: list, log_rows: np.ndarray, log_unseen: np.ndarray) -> None:
        self.nominal, self.log_rows, self.log_unseen = nominal, log_rows, log_unseen

    def __getstate__(self) -> tuple:
        """The arrays as one table of ``len(labels)`` columns (one array header per leaf)."""
        parts = [self.log_prior[None, :]]
        if self.nominal:
            parts += [self.log_rows, self.log_unseen]
        if self.num_names:
            parts += [self.means.T, self.half_precision.T]
        return self.labels, self.num_names, self.nominal, np.vstack(parts)

    def __setstate__(self, state: tuple) -> None:
        self.labels, self.num_names, self.nominal, table = state
        self.log_prior = table[0]
        self.log_rows = self.log_unseen = self.means = self.half_precision = self.log_norm = None
        end = len(table)
        if self.num_names:
            d = len(self.num_names)
            end -= 2 * d
            means, half_precision = table[end : end + d].T, table[end + d :].T
            # C order, as built: the sums in predict() then add in the same order, bit for bit
            self.set_numeric(
                self.num_names, np.ascontiguousarray(means), np.ascontiguousarray(half_precision)
            )
        if self.nominal:
            self.log_rows = table[1 : end - len(self.nominal)]
            self.log_unseen = table[end - len(self.nominal) : end]

    def _finite_votes(self, vals: np.ndarray, use: np.ndarray) -> np.ndarray:
        """The numeric features' votes without those whose terms overflow."""
        with np.errstate(over="ignore", invalid="ignore"):
            z = (vals[use] - self.means[:, use]) ** 2
            terms = self.log_norm[:, use] - z * self.half_precision[:, use]
        return terms[:, np.isfinite(terms).all(axis=0)].sum(axis=1)

    def predict(self, x) -> dict:
        """Class probabilities for ``x`` (features it lacks, or cannot read, are skipped)."""
        log_votes = self.log_prior.copy()
        if self.num_names:
            names = self.num_names
            if len(x) == len(names) and tuple(x) == names:
                vals = np.fromiter(x.values(), float, len(names))
            else:
                vals = np.array([_number(x.get(name)) for name in names])
            use = ~np.isnan(vals)
            if use.any():
                with np.errstate(over="ignore", invalid="ignore"):  # handled just below
                    z = (vals[use] - self.means[:, use]) ** 2
                    votes = (self.log_norm[:, use] - z * self.half_precision[:, use]).sum(axis=1)
                if not np.isfinite(votes).all():  # a value past float range: no vote, as unread
                    votes = self._finite_votes(vals, use)
                log_votes += votes
        for index, (name, rows, other) in enumerate(self.nominal):
            value = x.get(name)
            if value is None:
                continue
            row = rows.get(value, other)
            log_votes += self.log_unseen[index] if row is None else self.log_rows[row]
        log_votes -= log_votes.max()
        proba = np.exp(log_votes)
        proba /= proba.sum()
        return dict(zip(self.labels, proba.tolist()))


def _number(value) -> float:
    """``value`` as a float, NaN when it is missing or not a real number."""
    return float(value) if isinstance(value, numbers.Real) else math.nan
