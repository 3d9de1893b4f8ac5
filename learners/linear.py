"""A per-action logistic reward model learned online from bandit feedback.

The baseline of the doubly robust loss estimate (``estimator="dr"`` of the tree boosters). More:
docs/boosters.md, "learners/linear.py".

>>> model = LinearRewards(n_actions=3, seed_rows=4)
>>> for _ in range(50):
...     model.learn_one({"x": 1.0, "colour": "red"}, action=2, correct=True)
...     model.learn_one({"x": -1.0, "colour": "blue"}, action=2, correct=False)
>>> int(model.predict_one({"x": 1.0, "colour": "red"}).argmax())
2
>>> bool(model.predict_one({"x": -1.0, "colour": "blue"})[2] < 0.1)
True
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable

import numpy as np

__all__ = ["PAIR_HASH", "LinearRewards", "as_real", "standardised"]

#: standardised values are clipped to [-Z_CLIP, Z_CLIP], a guard against overflow (the quality
#: benchmark's streams reach about 3,000, on Mice)
Z_CLIP = 1e4
#: a product of two features is formed from values clipped to [-PAIR_CLIP, PAIR_CLIP]
PAIR_CLIP = 10.0
#: products are formed among an example's first PAIR_FEATURES features only (2,080 products at
#: most): their cost grows with the square of the features
PAIR_FEATURES = 64
#: the attributes only learning reads (AdaGrad's sums): a serving copy leaves them out
_LEARNING_STATE = frozenset({"squares", "bias_squares", "pair_squares"})
#: the feature values a normalised step's norm is taken of are clipped to this
NORM_CLIP = 3.0
#: odd multiplier of the pair hash (Knuth's multiplicative hashing constant)
PAIR_HASH = 2654435761


def as_real(value) -> float:
    """``value`` as a float; an int too large for one is an infinity of its sign."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _welford(n: float, mean: float, m2: float, v: float) -> tuple[float, float, float] | None:
    """Welford's update of (count, mean, sum of squared deviations) by ``v``; None on overflow."""
    n += 1.0
    delta = v - mean
    mean += delta / n
    m2 += delta * (v - mean)
    return (n, mean, m2) if math.isfinite(mean) and math.isfinite(m2) else None


def standardised(moments: np.ndarray, value, learn: bool, clip: float) -> float:
    """``value`` standardised by its feature's running ``moments`` (count, mean, sum of squared
    deviations; a row that learning first updates in place, Welford's, unless the value is not
    finite or the update would overflow), clipped to ``[-clip, clip]``; 0 while the feature has
    shown no spread, and for a NaN.

    >>> m = np.zeros(3)
    >>> standardised(m, 1.0, True, 10.0), standardised(m, 3.0, True, 10.0), m.tolist()
    (0.0, 1.0, [2.0, 2.0, 2.0])
    """
    v = as_real(value)
    n, mean, m2 = moments.tolist()
    if learn and math.isfinite(v):
        moved = _welford(n, mean, m2, v)
        if moved is not None:  # else an overflow: the moments stay as they were
            n, mean, m2 = moments[:] = moved
    sd = math.sqrt(m2 / n) if n > 1.0 else 0.0
    z = (v - mean) / sd if sd > 0.0 else 0.0
    return 0.0 if z != z else min(max(z, -clip), clip)


class LinearRewards:
    """One logistic regression per action, sharing its features, trained with AdaGrad.

    - A numeric feature is standardised with its running mean and variance (Welford's, over
      the contexts learned so far); a string feature, or a feature named in
      ``nominal_attributes``, is an indicator of its value.
    - Learning from ``(x, action, correct)``: a correct action is the label, so every action
      learns (target 1 on it, 0 elsewhere); a wrong one teaches only that action (target 0).
    - At most ``max_features`` features get a weight row of their own; later new ones share a
      row picked by a CRC-32 of their name (memory stays bounded, the result deterministic).
    - ``quadratic=True`` adds every product of two features (squares included, Vowpal Wabbit's
      ``-q ::``) among the example's first ``PAIR_FEATURES``, each hashed from its two rows into
      a table of ``max_pairs`` rows.

    Parameters
    ----------
    n_actions
        Number of actions ``k``.
    learning_rate
        AdaGrad's step: a weight moves by ``learning_rate * g / sqrt(sum of g^2)``.
    max_features
        Bound on the weight rows (``max_features x k`` weights and as many squared gradients).
    nominal_attributes
        Numeric-valued features to treat as categories.
    seed_rows
        Rows allocated at first; the table doubles when full, up to ``max_features``.
    quadratic
        Whether the products of pairs of features are features too.
    max_pairs
        Rows of the products' table (``quadratic`` only; allocated at the first product).
    normalized
        Whether a step is divided by the norm of the example's feature values (each clipped to
        ``[-NORM_CLIP, NORM_CLIP]``), at least 1: an example with many features moves the
        scores about as much as one with few.
    """

    #: no products; also what a model pickled before the option existed reads
    quadratic = False
    pair_weights: np.ndarray | None = None
    normalized = False

    def __init__(
        self,
        n_actions: int,
        learning_rate: float = 0.5,
        max_features: int = 4096,
        nominal_attributes: list | None = None,
        seed_rows: int = 64,
        quadratic: bool = False,
        max_pairs: int = 8192,
        normalized: bool = False,
    ) -> None:
        self.n_actions = int(n_actions)
        self.learning_rate = float(learning_rate)
        self.max_features = int(max_features)
        self.nominal_attributes = frozenset(nominal_attributes or ())
        rows = max(1, min(int(seed_rows), self.max_features))
        self.index: dict[Hashable, int] = {}
        self.weights = np.zeros((rows, self.n_actions))
        self.squares = np.full((rows, self.n_actions), 1e-6)
        self.bias = np.zeros(self.n_actions)
        self.bias_squares = np.full(self.n_actions, 1e-6)
        self.moments = np.zeros((rows, 3))  # numeric rows: count, mean, sum of squared deviations
        self.quadratic = bool(quadratic)
        self.normalized = bool(normalized)
        self.max_pairs = int(max_pairs)
        self.pair_weights = None  # (max_pairs, k) at the first product
        self.pair_squares: np.ndarray | None = None

    def _row(self, key: Hashable, learn: bool) -> int | None:
        """The weight row of ``key``; a new key gets one only when learning (else None: a
        feature never learned has weight 0), so predicting writes nothing."""
        row = self.index.get(key)
        if row is not None:
            return row
        if len(self.index) >= self.max_features:  # full: share a row, deterministically
            return zlib.crc32(repr(key).encode()) % self.max_features
        if not learn:
            return None
        row = len(self.index)
        if row >= self.weights.shape[0]:
            grow = min(2 * row, self.max_features) - row
            self.weights = np.vstack([self.weights, np.zeros((grow, self.n_actions))])
            self.squares = np.vstack([self.squares, np.full((grow, self.n_actions), 1e-6)])
            self.moments = np.vstack([self.moments, np.zeros((grow, 3))])
        self.index[key] = row
        return row

    def _features(self, x: dict, learn: bool) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values of ``x``; ``learn`` first adds ``x`` to the running moments."""
        rows, values = [], []
        for name, value in x.items():
            nominal = isinstance(value, str) or name in self.nominal_attributes
            row = self._row((name, value) if nominal else name, learn)
            if row is None:
                continue
            if nominal:
                rows.append(row)
                values.append(1.0)
                continue
            rows.append(row)
            values.append(standardised(self.moments[row], value, learn, Z_CLIP))
        return np.asarray(rows, dtype=np.int64), np.asarray(values)

    def _pairs(self, rows: np.ndarray, values: np.ndarray, learn: bool) -> tuple:
        """Rows (in the products' table) and values of every product of two features of ``x``
        (None before the first product is learned)."""
        if self.pair_weights is None:
            if not learn:
                return None, None
            self.pair_weights = np.zeros((self.max_pairs, self.n_actions))
            self.pair_squares = np.full((self.max_pairs, self.n_actions), 1e-6)
        rows, values = rows[:PAIR_FEATURES], values[:PAIR_FEATURES]
        i, j = np.triu_indices(rows.size)
        clipped = np.clip(values, -PAIR_CLIP, PAIR_CLIP)
        keys = rows[i] * PAIR_HASH + rows[j]
        return keys % self.max_pairs, clipped[i] * clipped[j]

    def _encode(self, x: dict, learn: bool) -> tuple:
        rows, values = self._features(x, learn)
        if not self.quadratic:
            return rows, values, None, None
        return (rows, values, *self._pairs(rows, values, learn))

    def _probabilities(self, rows, values, pair_rows=None, pair_values=None) -> np.ndarray:
        z = values @ self.weights[rows] + self.bias
        if pair_rows is not None:
            assert self.pair_weights is not None  # products come with their weights
            z += pair_values @ self.pair_weights[pair_rows]
        return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, overflow-free

    def serving_state(self) -> dict:
        """The attributes prediction reads, the weight rows cut to those in use: the state of a
        read-only copy (learners/frozen.py), which predicts exactly as this model does."""
        state = {k: v for k, v in vars(self).items() if k not in _LEARNING_STATE}
        used = len(self.index)  # every row a prediction can read (all of them once full)
        state["weights"], state["moments"] = self.weights[:used], self.moments[:used]
        return state

    def predict_one(self, x: dict) -> np.ndarray:
        """The estimated reward probability of every action in context ``x``, shape ``(k,)``.

        A feature never learned counts for nothing (its weight would be 0); the model is only
        read."""
        return self._probabilities(*self._encode(x, learn=False))

    def learn_one(self, x: dict, action: int, correct: bool, label: int | None = None) -> None:
        """One AdaGrad step from the played ``action`` and whether it was ``correct`` (the
        label when correct, or a known ``label``: every action learns)."""
        rows, values, pair_rows, pair_values = self._encode(x, learn=True)
        known = action if correct else label
        targets = np.zeros(self.n_actions)
        if known is None:
            mask = np.zeros(self.n_actions)
            mask[action] = 1.0
        else:
            mask = np.ones(self.n_actions)
            targets[known] = 1.0
        g = (self._probabilities(rows, values, pair_rows, pair_values) - targets) * mask
        rate = self.learning_rate / self._norm(values, pair_values)
        self._adagrad(self.weights, self.squares, rows, np.outer(values, g), rate)
        if pair_rows is not None:
            pair_grad = np.outer(pair_values, g)
            self._adagrad(self.pair_weights, self.pair_squares, pair_rows, pair_grad, rate)
        self.bias_squares += g * g
        self.bias -= self.learning_rate * g / np.sqrt(self.bias_squares)

    def _norm(self, values: np.ndarray, pair_values: np.ndarray | None) -> float:
        """What a step is divided by: 1, or with ``normalized`` the norm of the clipped values."""
        if not self.normalized:
            return 1.0
        squares = np.square(np.minimum(np.abs(values), NORM_CLIP)).sum()
        if pair_values is not None:
            squares += np.square(np.minimum(np.abs(pair_values), NORM_CLIP)).sum()
        return max(1.0, math.sqrt(squares))

    @staticmethod
    def _adagrad(weights, squares, rows, grad, rate: float) -> None:
        np.add.at(squares, rows, grad * grad)  # a shared row gets every share
        np.subtract.at(weights, rows, rate * grad / np.sqrt(squares[rows]))
