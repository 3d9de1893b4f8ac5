"""``boostbandit export`` / ``boostbandit import`` (service/eventlog/transfer.py) against a real
redis-server, and the DSJSON lines checked with Vowpal Wabbit's own parser."""

from __future__ import annotations

import csv
import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli import app as cli
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.eventlog.keys import keys
from service.eventlog.transfer import ImportError_, export_events, import_events
from service.formats import to_dsjson
from service.models.runtime import apply_joined
from service.models.store import restore
from service.settings import Settings
from tests.service.api.test_service_api import FAST, wait_for

ACTIONS = ["red", "green", "blue"]
N_EVENTS = 240


def _best(color: str) -> str:
    return color  # reward 1 iff the action names the context's color


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A model ``src`` with N_EVENTS joined events produced by the service; (redis url, model)."""
    from tests.conftest import own_redis

    server = own_redis(tmp_path_factory.mktemp("redis-interchange"))
    url = server.db_url(0)
    with TestClient(create_app(Settings(redis_url=url, **FAST))) as c:
        body = {"name": "src", "booster": "uniform", "actions": ACTIONS, "params": {"seed": 3},
                "reward_wait_seconds": 30}
        assert c.post("/v1/models", json=body).status_code == 201
        colors = ["red", "green", "blue"]
        for i in range(N_EVENTS):
            color = colors[i % 3]
            ctx = {"color": color, "x": float(i % 7), "n": i % 5}
            excluded = ["blue"] if i % 10 == 9 and color != "blue" else []
            r = c.post("/v1/models/src/predict",
                       json={"context": ctx, "event_id": f"ev-{i}", "excluded_actions": excluded})
            assert r.status_code == 200, r.text
            reward = 1.0 if r.json()["action"] == _best(color) else 0.0
            fb = c.post("/v1/models/src/feedback", json={"event_id": f"ev-{i}", "reward": reward})
            assert fb.status_code == 200
        r = redis.Redis.from_url(url)
        wait_for(lambda: r.xlen(keys("src")["joined"]) == N_EVENTS, timeout=20)
    yield url, "src"
    server.stop()


def _make_target(url: str, name: str, actions: list[str] | None = None,
                 negative_rewards: str = "clip") -> None:
    config = ModelConfig(name=name, booster="uniform", actions=actions or ACTIONS,
                         params={"seed": 1}, negative_rewards=negative_rewards)
    EventLog(redis.Redis.from_url(url)).add_config(config)


def _joined(url: str, name: str) -> list[dict]:
    r = redis.Redis.from_url(url)
    return [json.loads(f[b"e"]) for _, f in r.xrange(keys(name)["joined"])]


def _last_id(r: redis.Redis, name: str) -> str:
    return r.xrevrange(keys(name)["joined"], count=1)[0][0].decode()


def _export(url: str, name: str, fmt: str, path: Path, **kw) -> Path:
    with open(path, "w") as out:
        export_events(EventLog(redis.Redis.from_url(url)), name, fmt, out, progress=False, **kw)
    return path


# --- export -----


@pytest.mark.slow
def test_export_jsonl_is_the_stream_and_since_pages(produced, tmp_path: Path) -> None:
    url, name = produced
    path = _export(url, name, "jsonl", tmp_path / "all.jsonl", page=7)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines == _joined(url, name)
    r = redis.Redis.from_url(url)
    cut = r.xrange(keys(name)["joined"], count=100)[-1][0].decode()
    with open(tmp_path / "rest.jsonl", "w") as out:
        report = export_events(EventLog(r), name, "jsonl", out, since=cut, page=13, progress=False)
    assert report.exported == N_EVENTS - 100
    assert [json.loads(x) for x in (tmp_path / "rest.jsonl").read_text().splitlines()] == \
        lines[100:]


@pytest.mark.slow
def test_dsjson_is_parsed_by_vw_and_vw_learns(produced, tmp_path: Path) -> None:
    vw_module = pytest.importorskip("vowpalwabbit", reason="pip install vowpalwabbit (test extra)")
    url, name = produced
    path = _export(url, name, "dsjson", tmp_path / "log.dsjson")
    lines = path.read_text().splitlines()
    assert len(lines) == N_EVENTS
    first = json.loads(lines[0])
    assert first["Version"] == "1" and first["_label_Action"] == first["a"][0]
    assert first["_labelIndex"] == first["a"][0] - 1
    assert first["_label_probability"] == first["p"][0]
    vw = vw_module.Workspace("--cb_explore_adf --dsjson --epsilon 0.05 -q :: --quiet "
                             "--random_seed 1 --passes 1")
    try:
        for line in lines:
            examples = vw.parse(line)
            assert len(examples) == 1 + len(ACTIONS)  # shared + one per action
            labels = [e.get_label(vw_module.LabelType.CONTEXTUAL_BANDIT) for e in examples[1:]]
            event = json.loads(line)
            chosen = labels[event["_labelIndex"]]
            assert chosen.costs[0].cost == pytest.approx(event["_label_cost"])
            assert chosen.costs[0].probability == pytest.approx(event["_label_probability"])
            vw.learn(examples)
            vw.finish_example(examples)
        assert vw.get_weighted_examples() == N_EVENTS
        for color in ACTIONS:  # the learned greedy action is the context's color
            probe = {**first, "c": {**first["c"], "color": color}}
            pmf = vw.predict(json.dumps(probe))
            assert ACTIONS[max(range(3), key=lambda i: pmf[i])] == color, (color, pmf)
    finally:
        vw.finish()


def test_cli_export_writes_file_and_summary(produced, tmp_path: Path, monkeypatch) -> None:
    url, name = produced
    monkeypatch.setenv("REDIS_URL", url)
    out = tmp_path / "cli.dsjson"
    result = CliRunner().invoke(cli, ["export", "--model", name, "--format", "dsjson",
                                      "--no-progress", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stderr.strip().splitlines()[-1])
    assert summary["exported"] == N_EVENTS and summary["last_id"]
    assert len(out.read_text().splitlines()) == N_EVENTS and not (tmp_path / "cli.dsjson.part")\
        .exists()
    bad = CliRunner().invoke(cli, ["export", "--model", "nope", str(out)])
    assert bad.exit_code == 2 and "unknown model 'nope'" in bad.stderr
    # nothing new since the last id: that id again (not null), so a loop can go on with it
    again = CliRunner().invoke(cli, ["export", "--model", name, "--since", summary["last_id"],
                                     "--no-progress", "-"])
    assert again.exit_code == 0, again.output
    assert again.stdout == ""
    repeat = json.loads(again.stderr.strip().splitlines()[-1])
    assert (repeat["exported"], repeat["last_id"]) == (0, summary["last_id"])
    _make_target(url, "empty")  # an empty stream: "0-0", from which the next export starts
    empty = CliRunner().invoke(cli, ["export", "--model", "empty", "--no-progress", "-"])
    assert json.loads(empty.stderr.strip().splitlines()[-1])["last_id"] == "0-0"
    start = CliRunner().invoke(cli, ["export", "--model", name, "--since", "0-0",
                                     "--no-progress", "-"])
    assert len(start.stdout.splitlines()) == N_EVENTS


# --- round trips -----


def _same(a: dict, b: dict) -> None:
    for key in ("EventId", "Timestamp", "Version", "a", "p", "c", "_label_cost",
                "_label_probability", "_label_Action", "_labelIndex", "o"):
        assert a[key] == b[key], key
    for key in ("actions", "action_id", "propensity", "reward", "excluded"):
        assert a["bb"].get(key) == b["bb"].get(key), key
    assert a["bb"]["decision"]["probabilities"] == b["bb"]["decision"]["probabilities"]


def test_round_trip_dsjson_vw_import(produced, tmp_path: Path) -> None:
    url, name = produced
    path = _export(url, name, "dsjson", tmp_path / "rt.dsjson")
    vw_module = pytest.importorskip("vowpalwabbit", reason="pip install vowpalwabbit")
    vw = vw_module.Workspace("--cb_explore_adf --dsjson --quiet")
    for line in path.read_text().splitlines():  # VW accepts every exported line
        vw.finish_example(vw.parse(line))
    vw.finish()
    _make_target(url, "rt")
    log = EventLog(redis.Redis.from_url(url))
    report = import_events(log, "rt", path, "dsjson", progress=False)
    assert report.imported == N_EVENTS and not report.errors
    original, back = _joined(url, name), _joined(url, "rt")
    assert len(back) == len(original)
    for a, b in zip(original, back):
        _same(a, b)
        assert b["_skipLearn"] is True and b["bb"]["source"] == "import"
        assert b["bb"]["imported"]["format"] == "dsjson"
    assert any(b["bb"].get("excluded") for b in back)  # exclusions survive the round trip
    booster = ModelConfig.from_json(redis.Redis.from_url(url).hget("bb:models", "rt")).build()
    assert not any(apply_joined(booster, ev) for ev in back)  # never learned online


def test_round_trip_jsonl_keeps_everything(produced, tmp_path: Path) -> None:
    url, name = produced
    path = _export(url, name, "jsonl", tmp_path / "rt.jsonl")
    _make_target(url, "rt2")
    r = redis.Redis.from_url(url)
    import_events(EventLog(r), "rt2", path, "jsonl", progress=False)
    for a, b in zip(_joined(url, name), _joined(url, "rt2")):
        assert b["bb"].pop("imported")["format"] == "jsonl"
        assert b["bb"].pop("source_original") == a["bb"]["source"]
        assert b["_skipLearn"] and not b["bb"]["learn"] and b["bb"]["source"] == "import"
        b["_skipLearn"], b["bb"]["learn"], b["bb"]["source"] = (
            a["_skipLearn"], a["bb"]["learn"], a["bb"]["source"])
        assert a == b
    with pytest.raises(ImportError_, match="already imported"):  # same file twice
        import_events(EventLog(r), "rt2", path, "jsonl", progress=False)
    # imported events are for the offline worker: a restored model neither learns them nor
    # counts them, exactly as the live learner (which never sees them)
    log = EventLog(r)
    restored = restore(log, log.config("rt2"))
    fresh = log.config("rt2").build()
    assert restored.version == 0 and restored.joined_id == _last_id(r, "rt2")
    assert pickle.dumps(restored.booster) == pickle.dumps(fresh)
    # into a model whose actions are in another order: rebuilt on the model's indices
    _make_target(url, "rt3", ["blue", "red", "green"])
    import_events(EventLog(r), "rt3", path, "jsonl", progress=False)
    for a, b in zip(_joined(url, name), _joined(url, "rt3")):
        assert b["bb"]["action_id"] == a["bb"]["action_id"]
        assert b["_label_probability"] == a["_label_probability"]
        assert b["bb"]["actions"][b["_labelIndex"]] == a["bb"]["action_id"]


# --- validation -----


def _dsjson_line(event_id: str, **over) -> dict:
    line = {
        "_label_cost": -1.0, "_label_probability": 0.5, "_label_Action": 2, "_labelIndex": 1,
        "o": [{"v": 1.0, "EventId": event_id}], "Timestamp": "2021-02-04T16:31:29.2460000Z",
        "Version": "1", "EventId": event_id, "a": [2, 1, 3], "p": [0.5, 0.25, 0.25],
        "c": {"User": [{"age": 30, "tier": "gold"}],
              "_multi": [{"_tag": a, "i": {"id": a}} for a in ACTIONS]},
    }
    line.update(over)
    return line


BAD = {
    3: ("{not json", "malformed JSON"),
    4: (_dsjson_line("e4", _label_probability=0.0, p=[0.0, 0.5, 0.5]),
        "propensity must be in (0, 1], got 0.0"),
    5: (_dsjson_line("e5", _label_probability=1.5, p=[1.5, 0.25, 0.25]),
        "propensity must be in (0, 1], got 1.5"),
    6: ({k: v for k, v in _dsjson_line("e6").items() if k != "_label_probability"},
        "missing propensity"),
    7: (_dsjson_line("e7", c={"_multi": [{"_tag": "red"}, {"_tag": "mauve"}, {"_tag": "blue"}]}),
        "unknown action 'mauve'"),
    8: (_dsjson_line("e8", _label_cost=-2.0), "reward must be in [0, 1], got 2.0"),
    9: (_dsjson_line("e1"), "EventId 'e1' repeated"),
}


def _write_lines(path: Path) -> Path:
    rows = {1: _dsjson_line("e1"), 2: _dsjson_line("e2", _skipLearn=True), 10: _dsjson_line("e10")}
    rows.update({n: bad for n, (bad, _) in BAD.items()})
    with open(path, "w") as out:
        for n in range(1, 11):
            row = rows[n]
            out.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def test_bad_lines_fail_mode_writes_nothing(redis_url: str, tmp_path: Path) -> None:
    _make_target(redis_url, "v")
    path = _write_lines(tmp_path / "bad.dsjson")
    r = redis.Redis.from_url(redis_url)
    with pytest.raises(ImportError_) as info:
        import_events(EventLog(r), "v", path, "dsjson", progress=False)
    got = {e.line: e.reason for e in info.value.errors}
    assert sorted(got) == sorted(BAD)
    for n, (_, reason) in BAD.items():
        assert reason in got[n], (n, got[n])
    assert r.xlen(keys("v")["joined"]) == 0 and r.hlen(keys("v")["imports"]) == 0


def test_bad_lines_skip_mode_and_cli(redis_url: str, tmp_path: Path, monkeypatch) -> None:
    _make_target(redis_url, "v")
    path = _write_lines(tmp_path / "bad.dsjson")
    monkeypatch.setenv("REDIS_URL", redis_url)
    runner = CliRunner()
    failed = runner.invoke(cli, ["import", "--model", "v", "--format", "dsjson", "--no-progress",
                                 str(path)])
    assert failed.exit_code == 1
    assert "line 4: propensity must be in (0, 1], got 0.0" in failed.stderr
    assert "line 7: unknown action 'mauve'" in failed.stderr
    assert "nothing imported" in failed.stderr
    ok = runner.invoke(cli, ["import", "--model", "v", "--format", "dsjson", "--on-error", "skip",
                             "--no-progress", str(path)])
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.stdout)
    assert (summary["imported"], summary["ignored"], summary["errors"]) == (2, 1, len(BAD))
    assert "skipped line 3: malformed JSON" in ok.stderr
    assert len(summary["first_errors"]) == len(BAD)  # the errors it counts, listed
    assert summary["first_errors"][0].startswith("line 3: malformed JSON")
    events = _joined(redis_url, "v")
    assert [e["EventId"] for e in events] == ["e1", "e10"]
    e1 = events[0]
    assert e1["c"] == {"User.age": 30, "User.tier": "gold"}
    assert e1["bb"]["action_id"] == "green" and e1["bb"]["reward"] == 1.0
    assert e1["Timestamp"] == "2021-02-04T16:31:29.2460000Z"


@pytest.mark.parametrize(("negative_rewards", "expected"), [
    ("clip", [0.0, 0.0, 1.0]),  # 0/1 as sent, -0.5 counts as 0
    ("rescale", [0.25, 0.5, 1.0]),  # (x + 1) / 2
])
def test_personalizer_reward_map(redis_url: str, tmp_path: Path, negative_rewards: str,
                                 expected: list[float]) -> None:
    """Personalizer-scale rewards are read by the target model's own ``negative_rewards`` rule,
    as the Personalizer routes read them."""
    name = f"pm-{negative_rewards}"
    _make_target(redis_url, name, negative_rewards=negative_rewards)
    path = tmp_path / "p.dsjson"
    path.write_text("".join(json.dumps(_dsjson_line(i, _label_cost=cost)) + "\n"
                            for i, cost in [("a", 0.5), ("z", 0.0), ("b", -1.5), ("c", -1.0)]))
    r = redis.Redis.from_url(redis_url)
    report = import_events(EventLog(r), name, path, "dsjson", on_error="skip",
                           reward_map="personalizer", progress=False)
    assert report.imported == 3 and "in [-1, 1]" in report.errors[0].reason
    assert [e["bb"]["reward"] for e in _joined(redis_url, name)] == expected


def test_obp_table(redis_url: str, tmp_path: Path) -> None:
    _make_target(redis_url, "obp")
    path = tmp_path / "obp.csv"
    rows = [
        ["timestamp", "item_id", "position", "click", "propensity_score", "user_feature_0", "u1"],
        ["2019-11-24 00:00:01.123", "0", "1", "0", "0.5", "a81c", "0.25"],
        ["2019-11-24 00:00:02", "2", "1", "1", "0.25", "b3d2", ""],
        ["2019-11-24 00:00:03", "5", "1", "1", "0.25", "b3d2", "1"],
        ["2019-11-24 00:00:04", "1", "1", "1", "", "b3d2", "1"],
        ["2019-11-24 00:00:05", "1", "1", "3", "0.5", "b3d2", "1"],
    ]
    with open(path, "w", newline="") as out:
        csv.writer(out).writerows(rows)
    r = redis.Redis.from_url(redis_url)
    with pytest.raises(ImportError_) as info:
        import_events(EventLog(r), "obp", path, "obp", action_index=True, progress=False)
    assert [str(e) for e in info.value.errors] == [
        "line 4: unknown action index 5 (model has 3)",
        "line 5: missing propensity",
        "line 6: reward must be in [0, 1], got 3.0",
    ]
    report = import_events(EventLog(r), "obp", path, "obp", action_index=True, on_error="skip",
                           progress=False)
    assert report.imported == 2
    first, second = _joined(redis_url, "obp")
    assert first["c"] == {"user_feature_0": "a81c", "u1": 0.25}
    assert first["bb"]["action_id"] == "red" and first["_label_probability"] == 0.5
    # only the chosen action's propensity is known: the others are logged as null
    assert first["bb"]["decision"]["probabilities"] == [0.5, None, None]
    assert first["p"] == [0.5, None, None] and first["bb"]["propensity"] == 0.5
    assert second["bb"]["decision"]["probabilities"] == [None, None, 0.25]
    assert second["bb"]["action_id"] == "blue" and second["bb"]["reward"] == 1.0
    assert first["Timestamp"].startswith("2019-11-24T00:00:01.123")
    # the nulls survive an export and an import of either format, and VW reads the DSJSON
    for fmt in ("jsonl", "dsjson"):
        out = _export(redis_url, "obp", fmt, tmp_path / f"obp.{fmt}")
        _make_target(redis_url, f"obp-{fmt}")
        assert import_events(EventLog(r), f"obp-{fmt}", out, fmt, progress=False).imported == 2
        again = _joined(redis_url, f"obp-{fmt}")
        assert [e["p"] for e in again] == [[0.5, None, None], [0.25, None, None]]
        assert again[1]["bb"]["decision"]["probabilities"] == [None, None, 0.25]
    vw_module = pytest.importorskip("vowpalwabbit", reason="pip install vowpalwabbit (test extra)")
    vw = vw_module.Workspace("--cb_explore_adf --dsjson --quiet")
    try:
        for line in (tmp_path / "obp.dsjson").read_text().splitlines():
            examples = vw.parse(line)
            vw.learn(examples)
            vw.finish_example(examples)
        assert vw.get_weighted_examples() == 2
    finally:
        vw.finish()
    # the worker reads them (the logging policy's vector completed in memory, not in the log)
    from service.training import logged_data

    data = logged_data(_joined(redis_url, "obp"), ACTIONS)
    assert data.propensities.tolist() == [0.5, 0.25]
    assert data.logged.tolist() == [[0.5, 0.25, 0.25], [0.375, 0.375, 0.25]]


def test_failed_write_is_rolled_back(redis_url: str, tmp_path: Path) -> None:
    _make_target(redis_url, "rb")
    path = tmp_path / "many.dsjson"
    path.write_text("".join(json.dumps(_dsjson_line(f"e{i}")) + "\n" for i in range(25)))
    r = redis.Redis.from_url(redis_url)
    with pytest.raises(ImportError_, match="rolled back 20"):
        import_events(EventLog(r), "rb", path, "dsjson", batch=10, fail_after=2, progress=False)
    assert r.xlen(keys("rb")["joined"]) == 0
    assert int(r.hget(keys("rb")["stats"], "imported")) == 0
    (record,) = [json.loads(v) for v in r.hvals(keys("rb")["imports"])]
    assert record["status"] == "rolled_back"
    # the retry works
    report = import_events(EventLog(r), "rb", path, "dsjson", batch=10, progress=False)
    assert report.imported == 25 and r.xlen(keys("rb")["joined"]) == 25


def test_to_dsjson_refuses_reserved_feature_names() -> None:
    event = {"bb": {"actions": ["a", "b"]}, "c": {"_multi": 1}}
    with pytest.raises(ValueError, match="reserved"):
        to_dsjson(event, "m")


def test_import_into_an_unknown_model_says_so_or_creates_it(redis_url: str, tmp_path: Path,
                                                           monkeypatch) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    path = tmp_path / "new.dsjson"
    path.write_text("".join(json.dumps(_dsjson_line(f"n{i}")) + "\n" for i in range(4)))
    runner = CliRunner()
    unknown = runner.invoke(cli, ["import", "--model", "fresh", "--format", "dsjson",
                                  "--no-progress", str(path)])
    assert unknown.exit_code == 2
    assert "unknown model 'fresh'" in unknown.stderr and "--create" in unknown.stderr
    misplaced = runner.invoke(cli, ["import", "--model", "fresh", "--format", "dsjson",
                                    "--booster", "uniform", str(path)])
    assert misplaced.exit_code == 2 and "--booster only applies with --create" in misplaced.stderr
    created = runner.invoke(cli, ["import", "--model", "fresh", "--format", "dsjson", "--create",
                                  "--booster", "uniform", "--no-progress", str(path)])
    assert created.exit_code == 0, created.output
    assert "created model 'fresh' (uniform, 3 actions: red, green, blue)" in created.stderr
    assert json.loads(created.stdout)["imported"] == 4
    log = EventLog(redis.Redis.from_url(redis_url))
    config = log.config("fresh")
    assert (config.booster, config.actions) == ("uniform", ACTIONS)
    assert config.params["seed"] is not None  # filled in, as POST /v1/models does
    assert log.snapshot_meta("fresh")[0] == 0  # the version-0 snapshot of the creation route
    # the default booster is the settings' (PERSONALIZER_BOOSTER); checks are the API's
    obp = tmp_path / "obp.csv"
    obp.write_text("action,reward,pscore,x\n0,1,0.5,1\n3,0,0.25,2\n")
    monkeypatch.setenv("BOOSTBANDIT_PERSONALIZER_BOOSTER", "river_egreedy")
    indexed = runner.invoke(cli, ["import", "--model", "idx", "--format", "obp",
                                  "--action-index", "--create", "--no-progress", str(obp)])
    assert indexed.exit_code == 0, indexed.output
    assert (log.config("idx").booster, log.config("idx").actions) == (
        "river_egreedy", ["0", "1", "2", "3"])
    bad_name = runner.invoke(cli, ["import", "--model", "no spaces", "--format", "obp",
                                   "--create", str(obp)])
    assert bad_name.exit_code == 2 and bad_name.stderr.startswith("error: --create: name")
    one = tmp_path / "one.csv"
    one.write_text("action,reward,pscore\nonly,1,0.5\n")
    single = runner.invoke(cli, ["import", "--model", "single", "--format", "obp", "--create",
                                 str(one)])
    assert single.exit_code == 2 and "found 1 action id(s)" in single.stderr
    assert log.config("single") is None


def test_create_takes_the_actions_of_the_lines_that_import(produced, redis_url: str,
                                                          tmp_path: Path, monkeypatch) -> None:
    """A line skipped by ``--on-error skip`` adds no action to the created model (an OBP file
    with actions 0..3 and one bad line naming 7 once made a model of 8 actions)."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    obp = tmp_path / "obp.csv"
    rows = [f"{i % 4},{i % 2},0.25,{i}" for i in range(12)] + ["7,1,not-a-number,3"]
    obp.write_text("action,reward,pscore,x\n" + "\n".join(rows) + "\n")
    result = CliRunner().invoke(cli, ["import", "--model", "kept", "--format", "obp",
                                      "--action-index", "--create", "--booster", "uniform",
                                      "--on-error", "skip", "--no-progress", str(obp)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["imported"] == 12
    log = EventLog(redis.Redis.from_url(redis_url))
    assert log.config("kept").actions == ["0", "1", "2", "3"]
    named = tmp_path / "named.jsonl"  # the same for the actions a JSON line names
    exported = _export(*produced, "jsonl", tmp_path / "all.jsonl")
    good = json.loads(exported.read_text().splitlines()[0])
    bad = {**good, "bb": {**good["bb"], "actions": ["x", "y", "z"]}, "p": "broken"}
    named.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    result = CliRunner().invoke(cli, ["import", "--model", "named", "--create", "--booster",
                                      "uniform", "--on-error", "skip", "--no-progress",
                                      str(named)])
    assert result.exit_code == 0, result.output
    assert log.config("named").actions == good["bb"]["actions"]


def test_the_readme_vw_snippet_trains_on_an_export(produced, tmp_path: Path) -> None:
    # pip's vowpalwabbit has no `vw` binary: the README shows its Python Workspace instead
    pytest.importorskip("vowpalwabbit", reason="pip install vowpalwabbit (test extra)")
    import re
    import subprocess
    import sys

    readme = (Path(__file__).resolve().parents[3] / "docs" / "user-guide.md").read_text()
    assert "\nvw --dsjson" not in readme  # no command that cannot run
    snippet = re.search(r"python - <<'EOF'\n(import vowpalwabbit\n.*?)\nEOF\n", readme, re.S)
    assert snippet, "the README's vowpalwabbit snippet"
    url, name = produced
    _export(url, name, "dsjson", tmp_path / "news.dsjson")
    done = subprocess.run([sys.executable, "-"], input=snippet.group(1), text=True,
                          cwd=tmp_path, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "news.vw").stat().st_size > 0
