"""Replaying a log of a model with action features: each event's own candidate set,
through a fresh :class:`~boosters.online.adf.ActionFeatureBooster` (``boostbandit replay learner
LOG --booster adf``): rejection replay on a uniform log, importance-weighted otherwise, the
event's excluded candidates never played (docs/replay.md, "Candidate sets")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from boosters.online.adf import ActionFeatureBooster
from boosters.registry import make_booster
from service.cli import app as cli
from service.cli.replay import ACTION_FEATURES_BOOSTER
from service.domain import ACTION_FEATURES_BOOSTER as DOMAIN_BOOSTER
from service.events import dumps
from service.formats import to_dsjson
from service.replay import ReplayError, iter_log, replay_learner
from service.replay.offline import replay_events
from service.replay.reading import LoggedEvent
from tests.service.eventlog.test_dsjson_adf import CATS, adf_event

N = 1500


def logged(n: int, seed: int, uniform: bool = True) -> list[dict]:
    """Decisions over 2 to 4 candidates; reward 1 iff the candidate's ``cat`` is the context's
    ``pref``. ``uniform``: logged uniformly at random, else favouring the first candidate
    (probability 0.7) whatever it is; every fifth event excludes its last candidate."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(2, 5))
        context = {"pref": CATS[rng.integers(3)], "user.age": round(float(rng.random()), 2)}
        items = [{"cat": CATS[rng.integers(3)], "price": round(float(rng.random()), 2)}
                 for _ in range(k)]
        excluded = [k - 1] if i % 5 == 4 else []
        allowed = k - len(excluded)
        if uniform or allowed == 1:
            p = [1 / allowed] * allowed
        else:
            p = [0.7] + [0.3 / (allowed - 1)] * (allowed - 1)
        p += [0.0] * len(excluded)
        chosen = int(rng.choice(k, p=p))
        reward = float(items[chosen]["cat"] == context["pref"])
        out.append(adf_event(seed * 100000 + i, context, items, chosen, p, reward,
                             excluded=excluded))
    return out


def write(path: Path, events: list[dict], fmt: str) -> Path:
    lines = [dumps(ev if fmt == "jsonl" else to_dsjson(ev, "m")) for ev in events]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def uniform_log(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return logged(N, 1)


def test_the_cli_names_the_domain_booster() -> None:
    assert ACTION_FEATURES_BOOSTER == DOMAIN_BOOSTER


@pytest.mark.slow
def test_rejection_replay_over_each_events_candidates(uniform_log, tmp_path: Path) -> None:
    results = {}
    for fmt in ("dsjson", "jsonl"):
        path = write(tmp_path / f"log.{fmt}", uniform_log, fmt)
        results[fmt] = replay_learner(path, ActionFeatureBooster(seed=0, grace_period=20),
                                      name="adf")
    result = results["dsjson"]
    assert result.mode == "rejection" and result.uniform_log and result.events == N
    assert result.actions == [] and result.learned == result.matches
    # a match has the logged probability 1 / (allowed candidates): about sum 1/k events match
    expected = sum(1 / (len(ev["bb"]["actions"]) - len(ev["bb"].get("excluded", [])))
                   for ev in uniform_log)
    assert abs(result.matches - expected) < 4 * np.sqrt(expected), (result.matches, expected)
    # the booster learns the rule from the matched events: it earns more than the log
    replayed, logged_mean = result.estimates["replay"].value, result.estimates["logged"].value
    # measured (deterministic): 0.506 against the log's 0.327 for booster seed 0, the one
    # here; seeds 1, 2, 3: 0.562, 0.521, 0.559 (the margin asked is below the smallest, 0.18)
    assert replayed >= logged_mean + 0.12, (replayed, logged_mean)
    # DSJSON and our jsonl are the same events: the same replay
    other = results["jsonl"]
    assert (other.matches, other.estimates["replay"].value) == (result.matches, replayed)


def test_weighted_replay_of_a_skewed_log(tmp_path: Path) -> None:
    path = write(tmp_path / "skewed.dsjson", logged(600, 2, uniform=False), "dsjson")
    result = replay_learner(path, ActionFeatureBooster(seed=0))
    assert result.mode == "weighted" and not result.uniform_log
    assert result.learned == result.events == 600  # every event is learned, weighted or not
    assert {"snips", "ips", "logged"} <= set(result.estimates)
    assert result.estimates["snips"].value is not None and result.ess > 0


def test_excluded_candidates_are_never_played() -> None:
    # the logged choice is the only allowed candidate: every decision must match it, surely
    events = [LoggedEvent(i, f"x{i}", {"pref": "x"}, 1, 1.0, 1.0, np.array([0.0, 1.0, 0.0]),
                          np.array([False, True, False]),
                          ({"cat": "x"}, {"cat": "y"}, {"cat": "z"})) for i in range(30)]
    stream = replay_events(ActionFeatureBooster(seed=0), events, "rejection", len(events))
    assert stream.matched.all() and (stream.target == 1.0).all() and stream.learned == 30


def test_iter_log_reads_candidates_without_actions(uniform_log, tmp_path: Path) -> None:
    path = write(tmp_path / "log.dsjson", uniform_log[:10], "dsjson")
    events = [ev for _, ev in iter_log(path, "dsjson", [])]
    assert [list(ev.candidates) for ev in events] == \
        [ev["bb"]["candidates"] for ev in uniform_log[:10]]
    assert [len(ev.allowed) for ev in events] == [len(ev["bb"]["actions"])
                                                  for ev in uniform_log[:10]]
    assert not events[4].allowed[-1] and events[4].probabilities[-1] == 0.0


def test_refusals(uniform_log, tmp_path: Path) -> None:
    path = write(tmp_path / "log.dsjson", uniform_log[:20], "dsjson")
    with pytest.raises(ValueError, match="give no actions"):
        replay_learner(path, ActionFeatureBooster(), actions=["a", "b"])
    # a fixed-action booster cannot replay per-event candidate sets
    booster = make_booster("uniform", n_actions=len(uniform_log[0]["bb"]["actions"]))
    with pytest.raises(ReplayError, match="own candidates.*--booster adf"):
        replay_learner(path, booster)
    with pytest.raises(ReplayError, match="unknown action"):  # its actions given: line errors
        replay_learner(path, booster, actions=uniform_log[0]["bb"]["actions"])
    fixed = tmp_path / "fixed.jsonl"
    no_candidates = [json.loads(dumps(ev)) for ev in uniform_log[:3]]
    for ev in no_candidates:
        del ev["bb"]["candidates"]
    fixed.write_text("\n".join(map(dumps, no_candidates)) + "\n")
    with pytest.raises(ReplayError, match="missing bb.candidates"):
        replay_learner(fixed, ActionFeatureBooster())


def test_cli_replays_a_log_with_candidates(uniform_log, tmp_path: Path) -> None:
    path = str(write(tmp_path / "log.dsjson", uniform_log[:300], "dsjson"))
    result = CliRunner().invoke(cli, ["replay", "learner", path, "--booster", "adf",
                                      "--param", "n_trees=2", "--seed", "4", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["mode"] == "rejection" and out["events"] == 300
    assert out["params"] == {"seed": 4, "n_trees": 2}
    table = CliRunner().invoke(cli, ["replay", "learner", path, "--booster", "adf"])
    assert table.exit_code == 0 and "rejection" in table.stdout
    for args, words in [(["--actions", "a,b"], "give no --actions"),
                        (["--gamma", "0.5"], "--param"),
                        (["--param", "n_trees=0"], "cannot build booster 'adf'")]:
        bad = CliRunner().invoke(cli, ["replay", "learner", path, "--booster", "adf", *args])
        assert bad.exit_code == 2 and words in bad.output, bad.output
