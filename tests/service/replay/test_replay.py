"""``boostbandit replay`` (service/replay/): learner, fixed-policy and live-service replays of
simulated logs whose true values are known, line errors, determinism, and the CLI."""

from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from boosters.base import Decision, OnlineBooster, check_context
from boosters.exploration import restrict
from boosters.registry import make_booster
from service.api.app import create_app
from service.cli import app as cli
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.events import decision_event, dumps, joined_event
from service.formats import to_dsjson
from service.replay import (
    ReplayError,
    detect_format,
    infer_actions,
    iter_log,
    load_policy,
    replay_learner,
    replay_policy,
    replay_target,
    scan_log,
)
from service.settings import Settings
from service.training import TrainConfig, train_and_evaluate

ACTIONS = ["a", "b", "c"]

# --- a simulated world with known values -------------------------------------------------------
# x ~ U(-1, 1); one correct action per context, as in Zhang et al. 2019's bandit setting:
# a for x > 1/3, b for x < -1/3, c in between; reward 1 for the correct action, else 0.

SKEWED_VALUE = 0.6 / 3 + 0.1 / 6 + 0.6 / 6 + 0.3 / 3  # the skewed logging policy's value


def label(x: float) -> int:
    """The correct action of context ``x``."""
    return 0 if x > 1 / 3 else (1 if x < -1 / 3 else 2)


def mean_reward(x: float) -> np.ndarray:
    """E[r | x, a] for the three actions."""
    return np.eye(3)[label(x)]


def skewed(x: float) -> np.ndarray:
    """A non-uniform logging policy with full support (value SKEWED_VALUE = 0.4167)."""
    return np.array([0.6, 0.3, 0.1]) if x > 0 else np.array([0.1, 0.3, 0.6])


def uniform(x: float) -> np.ndarray:
    """Uniform logging (value 1/3)."""
    return np.full(3, 1 / 3)


class Fixed(OnlineBooster):
    """A known, non-learning policy: 0.7 on a for x > 0 (on b for x <= 0), 0.2 on the other of
    the two, 0.1 on c. Its value is 2/3 * 0.7 + 1/3 * 0.1 = 0.5.
    """

    VALUE = 0.5

    def __init__(self, n_actions: int = 3, seed: int = 0, always: int | None = None) -> None:
        self.n_actions, self.always = n_actions, always
        self._rng = np.random.default_rng(seed)
        self.learned = 0

    def probabilities(self, x: dict) -> np.ndarray:
        if self.always is not None:
            return np.eye(3)[self.always]
        return np.array([0.7, 0.2, 0.1]) if x["x"] > 0 else np.array([0.2, 0.7, 0.1])

    def decide_one(self, x: dict, *, allowed=None, rng=None) -> Decision:
        check_context(x)
        p = self.probabilities(x)
        if allowed is not None:
            p = restrict(p, np.asarray(allowed))
        return Decision(int((rng or self._rng).choice(3, p=p)), p)

    def learn_one(self, x, decision, reward=None, label=None) -> None:
        self._feedback(decision, reward, label)
        self.learned += 1


def simulate_log(
    n: int,
    seed: int,
    logging=uniform,
    excluded: list[int] | None = None,
    colour: bool = True,
) -> list[dict[str, Any]]:
    """``n`` joined events of the simulated world logged by ``logging``."""
    rng = np.random.default_rng(seed)
    events = []
    for i in range(n):
        x = float(rng.uniform(-1, 1))
        p = logging(x)
        if excluded:
            p = p.copy()
            p[excluded] = 0.0
            p /= p.sum()
        a = int(rng.choice(3, p=p))
        reward = float(rng.random() < mean_reward(x)[a])
        context: dict[str, Any] = {"x": x}
        if colour:
            context["colour"] = "red" if x > 0.5 else "blue"
        ev = decision_event(
            f"s{seed}-{i}", 1.7e9 + i, 0, ACTIONS, context, Decision(a, p), excluded=excluded
        )
        events.append(
            joined_event(ev, reward=reward, label=None, source="feedback", learn=True, ts=1.7e9 + i)
        )
    return events


def write_log(path: Path, events: list[dict[str, Any]], fmt: str = "jsonl") -> Path:
    """Write ``events`` as our JSON lines, DSJSON or an OBP CSV."""
    if fmt == "obp":
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["event_id", "x", "colour", "action", "reward", "pscore"])
            for ev in events:
                writer.writerow(
                    [
                        ev["EventId"],
                        repr(ev["c"]["x"]),
                        ev["c"].get("colour", ""),
                        ev["bb"]["action_id"],
                        ev["bb"]["reward"],
                        repr(ev["_label_probability"]),
                    ]
                )
        return path
    with open(path, "w") as handle:
        for ev in events:
            handle.write(dumps(ev if fmt == "jsonl" else to_dsjson(ev, "sim")) + "\n")
    return path


@pytest.fixture(scope="module")
def uniform_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_log(tmp_path_factory.mktemp("replay") / "uniform.jsonl", simulate_log(3000, 1))


@pytest.fixture(scope="module")
def skewed_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_log(
        tmp_path_factory.mktemp("replay") / "skewed.jsonl", simulate_log(3000, 2, skewed)
    )


# --- learner replay: known values --------------------------------------------------------------


def test_rejection_sampling_estimates_a_known_policy(uniform_log: Path) -> None:
    result = replay_learner(uniform_log, Fixed(seed=3), name="fixed")
    assert (result.mode, result.uniform_log, result.events) == ("rejection", True, 3000)
    est = result.estimates["replay"]
    assert est.covers(Fixed.VALUE)
    assert not est.covers(1 / 3)  # the logging policy's value is outside: the test can fail
    assert est.n == result.matches == result.learned
    assert 900 < result.matches < 1100  # about 1/3 of the events are kept
    assert result.estimates["logged"].covers(1 / 3)
    assert result.primary == "replay"


def test_weighted_estimate_of_a_known_policy_on_a_skewed_log(skewed_log: Path) -> None:
    booster = Fixed(seed=4)
    result = replay_learner(skewed_log, booster)
    assert (result.mode, result.uniform_log) == ("weighted", False)
    assert result.estimates["snips"].covers(Fixed.VALUE)
    assert result.estimates["ips"].covers(Fixed.VALUE)
    assert not result.estimates["snips"].covers(SKEWED_VALUE)
    assert result.estimates["logged"].covers(SKEWED_VALUE)
    # off-policy learning: every event is learned, with the logged propensity
    assert result.learned == booster.learned == 3000
    assert 0 < result.ess < 3000
    assert 0 < result.matches < 3000


@pytest.mark.slow
def test_intervals_cover_the_true_value_over_seeds(tmp_path: Path) -> None:
    """Coverage of the 95% intervals over 12 simulated logs per mode: at least 10 of 12."""
    covered = {"replay": 0, "snips": 0}
    for seed in range(12):
        log = write_log(tmp_path / f"u{seed}.jsonl", simulate_log(600, 100 + seed))
        covered["replay"] += replay_learner(log, Fixed(seed=seed)).estimates["replay"].covers(0.5)
        log = write_log(tmp_path / f"s{seed}.jsonl", simulate_log(600, 200 + seed, skewed))
        covered["snips"] += replay_learner(log, Fixed(seed=seed)).estimates["snips"].covers(0.5)
    assert covered["replay"] >= 10 and covered["snips"] >= 10, covered


def test_forcing_a_mode(uniform_log: Path, skewed_log: Path) -> None:
    forced = replay_learner(uniform_log, Fixed(seed=3), mode="weighted")
    assert forced.mode == "weighted" and forced.learned == 3000
    assert forced.estimates["snips"].covers(Fixed.VALUE)
    biased = replay_learner(skewed_log, Fixed(seed=3), mode="rejection")
    assert biased.mode == "rejection" and any("not uniform" in n for n in biased.notes)
    with pytest.raises(ValueError, match="mode must be"):
        replay_learner(uniform_log, Fixed(), mode="both")  # type: ignore[arg-type]


def test_replay_is_deterministic_by_seed(skewed_log: Path) -> None:
    def run(seed: int) -> dict[str, Any]:
        booster = make_booster("egreedy_tree", n_actions=3, seed=seed)
        out = replay_learner(skewed_log, booster, limit=500).to_dict()
        for key in ("seconds", "scan_seconds", "events_per_second"):
            out.pop(key)
        return out

    first = run(5)
    assert first == run(5)
    other = run(6)
    # the tree's probabilities do not depend on its draws, so neither does the weighted
    # estimate; its drawn actions (the matches) do
    assert first["matches"] != other["matches"]
    assert first["estimates"] == other["estimates"]


@pytest.mark.slow
def test_a_booster_learns_through_both_replays(uniform_log: Path, skewed_log: Path) -> None:
    # the world is learnable from x: a learner ends well above the logging policy
    ada = replay_learner(
        uniform_log, make_booster("adabandit", n_actions=3, n_learners=3, rho=0.1, seed=1)
    )
    assert ada.mode == "rejection"
    assert ada.estimates["replay"].value > ada.estimates["logged"].high
    tree = replay_learner(skewed_log, make_booster("egreedy_tree", n_actions=3, seed=1))
    assert tree.mode == "weighted" and tree.learned == tree.events
    assert tree.estimates["snips"].low > SKEWED_VALUE + 0.2


def test_excluded_actions_are_respected(tmp_path: Path) -> None:
    log = write_log(tmp_path / "excl.jsonl", simulate_log(900, 7, excluded=[2]))
    scan = scan_log(log, "jsonl", ACTIONS)
    assert scan.uniform and scan.events == 900  # uniform over the two allowed actions
    result = replay_learner(log, Fixed(seed=1, always=2))  # always c, which is excluded
    assert result.mode == "rejection"
    assert 380 < result.matches < 520  # decided between a and b: half the events match


def test_bad_arguments(uniform_log: Path) -> None:
    with pytest.raises(ValueError, match="limit must be an integer >= 1"):
        replay_learner(uniform_log, Fixed(), limit=0)
    with pytest.raises(ValueError, match="level must be a number in"):
        replay_learner(uniform_log, Fixed(), level=1.5)
    with pytest.raises(ValueError, match="format must be"):
        replay_learner(uniform_log, Fixed(), fmt="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_error must be"):
        replay_learner(uniform_log, Fixed(), on_error="ignore")  # type: ignore[arg-type]


def test_full_information_boosters_and_wrong_action_counts_are_refused(uniform_log: Path) -> None:
    with pytest.raises(ValueError, match="full-information"):
        replay_learner(uniform_log, make_booster("adaboostolm", n_actions=3, seed=0))
    with pytest.raises(ValueError, match="the booster has 4 actions but the log has 3"):
        replay_learner(uniform_log, make_booster("uniform", n_actions=4, seed=0))


# --- formats -----------------------------------------------------------------------------------


def test_the_three_formats_give_the_same_replay(tmp_path: Path) -> None:
    events = simulate_log(400, 9)
    results = {}
    for fmt, name in (("jsonl", "log.jsonl"), ("dsjson", "log.json"), ("obp", "log.csv")):
        path = write_log(tmp_path / name, events, fmt)
        assert detect_format(path) == fmt
        assert infer_actions(path, fmt) == ACTIONS
        result = replay_learner(path, Fixed(seed=2))
        assert result.format == fmt and result.events == 400
        results[fmt] = result.estimates["replay"]
    assert results["jsonl"] == results["dsjson"] == results["obp"]


def test_actions_that_cannot_be_inferred(tmp_path: Path) -> None:
    line = to_dsjson(simulate_log(1, 0)[0], "sim")
    for item in line["c"]["_multi"]:
        del item["_tag"], item["Action"]
    path = tmp_path / "untagged.json"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ReplayError, match="--actions"):
        infer_actions(path, "dsjson")
    result = replay_learner(path, Fixed(), actions=ACTIONS)  # given explicitly: fine
    assert result.events == 1


# --- bad lines ---------------------------------------------------------------------------------


def _bad_log(tmp_path: Path) -> Path:
    good = [dumps(ev) for ev in simulate_log(8, 3)]

    def edit(i: int, **changes: Any) -> str:
        obj = json.loads(good[i])
        for key, value in changes.items():
            if value is None:
                obj.pop(key)
            else:
                obj[key] = value
        return dumps(obj)

    unknown = json.loads(good[5])
    unknown["bb"]["actions"] = ["a", "b", "zzz"]
    lines = [
        good[0],
        '{"EventId": "broken", ',  # line 2
        edit(2, _label_probability=0.0),  # line 3
        edit(3, _label_probability=1.5),  # line 4
        edit(4, _label_probability=None),  # line 5
        dumps(unknown),  # line 6
        good[6],
        good[7],
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_bad_lines_are_reported_with_line_numbers(tmp_path: Path) -> None:
    path = _bad_log(tmp_path)
    with pytest.raises(ReplayError) as info:
        replay_learner(path, Fixed(), fmt="jsonl", actions=ACTIONS)
    errors = {e.line: e.reason for e in info.value.errors}
    assert sorted(errors) == [2, 3, 4, 5, 6]
    assert errors[2].startswith("malformed JSON")
    assert errors[3] == "propensity must be in (0, 1], got 0.0"
    assert errors[4] == "propensity must be in (0, 1], got 1.5"
    assert errors[5] == "missing propensity"
    assert errors[6].startswith("unknown action 'zzz'")
    assert str(info.value).startswith("5 bad line(s), nothing replayed; first: line 2:")
    skipped = replay_learner(path, Fixed(), fmt="jsonl", actions=ACTIONS, on_error="skip")
    assert skipped.events == 3 and [e.line for e in skipped.skipped] == [2, 3, 4, 5, 6]


def test_bad_csv_rows_and_empty_logs(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("x,action,reward,pscore\n0.5,a,1,0.3\n0.1,b,0,\n0.2,q,1,0.3\n0.3,a,1,0\n")
    with pytest.raises(ReplayError) as info:
        replay_learner(path, Fixed(), actions=ACTIONS)
    assert [str(e) for e in info.value.errors] == [
        "line 3: missing propensity",
        "line 4: unknown action 'q' (model actions: a, b, c)",
        "line 5: propensity must be in (0, 1], got 0.0",
    ]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ReplayError, match="holds no event"):
        replay_learner(empty, Fixed())
    with pytest.raises(ReplayError, match="no such file"):
        replay_learner(tmp_path / "missing.jsonl", Fixed())


# --- fixed policies ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle() -> Any:
    """A BOPL policy trained on a uniform simulated log."""
    events = simulate_log(900, 11)
    result = train_and_evaluate(
        events, ACTIONS, TrainConfig(n_rounds=10, max_depth=3, min_propensity=0.02)
    )
    return result.bundle


def true_value(bundle: Any, temperature: float, floor: float) -> float:
    """The policy's value on 40000 fresh contexts (Monte Carlo error about 0.002)."""
    rng = np.random.default_rng(99)
    xs = rng.uniform(-1, 1, 40000)
    contexts = [{"x": float(x), "colour": "red" if x > 0.5 else "blue"} for x in xs]
    pi = bundle.probabilities(contexts, temperature, floor)
    mu = np.eye(3)[[label(x) for x in xs]]
    return float((pi * mu).sum(axis=1).mean())


def test_policy_estimates_cover_the_true_value(bundle: Any, skewed_log: Path) -> None:
    truth = true_value(bundle, bundle.temperature, bundle.min_propensity)
    assert truth > 0.7  # the policy learned something
    result = replay_policy(skewed_log, bundle, name="bopl")
    assert result.kind == "policy" and result.events == 3000 and result.primary == "dr"
    for key in ("ips", "snips", "dr"):
        assert result.estimates[key].covers(truth), (key, result.estimates[key], truth)
    assert not result.estimates["dr"].covers(SKEWED_VALUE)
    assert result.estimates["dr"].stderr < result.estimates["ips"].stderr
    assert result.params == {
        "temperature": bundle.temperature,
        "min_propensity": bundle.min_propensity,
    }
    other = replay_policy(skewed_log, bundle, temperature=0.5, min_propensity=0.05, dr=False)
    assert "dr" not in other.estimates and other.primary == "snips"
    assert other.estimates["snips"].covers(true_value(bundle, 0.5, 0.05))
    assert other.estimates["snips"].value > result.estimates["snips"].value  # sharper: better
    with pytest.raises(ValueError, match="min_propensity"):
        replay_policy(skewed_log, bundle, min_propensity=0.5)


def test_policy_from_a_file_and_from_redis(bundle: Any, tmp_path: Path, redis_url: str) -> None:
    path = tmp_path / "policy.pkl"
    path.write_bytes(pickle.dumps(bundle))
    loaded, label = load_policy(str(path))
    assert label == "file policy.pkl" and loaded.actions == ACTIONS
    (tmp_path / "junk.pkl").write_bytes(pickle.dumps({"not": "a policy"}))
    with pytest.raises(ValueError, match="is not a policy bundle"):
        load_policy(str(tmp_path / "junk.pkl"))

    client = redis.Redis.from_url(redis_url)
    log = EventLog(client)
    log.add_config(ModelConfig(name="sim", booster="uniform", actions=ACTIONS, params={"seed": 1}))
    with pytest.raises(ValueError, match="has no published policy"):
        load_policy("sim", EventLog(client))
    log.store_policy("sim", 1, {"variant": "bopl-regr"}, pickle.dumps(bundle), publish=True)
    log.store_policy("sim", 2, {"variant": "bopl-regr"}, None, publish=False)
    assert load_policy("sim", EventLog(client))[1] == "sim:1"
    assert load_policy("sim:1", EventLog(client))[1] == "sim:1"
    with pytest.raises(ValueError, match="policy v2 of 'sim' was not published"):
        load_policy("sim:2", EventLog(client))
    with pytest.raises(ValueError, match="has no policy version 7"):
        load_policy("sim:7", EventLog(client))
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        load_policy("nope:1", EventLog(client))
    with pytest.raises(ValueError, match="needs REDIS_URL"):
        load_policy("sim:1")


# --- a running service -------------------------------------------------------------------------


@pytest.mark.slow
def test_replay_against_a_service(uniform_log: Path, redis_url: str) -> None:
    settings = Settings(
        redis_url=redis_url, run_learner=True, learner_block_ms=20, redis_timeout_seconds=0.5
    )
    with TestClient(create_app(settings)) as c:
        body = {"name": "live", "booster": "uniform", "actions": ACTIONS, "params": {"seed": 5}}
        assert c.post("/v1/models", json=body).status_code == 201
        result = replay_target(
            uniform_log, "http://testserver", "live", client=c, event_prefix="r-", limit=300
        )
        assert result.kind == "target" and result.events == 300
        assert 60 < result.matches < 140 and result.learned == result.matches
        assert result.estimates["replay"].n == result.matches
        assert result.estimates["replay"].covers(1 / 3)  # a uniform service: value 1/3
        assert set(result.extra["latency_ms"]) == {"predict", "feedback"}
        assert result.extra["http_errors"] == 0 and result.extra["decisions_per_second"] > 0
        info = c.get("/v1/models/live").json()
        assert info["decisions"] == 300 and info["rewards"] == result.matches
        again = replay_target(
            uniform_log, "http://testserver", "live", client=c, event_prefix="r-", limit=5
        )  # same event ids, same requests: predict is idempotent, nothing new is logged
        assert again.extra["http_errors"] == 0
        assert c.get("/v1/models/live").json()["decisions"] == 300
        two = replay_target(
            uniform_log,
            "http://testserver",
            "live",
            client=c,
            event_prefix="r2-",
            limit=100,
            concurrency=2,
        )
        assert two.events == 100 and two.extra["http_errors"] == 0
        assert two.params["concurrency"] == 2
        with pytest.raises(ReplayError, match="answered 404"):
            replay_target(uniform_log, "http://testserver", "nope", client=c)
    with pytest.raises(ReplayError, match="cannot reach"):
        replay_target(uniform_log, "http://127.0.0.1:9", "live", timeout=0.5)


# --- the command -------------------------------------------------------------------------------


def test_cli_replay_learner_json_and_plot(uniform_log: Path, tmp_path: Path) -> None:
    png = tmp_path / "replay.png"
    result = CliRunner().invoke(
        cli,
        [
            "replay",
            "learner",
            str(uniform_log),
            "--booster",
            "adabandit",
            "--learners",
            "2",
            "--limit",
            "300",
            "--json",
            "--plot",
            str(png),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["mode"] == "rejection" and record["events"] == 300
    assert record["params"] == {"n_learners": 2, "seed": 0}
    assert record["estimates"]["replay"]["n"] == record["matches"]
    assert len(record["curve"]["events"]) == len(record["curve"]["estimate"]) > 10
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 200_000
    table = CliRunner().invoke(
        cli,
        [
            "replay",
            "learner",
            str(uniform_log),
            "--booster",
            "uniform",
            "--limit",
            "100",
            "--mode",
            "weighted",
        ],
    )
    assert table.exit_code == 0 and "SNIPS *" in table.stdout and "matches:" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["LOG"], "replay takes a subcommand first: learner ("),
        (["LOG", "--booster", "uniform"], "is now `boostbandit replay learner LOG --booster"),
        (["LOG", "--policy", "x"], "is now `boostbandit replay policy LOG --policy ...`"),
        (["LOG", "--target", "http://x"], "is now `boostbandit replay target LOG --target"),
        (["learner", "LOG", "--booster", "nope"], "unknown booster 'nope'"),
        (["learner", "LOG", "--booster", "adaboostolm"], "full-information booster"),
        (["policy", "LOG", "--policy", "p", "--mode", "weighted"], "No such option: --mode"),
        (["learner", "LOG", "--booster", "uniform", "--temperature", "1"],
         "No such option: --temperature"),
        (["target", "LOG", "--target", "http://x"], "Missing option '--model'"),
        (["learner", "LOG", "--booster", "uniform", "--level", "1.5"], "--level must be in (0, 1)"),
        (["learner", "LOG", "--booster", "uniform", "--param", "rho"], "--param must be KEY=VALUE"),
        (["learner", "LOG", "--booster", "uniform", "--param", "nope=1"],
         "unknown parameter(s) for uniform: nope"),
        (["learner", "LOG", "--booster", "uniform", "--actions", "a"],
         "at least 2 distinct action ids"),
        (["policy", "LOG", "--policy", "sim:1"], "start `boostbandit serve"),
    ],
)
def test_cli_usage_errors(
    uniform_log: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("BOOSTBANDIT_DATA_DIR", str(uniform_log.parent / "no-serve-here"))
    log = str(uniform_log)
    result = CliRunner().invoke(cli, ["replay", *(log if arg == "LOG" else arg for arg in args)])
    message = message.replace("LOG", log)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_cli_bad_lines_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["replay", "learner", str(_bad_log(tmp_path)), "--booster", "uniform", "--actions",
              "a,b,c"]
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith("line 2: malformed JSON")
    assert result.stderr.splitlines()[-1].startswith("error: 5 bad line(s), nothing replayed")
    skip = CliRunner().invoke(
        cli,
        [
            "replay",
            "learner",
            str(_bad_log(tmp_path)),
            "--booster",
            "uniform",
            "--actions",
            "a,b,c",
            "--on-error",
            "skip",
            "--json",
        ],
    )
    assert skip.exit_code == 0 and json.loads(skip.stdout)["skipped_lines"] == 5
    assert "skipped line 3: propensity must be in (0, 1], got 0.0" in skip.stderr


def test_cli_target_unreachable(uniform_log: Path) -> None:
    args = ["replay", "target", str(uniform_log), "--target", "http://127.0.0.1:9", "--model", "m"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and result.stderr.startswith("error: cannot reach")


def test_cli_policy_from_redis(
    bundle: Any, skewed_log: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = EventLog(redis.Redis.from_url(redis_url))
    log.add_config(ModelConfig(name="sim", booster="uniform", actions=ACTIONS, params={"seed": 1}))
    log.store_policy("sim", 1, {"variant": "bopl-regr"}, pickle.dumps(bundle), publish=True)
    monkeypatch.setenv("REDIS_URL", redis_url)
    result = CliRunner().invoke(
        cli, ["replay", "policy", str(skewed_log), "--policy", "sim", "--json", "--limit", "1000"]
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["name"] == "sim:1" and record["primary"] == "dr"
    assert set(record["estimates"]) == {"ips", "snips", "dr", "logged"}
    missing = CliRunner().invoke(cli, ["replay", "policy", str(skewed_log), "--policy",
                                              "sim:9"])
    assert missing.exit_code == 2 and "has no policy version 9" in missing.stderr


# --- repeated event ids, and a policy's features missing from the log --------------------------


def _repeated_log(tmp_path: Path) -> Path:
    events = simulate_log(300, 5)
    return write_log(tmp_path / "repeated.jsonl", events + events[:40] + events[:3])


@pytest.mark.parametrize("kind", ["learner", "policy"])
def test_repeated_event_ids_are_flagged_and_skipped_kept_or_refused(
    tmp_path: Path, bundle: Any, kind: str
) -> None:
    log = _repeated_log(tmp_path)

    def run(mode: str) -> Any:
        if kind == "learner":
            return replay_learner(log, make_booster("uniform", n_actions=3, seed=1),
                                  repeated_ids=mode)
        return replay_policy(log, bundle, dr=False, repeated_ids=mode)

    skipped = run("skip")  # the default: each id once
    assert skipped.events == 300
    summary = skipped.to_dict(curve=False)["repeated_ids"]
    assert summary == {"mode": "skip", "count": 43, "first": ["s5-0", "s5-1", "s5-2", "s5-3",
                                                              "s5-4"]}
    assert any("43 event(s) repeat an earlier event id" in note for note in skipped.notes)
    assert "43 event(s) repeat" in skipped.table()
    kept = run("keep")
    assert kept.events == 343 and kept.extra["repeated_ids"]["count"] == 43
    with pytest.raises(ReplayError, match="43 event.*repeat.*nothing replayed"):
        run("fail")
    clean = replay_learner(write_log(tmp_path / "clean.jsonl", simulate_log(50, 5)),
                           make_booster("uniform", n_actions=3, seed=1))
    assert clean.extra["repeated_ids"]["count"] == 0 and not clean.notes


def test_cli_repeated_ids(tmp_path: Path) -> None:
    log = str(_repeated_log(tmp_path))
    result = CliRunner().invoke(cli, ["replay", "learner", log, "--booster", "uniform", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["repeated_ids"]["count"] == 43
    failed = CliRunner().invoke(cli, ["replay", "learner", log, "--booster", "uniform",
                                      "--repeated-ids", "fail"])
    assert failed.exit_code == 1 and "43 event(s) repeat" in failed.stderr
    bad = CliRunner().invoke(cli, ["replay", "learner", log, "--booster", "uniform",
                                   "--repeated-ids", "drop"])
    assert bad.exit_code == 2 and "--repeated-ids must be skip, keep or fail" in bad.stderr


def test_policy_replay_reports_the_policy_features_absent_from_the_log(
    tmp_path: Path, bundle: Any
) -> None:
    events = simulate_log(400, 6)
    plain = replay_policy(write_log(tmp_path / "plain.dsjson", events, "dsjson"), bundle,
                          dr=False)
    assert plain.extra["policy_features"] == {"count": 2, "absent": 0, "absent_share": 0.0,
                                              "first_absent": []}
    # the same events with VW namespaces: the log's features are read as "user.x", "user.colour"
    with open(tmp_path / "namespaced.dsjson", "w") as handle:
        for ev in events:
            line = to_dsjson(ev, "sim")
            line["c"] = {"user": {k: v for k, v in line["c"].items() if k != "_multi"},
                         "_multi": line["c"]["_multi"]}
            handle.write(json.dumps(line) + "\n")
    namespaced = replay_policy(tmp_path / "namespaced.dsjson", bundle, dr=False)
    assert namespaced.events == 400
    assert namespaced.extra["policy_features"] == {
        "count": 2, "absent": 2, "absent_share": 1.0, "first_absent": ["colour", "x"]}
    assert any("2 of the policy's 2 features (100%) never appear" in note
               and "namespace.feature" in note for note in namespaced.notes)
    # without its features the policy is one fixed distribution: its estimate moves
    assert namespaced.estimates["snips"].value != plain.estimates["snips"].value


def test_an_obp_table_replays_with_only_the_chosen_propensity_known(tmp_path: Path) -> None:
    path = write_log(tmp_path / "skewed.csv", simulate_log(400, 12, skewed), "obp")
    _, first = next(iter_log(path, "obp", ACTIONS))
    assert int(np.isnan(first.probabilities).sum()) == 2  # unknown, not made up
    assert first.probabilities[first.action] == first.propensity
    result = replay_learner(path, make_booster("adabandit", n_actions=3, n_learners=3, seed=1))
    assert (result.mode, result.events, result.learned) == ("weighted", 400, 400)
    assert 0.0 <= result.estimates["snips"].value <= 1.0
