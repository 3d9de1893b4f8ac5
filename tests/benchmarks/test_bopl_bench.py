"""Data conversion of the BOPL reproduction (benchmarks/paper/bopl_repro.py) and the speed helpers.

Paper: London et al. 2023, *Boosted Off-Policy Learning*, Sec. 5 and Appendix F (splits, logging
policy, reward structure, propensity floor) and the alpha identity of Algorithm 3, which must
survive the hist split method.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from benchmarks.paper import bopl_repro as br
from benchmarks.speed import bopl_speed as bs
from boosters.batch.bopl import BOPLS
from service.sim import fashion

# ------------------------------------------------------------------ rewards (App. F.4)


def test_fashion_near_miss_groups():
    R = br.near_miss_rewards(np.arange(10), 10, br.FASHION_GROUPS)
    assert np.array_equal(np.diag(R), np.ones(10))
    quarter = {tuple(sorted(map(int, np.flatnonzero(row == 0.25)))) for row in R}
    # coat<->pullover, T-shirt<->shirt, each footwear with the other two; singletons get nothing
    assert R[2, 4] == R[4, 2] == R[0, 6] == R[6, 0] == 0.25
    assert R[5, 7] == R[5, 9] == R[7, 9] == R[9, 5] == 0.25
    assert R[1].sum() == R[3].sum() == R[8].sum() == 1.0
    assert quarter == {(4,), (2,), (0,), (6,), (7, 9), (5, 9), (5, 7), ()}
    assert set(np.unique(R)) == {0.0, 0.25, 1.0}


def test_near_miss_rejects_bad_input():
    with pytest.raises(ValueError, match="labels"):
        br.near_miss_rewards(np.array([0, 10]), 10)
    with pytest.raises(ValueError, match="disjoint"):
        br.near_miss_rewards(np.array([0]), 4, groups=((0, 1), (1, 2)))


def test_multilabel_rewards_and_errors():
    Y = np.array([[1, 0, 1, 0], [0, 0, 0, 1]])
    R = br.multilabel_rewards(Y)
    assert R.dtype == np.float64 and np.array_equal(R, Y)
    with pytest.raises(ValueError, match="at least one"):
        br.multilabel_rewards(np.array([[0, 0], [1, 0]]))
    with pytest.raises(ValueError, match="0/1"):
        br.multilabel_rewards(np.array([[2, 0]]))


# ------------------------------------------------------------------ Fashion-MNIST files


def _write_idx(path: Path, data: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, data.ndim]) + struct.pack(f">{data.ndim}i", *data.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + data.astype(np.uint8).tobytes())


def test_read_idx_and_load_fashion(tmp_path):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(5, 28, 28))
    labels = np.array([0, 9, 3, 3, 1])
    for split in ("train", "t10k"):
        _write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", imgs)
        _write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", labels)
    assert fashion.read_idx(tmp_path / "train-images-idx3-ubyte.gz").shape == (5, 28, 28)
    Xtr, ytr, Xte, yte = fashion.load_fashion(tmp_path)
    assert Xtr.shape == (5, 784) and Xtr.max() <= 1.0 and np.array_equal(ytr, labels)
    np.testing.assert_allclose(Xte[1], imgs[1].ravel() / 255.0)


def test_missing_fashion_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        fashion.load_fashion(tmp_path)


def test_read_idx_rejects_truncated(tmp_path):
    path = tmp_path / "bad.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(bytes([0, 0, 8, 1]) + struct.pack(">i", 10) + bytes(3))
    with pytest.raises(ValueError, match="header says"):
        fashion.read_idx(path)


# ------------------------------------------------------------------ logging policy (App. F.3)


def _toy(n: int = 400, k: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    X = np.eye(k)[y] + rng.normal(0, 0.5, size=(n, k))
    return X, br.near_miss_rewards(y, k, groups=((0, 1),))


def test_logging_propensities_sum_to_one_and_are_floored():
    X, R = _toy()
    bandit = br.to_bandit(X, R, seed=3, C=1.0, epsilon=0.2)
    P = bandit.logging.probabilities(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert P.min() >= 0.2 / 4 - 1e-12
    # the logged propensity is the probability of the logged action under that very policy
    np.testing.assert_allclose(
        bandit.propensities, bandit.logging.probabilities(bandit.X)[np.arange(360), bandit.actions]
    )
    assert bandit.n_logging_rows == 40 and bandit.X.shape[0] == 360


def test_logged_rewards_come_from_the_reward_matrix_and_seed_is_deterministic():
    X, R = _toy()
    a = br.to_bandit(X, R, seed=1, C=1.0)
    b = br.to_bandit(X, R, seed=1, C=1.0)
    c = br.to_bandit(X, R, seed=2, C=1.0)
    assert np.array_equal(a.actions, b.actions) and np.array_equal(a.rewards, b.rewards)
    assert not np.array_equal(a.actions, c.actions)
    assert set(np.unique(a.rewards)) <= {0.0, 0.25, 1.0}
    # strong regularisation keeps the logging policy far from deterministic
    weak = br.to_bandit(X, R, seed=1, C=1e-4)
    assert weak.logging.probabilities(X).max() < a.logging.probabilities(X).max()


def test_multilabel_logging_gives_absent_labels_the_floor_only():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    Y = np.zeros((300, 5), dtype=int)
    Y[:, 0] = 1
    Y[X[:, 0] > 0, 1] = 1  # labels 2-4 never occur
    policy = br.fit_logging_policy(X, br.multilabel_rewards(Y), C=1.0, min_propensity=0.01)
    P = policy.probabilities(X)
    np.testing.assert_allclose(P[:, 2:], 0.01)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    # the label-1 rows push probability to action 1
    assert P[X[:, 0] > 1, 1].mean() > P[X[:, 0] < -1, 1].mean()


def test_logging_needs_two_labels():
    X = np.zeros((10, 2))
    R = br.near_miss_rewards(np.zeros(10, dtype=int), 3)
    with pytest.raises(ValueError, match="two distinct"):
        br.fit_logging_policy(X, R, C=1.0, min_propensity=0.0)


# ------------------------------------------------------------------ methods and curves


def test_hist_tree_keeps_alpha_identity_and_staged_scores_add_up():
    X, R = _toy(n=300)
    bandit = br.to_bandit(X, R, seed=0, C=1.0)
    hp = dict(rounds=5, max_depth=4, min_child_weight=1.0, reg_lambda=0.0, c=-0.3)
    model = br.make_method("bopls-regr", hp, 4, seed=0, tree_method="hist")
    model.fit(bandit.X, bandit.actions, bandit.propensities, bandit.rewards)
    assert isinstance(model, BOPLS) and model.solver_ == "xgb-objective"
    np.testing.assert_allclose(model.alphas_, 1.0, rtol=1e-5)  # Algorithm 3, kappa = 1
    Z = br.augment_actions(X, 4).astype(np.float32)
    stages = [F.copy() for F in br.staged_scores(model, Z, 4)]
    assert len(stages) == 5
    np.testing.assert_allclose(stages[-1], model.scores(X), atol=1e-4)


def test_staged_scores_of_classification_variant_and_argmax_reward():
    X, R = _toy(n=200)
    bandit = br.to_bandit(X, R, seed=0, C=1.0)
    hp = dict(rounds=4, max_depth=3, min_child_weight=2, c=-0.2)
    model = br.make_method("bopl-class", hp, 4, seed=0, tree_method="exact")
    model.fit(bandit.X, bandit.actions, bandit.propensities, bandit.rewards)
    Z = br.augment_actions(X, 4).astype(np.float32)
    last = list(br.staged_scores(model, Z, 4))[-1]
    np.testing.assert_allclose(last, model.scores(X), atol=1e-6)
    assert br.argmax_reward(np.eye(4)[[0, 1]], R[:2]) == float(R[[0, 1], [0, 1]].mean())


@pytest.mark.parametrize("method", br.NEURAL)
def test_neural_baselines_take_table_5_rows_and_score_once(method):
    hp = dict(br.HYPERPARAMETERS["yeast"][method], layers=1, width=8, epochs=3)
    model = br.make_method(method, hp, 4, seed=0)
    assert (model.dropout, model.weight_decay, model.learning_rate, model.patience) == (
        hp["dropout"], hp["weight_decay"], 0.01, 10)
    assert getattr(model, "reward_translation", -0.2) == -0.2  # Table 5, Scene column
    X, R = _toy(n=200)
    bandit = br.to_bandit(X, R, seed=0, C=1.0)
    model.fit(bandit.X, bandit.actions, bandit.propensities, bandit.rewards)
    stages = list(br.staged_scores(model, br.augment_actions(X, 4).astype(np.float32), 4))
    assert len(stages) == 1
    np.testing.assert_allclose(stages[0], model.scores(X), atol=1e-4)


def test_plan_names_mark_departures_from_the_paper():
    assert br.Unit("fashion", "bopl-regr", 0).plan == "paper"
    assert br.Unit("fashion", "bopl-regr", 0, "hist", 5000).plan == "hist256,rows=5000"
    assert br.Unit("fashion", "bopls-regr", 0, "hist", None, 2, 64).plan == "hist64,pool2"
    assert br.Unit("fashion", "bopl-class", 0, "hist", 5000, 2, 64).plan == "pool2,rows=5000"
    assert br.Unit("fashion", "logging", 0, "hist", 5000, 2).plan == "paper"


# ------------------------------------------------------------------ speed benchmark helpers


def test_synthetic_events_are_valid_logged_data():
    a, p, r, target, rhat = bs.synthetic_events(1000, 5, seed=0)
    assert a.shape == p.shape == r.shape == (1000,)
    np.testing.assert_allclose(target.sum(axis=1), 1.0)
    assert np.all((p > 0) & (p <= 1)) and rhat.shape == (1000, 5)
    # the logged propensity is one of the logging distribution's entries: mean 1/p ~ k
    assert 3.0 < float(np.mean(1.0 / p)) < 8.0


def test_ope_throughput_rows_cover_every_estimator():
    rows = bs.ope_throughput(2000, 4, repeats=1)
    assert [r["estimator"] for r in rows] == list(bs.ESTIMATORS)
    assert all(r["events_per_second"] > 0 and 0.0 <= r["value"] <= 1.5 for r in rows)


def test_first_round_problem_matches_bopls_targets():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    a = rng.integers(0, 4, size=50)
    p = np.full(50, 0.25)
    r = (a == 0).astype(float)
    y, w = bs.first_round_problem(X, a, p, r, 4)
    # F_0 = 0: positive rewards (r' = 0.6) target g = e_a - 1/4; negative ones -2 q g, q = 1/4
    rows = y.reshape(50, 4)
    pos, neg = np.flatnonzero(r == 1)[0], np.flatnonzero(r == 0)[0]
    np.testing.assert_allclose(rows[pos], np.eye(4)[a[pos]] - 0.25)
    np.testing.assert_allclose(rows[neg], -0.5 * (np.eye(4)[a[neg]] - 0.25))
    np.testing.assert_allclose(w.reshape(50, 4)[neg], 0.4 * 0.5 / 0.25)


def test_a_unit_done_twice_counts_once(tmp_path) -> None:
    rows = [
        {"dataset": "digits", "method": "logging", "trial": 0, "plan": "paper", "test_reward": 0.4},
        {"dataset": "digits", "method": "logging", "trial": 1, "plan": "paper", "test_reward": 0.5},
        {"dataset": "digits", "method": "logging", "trial": 0, "plan": "paper", "test_reward": 0.4},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    assert [r["trial"] for r in br.read_rows(path)] == [0, 1]
