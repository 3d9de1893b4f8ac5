"""benchmarks/speed/size_limits.py runs its cases on tiny sizes and reports them (the figures are
its business)."""

from __future__ import annotations

import pytest

from benchmarks.speed import size_limits


def test_cases_measure_tiny_boosters_and_report_them() -> None:
    tiny = [("adabandit", {"k": 5, "n": 3, "repeats": 2}),
            ("banditbbm", {"k": 3, "n": 3, "rounds": 5}),
            ("oco", {"k": 5, "n": 2, "repeats": 2}),
            ("thompson", {"k": 10, "samples": 100, "repeats": 2})]
    results = [(case, a, size_limits.CASES[case](**a)) for case, a in tiny]
    adabandit, banditbbm, oco, thompson = (r for _, _, r in results)
    assert adabandit["learn_s"] > 0 and adabandit["rss_growth"] >= 0
    assert banditbbm["rounds"] == 5 and banditbbm["round_max_s"] >= banditbbm["round_median_s"]
    assert oco["trees"] == 10 and 0 < oco["serving_bytes"] and 0 < oco["pickle_bytes"]
    assert thompson["draws"] == 1000 and thompson["decide_mem"] > 100 * 10 * 8  # the draws
    text = size_limits.report(results, "cmd", 1.0)
    assert "| OCOBandit, 10 trees (5 x 2): one decision |" in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 1 + 1 + 3 + 1  # header, rule and one row per figure


def test_budget_stops_banditbbm_between_rounds() -> None:
    result = size_limits.case_banditbbm(k=3, n=3, rounds=50, budget=0.0)
    assert (result["rounds"], result["of_rounds"]) == (1, 50)


@pytest.mark.slow
def test_child_process_reports_json_and_errors() -> None:
    result = size_limits.run_child("thompson", {"k": 3, "samples": 10, "repeats": 1}, 60)
    assert result["draws"] == 30
    assert "error" in size_limits.run_child("thompson", {"k": 3}, 60)


def test_help_exits_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        size_limits.main(["--help"])
    assert stop.value.code == 0 and "--quick" in capsys.readouterr().out
