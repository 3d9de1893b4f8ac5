"""Ten public or synthetic classification streams, all offline: the quality benchmark's, and the
tests'.

Each stream is a :class:`service.sim.datasets.Dataset` (contexts as dicts of float or str, integer
labels). ``load_stream(name, max_rows)`` keeps at most ``max_rows`` rows, a fixed random subsample
(``default_rng(0)``, the same for every seed and protocol) in the original row order.

- ``balance``, ``car``, ``nursery``, ``mice``: the four sets of Zhang et al. 2019's Table 1
  (bundled with the simulator);
- ``digits`` (8x8 images, 10 classes) and ``wine`` (13 numbers, 3 classes): scikit-learn's bundled
  copies;
- ``segments``: River's bundled ImageSegments (18 numbers, 7 classes);
- ``fashion``: Fashion-MNIST's 60,000 training images (Debian's dataset-fashion-mnist), each
  mean-pooled over 7x7 blocks to 4x4 = 16 numbers in 0..1, subsampled to 5,000 rows (10 classes);
- ``userid``: synthetic, 5,000 rows, 4 actions, a string id of high cardinality (below);
- ``rbf26``: River's ``RandomRBF(n_classes=26, n_features=10)``, model and sample seed 7, 5,000
  rows (a plain many-action numeric stream; 26 actions, of which 20 classes occur in those rows).

``userid``: 1,000 users ``u0 .. u999``, each given a fixed hidden group ``g(u)`` in 0..3; a row
draws a user with Zipf-like popularity (probability proportional to ``1 / (rank + 10)``, so the
head users recur and the tail is seen a few times), and two uniform numbers ``x1, x2`` in 0..1,
plus a uniform 50-value string ``device`` that carries no signal. The class (the best action) is
``(g(u) + [x1 > 0.5] + [x2 > 0.5]) mod 4``: the id sets the offset, the numbers shift it. All draws
come from ``default_rng(15)``.

>>> ds = load_stream("userid", max_rows=300)
>>> len(ds), ds.n_classes, sorted(ds.X[0])
(300, 4, ['device', 'user', 'x1', 'x2'])
>>> load_stream("wine").n_classes
3
"""

from __future__ import annotations

import numpy as np

from service.sim.datasets import Dataset, load_dataset
from service.sim.fashion import FASHION_DIR, read_idx

__all__ = ["DUP", "STREAMS", "dup_of", "load_stream"]

#: stream -> duplication of the "duplicated" protocol (the paper's for its four sets, else 5)
DUP = {"balance": 10, "car": 6, "nursery": 4, "mice": 8}
DEFAULT_DUP = 5

STREAMS = (
    "balance",
    "car",
    "nursery",
    "mice",
    "digits",
    "wine",
    "segments",
    "fashion",
    "userid",
    "rbf26",
)


def _from_arrays(name: str, X: np.ndarray, y: list, prefix: str = "x", classes=None) -> Dataset:
    classes = sorted(set(y), key=str) if classes is None else list(classes)
    index = {c: i for i, c in enumerate(classes)}
    rows = [{f"{prefix}{j}": float(v) for j, v in enumerate(row)} for row in X]
    labels = np.array([index[c] for c in y], dtype=np.int64)
    return Dataset(name, rows, labels, [str(c) for c in classes], [])


def _sklearn(name: str) -> Dataset:
    from sklearn import datasets

    bunch = datasets.load_digits() if name == "digits" else datasets.load_wine()
    return _from_arrays(name, bunch.data, bunch.target.tolist())


def _segments() -> Dataset:
    from river import datasets

    pairs = list(datasets.ImageSegments())
    classes = sorted({y for _, y in pairs})
    X = [{k: float(v) for k, v in x.items()} for x, _ in pairs]
    y = np.array([classes.index(label) for _, label in pairs], dtype=np.int64)
    return Dataset("segments", X, y, classes, [])


def _fashion(n_rows: int = 5000) -> Dataset:
    images = read_idx(FASHION_DIR / "train-images-idx3-ubyte.gz")
    labels = read_idx(FASHION_DIR / "train-labels-idx1-ubyte.gz")
    keep = np.sort(np.random.default_rng(0).choice(len(labels), n_rows, replace=False))
    pooled = images[keep].reshape(n_rows, 4, 7, 4, 7).mean(axis=(2, 4)) / 255.0
    return _from_arrays("fashion", pooled.reshape(n_rows, 16), labels[keep].tolist(), "p")


def _userid(n_rows: int = 5000, n_users: int = 1000, k: int = 4) -> Dataset:
    rng = np.random.default_rng(15)
    group = rng.integers(0, k, n_users)
    popularity = 1.0 / (np.arange(n_users) + 10.0)
    users = rng.choice(n_users, n_rows, p=popularity / popularity.sum())
    x1, x2 = rng.random(n_rows), rng.random(n_rows)
    device = rng.integers(0, 50, n_rows)
    y = (group[users] + (x1 > 0.5) + (x2 > 0.5)) % k
    X = [
        {"user": f"u{u}", "device": f"d{d}", "x1": float(a), "x2": float(b)}
        for u, d, a, b in zip(users, device, x1, x2, strict=True)
    ]
    return Dataset("userid", X, y.astype(np.int64), [str(c) for c in range(k)], [])


def _rbf26(n_rows: int = 5000) -> Dataset:
    from river.datasets import synth

    pairs = list(
        synth.RandomRBF(seed_model=7, seed_sample=7, n_classes=26, n_features=10).take(n_rows)
    )
    X = np.array([[x[j] for j in range(10)] for x, _ in pairs])
    return _from_arrays("rbf26", X, [y for _, y in pairs], classes=range(26))


def _load(name: str) -> Dataset:
    if name in DUP:
        return load_dataset(name)
    if name in ("digits", "wine"):
        return _sklearn(name)
    loaders = {"segments": _segments, "fashion": _fashion, "userid": _userid, "rbf26": _rbf26}
    if name not in loaders:
        raise ValueError(f"unknown stream {name!r}; streams: {', '.join(STREAMS)}")
    return loaders[name]()


def load_stream(name: str, max_rows: int | None = None) -> Dataset:
    """Stream ``name``, at most ``max_rows`` rows (a fixed subsample, original order kept)."""
    ds = _load(name)
    if max_rows is None or len(ds) <= max_rows:
        return ds
    keep = np.sort(np.random.default_rng(0).choice(len(ds), max_rows, replace=False))
    return Dataset(ds.name, [ds.X[i] for i in keep], ds.y[keep], ds.classes, ds.nominal)


def dup_of(name: str) -> int:
    """The duplication of the "duplicated" protocol for ``name``."""
    return DUP.get(name, DEFAULT_DUP)
