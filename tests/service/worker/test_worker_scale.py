"""The offline worker on bigger hardware: ``worker_device`` (XGBoost on a GPU) and
``worker_dask_scheduler`` (the -regr variants with xgboost.dask), service/training/compute.py and
learners/dask_trees.py. This machine has no GPU: a cuda device must fail at start-up."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from boosters.batch.bopl import BOPLS
from learners.batch_trees import LeastSquaresTree
from service.models.snapshots import dumps_whole, loads
from service.settings import Settings
from service.training import TrainConfig, compute, train_and_evaluate
from service.training.compute import (
    WorkerSetupError,
    check_device,
    connect_dask,
    hold_out_probabilities,
    start_compute,
)
from tests.service.worker.test_worker import ACTIONS, synthetic_events

ROOT = Path(__file__).resolve().parents[3]

pytest.importorskip("distributed", reason="the dask extra: pip install 'boostbandit[dask]'")


def _has_cuda() -> bool:
    import xgboost

    return bool(xgboost.build_info().get("USE_CUDA"))


@pytest.fixture(scope="module")
def dask_client():
    """A LocalCluster of 2 in-process workers (threads: fast to start)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           dashboard_address=None)
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def logged(n: int = 600, k: int = 3, seed: int = 0):
    """Logged bandit data on a grid of feature values (fewer than the bins: exact sketches)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, 3)) * 8) / 8
    best = (X[:, 0] > 0).astype(int) + (X[:, 1] > 1)
    a = rng.integers(0, k, n)
    return X, a, np.full(n, 1 / k), (a == best).astype(float)


# ---- the device ----------------------------------------------------------------------------


@pytest.mark.skipif(_has_cuda(), reason="an XGBoost with CUDA: the GPU check runs for real")
def test_cuda_without_gpu_fails_at_start_up_naming_the_setting():
    with pytest.raises(WorkerSetupError, match="BOOSTBANDIT_WORKER_DEVICE=cuda.*xgboost-cpu"):
        check_device("cuda")
    with pytest.raises(WorkerSetupError, match="use cpu"):
        start_compute(Settings(worker_device="cuda"))


@pytest.mark.slow
@pytest.mark.skipif(_has_cuda(), reason="an XGBoost with CUDA: the GPU check runs for real")
def test_worker_command_with_cuda_exits_at_once_with_one_line(tmp_path):
    env = {**os.environ, "BOOSTBANDIT_WORKER_DEVICE": "cuda",
           "REDIS_URL": "redis://127.0.0.1:1/0", "BOOSTBANDIT_WORKER_METRICS_PORT": "0"}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "from service.cli import app; app()", "worker"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert time.monotonic() - start < 30
    assert done.returncode != 0
    assert done.stderr.startswith("error: BOOSTBANDIT_WORKER_DEVICE=cuda")
    assert "xgboost-cpu" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_bad_device_and_class_variant_on_dask_are_settings_errors():
    with pytest.raises(ValidationError, match="worker_device"):
        Settings(worker_device="gpu")
    with pytest.raises(ValidationError, match="only the -regr variants"):
        Settings(worker_variant="bopls-class", worker_dask_scheduler="local")
    assert Settings(worker_dask_scheduler=" ").worker_dask_scheduler is None
    ok = Settings(worker_variant="bopls-regr", worker_dask_scheduler="tcp://h:8786")
    assert (ok.worker_device, ok.worker_dask_scheduler) == ("cpu", "tcp://h:8786")


def test_cuda_trees_use_hist_and_exact_stays_the_cpu_default():
    assert LeastSquaresTree().params(0)["tree_method"] == "exact"
    gpu = LeastSquaresTree(device="cuda").params(0)
    assert (gpu["tree_method"], gpu["device"]) == ("hist", "cuda")
    with pytest.raises(ValueError, match="not supported on device 'cuda'"):
        LeastSquaresTree(device="cuda", tree_method="exact")
    with pytest.raises(ValueError, match="device must be one of"):
        LeastSquaresTree(device="tpu")


def test_missing_dask_is_a_start_up_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    with pytest.raises(WorkerSetupError, match=r"dask extra.*boostbandit\[dask\]"):
        start_compute(Settings(worker_variant="bopls-regr", worker_dask_scheduler="local"))


@pytest.mark.slow
def test_unreachable_scheduler_is_a_start_up_error(monkeypatch):
    monkeypatch.setattr(compute, "DASK_CONNECT_SECONDS", 0.5)
    with pytest.raises(WorkerSetupError, match="cannot reach the Dask scheduler"):
        connect_dask("tcp://127.0.0.1:1")


def test_class_variant_with_a_client_refuses(dask_client):
    events = synthetic_events(400, seed=1)
    with pytest.raises(ValueError, match="only the -regr variants train on Dask"):
        train_and_evaluate(events, ACTIONS, TrainConfig(variant="bopl-class"),
                           dask_client=dask_client)


# ---- Dask ----------------------------------------------------------------------------------


def test_dask_tree_predicts_as_the_local_hist_tree(dask_client):
    from learners.dask_trees import DaskLeastSquaresTree

    X, a, _, _ = logged()
    rng = np.random.default_rng(3)
    Z = np.column_stack([X, a])
    y, w = rng.normal(size=len(Z)), rng.uniform(0.5, 2.0, size=len(Z))
    local = LeastSquaresTree(max_depth=4, tree_method="hist")
    fitted, pred = local.fit(local.prepare(Z), y, w, seed=0)
    tree = DaskLeastSquaresTree(dask_client, max_depth=4)
    dfitted, dpred = tree.fit(tree.prepare(Z), y, w, seed=0)
    np.testing.assert_allclose(dpred, pred, atol=1e-5)
    np.testing.assert_allclose(dfitted.predict(Z), fitted.predict(Z), atol=1e-5)


@pytest.mark.slow
def test_bopls_regr_on_dask_is_the_local_hist_policy(dask_client):
    from learners.dask_trees import DaskLeastSquaresTree, dask_scores

    X, a, p, r = logged()
    kwargs = dict(n_actions=3, n_rounds=6, reward_translation=-0.3, random_state=0)
    local = BOPLS(base_learner=LeastSquaresTree(max_depth=4, tree_method="hist"),
                  solver="per-round", **kwargs).fit(X, a, p, r)
    dask = BOPLS(base_learner=DaskLeastSquaresTree(dask_client, max_depth=4),
                 **kwargs).fit(X, a, p, r)
    assert dask.solver_ == "per-round" and dask.n_rounds_ == local.n_rounds_ == 6
    np.testing.assert_allclose(dask.objective_, local.objective_, atol=1e-6)
    np.testing.assert_allclose(dask.scores(X), local.scores(X), atol=1e-4)
    np.testing.assert_array_equal(dask.predict(X), local.predict(X))
    # the scores on the workers are the ensemble's own sum
    np.testing.assert_allclose(dask_scores(dask_client, dask.ensemble_, X), dask.scores(X),
                               rtol=0, atol=1e-12)
    # the published policy pickles without its Dask client and serves without Dask
    copy = pickle.loads(pickle.dumps(dask))
    assert copy.base_learner.client is None
    np.testing.assert_array_equal(copy.predict(X), dask.predict(X))


@pytest.mark.slow
def test_worker_training_on_dask_trains_and_evaluates_there(dask_client):
    events = synthetic_events(600, seed=2)
    config = TrainConfig(variant="bopls-regr", n_rounds=5, max_depth=3, reward_model_rounds=10)
    on_dask = train_and_evaluate(events, ACTIONS, config, dask_client=dask_client)
    training = on_dask.meta["training"]
    assert training["solver"] == "per-round" and training["rounds"] == 5
    assert training["base_learner"].startswith("DaskLeastSquaresTree")
    estimates = on_dask.meta["estimates"]
    assert estimates["policy"]["dr"]["value"] > estimates["logging"]["dr"]["value"] + 0.1
    assert on_dask.published
    # the hold-out probabilities from the workers' scores are the policy's own
    model, X = on_dask.bundle.model, np.linspace(-1, 1, 50)[:, None] * np.ones((1, 3))
    np.testing.assert_allclose(
        hold_out_probabilities(model, X, 1.0, 0.02, dask_client),
        model.policy(1.0, 0.02).probabilities(X), rtol=0, atol=1e-12,
    )
    # the published bundle (stored as the worker stores it, read with the allow-list) serves
    # without Dask
    served = loads(dumps_whole(on_dask.bundle))
    assert served.probabilities([{"x": 0.9}], 1.0, 0.02).argmax() == 0
