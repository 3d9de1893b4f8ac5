"""benchmarks/load/swap_stall.py runs end to end on a small model (the figures are its business)."""

from __future__ import annotations

import pytest

from benchmarks.load import swap_stall

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only


def test_swap_stall_measures_all_three_swaps() -> None:
    result = swap_stall.measure(events=300, repeats=1)
    assert result["same_decisions"]
    assert 0 < result["serving_bytes"] < result["whole_bytes"]
    for name in ("whole", "serving, naive", "serving, replica path"):
        assert result[name]["longest_pause_ms"] > 0
    assert "replica path" in swap_stall.summary(result, "cmd")
