"""Fast tests of the agnostic boosting benchmark helpers (benchmarks/paper/table3.py,
binary_streams.py, batch_speed.py, table1_report.py): noise injection, progressive validation, the
booster adapter, the report logic. No long runs; the UCI files are read from
benchmarks/data/seed003."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.paper import binary_streams, table1_report, table3
from benchmarks.paper.binary_streams import (
    BoosterModel,
    RiverModel,
    make_model,
    make_stream,
    progressive_validation,
)
from benchmarks.paper.table3 import best_cells, flip_labels, within_spread
from benchmarks.speed import batch_speed
from boosters.online.oco import OCOBooster

# ---- noise injection -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [7, 100, 351])
@pytest.mark.parametrize("fraction", [0.0, 0.05, 0.1, 0.2, 1.0])
def test_flip_labels_flips_exactly_the_stated_fraction(n, fraction):
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, n)
    original = y.copy()
    noisy = flip_labels(y, fraction, np.random.default_rng(0))
    assert int((noisy != y).sum()) == round(fraction * n)
    assert set(np.unique(noisy)) <= {0, 1}
    assert np.array_equal(y, original)  # the input is left unchanged


def test_flip_labels_is_seeded_and_random():
    y = np.zeros(1000, dtype=int)
    a = flip_labels(y, 0.1, np.random.default_rng(1))
    b = flip_labels(y, 0.1, np.random.default_rng(1))
    c = flip_labels(y, 0.1, np.random.default_rng(2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # the flipped rows are spread over the whole range, not a block
    assert np.flatnonzero(a).min() < 200 and np.flatnonzero(a).max() > 800


@pytest.mark.parametrize("fraction", [-0.1, 1.1])
def test_flip_labels_rejects_bad_fraction(fraction):
    with pytest.raises(ValueError, match="fraction"):
        flip_labels(np.zeros(5, dtype=int), fraction, np.random.default_rng(0))


def test_flip_labels_rejects_non_binary_labels():
    with pytest.raises(ValueError, match="0 or 1"):
        flip_labels(np.array([0, 1, 2]), 0.1, np.random.default_rng(0))


@pytest.mark.parametrize("stream", ["sea", "agrawal"])
def test_stream_noise_is_exact_and_seeded(stream):
    xs, y, clean = make_stream(stream, 0.2, seed=4, rows=300)
    assert len(xs) == 300 and int((y != clean).sum()) == 60
    xs2, y2, _ = make_stream(stream, 0.2, seed=4, rows=300)
    assert xs == xs2 and np.array_equal(y, y2)
    assert make_stream(stream, 0.2, seed=5, rows=300)[0] != xs


def test_real_stream_is_a_shuffle_of_the_dataset():
    X, y = table3.load("ionosphere")
    xs, ys, clean = make_stream("ionosphere", 0.0, seed=1, rows=0)
    assert len(xs) == len(y) and np.array_equal(ys, clean)
    assert sorted(ys.tolist()) == sorted(y.tolist())
    assert not np.array_equal(ys, y)  # shuffled
    with pytest.raises(ValueError, match="unknown stream"):
        make_stream("spambase", 0.0, seed=1, rows=10)


# ---- progressive validation ----------------------------------------------------------------------


class Recorder:
    """Predicts the last label it learnt; logs every call."""

    metrics = ("prediction",)

    def __init__(self):
        self.calls: list[tuple[str, int]] = []
        self.last = 0

    def predict_one(self, x):
        self.calls.append(("predict", x["i"]))
        return (self.last,)

    def learn_one(self, x, y):
        self.calls.append(("learn", x["i"]))
        self.last = y


def test_progressive_validation_predicts_each_example_before_learning_it():
    xs = [{"i": i} for i in range(6)]
    ys = [1, 0, 1, 1, 0, 0]
    model = Recorder()
    preds = progressive_validation(model, xs, ys)
    assert model.calls == [(kind, i) for i in range(6) for kind in ("predict", "learn")]
    # each prediction is the previous label: the current one was not seen yet
    assert preds[:, 0].tolist() == [0, 1, 0, 1, 1, 0]


def test_progressive_validation_checks_lengths():
    with pytest.raises(ValueError, match="labels"):
        progressive_validation(Recorder(), [{"i": 0}], [1, 0])


def test_booster_model_uses_the_decision_it_made():
    model = BoosterModel(OCOBooster(n_learners=4, seed=0))
    x = {"a": 1.0}
    with pytest.raises(RuntimeError, match="predict_one"):
        model.learn_one(x, 1)
    sign, pi = model.predict_one(x)
    assert sign in (0, 1) and pi in (0, 1)
    model.learn_one(x, 1)
    assert model.booster.n_updates == 1
    with pytest.raises(RuntimeError):  # the decision was consumed
        model.learn_one(x, 1)


def test_oco_on_a_stream_is_deterministic_and_learns():
    xs, ys, _ = make_stream("sea", 0.0, seed=1, rows=1500)
    a = progressive_validation(make_model("oco-0.5", seed=3), xs, ys)
    b = progressive_validation(make_model("oco-0.5", seed=3), xs, ys)
    assert np.array_equal(a, b)
    assert set(np.unique(a)) <= {0, 1} and (a[:, 0] == ys).mean() > 0.65  # chance is 0.5


def test_river_model_maps_none_to_class_zero():
    class Untrained:
        def predict_one(self, x):
            return None

    assert RiverModel(Untrained()).predict_one({}) == (0,)
    with pytest.raises(ValueError, match="unknown model"):
        make_model("nope", 0)


def test_binary_report_marks_the_best_and_splits_pi():
    rows = [
        {
            "stream": "sea",
            "noise": 0.1,
            "model": m,
            "seed": s,
            "rows": 100,
            "metrics": metrics,
            "accuracy": acc,
            "clean_accuracy": acc,
            "blocks": [0.5] * 20,
            "seconds": 1.0,
        }
        for s in (1, 2)
        for m, metrics, acc in [
            ("oco-0.5", ["sign", "pi"], [0.8, 0.7]),
            ("ht", ["prediction"], [0.9]),
        ]
    ]
    text = binary_streams.report(rows, "cmd")
    assert "**0.900 ± 0.000**" in text and "0.700 ± 0.000" in text
    assert "clean labels" in text


# ---- table 3 logic -------------------------------------------------------------------------------


def test_within_spread_allows_rounding_only():
    assert within_spread(0.92, (0.90, 0.02)) and within_spread(0.8751, (0.89, 0.02))
    assert not within_spread(0.86, (0.89, 0.02))


def test_best_cells_picks_the_best_mean_over_folds():
    rows = [
        {"dataset": "d", "noise": 0.0, "algorithm": "ours", "T": T, "sigma": 0.1, "accuracy": a}
        for T, accs in [(25, [0.9, 0.7]), (50, [0.85, 0.85])]
        for a in accs
    ]
    best = best_cells(rows)[("d", 0.0, "ours")]
    assert best["T"] == 50 and best["mean"] == pytest.approx(0.85) and best["n"] == 2


def test_run_job_trains_on_noisy_folds_and_tests_on_clean_ones():
    rows = table3.run_job(("ionosphere", 0.2, 0, 3, "kk09", [(25, None)]))
    (row,) = rows
    assert 0.5 < row["accuracy"] <= 1.0 and row["T"] == 25
    # the noisy training labels are what the model fitted: its fit on them is far from perfect
    assert row["train_accuracy_noisy"] < 0.9
    X, y = table3.load("ionosphere")
    train, test = table3.folds(y, 3)[0]
    assert not set(train) & set(test) and len(train) + len(test) == len(y)


def test_adaboost_reference_has_the_recorded_attributes():
    X, y = table3.load("diabetes")
    model = table3.make("adaboost", 10, None, 0).fit(X, y)
    assert model.best_round_ == 10 and 0.7 < model.score(X, y) <= 1.0


# ---- batch speed and the table 1 note ------------------------------------------------------------


def test_batch_speed_measures_both_in_each_repeat():
    (r,) = batch_speed.measure(["ionosphere"], ["kk09"], rounds=5, repeats=2, stump_fits=2)
    assert len(r["ratios"]) == 2 and all(t > 0 for t in r["round_seconds"] + r["stump_seconds"])
    assert r["median_ratio"] == pytest.approx(np.median(r["ratios"]))
    assert "KK09" in batch_speed.report([r], "cmd", "machine")


def test_table1_report_says_the_extension_goes_beyond_the_papers():
    rows = [
        {"dataset": "car", "booster": b, "params": {}, "seconds": 9.0, "last20_accuracy": acc}
        for b, acc in [("oco", 0.9), ("adabandit", 0.95), ("banditbbm", 0.85)]
    ]
    note = table1_report.extension_note(rows, ["adabandit", "oco"])
    assert "beyond the papers" in note and "car 9 s" in note
    assert "car +0.050 / -0.050" in note
    assert table1_report.extension_note(rows, ["adabandit"]) == ""


def test_table1_report_compares_the_two_cores_cell_by_cell():
    def rows(values):
        return [{"booster": b, "dataset": d, "last20_accuracy": v} for (b, d), vs in
                values.items() for v in vs]

    compiled = rows({("adabandit", "car"): [0.95, 0.97], ("adabandit", "mice"): [0.88],
                     ("binbandit", "car"): [0.8]})
    river = rows({("adabandit", "car"): [0.96], ("adabandit", "mice"): [0.90]})
    gaps = table1_report.core_gaps(compiled, river, "last20_accuracy")
    assert gaps == "AdaBandit -0.020 (mice)"  # BinBandit has no River's run to compare with


def test_binary_streams_headline_is_the_observed_table_alone():
    rows = [{"stream": "sea", "noise": 0.1, "model": m, "seed": s, "rows": 100,
             "metrics": ["prediction"], "accuracy": [a], "clean_accuracy": [a + 0.05],
             "blocks": [0.5] * 20, "seconds": 1.0}
            for s in (1, 2) for m, a in [("alg2-0.3", 0.8), ("alg2r-0.3", 0.7)]]
    text = binary_streams.headline(rows, "cmd")
    assert "**0.800 ± 0.000**" in text and "Alg. 2 realizable" in text
    assert "clean labels" not in text and "0.850" not in text  # those are in the notes
    assert "clean labels" in binary_streams.report(rows, "cmd")


def test_a_batch_refit_predicts_with_its_last_fit_on_a_doubling_schedule():
    fits = []

    class Majority:
        def fit(self, X, y):
            fits.append(len(y))
            self.label = int(np.mean(y) >= 0.5)
            return self

        def predict(self, X):
            return np.full(len(X), self.label)

    model = binary_streams.BatchRefit(Majority)
    preds = binary_streams.progressive_validation(model, [{"a": float(i)} for i in range(200)],
                                                  [0, 1] + [0] * 198)
    assert fits == [32, 64, 128] and preds[0, 0] == 1 and preds[-1, 0] == 0


def test_bopl_table2_compares_the_dm_estimate_with_the_truth():
    from benchmarks.paper import bopl_dm

    rows = [{"dataset": "digits", "method": m, "trial": t, "dm_test_reward": dm,
             "test_reward": true}
            for t, (m, dm, true) in enumerate([("boplcs-regr", 0.6, 0.9),
                                               ("boplcs-regr", 0.8, 0.9)])]
    (row,) = bopl_dm.table2(rows)[2:]
    assert "BOPL-CS-regr | 2 | 0.7000 ± 0.1414 | 0.9000 ± 0.0000 | -0.2000" in row
    # SNIPS of the argmax policy: only the logged rows it would have played count
    scores = np.array([[2.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    value = bopl_dm.snips(scores, np.array([0, 1, 0]), np.array([0.5, 0.25, 0.5]),
                          np.array([1.0, 0.0, 1.0]))
    assert value == pytest.approx((1 / 0.5) / (1 / 0.5 + 1 / 0.25))
