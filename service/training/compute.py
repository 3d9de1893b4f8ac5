"""Where the offline worker trains: XGBoost's device (``worker_device``) and a Dask cluster
(``worker_dask_scheduler``), checked at the worker's start-up so that a missing GPU or a missing
Dask fails there, in one clear line, and not in the middle of a training.

:func:`start_compute` is what ``boostbandit worker`` calls first; it returns the Dask client the
trainings use (None: in-process). :func:`base_learner` and :func:`hold_out_probabilities` are
the training's (pure) side of it: the trees of a variant on that device or cluster, and the
policy's hold-out probabilities from scores computed there. docs/training.md, "Bigger hardware:
a GPU, a Dask cluster".

>>> from service.settings import Settings
>>> start_compute(Settings()) is None            # cpu, no Dask: nothing to check or connect
True
>>> check_device("cpu")
"""

from __future__ import annotations

from typing import Any

import numpy as np

from boosters.batch.policies import SoftmaxEnsemblePolicy
from learners.batch_trees import LeastSquaresTree, WeightedTreeClassifier

__all__ = ["DASK_CONNECT_SECONDS", "WorkerSetupError", "base_learner", "check_device",
           "connect_dask", "hold_out_probabilities", "start_compute", "stop_compute"]

#: How long the worker waits for the Dask scheduler at start-up.
DASK_CONNECT_SECONDS = 10.0


class WorkerSetupError(RuntimeError):
    """The worker's compute settings cannot work on this machine (reported at start-up)."""


def check_device(device: str) -> None:
    """WorkerSetupError unless XGBoost can train on ``device`` here (``cuda``: built with CUDA,
    and a one-row training on the GPU works)."""
    if device == "cpu":
        return
    import xgboost as xgb

    if not xgb.build_info().get("USE_CUDA"):
        raise WorkerSetupError(
            f"BOOSTBANDIT_WORKER_DEVICE={device} but this XGBoost has no CUDA support (the "
            "xgboost-cpu package); install `xgboost` with CUDA or use cpu"
        )
    import warnings

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data = xgb.DMatrix(np.zeros((1, 1)), label=np.zeros(1))
            xgb.train({"device": device, "tree_method": "hist"}, data, num_boost_round=1)
    except xgb.core.XGBoostError as exc:
        raise WorkerSetupError(
            f"BOOSTBANDIT_WORKER_DEVICE={device} but XGBoost cannot train on it: "
            f"{str(exc).splitlines()[0]}; check the GPU (nvidia-smi) or use cpu"
        ) from None
    fallback = [str(w.message) for w in caught if "GPU" in str(w.message)]
    if fallback:  # XGBoost falls back to the CPU, with a warning, when it sees no GPU
        raise WorkerSetupError(
            f"BOOSTBANDIT_WORKER_DEVICE={device} but XGBoost sees no GPU ({fallback[0].strip()}); "
            "check the GPU (nvidia-smi) or use cpu"
        )


def connect_dask(address: str) -> Any:
    """A ``distributed.Client``: of a new ``LocalCluster`` for ``local``, else of the scheduler
    at ``address`` (WorkerSetupError when Dask is not installed or the scheduler answers not)."""
    try:
        from distributed import Client, LocalCluster
        from xgboost import dask as _  # noqa: F401 - xgboost.dask needs dask.dataframe too
    except ImportError as exc:
        raise WorkerSetupError(
            f"BOOSTBANDIT_WORKER_DASK_SCHEDULER={address} but Dask is not installed ({exc}); "
            "install the dask extra: pip install 'boostbandit[dask]'"
        ) from None
    if address == "local":
        return Client(LocalCluster(dashboard_address=None))
    try:
        return Client(address, timeout=DASK_CONNECT_SECONDS)
    except (OSError, TimeoutError, ValueError) as exc:
        raise WorkerSetupError(
            f"BOOSTBANDIT_WORKER_DASK_SCHEDULER={address}: cannot reach the Dask scheduler "
            f"({exc})"
        ) from None


def start_compute(settings: Any) -> Any:
    """Check ``worker_device`` and connect to ``worker_dask_scheduler`` (the settings have
    checked that only a -regr variant goes with a scheduler); the Dask client, or None."""
    check_device(settings.worker_device)
    if settings.worker_dask_scheduler is None:
        return None
    return connect_dask(settings.worker_dask_scheduler)


def stop_compute(client: Any) -> None:
    """Close a client of :func:`start_compute` and the local cluster it started, if any."""
    if client is None:
        return
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def base_learner(reduction: str, max_depth: int, device: str, dask_client: Any = None) -> Any:
    """The base trees of a variant's ``reduction`` (``regr`` or ``class``): XGBoost's on
    ``device``, on the Dask workers with a client; scikit-learn's (the CPU) for ``class``."""
    if reduction == "regr" and dask_client is not None:
        from learners.dask_trees import DaskLeastSquaresTree

        return DaskLeastSquaresTree(dask_client, max_depth, device=device)
    if reduction == "regr":
        return LeastSquaresTree(max_depth=max_depth, device=device)
    if dask_client is not None:
        raise ValueError(f"only the -regr variants train on Dask, not the -{reduction} ones")
    return WeightedTreeClassifier(max_depth=max_depth)


class _Scores:
    """Scores computed elsewhere (on the Dask workers) for the one matrix they belong to."""

    def __init__(self, scores: np.ndarray) -> None:
        self.values, self.n_actions = scores, scores.shape[1]

    def scores(self, X: np.ndarray) -> np.ndarray:
        if X.shape[0] != self.values.shape[0]:
            raise ValueError("precomputed scores are for another matrix")
        return self.values


def hold_out_probabilities(
    model: Any, X: np.ndarray, temperature: float, floor: float, dask_client: Any = None
) -> np.ndarray:
    """The fitted policy's probabilities on ``X``; with a client its scores come from the Dask
    workers (the softmax and the floor stay the policy's own, boosters/batch/policies.py)."""
    if dask_client is None:
        return model.policy(temperature, floor).probabilities(X)
    from learners.dask_trees import dask_scores

    scores = _Scores(dask_scores(dask_client, model.ensemble_, X))
    return SoftmaxEnsemblePolicy(scores, temperature, floor).probabilities(X)
