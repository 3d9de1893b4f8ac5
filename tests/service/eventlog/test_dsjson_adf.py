"""DSJSON of models with action features: the export keeps each event's candidates
(``_multi`` with their features in namespaces) and its context's namespaces
(service/formats/namespaces.py), VW parses every line and learns ``--cb_explore_adf -q UA`` from
it, and the import reads the candidates back (docs/formats.md, "Namespaces")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from boosters.base import Decision
from service.api.app import create_app
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.eventlog.keys import keys
from service.eventlog.transfer import export_events, import_events
from service.events import decision_event, dumps, joined_event
from service.formats import parse_dsjson, parse_jsonl, to_dsjson
from service.formats.reader import LineError, iter_events
from service.models.runtime import apply_joined
from service.settings import Settings
from tests.service.api.test_service_api import FAST, wait_for

CATS = ["x", "y", "z"]
N_SERVED = 40


def adf_event(i: int, context: dict, candidates: list[dict], chosen: int,
              probabilities: list[float], reward: float, excluded: list[int] | None = None,
              ids: list[str] | None = None) -> dict:
    """A joined event of a model with action features, as the service logs it."""
    ids = ids or [f"c{i}-{j}" for j in range(len(candidates))]
    d = Decision(action=chosen, probabilities=np.array(probabilities))
    ev = decision_event(f"e{i}", 1.7e9 + i, 2, ids, context, d, excluded=excluded,
                        candidates=candidates)
    return joined_event(ev, reward=reward, label=None, source="feedback", learn=True,
                        ts=1.7e9 + i)


def assert_same(original: dict, back: dict) -> None:
    """What a round trip keeps: context, candidates, ids, choice, propensities, reward."""
    a, b = original["bb"], back["bb"]
    assert back["EventId"] == original["EventId"]
    assert back["c"] == original["c"]
    assert {k: type(v) for k, v in back["c"].items()} == \
        {k: type(v) for k, v in original["c"].items()}  # numbers and strings kept apart
    for x, y in zip(a["candidates"], b["candidates"], strict=True):
        assert {k: type(v) for k, v in x.items()} == {k: type(v) for k, v in y.items()}
    assert b["candidates"] == a["candidates"] and b["actions"] == a["actions"]
    assert b["action_id"] == a["action_id"] and back["a"] == original["a"]
    assert back["p"] == pytest.approx(original["p"], abs=0)
    assert back["_label_probability"] == original["_label_probability"]
    assert b["decision"]["probabilities"] == a["decision"]["probabilities"]
    assert b["reward"] == a["reward"] and back["_label_cost"] == original["_label_cost"]
    assert b.get("excluded", []) == a.get("excluded", [])


# --- the mapping, event by event -----------------------------------------------------------------


def test_export_puts_features_in_namespaces_and_import_reads_them_back() -> None:
    context = {"age": 31, "age:str": "31", "pref": "x", "user.name": "tom", "user.x.y": 2.5,
               "tags[0]": "a"}
    candidates = [{"cat": "x", "price": 1}, {"cat": "y", "article.len": 3, "article.topic": "t"},
                  {}]
    ev = adf_event(0, context, candidates, 1, [0.2, 0.8, 0.0], 1.0, excluded=[2])
    line = to_dsjson(ev, "m")
    assert line["c"] == {
        "User": {"age": 31, "age:str": "31", "pref": "x", "tags[0]": "a"},
        "user": {"name": "tom", "x.y": 2.5},
        "_multi": [{"_tag": "c0-0", "Action": {"cat": "x", "price": 1}},
                   {"_tag": "c0-1", "Action": {"cat": "y"}, "article": {"len": 3, "topic": "t"}},
                   {"_tag": "c0-2"}],
    }
    assert line["bb"] == {"excluded": ["c0-2"],
                          "namespaces": {"context": "User", "action": "Action"}}
    assert (line["a"], line["_label_Action"], line["_labelIndex"]) == ([2, 1, 3], 2, 1)
    back = parse_dsjson(json.loads(dumps(line)), [], "identity")
    assert_same(ev, back)
    assert back["bb"]["excluded"] == [2] and back["_skipLearn"] is True


def test_a_namespace_named_like_the_default_one_moves_the_default() -> None:
    # the context already has a namespace "User" and the candidates one "Action": the
    # un-namespaced features go to "User_" / "Action_" (still U and A for -q UA)
    context = {"User.id": "u1", "age": 3}
    candidates = [{"Action.kind": "k", "cat": "x"}, {"cat": "y"}]
    ev = adf_event(1, context, candidates, 0, [0.5, 0.5], 0.0)
    line = to_dsjson(ev, "m")
    assert line["c"]["User"] == {"id": "u1"} and line["c"]["User_"] == {"age": 3}
    assert line["c"]["_multi"][0] == {"_tag": "c1-0", "Action": {"kind": "k"},
                                      "Action_": {"cat": "x"}}
    assert line["bb"]["namespaces"] == {"context": "User_", "action": "Action_"}
    assert_same(ev, parse_dsjson(line, [], "identity"))


def test_fixed_action_export_is_unchanged() -> None:
    d = Decision(action=1, probabilities=np.array([0.3, 0.7]))
    ev = joined_event(decision_event("f1", 0.0, 1, ["a", "b"], {"x": 1.0, "n.s": "v"}, d),
                      reward=1.0, label=None, source="feedback", learn=True, ts=0.0)
    line = to_dsjson(ev, "m")
    assert line["c"] == {"x": 1.0, "n.s": "v", "_multi": [{"_tag": "a", "Action": {"id": "a"}},
                                                          {"_tag": "b", "Action": {"id": "b"}}]}
    assert "bb" not in line
    back = parse_dsjson(line, ["a", "b"], "identity")
    assert back["c"] == {"x": 1.0, "n.s": "v"} and "candidates" not in back["bb"]


def test_a_foreign_line_gives_candidates_by_position_and_namespace() -> None:
    # VW's own ADF example: no _tag, no bb; the namespaces stay in the names
    line = {"_label_cost": -1, "_label_probability": 0.5, "_label_Action": 2, "_labelIndex": 1,
            "EventId": "vw1", "a": [2, 1], "p": [0.5, 0.5],
            "c": {"User": {"user": "Tom", "time_of_day": "morning"}, "n": 2,
                  "_multi": [{"Action": {"article": "politics"}},
                             {"id": "s", "Action": {"article": "sports"}, "f": 1}]}}
    ev = parse_dsjson(line, [], "identity")
    assert ev["c"] == {"User.user": "Tom", "User.time_of_day": "morning", "n": 2}
    assert ev["bb"]["actions"] == ["1", "s"] and ev["bb"]["action_id"] == "s"
    assert ev["bb"]["candidates"] == [{"Action.article": "politics"},
                                      {"Action.article": "sports", "f": 1}]


@pytest.mark.parametrize(("change", "words"), [
    (lambda c: c.pop("_multi"), "_multi' must be a non-empty array"),
    (lambda c: c.update(_multi=[1, 2]), "_multi[0] must be an object"),
    (lambda c: c.update(_multi=[{"_tag": "a"}, {"_tag": "a"}]), "repeats an action id"),
    (lambda c: c["_multi"][0].update(Action={"f": 10**400}), "candidate 'c2-0'"),
    (lambda c: c.update(_multi=c["_multi"][:1]), "'a' refers to action 2"),
])
def test_bad_candidate_lines_name_the_problem(change, words: str) -> None:
    line = to_dsjson(adf_event(2, {"u": 1}, [{"f": 1}, {"f": 2}], 1, [0.5, 0.5], 1.0), "m")
    change(line["c"])
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("(", r"\(")):
        parse_dsjson(line, [], "identity")


def test_export_refuses_names_dsjson_would_drop() -> None:
    for context, candidates in [({"a._b": 1}, [{}]), ({"a": 1}, [{"_f": 1}]),
                                ({"_a": 1}, [{}])]:
        with pytest.raises(ValueError, match="reserved by DSJSON"):
            to_dsjson(adf_event(3, context, candidates, 0, [1.0], 1.0), "m")


def test_jsonl_lines_with_candidates_are_read_for_a_model_without_actions() -> None:
    ev = adf_event(4, {"u": "a"}, [{"f": 1}, {"f": 2}], 0, [0.6, 0.4], 1.0)
    assert parse_jsonl(json.loads(dumps(ev)), [], "identity")["bb"]["candidates"] == \
        [{"f": 1}, {"f": 2}]
    # another reward map rebuilds the event: the candidates stay
    rebuilt = parse_jsonl(ev, [], "rescale")
    assert rebuilt["bb"]["candidates"] == [{"f": 1}, {"f": 2}] and rebuilt["bb"]["reward"] == 1.0
    fixed = json.loads(dumps(ev))
    del fixed["bb"]["candidates"]
    with pytest.raises(ValueError, match="missing bb.candidates"):
        parse_jsonl(fixed, [], "identity")
    fixed["bb"]["candidates"] = [{"f": 1}]
    with pytest.raises(ValueError, match="each of bb.actions once"):
        parse_jsonl(fixed, [], "identity")


def test_the_reader_reports_bad_candidate_lines(tmp_path: Path) -> None:
    good = to_dsjson(adf_event(5, {"u": 1}, [{"f": 1}, {"f": 2}], 0, [0.5, 0.5], 1.0), "m")
    bad = json.loads(json.dumps(good))
    bad["c"]["_multi"][1]["Action"]["f"] = 10**400  # beyond a float
    path = tmp_path / "log.dsjson"
    path.write_text(dumps(good) + "\n" + dumps(bad) + "\n")
    items = list(iter_events(path, "dsjson", [], "identity", False, "t"))
    assert items[0][1]["bb"]["candidates"] == [{"f": 1}, {"f": 2}]
    assert isinstance(items[1][1], LineError) and "candidate 'c5-1'" in str(items[1][1])


# --- VW trains --cb_explore_adf -q UA on an export -------------------------------------------


def synthetic(n: int, seed: int) -> list[dict]:
    """Uniformly logged decisions over 2 to 5 candidates; reward 1 iff the candidate's ``cat``
    is the context's ``pref`` (a context x action interaction, nothing else pays)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(2, 6))
        context = {"pref": CATS[rng.integers(3)], "age": round(float(rng.random()), 3),
                   "user.region": ["eu", "us"][rng.integers(2)]}
        items = [{"cat": CATS[rng.integers(3)], "price": round(float(rng.random()), 3)}
                 for _ in range(k)]
        chosen = int(rng.integers(k))
        reward = float(items[chosen]["cat"] == context["pref"])
        out.append(adf_event(seed * 100000 + i, context, items, chosen, [1 / k] * k, reward))
    return out


def vw_reward(vw_module, args: str, train: list[str], test: list[dict]) -> tuple[int, float]:
    """``(lines VW parsed into 1 shared + k action examples, the expected reward of VW's
    policy on ``test``)`` after training on ``train`` (DSJSON lines)."""
    vw = vw_module.Workspace(args)
    parsed = 0
    for line in train:
        examples = vw.parse(line, labelType=vw_module.LabelType.CONTEXTUAL_BANDIT)
        k = len(json.loads(line)["c"]["_multi"])
        parsed += len(examples) == 1 + k
        vw.learn(examples)
        vw.finish_example(examples)
    assert vw.get_weighted_examples() == len(train)  # VW learned every line: none skipped
    rewards = []
    for ev in test:
        examples = vw.parse(dumps(to_dsjson(ev, "m")),
                            labelType=vw_module.LabelType.CONTEXTUAL_BANDIT)
        pmf = np.array(vw.predict(examples))
        vw.finish_example(examples)
        hits = [c["cat"] == ev["c"]["pref"] for c in ev["bb"]["candidates"]]
        rewards.append(float(pmf @ np.array(hits, dtype=float)))
    vw.finish()
    return parsed, float(np.mean(rewards))


def test_vw_reads_every_exported_line_and_learns_the_interaction() -> None:
    vw_module = pytest.importorskip("vowpalwabbit", reason="pip install vowpalwabbit (test extra)")
    train = [dumps(to_dsjson(ev, "m")) for ev in synthetic(2000, 1)]
    test = synthetic(500, 2)
    uniform = float(np.mean([np.mean([c["cat"] == ev["c"]["pref"] for c in ev["bb"]["candidates"]])
                             for ev in test]))
    parsed, crossed = vw_reward(vw_module, "--cb_explore_adf -q UA --dsjson --quiet --epsilon 0.1",
                                train, test)
    assert parsed == len(train)  # 100%: every line is one shared and k action examples
    _, flat = vw_reward(vw_module, "--cb_explore_adf --dsjson --quiet --epsilon 0.1", train, test)
    # measured (deterministic): uniform 0.324, VW -q UA 0.688 (the best policy exploring 10%
    # as --epsilon 0.1 does earns 0.9 * 0.728 + 0.1 * 0.324 = 0.688), VW without -q 0.306: the
    # crossing of the User and Action namespaces is what learns the rule
    assert crossed >= uniform + 0.25, (crossed, uniform)
    assert flat <= uniform + 0.05, (flat, uniform)


# --- export and import through the event log ------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """An ``adf`` model with N_SERVED joined events of the service: namespaced contexts, a
    feature whose type changes (logged as ``age:num``), exclusions; (redis url, model)."""
    from tests.conftest import start_redis

    server = start_redis(tmp_path_factory.mktemp("redis-dsjson-adf"))
    url = server.db_url(0)
    rng = np.random.default_rng(4)
    with TestClient(create_app(Settings(redis_url=url, **FAST))) as c:
        body = {"name": "src", "action_features": True, "params": {"seed": 3}}
        assert c.post("/v1/models", json=body).status_code == 201
        for i in range(N_SERVED):
            age = 30 + i if i % 4 else f"{30 + i}"
            items = [{"id": f"r{i}-{j}", "features": {"cat": CATS[rng.integers(3)],
                                                       "price": round(float(rng.random()), 3),
                                                       "article.len": int(rng.integers(9))}}
                     for j in range(int(rng.integers(1, 5)))]
            excluded = [items[0]["id"]] if len(items) > 2 and i % 3 == 0 else []
            r = c.post("/v1/models/src/predict", json={
                "context": {"pref": CATS[i % 3], "age": age, "user.region": "eu"},
                "actions": items, "excluded_actions": excluded, "event_id": f"s{i}"})
            assert r.status_code == 200, r.text
            assert c.post("/v1/models/src/feedback", json={
                "event_id": f"s{i}", "reward": float(i % 2)}).status_code == 200
        r = redis.Redis.from_url(url)
        wait_for(lambda: r.xlen(keys("src")["joined"]) == N_SERVED, timeout=20)
    yield url, "src"
    server.stop()


def _joined(url: str, name: str) -> list[dict]:
    r = redis.Redis.from_url(url)
    return [json.loads(f[b"e"]) for _, f in r.xrange(keys(name)["joined"])]


@pytest.mark.slow
def test_round_trip_through_export_vw_and_import(served, tmp_path: Path) -> None:
    url, name = served
    log = EventLog(redis.Redis.from_url(url))
    path = tmp_path / "adf.dsjson"
    with open(path, "w") as out:
        report = export_events(log, name, "dsjson", out, progress=False)
    assert report.exported == N_SERVED and report.skipped == 0
    original = _joined(url, name)
    # the mixed-type name is in the log (age came first as a string: the numbers are age:num)
    assert any("age:num" in ev["c"] for ev in original)
    assert any(ev["bb"].get("excluded") for ev in original)
    vw_module = pytest.importorskip("vowpalwabbit", reason="pip install vowpalwabbit")
    vw = vw_module.Workspace("--cb_explore_adf -q UA --dsjson --quiet")
    for line, ev in zip(path.read_text().splitlines(), original, strict=True):
        examples = vw.parse(line, labelType=vw_module.LabelType.CONTEXTUAL_BANDIT)
        assert len(examples) == 1 + len(ev["bb"]["candidates"])
        vw.learn(examples)
        vw.finish_example(examples)
    assert vw.get_weighted_examples() == N_SERVED
    vw.finish()

    log.add_config(ModelConfig(name="dst", booster="adf", actions=[], params={"seed": 1}))
    imported = import_events(log, "dst", path, "dsjson", progress=False)
    assert imported.imported == N_SERVED and not imported.errors
    back = _joined(url, "dst")
    for a, b in zip(original, back, strict=True):
        assert_same(a, b)
        assert b["_skipLearn"] is True and b["bb"]["imported"]["format"] == "dsjson"
    # the imported events carry what the adf learner learns from (imports themselves are never
    # learned online, as for every model: docs/formats.md)
    booster = log.config("dst").build()
    assert all(apply_joined(booster, {**ev, "_skipLearn": False}) for ev in back)
    assert booster.n_learned == N_SERVED


@pytest.mark.slow
def test_cli_export_and_import_create_a_model_with_action_features(
    served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from service.cli import app as cli

    url, name = served
    monkeypatch.setenv("REDIS_URL", url)
    path = tmp_path / "cli.dsjson"
    runner = CliRunner()
    exported = runner.invoke(cli, ["export", "--model", name, "--format", "dsjson",
                                   "--no-progress", str(path)])
    assert exported.exit_code == 0, exported.output
    created = runner.invoke(cli, ["import", "--model", "made", "--format", "dsjson", "--create",
                                  "--booster", "adf", "--no-progress", str(path)])
    assert created.exit_code == 0, created.output
    assert "created model 'made' (adf: action features)" in created.stderr
    assert json.loads(created.stdout.splitlines()[-1])["imported"] == N_SERVED
    config = EventLog(redis.Redis.from_url(url)).config("made")
    assert config.action_features and config.actions == []
    for a, b in zip(_joined(url, name), _joined(url, "made"), strict=True):
        assert_same(a, b)
