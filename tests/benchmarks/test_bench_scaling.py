"""benchmarks/load/scaling.py runs end to end on one Redis and on a 3-node cluster (short
windows; the figures are its business): every figure of each shape is there and sane."""

from __future__ import annotations

import pytest

from benchmarks.load import scaling

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only


def test_scaling_quick_run_measures_each_shape(tmp_path) -> None:
    out = tmp_path / "scaling.json"
    result = scaling.main(["--quick", "--shapes", "redis-1", "cluster-3", "--seconds", "3",
                           "--tail", "3", "--models", "3", "--out", str(out)])
    assert out.is_file()
    assert [run["shape"] for run in result["runs"]] == ["redis-1", "cluster-3"]
    for run in result["runs"]:
        assert run["predicts"] > 0 and run["decisions_per_second"] > 0
        assert run["predict_p99_ms"] >= run["predict_p50_ms"] > 0
        assert run["lags_measured"] > 0 and run["lag_p99_s"] >= run["lag_p50_s"] > 0
        assert run["updates_per_second"] > 0
        assert sum(run["models_per_learner"]) == 3
        assert sum(run["errors"].values()) <= 0.05 * run["predicts"]
    assert result["runs"][1]["models_per_learner"] == [1, 1, 1]  # the models spread out
    text = scaling.report(result)
    assert text.count("\n| ") == 1 + 2  # the header and a row per shape
