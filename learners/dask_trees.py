"""BOPL's regression trees grown by XGBoost on Dask: the expanded (context x action) rows live on
the Dask workers, one ``xgboost.dask`` tree per boosting round, and the policy's scores computed
there.

A Dask client is this module's compute engine, never its to make: the caller (the offline worker
in service/, the benchmark) connects it and passes it in. No other I/O here. More:
docs/training.md, "Bigger hardware: a GPU, a Dask cluster".

The boosting arithmetic stays in boosters/batch/bopl.py: :class:`DaskLeastSquaresTree` is a base
learner of its per-round solver (``kind``, ``prepare``, ``fit``), the Dask twin of
:class:`learners.batch_trees.LeastSquaresTree` with ``tree_method="hist"``: the same parameters
(its bins sketched per round on the workers), the fitted trees plain XGBoost boosters (they
pickle and serve without Dask). :func:`dask_scores` is
:class:`boosters.batch.policies.AdditiveEnsemble`'s sum, in its order and in float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from learners.batch_trees import FittedBooster, LeastSquaresTree, augment_actions, servable

__all__ = ["DaskLeastSquaresTree", "DaskRows", "dask_scores", "rows_on_workers"]


def _n_workers(client: Any) -> int:
    return max(1, len(client.scheduler_info().get("workers", {})))


def rows_on_workers(client: Any, Z: np.ndarray) -> Any:
    """``Z`` (float32) as a Dask array of one row block per Dask worker, held by the workers."""
    import dask.array as da

    Z = np.asarray(Z, dtype=np.float32)
    size = max(1, -(-Z.shape[0] // _n_workers(client)))
    return client.persist(da.from_array(Z, chunks=(size, Z.shape[1])))


@dataclass
class DaskRows:
    """The prepared training rows: a Dask array of float32 rows held by the workers."""

    X: Any


class DaskLeastSquaresTree:
    """One weighted least-squares regression tree per round, XGBoost ``hist`` on Dask.

    Parameters: ``client`` (a ``distributed.Client``; not pickled), then those of
    :class:`learners.batch_trees.LeastSquaresTree` (``device`` ``cpu`` or ``cuda``, the hist
    method always). BOPL uses it with its per-round solver (this is no ``LeastSquaresTree``, so
    ``solver="auto"`` picks that one).

    >>> DaskLeastSquaresTree(None, max_depth=0)
    Traceback (most recent call last):
    ...
    ValueError: max_depth must be an integer >= 1, got 0
    """

    kind = "regression"

    def __init__(
        self,
        client: Any,
        max_depth: int = 6,
        min_child_weight: float = 1.0,
        reg_lambda: float = 0.0,
        learning_rate: float = 1.0,
        device: str = "cpu",
        max_bin: int = 256,
    ) -> None:
        self.tree = LeastSquaresTree(
            max_depth=max_depth, min_child_weight=min_child_weight, reg_lambda=reg_lambda,
            learning_rate=learning_rate, device=device, tree_method="hist", max_bin=max_bin,
        )
        self.client = client

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "client": None}  # a published policy holds no connection

    def __repr__(self) -> str:
        return f"Dask{self.tree!r}"

    def _client(self) -> Any:
        if self.client is None:
            raise RuntimeError("DaskLeastSquaresTree has no Dask client (it is not pickled)")
        return self.client

    def params(self, seed: int) -> dict[str, Any]:
        """XGBoost parameters of one tree (the local tree's; threads are the Dask workers')."""
        params = self.tree.params(seed)
        del params["nthread"]
        return params

    def prepare(self, Z: np.ndarray) -> DaskRows:
        """The augmented rows, sent once to the workers."""
        return DaskRows(rows_on_workers(self._client(), Z))

    def fit(
        self, data: DaskRows, y: np.ndarray, sample_weight: np.ndarray, seed: int
    ) -> tuple[FittedBooster, np.ndarray]:
        """Fit one tree to targets ``y`` with weights on the workers' rows.

        The bins are sketched per round, weighted by that round's weights, and merged across
        the workers (XGBoost's distributed sketch): the only difference from the local hist
        tree, whose bins are sketched once, unweighted.

        Returns the fitted tree (a plain booster) and its predictions on the training rows.
        """
        import dask.array as da
        from xgboost import dask as dxgb

        client = self._client()
        chunks = (data.X.chunks[0],)
        label = da.from_array(np.asarray(y, dtype=np.float32), chunks=chunks)
        weight = da.from_array(np.asarray(sample_weight, dtype=np.float32), chunks=chunks)
        dtrain = dxgb.DaskQuantileDMatrix(
            client, data.X, label=label, weight=weight, max_bin=self.tree.max_bin
        )
        booster = dxgb.train(client, self.params(seed), dtrain, num_boost_round=1)["booster"]
        margin = dxgb.inplace_predict(client, booster, data.X, predict_type="margin")
        pred = np.asarray(margin.compute(), dtype=np.float64)
        return FittedBooster(servable(booster)), pred


def dask_scores(client: Any, ensemble: Any, X: np.ndarray) -> np.ndarray:
    """``ensemble.scores(X)`` computed on the Dask workers (shape (n, k), float64).

    ``ensemble`` is an :class:`boosters.batch.policies.AdditiveEnsemble` of fitted XGBoost
    boosters; the sum is its own, term by term in float64, so the scores are the same numbers.
    """
    from xgboost import dask as dxgb

    k = ensemble.n_actions
    X = np.asarray(X, dtype=np.float64)
    if not len(ensemble):
        return np.zeros((X.shape[0], k))
    Z = rows_on_workers(client, augment_actions(X, k))
    total = None
    for alpha, est in zip(ensemble.alphas, ensemble.estimators):
        margin = dxgb.inplace_predict(client, est.booster, Z, predict_type="margin")
        term = float(alpha) * margin.astype(np.float64)
        total = term if total is None else total + term
    assert total is not None  # the ensemble is not empty
    return np.asarray(total.compute(), dtype=np.float64).reshape(X.shape[0], k)
