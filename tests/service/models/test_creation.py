"""The one rule of model creation (:func:`service.models.creation.create_model`), on a real Redis:
what it writes, what it refuses, and that a losing creation leaves the winner untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from service.domain import ModelConfig
from service.eventlog import EventLog
from service.models.creation import create_model
from service.models.errors import InvalidModel, ModelExists
from service.models.store import ModelStore, restore

ROOT = Path(__file__).resolve().parents[3]
ACTIONS = ["red", "green", "blue"]


@pytest.fixture
def log(redis_url: str) -> EventLog:
    return EventLog(redis.Redis.from_url(redis_url))


def config(name: str = "m", **params) -> ModelConfig:
    return ModelConfig(name=name, booster="adabandit", actions=ACTIONS,
                       params={"n_learners": 2, **params})


def test_creation_stores_the_config_and_a_version_0_snapshot(log: EventLog) -> None:
    store = ModelStore(log)
    model = create_model(log, store, config(seed=5.0), max_actions=10)
    stored = log.config("m")
    assert stored is not None and stored.uid == model.config.uid
    assert stored.params == {"n_learners": 2, "seed": 5} and type(stored.params["seed"]) is int
    assert log.snapshot_meta("m") == (0, model.config.uid)
    assert store.peek("m") is model
    restored = restore(log, stored, replay=False)  # from the snapshot, not a fresh build
    assert (restored.version, restored.snapshot_version) == (0, 0)
    assert restored.booster is not model.booster
    assert type(restored.booster) is type(model.booster)


def test_a_missing_seed_is_filled_in(log: EventLog) -> None:
    model = create_model(log, ModelStore(log), config(), max_actions=10)
    assert isinstance(log.config("m").params["seed"], int) and model.config.seed >= 0


def test_a_second_creation_raises_and_leaves_the_first_untouched(log: EventLog) -> None:
    first = create_model(log, ModelStore(log), config(seed=1), max_actions=10)
    blob = log.load_snapshot("m")["blob"]
    other = ModelStore(log)
    with pytest.raises(ModelExists, match="model 'm' already exists"):
        create_model(log, other, config(seed=2), max_actions=10)
    assert log.config("m").uid == first.config.uid and log.config("m").seed == 1
    assert log.snapshot_meta("m") == (0, first.config.uid)
    assert log.load_snapshot("m")["blob"] == blob
    assert other.peek("m") is None


def test_a_creation_that_lost_the_race_writes_nothing(log: EventLog, monkeypatch) -> None:
    """Both creators saw no config; the loser's ``add_config`` fails after its build."""
    winner = create_model(log, ModelStore(log), config(seed=1), max_actions=10)
    blob = log.load_snapshot("m")["blob"]
    monkeypatch.setattr(log, "config", lambda name: None)  # the loser checked before the win
    loser = ModelStore(log)
    with pytest.raises(ModelExists):
        create_model(log, loser, config(seed=2), max_actions=10)
    monkeypatch.undo()
    assert log.config("m").uid == winner.config.uid
    assert log.snapshot_meta("m") == (0, winner.config.uid)
    assert log.load_snapshot("m")["blob"] == blob
    assert loser.peek("m") is None


@pytest.mark.parametrize(("cfg", "max_actions", "message"), [
    (config(), 2, "too many actions: 3 > 2 (max_actions)"),
    (config(bogus=1), 10, "unknown parameter(s) for adabandit: bogus; accepted: "),
    (config(seed=-1), 10, "params.seed must be a non-negative integer, got -1"),
    (config(seed=True), 10, "params.seed must be a non-negative integer, got True"),
    (config(n_learners=0), 10, "cannot build booster 'adabandit': "),
])
def test_an_invalid_config_raises_and_stores_nothing(log: EventLog, cfg: ModelConfig,
                                                     max_actions: int, message: str) -> None:
    store = ModelStore(log)
    with pytest.raises(InvalidModel) as caught:
        create_model(log, store, cfg, max_actions=max_actions)
    assert str(caught.value).startswith(message), str(caught.value)
    assert log.config("m") is None and log.snapshot_meta("m") is None and store.peek("m") is None


@pytest.mark.slow
def test_import_create_loads_no_web_framework(redis_url: str, tmp_path: Path) -> None:
    path = tmp_path / "events.dsjson"
    lines = [{"_label_cost": -1.0, "_label_probability": 0.5, "_label_Action": 2,
              "_labelIndex": 1, "o": [{"v": 1.0, "EventId": f"e{i}"}], "Version": "1",
              "Timestamp": "2021-02-04T16:31:29.2460000Z", "EventId": f"e{i}",
              "a": [2, 1, 3], "p": [0.5, 0.25, 0.25],
              "c": {"u": [{"age": i}], "_multi": [{"_tag": a, "i": {"id": a}} for a in ACTIONS]}}
             for i in range(2)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    probe = (
        "import json, sys\nfrom typer.testing import CliRunner\nfrom service.cli import app\n"
        "r = CliRunner().invoke(app, ['import', '--model', 'fresh', '--format', 'dsjson', "
        f"'--create', '--booster', 'uniform', '--no-progress', {str(path)!r}])\n"
        "print(json.dumps([r.exit_code, r.output, [m for m in ('fastapi', 'starlette', "
        "'uvicorn') if m in sys.modules]]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": redis_url}
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    code, output, web = json.loads(done.stdout.splitlines()[-1])
    assert code == 0, output
    assert "created model 'fresh'" in output
    assert web == []


@pytest.mark.parametrize(("params", "fragment"), [
    ({"n_learners": 0}, "cannot build booster: "),
    ({"bogus": 1}, "cannot build booster: unknown parameter(s) for adabandit: bogus"),
])
def test_a_personalizer_model_the_settings_cannot_make_is_a_500_envelope(
        redis_url: str, params: dict, fragment: str) -> None:
    from fastapi.testclient import TestClient

    from service.api.app import create_app
    from service.settings import Settings
    from tests.service.personalizer.test_personalizer import BASE, RANK_EXAMPLE, SETTINGS

    settings = Settings(redis_url=redis_url, **{**SETTINGS, "personalizer_params": params})
    with TestClient(create_app(settings)) as client:
        r = client.post(f"{BASE}/rank", json=RANK_EXAMPLE)
        assert r.status_code == 500, r.text
        error = r.json()["error"]
        assert error["code"] == "InternalServerError" and error["message"].startswith(fragment)
        assert client.app.state.log.configs() == {}
