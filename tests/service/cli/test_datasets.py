"""Tests of the dataset loader (service/sim/datasets.py) and the simulation loop
(service/sim/loop.py)."""

from __future__ import annotations

import errno
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from boosters.base import Decision, OnlineBooster
from boosters.registry import make_booster
from service.sim.datasets import (
    BUNDLED,
    MISSING_NOMINAL,
    Dataset,
    DatasetError,
    load_dataset,
    resolve_path,
)
from service.sim.loop import SimulationResult, shuffled_order, simulate


def write_csv(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- bundled datasets ----------------------------------------------------------------------


def test_balance_is_numeric():
    ds = load_dataset("balance")
    assert ds.name == "balance"
    assert len(ds) == 625 and ds.n_classes == 3
    assert ds.classes == ["B", "L", "R"]
    assert ds.nominal == []
    assert ds.features == ["Left-Weight", "Left-Distance", "Right-Weight", "Right-Distance"]
    assert all(type(v) is float for x in ds.X for v in x.values())
    assert Counter(ds.y.tolist()) == {0: 49, 1: 288, 2: 288}
    assert ds.y.dtype.kind == "i"


def test_car_is_all_nominal():
    ds = load_dataset("car")
    assert (len(ds), ds.n_classes) == (1728, 4)
    assert ds.classes == ["acc", "good", "unacc", "vgood"]
    assert (
        ds.nominal
        == ds.features
        == [
            "buying",
            "maint",
            "doors",
            "persons",
            "lug_boot",
            "safety",
        ]
    )
    assert all(type(v) is str for x in ds.X for v in x.values())
    assert ds.X[0] == {
        "buying": "vhigh",
        "maint": "vhigh",
        "doors": "2",
        "persons": "2",
        "lug_boot": "small",
        "safety": "low",
    }
    # the numeric rule alone would read the number-coded columns as numeric
    auto = load_dataset("car", nominal="auto")
    assert auto.nominal == ["buying", "maint", "lug_boot", "safety"]
    assert auto.X[0]["doors"] == 2.0


def test_nursery_is_all_nominal():
    ds = load_dataset("nursery")
    assert len(ds) == 12960 and len(ds.nominal) == 8 == len(ds.features)
    assert ds.n_classes == 5  # 'recommend' has 2 rows but is a label value


def test_mice_is_numeric():
    ds = load_dataset("mice")
    assert (len(ds), ds.n_classes, len(ds.features)) == (1080, 8, 77)
    assert ds.nominal == []
    assert all(type(v) is float and np.isfinite(v) for x in ds.X for v in x.values())


def test_bundled_names_resolve_to_package_data():
    for name in BUNDLED:
        resolved, path = resolve_path(name)
        assert resolved == name and path.is_file() and path.suffix == ".csv"


def test_path_source_is_named_after_its_stem(tmp_path):
    path = write_csv(tmp_path, "c,a\nx,1\ny,2\n", name="tiny.csv")
    assert load_dataset(path).name == "tiny"
    assert load_dataset(str(path)).name == "tiny"


# --- parsing rules -------------------------------------------------------------------------


def test_missing_values_numeric_and_nominal(tmp_path):
    path = write_csv(
        tmp_path,
        "class,num,nom\na,1.5,red\nb,,blue\na,?,?\nb,NA,\na, 2 ,NA\n",
    )
    ds = load_dataset(path)
    assert ds.nominal == ["nom"]
    assert [x["num"] for x in ds.X] == [1.5, 0.0, 0.0, 0.0, 2.0]
    assert [x["nom"] for x in ds.X] == ["red", "blue", MISSING_NOMINAL, "?", "?"]


def test_column_numeric_only_if_every_value_parses(tmp_path):
    path = write_csv(tmp_path, "class,ints,mixed,sci\na,1,1,1e-3\nb,2,x,-2.5E2\n")
    ds = load_dataset(path)
    assert ds.nominal == ["mixed"]
    assert ds.X[1] == {"ints": 2.0, "mixed": "x", "sci": -250.0}
    assert ds.X[0]["mixed"] == "1"  # a nominal column keeps its raw strings


def test_all_missing_column_is_nominal(tmp_path):
    ds = load_dataset(write_csv(tmp_path, "class,f,g\na,?,1\nb,,2\n"))
    assert ds.nominal == ["f"]
    assert [x["f"] for x in ds.X] == ["?", "?"]


def test_class_mapping_is_sorted(tmp_path):
    path = write_csv(tmp_path, "label,f\nzeta,1\nalpha,2\nmid,3\nalpha,4\n")
    ds = load_dataset(path)
    assert ds.classes == ["alpha", "mid", "zeta"]
    assert ds.y.tolist() == [2, 0, 1, 0]
    # numeric-looking labels sort as strings (documented)
    ds = load_dataset(write_csv(tmp_path, "c,f\n9,1\n10,2\n", name="num.csv"))
    assert ds.classes == ["10", "9"] and ds.y.tolist() == [1, 0]


def test_quoted_fields_bom_and_blank_lines(tmp_path):
    path = tmp_path / "q.csv"
    path.write_bytes('\ufeffclass,"a, b"\n\n"x",1\n  \ny,2\n'.encode())
    ds = load_dataset(path)
    assert ds.features == ["a, b"] and len(ds) == 2


def test_nominal_list_override(tmp_path):
    path = write_csv(tmp_path, "c,a,b\nx,1,2\ny,3,4\n")
    ds = load_dataset(path, nominal=["a"])
    assert ds.nominal == ["a"] and ds.X[0] == {"a": "1", "b": 2.0}
    assert load_dataset(path, nominal="all").nominal == ["a", "b"]
    with pytest.raises(DatasetError, match="no such feature"):
        load_dataset(path, nominal=["zzz"])
    with pytest.raises(DatasetError, match="nominal must be"):
        load_dataset(path, nominal="some")


# --- errors --------------------------------------------------------------------------------

BAD_CSVS = {
    "empty": ("", "empty"),
    "blank": ("\n\n  \n", "empty"),
    "header only": ("class,a,b\n", "no data rows"),
    "one column": ("class\na\nb\n", "at least one feature"),
    "empty class": ("class,a\nx,1\n,2\ny,3\n", "line 3: missing class value"),
    "missing class ?": ("class,a\nx,1\ny,3\n?,2\n", "line 4: missing class value"),
    "one class": ("class,a\nx,1\nx,2\n", "at least 2 classes, found 1"),
    "ragged short": ("class,a,b\nx,1,2\ny,3\n", "line 3: 2 fields, but the header has 3"),
    "ragged long": ("class,a\nx,1\ny,2\nx,3,4\n", "line 4: 3 fields"),
    "duplicate feature": ("class,a,a\nx,1,2\ny,3,4\n", "duplicate feature name"),
    "unnamed feature": ("class,a,\nx,1,2\ny,3,4\n", "header column 3 has no name"),
    "non-finite": ("class,a\nx,1\ny,inf\n", "line 3: non-finite value"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSVS))
def test_bad_csv_raises_one_line_dataset_error(tmp_path, case):
    text, message = BAD_CSVS[case]
    path = write_csv(tmp_path, text)
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert isinstance(info.value, ValueError)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "nope.csv")
    with pytest.raises(DatasetError, match="directory"):
        load_dataset(tmp_path)


def test_unreadable_and_binary_files(tmp_path, monkeypatch):
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"class,a\n\xff\xfe\x00x,1\n")
    with pytest.raises(DatasetError, match="UTF-8"):
        load_dataset(binary)

    locked = write_csv(tmp_path, "class,a\nx,1\ny,2\n", name="locked.csv")

    def refuse(self, *args, **kwargs):  # a permission error, even when running as root
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(DatasetError, match="cannot read dataset .*Permission denied"):
        load_dataset(locked)


# --- simulation protocol -------------------------------------------------------------------


def test_uniform_on_car_is_near_chance_and_deterministic():
    ds = load_dataset("car")
    runs = [
        simulate(make_booster("uniform", n_actions=ds.n_classes, seed=0), ds, dup=2, seed=0)
        for _ in range(2)
    ]
    first, second = runs
    assert first.rounds == 2 * 1728 == first.correct.size
    assert abs(first.accuracy - 0.25) < 0.03
    np.testing.assert_array_equal(first.correct, second.correct)
    assert first.accuracy == second.accuracy and first.last20_accuracy == second.last20_accuracy
    other = simulate(make_booster("uniform", n_actions=4, seed=1), ds, dup=2, seed=1)
    assert not np.array_equal(first.correct, other.correct)


class Recorder(OnlineBooster):
    """Plays action 0 always and records every call."""

    def __init__(self, n_actions: int, full: bool = False):
        self.n_actions = n_actions
        self.full_information = full
        self._rng = np.random.default_rng(0)
        self.calls: list[tuple] = []

    def decide_one(self, x):
        self.calls.append(("decide", x))
        return Decision(0, np.eye(self.n_actions)[0])

    def learn_one(self, x, decision, reward=None, label=None):
        self.calls.append(("learn", x, decision.action, reward, label))


def toy_dataset() -> Dataset:
    X = [{"i": float(i)} for i in range(5)]
    return Dataset("toy", X, np.array([0, 1, 0, 2, 0]), ["a", "b", "c"], [])


@pytest.mark.parametrize("full", [False, True])
def test_stream_order_feedback_and_scoring(full):
    ds = toy_dataset()
    booster = Recorder(3, full=full)
    result = simulate(booster, ds, dup=3, seed=7)
    order = shuffled_order(5, 3, seed=7)
    assert sorted(order.tolist()) == sorted(list(range(5)) * 3)
    expected = np.random.default_rng(7).permutation(15)
    np.testing.assert_array_equal(order, np.tile(np.arange(5), 3)[expected])

    assert len(booster.calls) == 2 * 15
    for t, i in enumerate(order.tolist()):
        decide, learn = booster.calls[2 * t], booster.calls[2 * t + 1]
        assert decide == ("decide", ds.X[i])
        _, x, action, reward, label = learn
        assert x is ds.X[i] and action == 0
        y = int(ds.y[i])
        if full:
            assert (reward, label) == (None, y) and type(label) is int
        else:
            assert label is None and reward == (1.0 if y == 0 else 0.0)
        assert result.correct[t] == (y == 0)
    assert result.accuracy == pytest.approx(9 / 15)


def test_simulate_rejects_bad_arguments():
    ds = toy_dataset()
    with pytest.raises(ValueError, match="actions"):
        simulate(Recorder(4), ds, dup=1, seed=0)
    with pytest.raises(ValueError, match="dup"):
        simulate(Recorder(3), ds, dup=0, seed=0)


def test_result_summaries_and_moving_average():
    correct = np.array([1, 0, 0, 1, 1, 1, 0, 1, 1, 1], dtype=bool)
    r = SimulationResult.from_correct(correct, seconds=2.0)
    assert (r.rounds, r.accuracy, r.rounds_per_second) == (10, 0.7, 5.0)
    assert r.last20_accuracy == 1.0  # rounds 9 and 10: 10 - int(0.8 * 10) = 2 rounds
    steps, values = r.moving_average()
    assert steps.tolist() == list(range(2, 11))
    np.testing.assert_allclose(values, [0.5, 0, 0.5, 1, 1, 0.5, 0.5, 1, 1])
    steps, values = r.moving_average(window=10)
    assert steps.tolist() == [10] and values.tolist() == [0.7]
    with pytest.raises(ValueError):
        r.moving_average(window=11)
    with pytest.raises(ValueError):
        r.moving_average(window=0)
    # odd lengths: the last 20% is rounds - int(0.8 * rounds)
    r = SimulationResult.from_correct(np.ones(7, dtype=bool), seconds=0.0)
    assert r.last20_accuracy == 1.0 and np.isfinite(r.rounds_per_second)
    assert set(r.summary()) == {
        "rounds",
        "accuracy",
        "last20_accuracy",
        "seconds",
        "rounds_per_second",
    }


def test_progress_bar_goes_to_stderr(capsys):
    ds = toy_dataset()
    simulate(Recorder(3), ds, dup=2, seed=0, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "10/10" in captured.err
    simulate(Recorder(3), ds, dup=2, seed=0, progress=False)
    assert capsys.readouterr().err == ""
