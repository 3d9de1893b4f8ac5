"""DRR and BanditNet: the BOPL paper's neural baselines (Sec. 5.2), on ``learners.mlp``.

- :class:`DeepRewardRegression` (DRR): a network regressing r on ``[x_i; e_{a_i}]`` (Eq. 5,
  squared error), acting as argmax over the actions' predicted rewards.
- :class:`BanditNet` (Joachims et al. 2018): the network scores ``[x; e_a]`` for every action,
  the policy is the softmax of the scores, and training minimises the IPS risk (Eq. 6) on
  translated rewards ``r + c``, BOPL's objective on a network instead of a tree ensemble.

Both standardise the features (the paper scaled them for these baselines only), train by
mini-batch AdaGrad and stop early on the training reward estimated by SNIPS, keeping the best
epoch's network (patience: ``patience`` epochs without a better estimate).

More: docs/boosters.md, "boosters/batch/neural.py".

>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(600, 2))
>>> best = (X[:, 0] > 0).astype(int)
>>> actions = rng.integers(0, 2, size=600)
>>> rewards = (actions == best).astype(float)
>>> net = BanditNet(n_actions=2, num_hidden_layers=1, first_layer_width=16, epochs=30,
...                 reward_translation=-0.5, random_state=0)
>>> net = net.fit(X, actions, np.full(600, 0.5), rewards)
>>> float((net.predict(X) == best).mean()) > 0.9
True
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from boosters._params import Interval, Options, validate_params
from boosters.batch.bopl import check_logged_data, ips_risk_gradient
from boosters.batch.policies import SoftmaxEnsemblePolicy, softmax
from boosters.ope import snips
from learners.batch_trees import augment_actions
from learners.mlp import MLP, hidden_widths

__all__ = ["BanditNet", "DeepRewardRegression"]


class _Network(BaseEstimator):
    """The shared parameters, training loop and scoring of DRR and BanditNet.

    Parameters
    ----------
    n_actions
        Number of actions k (>= 2).
    num_hidden_layers, first_layer_width
        Depth and first width; later layers halve it, down to 32 (Appendix G).
    dropout, weight_decay, learning_rate
        Dropout rate, L2 penalty on the dense weights, AdaGrad's step (Table 4's rows).
    epochs, batch_size, patience
        At most ``epochs`` passes over the logged rows in mini-batches of ``batch_size``
        contexts; stop after ``patience`` epochs without a better training SNIPS estimate.
    random_state
        Seed of the initial weights, the dropout masks and the batches' order.
    dtype
        ``"float32"`` (MXNet's default, as in the paper) or ``"float64"``.

    Attributes (after :meth:`fit`): ``network_`` (the best epoch's :class:`learners.mlp.MLP`),
    ``snips_`` (the training estimate after each epoch), ``best_epoch_``, ``n_epochs_``,
    ``mean_`` and ``scale_`` (the standardisation).
    """

    _parameter_constraints: ClassVar[dict[str, list]] = {
        "n_actions": [Interval(int, 2, None)],
        "num_hidden_layers": [Interval(int, 1, None)],
        "first_layer_width": [Interval(int, 1, None)],
        "dropout": [Interval(float, 0.0, 1.0, closed="left")],
        "weight_decay": [Interval(float, 0.0, None)],
        "learning_rate": [Interval(float, 0.0, None, closed="neither")],
        "epochs": [Interval(int, 1, None)],
        "batch_size": [Interval(int, 1, None)],
        "patience": [Interval(int, 1, None)],
        "random_state": [Interval(int, 0, None)],
        "dtype": [Options(("float32", "float64"))],
    }

    def __init__(
        self,
        *,
        n_actions: int,
        num_hidden_layers: int = 2,
        first_layer_width: int = 256,
        dropout: float = 0.1,
        weight_decay: float = 0.0,
        learning_rate: float = 0.01,
        epochs: int = 1000,
        batch_size: int = 100,
        patience: int = 10,
        random_state: int = 0,
        dtype: str = "float32",
    ) -> None:
        self.dtype = dtype
        self.n_actions = n_actions
        self.num_hidden_layers = num_hidden_layers
        self.first_layer_width = first_layer_width
        self.dropout = dropout
        self.weight_decay = weight_decay
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.batch_size = batch_size
        self.patience = patience
        self.random_state = random_state

    # ---- what differs between DRR and BanditNet

    def _batch_step(self, X: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> None:
        raise NotImplementedError

    def _policy_matrix(self, scores: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # ---- training

    def fit(
        self, X: np.ndarray, actions: np.ndarray, propensities: np.ndarray, rewards: np.ndarray
    ):
        """Train on logged rows (x_i, a_i, p_i, r_i); returns ``self``."""
        validate_params(self.get_params(deep=False), self._parameter_constraints)
        X, a, p, r = check_logged_data(X, actions, propensities, rewards, self.n_actions)
        self.mean_ = X.mean(axis=0)
        std = X.std(axis=0)
        self.scale_ = np.where(std > 0, std, 1.0)
        Xs = (X - self.mean_) / self.scale_
        widths = hidden_widths(self.num_hidden_layers, self.first_layer_width)
        self.network_ = MLP(X.shape[1] + self.n_actions, widths, self.dropout,
                            self.weight_decay, self.learning_rate, seed=self.random_state,
                            dtype=self.dtype)
        rng = np.random.default_rng([self.random_state, 1])
        n_batches = max(1, -(-a.size // self.batch_size))
        best, best_state, waited, self.snips_ = -np.inf, self.network_.state(), 0, []
        for epoch in range(self.epochs):
            for rows in np.array_split(rng.permutation(a.size), n_batches):
                self._batch_step(Xs[rows], a[rows], p[rows], r[rows])
            estimate = self._training_snips(Xs, a, p, r)
            self.snips_.append(estimate)
            if estimate > best:
                best, best_state, waited = estimate, self.network_.state(), 0
                self.best_epoch_ = epoch
            else:
                waited += 1
                if waited >= self.patience:
                    break
        self.n_epochs_ = len(self.snips_)
        self.network_.restore(best_state)
        return self

    def _training_snips(self, Xs: np.ndarray, a: np.ndarray, p: np.ndarray,
                        r: np.ndarray) -> float:
        """SNIPS of the policy on the (untranslated) training rows; -inf if it gives no logged
        action positive probability."""
        target = self._policy_matrix(self._scores(Xs))
        try:
            return snips(a, p, r, target).value
        except ValueError:
            return -np.inf

    # ---- scoring

    def _scores(self, Xs: np.ndarray, train: bool = False) -> np.ndarray:
        Z = augment_actions(Xs, self.n_actions)
        return self.network_.forward(Z, train=train).reshape(-1, self.n_actions)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """The network's score of every action, shape (n, k)."""
        if not hasattr(self, "network_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() first")
        X = np.asarray(X, dtype=np.float64)
        return self._scores((X - self.mean_) / self.scale_).astype(np.float64)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The argmax policy (how the paper evaluates every learned policy)."""
        return np.argmax(self.scores(X), axis=1)

    def policy(
        self, temperature: float = 0.0, min_propensity: float = 0.0
    ) -> SoftmaxEnsemblePolicy:
        """A servable policy over the scores (default: argmax)."""
        return SoftmaxEnsemblePolicy(self, temperature=temperature, min_propensity=min_propensity)


def _argmax_matrix(scores: np.ndarray) -> np.ndarray:
    out = np.zeros_like(scores)
    out[np.arange(scores.shape[0]), np.argmax(scores, axis=1)] = 1.0
    return out


class DeepRewardRegression(_Network):
    """DRR: squared-error regression of r on ``[x_i; e_{a_i}]``, argmax policy; no reward
    translation. Early stopping estimates the argmax policy's training reward.

    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(400, 2))
    >>> actions = rng.integers(0, 2, size=400)
    >>> rewards = (actions == (X[:, 1] > 0)).astype(float)
    >>> drr = DeepRewardRegression(n_actions=2, num_hidden_layers=1, first_layer_width=16,
    ...                            epochs=30).fit(X, actions, np.full(400, 0.5), rewards)
    >>> float((drr.predict(X) == (X[:, 1] > 0)).mean()) > 0.9
    True
    """

    def _batch_step(self, X: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> None:
        Z = np.hstack([X, np.eye(self.n_actions)[a]])
        out = self.network_.forward(Z, train=True)
        self.network_.step(self.network_.backward((out - r) / r.size))

    def _policy_matrix(self, scores: np.ndarray) -> np.ndarray:
        return _argmax_matrix(scores)


class BanditNet(_Network):
    """BanditNet: the softmax of the network's scores over ``[x; e_a]``, trained on the IPS risk
    (Eq. 6) of the translated rewards ``r + reward_translation`` (training only; the paper uses
    -0.6 .. -0.2). Early stopping estimates the softmax policy's training reward (raw rewards).

    Parameters: those of DRR (see ``_Network``) and ``reward_translation``.
    """

    _parameter_constraints: ClassVar[dict[str, list]] = {
        **_Network._parameter_constraints,
        "reward_translation": [Interval(float, None, None)],
    }

    def __init__(
        self,
        *,
        n_actions: int,
        num_hidden_layers: int = 2,
        first_layer_width: int = 256,
        dropout: float = 0.1,
        weight_decay: float = 0.0,
        learning_rate: float = 0.01,
        epochs: int = 1000,
        batch_size: int = 100,
        patience: int = 10,
        reward_translation: float = 0.0,
        random_state: int = 0,
        dtype: str = "float32",
    ) -> None:
        super().__init__(
            n_actions=n_actions, num_hidden_layers=num_hidden_layers,
            first_layer_width=first_layer_width, dropout=dropout, weight_decay=weight_decay,
            learning_rate=learning_rate, epochs=epochs, batch_size=batch_size, patience=patience,
            random_state=random_state, dtype=dtype,
        )
        self.reward_translation = reward_translation

    def _batch_step(self, X: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray) -> None:
        scores = self._scores(X, train=True)
        grad = ips_risk_gradient(scores, a, p, r + self.reward_translation)
        self.network_.step(self.network_.backward(grad.ravel()))

    def _policy_matrix(self, scores: np.ndarray) -> np.ndarray:
        return softmax(scores)
