"""A learner replay reads the events its validation pass parsed (a short log) or parses the log
again (a long one): the same replay either way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import service.replay.offline as offline
from boosters.base import Decision
from boosters.registry import make_booster
from service.events import decision_event, dumps, joined_event
from service.replay import replay_learner
from service.replay.reading import scan_log


def _log(path: Path, n: int = 400) -> Path:
    rng = np.random.default_rng(3)
    lines = []
    for i in range(n):
        a = int(rng.integers(3))
        x = {"x": float(rng.normal()), "s": ["p", "q"][int(rng.integers(2))]}
        ev = decision_event(f"e{i % (n - 20)}", 0.0, 0, ["a", "b", "c"], x,  # 20 repeated ids
                            Decision(a, np.full(3, 1 / 3)))
        lines.append(dumps(joined_event(ev, reward=float(a == (x["s"] == "p")), label=None,
                                        source="feedback", learn=True, ts=0.0)))
    lines.insert(5, "not json")
    path.write_text("\n".join(lines) + "\n")
    return path


def _replay(path: Path, **kwargs):
    booster = make_booster("adabandit", n_actions=3, n_learners=4, seed=0)
    return replay_learner(path, booster, on_error="skip", **kwargs)


@pytest.mark.parametrize("options", [{}, {"limit": 150}, {"repeated_ids": "keep"}])
def test_kept_and_parsed_again_replay_alike(tmp_path, monkeypatch, options):
    path = _log(tmp_path / "log.jsonl")
    kept = _replay(path, **options)
    monkeypatch.setattr(offline, "KEEP_EVENTS", 10)  # too many events to keep: parsed again
    again = _replay(path, **options)
    assert kept.events == again.events and kept.learned == again.learned
    assert kept.estimates == again.estimates
    assert np.array_equal(kept.curve[1], again.curve[1], equal_nan=True)
    monkeypatch.setattr(offline, "KEEP_EVENTS", 10**6)
    monkeypatch.setattr(offline, "KEEP_BYTES", 100)  # too large a file: parsed again
    assert _replay(path, **options).estimates == kept.estimates


def test_the_validation_pass_keeps_the_replayed_events_when_few(tmp_path):
    path = _log(tmp_path / "log.jsonl")
    scan = scan_log(path, "jsonl", ["a", "b", "c"], keep=1000)
    assert scan.kept is not None and len(scan.kept) == scan.events == 380
    assert [ev.event_id for ev in scan.kept] == [f"e{i}" for i in range(380)]
    assert scan_log(path, "jsonl", ["a", "b", "c"], keep=379).kept is None
    assert scan_log(path, "jsonl", ["a", "b", "c"]).kept is None
    limited = scan_log(path, "jsonl", ["a", "b", "c"], keep=50, limit=50)
    assert len(limited.kept) == limited.events == 50


def test_a_short_log_is_parsed_once(tmp_path, monkeypatch):
    path = _log(tmp_path / "log.jsonl")
    expected = _replay(path)

    def no_second_pass(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(offline, "iter_log", no_second_pass)
    assert _replay(path).estimates == expected.estimates
