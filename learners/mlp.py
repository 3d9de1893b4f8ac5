"""A small multilayer perceptron in NumPy: hidden dense layers with batch normalisation, ReLU and
dropout, one linear output, trained by AdaGrad with weight decay (the networks of the BOPL paper's
DRR and BanditNet baselines, ``boosters/batch/neural.py``).

More: docs/boosters.md, "boosters/batch/neural.py".

>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(512, 2))
>>> y = (X[:, 0] * X[:, 1] > 0).astype(float)          # XOR: no linear model fits it
>>> net = MLP(2, hidden_widths(2, 32), dropout=0.0, learning_rate=0.05, seed=0)
>>> for _ in range(60):
...     for batch in np.array_split(rng.permutation(512), 8):
...         out = net.forward(X[batch], train=True)
...         net.step(net.backward((out - y[batch]) / batch.size))
>>> float(np.mean((net.forward(X) > 0.5) == y)) > 0.9
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["MLP", "hidden_widths"]

_BN_EPS = 1e-5
_ADAGRAD_EPS = 1e-7


def hidden_widths(n_layers: int, first_width: int, min_width: int = 32) -> list[int]:
    """The paper's widths: the first layer's, then halved per layer, never below ``min_width``
    (nor below a first width smaller than it).

    >>> hidden_widths(4, 256), hidden_widths(3, 40), hidden_widths(2, 16)
    ([256, 128, 64, 32], [40, 32, 32], [16, 16])
    """
    if n_layers < 1 or first_width < 1:
        raise ValueError(f"need n_layers >= 1 and first_width >= 1, got {n_layers}, {first_width}")
    floor = min(min_width, first_width)
    return [max(first_width >> i, floor) for i in range(n_layers)]


@dataclass
class _Cache:
    """What one hidden layer's forward pass keeps for the backward pass."""

    inputs: np.ndarray
    normalised: np.ndarray
    inv_std: np.ndarray
    active: np.ndarray
    mask: np.ndarray | None


@dataclass
class MLP:
    """Dense -> batch norm -> ReLU -> dropout per hidden layer, then a linear unit.

    Parameters: the input width, the hidden widths, the dropout rate, the weight decay (an L2
    penalty ``weight_decay/2 ||W||^2`` on the dense weights, not on batch norm's scale and shift
    or the output bias), AdaGrad's learning rate, batch norm's running-average momentum, the
    seed of the weights' initialisation (He normal) and of the dropout masks, and the floating
    point type of the parameters and the arithmetic (``"float32"``: half the memory, twice the
    speed of float64's matrix products).
    """

    n_inputs: int
    widths: list[int]
    dropout: float = 0.0
    weight_decay: float = 0.0
    learning_rate: float = 0.01
    momentum: float = 0.9
    seed: int = 0
    dtype: str = "float64"
    params: list[np.ndarray] = field(init=False)
    running: list[np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        self._rng = np.random.default_rng(self.seed)
        self.params, self.running = [], []
        fan_in = self.n_inputs
        for width in self.widths:  # W, gamma, beta per hidden layer
            self.params += [self._rng.normal(0.0, np.sqrt(2.0 / fan_in), (fan_in, width)),
                            np.ones(width), np.zeros(width)]
            self.running += [np.zeros(width), np.ones(width)]
            fan_in = width
        self.params += [self._rng.normal(0.0, np.sqrt(1.0 / fan_in), (fan_in, 1)), np.zeros(1)]
        self.params = [p.astype(self.dtype) for p in self.params]
        self.running = [r.astype(self.dtype) for r in self.running]
        self._squares = [np.zeros_like(p) for p in self.params]
        self._caches: list[_Cache] = []

    def forward(self, X: np.ndarray, train: bool = False) -> np.ndarray:
        """The network's output for the rows of ``X``, shape (n,). ``train``: batch statistics
        (and an update of the running ones) and dropout; otherwise the running statistics."""
        h = np.asarray(X, dtype=self.dtype)
        if train:
            self._caches = []
        for layer in range(len(self.widths)):
            W, gamma, beta = self.params[3 * layer: 3 * layer + 3]
            mean, var = self.running[2 * layer: 2 * layer + 2]
            z = h @ W
            if train:
                batch_mean, batch_var = z.mean(axis=0), z.var(axis=0)
                mean *= self.momentum
                mean += (1.0 - self.momentum) * batch_mean
                var *= self.momentum
                var += (1.0 - self.momentum) * batch_var
                mean, var = batch_mean, batch_var
            inv_std = 1.0 / np.sqrt(var + _BN_EPS)
            normalised = (z - mean) * inv_std
            pre = gamma * normalised + beta
            active = pre > 0.0
            out = np.where(active, pre, pre.dtype.type(0.0))
            mask = None
            if train and self.dropout > 0.0:
                keep = self._rng.random(out.shape) >= self.dropout
                mask = keep.astype(out.dtype) / out.dtype.type(1.0 - self.dropout)
                out = out * mask
            if train:  # what backward() needs; an evaluation keeps nothing
                self._caches.append(_Cache(h, normalised, inv_std, active, mask))
            h = out
        if train:
            self._last = h
        return (h @ self.params[-2])[:, 0] + self.params[-1][0]

    def backward(self, grad_out: np.ndarray) -> list[np.ndarray]:
        """Gradients of the parameters (the order of ``params``) given d loss / d output (n,) of
        the last ``forward(train=True)``; the weight decay is added to the dense weights'."""
        g = np.asarray(grad_out, dtype=self.dtype)[:, None]
        W_out = self.params[-2]
        grads = [self._last.T @ g + self.weight_decay * W_out, g.sum(axis=0)]
        dh = g @ W_out.T
        for layer in reversed(range(len(self.widths))):
            cache = self._caches[layer]
            W, gamma = self.params[3 * layer], self.params[3 * layer + 1]
            if cache.mask is not None:
                dh = dh * cache.mask
            dpre = np.where(cache.active, dh, dh.dtype.type(0.0))
            dnorm = dpre * gamma
            n = dpre.shape[0]
            dz = cache.inv_std / n * (n * dnorm - dnorm.sum(axis=0)
                                      - cache.normalised * (dnorm * cache.normalised).sum(axis=0))
            grads[:0] = [cache.inputs.T @ dz + self.weight_decay * W,
                         (dpre * cache.normalised).sum(axis=0), dpre.sum(axis=0)]
            dh = dz @ W.T
        return grads

    def step(self, grads: list[np.ndarray]) -> None:
        """One AdaGrad step: each parameter moves by ``-lr g / (sqrt(sum of g^2) + 1e-7)``."""
        for param, square, grad in zip(self.params, self._squares, grads):
            square += grad * grad
            param -= self.learning_rate * grad / (np.sqrt(square) + _ADAGRAD_EPS)

    def state(self) -> list[np.ndarray]:
        """Copies of the parameters and running statistics (for :meth:`restore`)."""
        return [p.copy() for p in self.params + self.running]

    def restore(self, state: list[np.ndarray]) -> None:
        """Put back the parameters and running statistics of :meth:`state` (and drop the last
        forward pass's intermediate arrays)."""
        for target, saved in zip(self.params + self.running, state):
            target[...] = saved
        self._caches, self._last = [], np.zeros((0, 0))
