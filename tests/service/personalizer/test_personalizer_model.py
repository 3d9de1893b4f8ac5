"""The model routes through the official ``azure-ai-personalizer`` SDK
(``PersonalizerAdministrationClient``) against the real app under uvicorn with its learner:
export (unsigned and signed), import refused unless signed with the server's key and accepted
then (the imported model decides exactly as the exported one), reset to a fresh model that
keeps serving and learning, and the model properties."""

from __future__ import annotations

import datetime as dt
import functools
import io
import json
import time
import zipfile

import httpx
import pytest
import redis

from learners.frozen import dumps_serving
from service.api.server import serve_in_thread as serve
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.models import modeldata, snapshots
from service.models.runtime import ServedModel
from service.models.store import ModelStore
from service.personalizer import loop, modelfile, models
from service.personalizer.errors import PersonalizerFailure
from service.personalizer.mapping import action_set_model_name
from service.settings import Settings

pytest.importorskip("azure.ai.personalizer")
from azure.ai.personalizer import (  # noqa: E402
    PersonalizerAdministrationClient,
    PersonalizerClient,
)
from azure.core.credentials import AzureKeyCredential  # noqa: E402
from azure.core.exceptions import HttpResponseError  # noqa: E402

ACTIONS = ["a0", "a1", "a2", "a3"]
NAME = action_set_model_name(ACTIONS)
KEY = "test-signing-key-0123456789"
TRAIN = 240  # events; the greedy choice is then the best action of every segment


def settings(redis_url: str, key: str = KEY) -> Settings:
    return Settings(redis_url=redis_url, run_learner=True, redis_async="off",
                    personalizer_params={"n_learners": 5, "seed": 3},
                    personalizer_model_signing_key=key, max_body_bytes=4 << 20,
                    personalizer_action_features="never")


def request(segment: int, hour: int, event_id: str) -> dict:
    return {"actions": [{"id": a, "features": [{"n": a}]} for a in ACTIONS],
            "contextFeatures": [{"user": {"segment": f"s{segment}"}}, {"visit": {"hour": hour}}],
            "eventId": event_id}


@functools.cache
def http(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=10)  # one connection per server


def version(base: str) -> int:
    return http(base).get(f"/v1/models/{NAME}").json()["version"]


def wait_version(base: str, target: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while version(base) < target:
        assert time.monotonic() < deadline, f"the learner did not reach version {target}"
        time.sleep(0.005)


def wait_swapped(base: str, target: int, timeout: float = 20.0) -> int:
    """Until the API serves the new version of a reset or imported model (the old one serves
    until the learner has rebuilt it), at version ``target``."""
    deadline = time.monotonic() + timeout
    while version(base) != target:
        assert time.monotonic() < deadline, f"not swapped to version {target}: {version(base)}"
        time.sleep(0.005)
    return target


def train(client: PersonalizerClient, base: str, n: int, prefix: str, start: int = 0) -> float:
    """Rank and reward ``n`` events (reward 1 when the action is the segment's); the hit rate
    of the last 100. Each event is learned before the next one (deterministic)."""
    hits = []
    for i in range(n):
        segment, hour = (i * 7) % 4, (i * 5) % 24
        ranked = client.rank(request(segment, hour, f"{prefix}-{i}"))
        hit = ranked["rewardActionId"] == ACTIONS[segment]
        client.reward(ranked["eventId"], {"value": 1.0 if hit else 0.0})
        hits.append(hit)
        wait_version(base, start + i + 1)
    return sum(hits[-100:]) / len(hits[-100:])


def probes(client: PersonalizerClient, prefix: str) -> list[dict]:
    return [client.rank(request(s, 11, f"{prefix}-{s}")) for s in range(4)]


def clients(base: str) -> tuple[PersonalizerClient, PersonalizerAdministrationClient]:
    key = AzureKeyCredential("k")
    return PersonalizerClient(base, key), PersonalizerAdministrationClient(base, key)


def refused(call, code: str) -> None:
    with pytest.raises(HttpResponseError) as info:
        call()
    assert info.value.status_code == 400, info.value
    response = info.value.response
    response.read()  # a streamed answer (export) is not read yet
    assert json.loads(response.text())["error"]["code"] == code


def tampered(data: bytes, entry: str) -> bytes:
    """``data`` with one byte of ``entry`` flipped (same size)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            content = bytearray(src.read(info))
            if info.filename == entry:
                content[len(content) // 2] ^= 1
            dst.writestr(info.filename, bytes(content))
    return out.getvalue()


@pytest.mark.slow
def test_export_then_import_into_a_fresh_endpoint_decides_the_same(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        client, admin = clients(base)
        assert train(client, base, TRAIN, "t") >= 0.8
        unsigned = b"".join(admin.export_model())
        signed = b"".join(admin.export_model(signed=True))
        before = probes(client, "probe")
        uid = EventLog(redis.Redis.from_url(redis_url)).config(NAME).uid
        # refused: nothing of the endpoint changes
        refused(lambda: admin.import_model(unsigned), "ModelFileNotSigned")
        booster = f"models/{NAME}/booster.data"
        refused(lambda: admin.import_model(tampered(signed, booster)), "InvalidModelSignature")
        refused(lambda: admin.import_model(tampered(signed, "manifest.json")),
                "InvalidModelSignature")
        refused(lambda: admin.import_model(b"not a zip"), "InvalidModelFile")
        assert EventLog(redis.Redis.from_url(redis_url)).config(NAME).uid == uid
        # accepted on the running endpoint too, whose learner holds the model: it goes back
        # to the exported state and learns on from there
        train(client, base, 10, "extra", start=TRAIN)
        admin.import_model(signed)
        assert wait_swapped(base, TRAIN) == TRAIN
        train(client, base, 3, "extra2", start=TRAIN)
        assert version(base) == TRAIN + 3
    with zipfile.ZipFile(io.BytesIO(unsigned)) as z:
        manifest = json.loads(z.read("manifest.json"))
        assert "signature.json" not in z.namelist()
        assert not [n for n in z.namelist() if n.endswith(".pkl")]  # data, never a pickle
    assert manifest["formatVersion"] == modelfile.FORMAT_VERSION == 2
    assert manifest["models"][0]["booster"]["encoding"] == modelfile.DATA
    assert [(m["name"], m["version"], m["uid"]) for m in manifest["models"]] == [
        (NAME, TRAIN, uid)]
    assert manifest["models"][0]["featureTypes"] == {"user.segment": "s", "visit.hour": "n"}
    with zipfile.ZipFile(io.BytesIO(signed)) as z:
        assert json.loads(z.read("signature.json"))["algorithm"] == "HMAC-SHA256"
    # the trained model plays each segment's best action (a fresh one would not)
    assert [max(r["ranking"], key=lambda a: a["probability"])["id"] for r in before] == ACTIONS

    redis.Redis.from_url(redis_url).flushdb()  # another endpoint, same key
    with serve(settings(redis_url)) as base:
        client, admin = clients(base)
        admin.import_model(signed)
        assert wait_swapped(base, TRAIN) == TRAIN
        after = probes(client, "probe")  # the same event ids: the same draws
        assert after == before
        # it keeps learning: the next events count on from the imported version
        train(client, base, 5, "more", start=TRAIN)
        assert version(base) == TRAIN + 5
        # the feature types came with it: the hour stays a number, and a string hour is
        # another feature (as Personalizer keeps them apart), not a refusal
        typo = request(0, 11, "typo")
        typo["contextFeatures"][1]["visit"]["hour"] = "eleven"
        client.rank(typo)
        schema = EventLog(redis.Redis.from_url(redis_url)).schema(
            NAME, ["visit.hour", "visit.hour:str"])
        assert schema == {"visit.hour": "n", "visit.hour:str": "s"}


@pytest.mark.slow
def test_import_needs_the_servers_key(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        client, admin = clients(base)
        train(client, base, 5, "t")
        signed = b"".join(admin.export_model(signed=True))
    redis.Redis.from_url(redis_url).flushdb()
    with serve(settings(redis_url, key="another-key-of-another-server")) as base:
        _, admin = clients(base)
        refused(lambda: admin.import_model(signed), "InvalidModelSignature")
    with serve(settings(redis_url, key="")) as base:
        _, admin = clients(base)
        refused(lambda: admin.import_model(signed), "ModelSigningKeyNotSet")
        refused(lambda: b"".join(admin.export_model(signed=True)), "ModelSigningKeyNotSet")


@pytest.mark.slow
def test_reset_gives_a_fresh_model_that_serves_and_learns(redis_url: str) -> None:
    with serve(settings(redis_url)) as base:
        client, admin = clients(base)
        train(client, base, 60, "t")
        props = admin.get_model_properties()
        created = dt.datetime.fromisoformat(props["creationTime"])
        modified = dt.datetime.fromisoformat(props["lastModifiedTime"])
        assert modified > created
        log = EventLog(redis.Redis.from_url(redis_url))
        old = log.config(NAME)
        admin.reset_model()
        new = log.config(NAME)
        assert new.uid != old.uid and new.params == old.params and wait_swapped(base, 0) == 0
        after = admin.get_model_properties()
        assert dt.datetime.fromisoformat(after["creationTime"]) > modified
        # the decisions of an untrained model of that config, event for event
        fresh = ServedModel(new, new.build())
        for ranked, segment in zip(probes(client, "probe"), range(4), strict=True):
            context = {"user.segment": f"s{segment}", "visit.hour": 11}
            decision, _ = fresh.decide(context, ranked["eventId"])
            chosen = new.actions[decision.action]
            assert ranked["rewardActionId"] == chosen
            assert {a["id"]: a["probability"] for a in ranked["ranking"]} == pytest.approx(
                dict(zip(new.actions, decision.probabilities.tolist(), strict=True)))
        # it learns only what is joined from now on (not the 60 events before the reset)
        train(client, base, 10, "after", start=0)
        assert version(base) == 10
        time.sleep(0.2)
        assert version(base) == 10


@pytest.mark.slow
def test_an_api_replica_exports_the_latest_snapshot(redis_url: str) -> None:
    main = settings(redis_url).model_copy(update={"snapshot_every_events": 50})
    with serve(main) as base:
        client, admin = clients(base)
        train(client, base, 120, "t")
        deadline = time.monotonic() + 20
        info = lambda: http(base).get(f"/v1/models/{NAME}").json()  # noqa: E731
        while info()["snapshot_version"] < 100:
            assert time.monotonic() < deadline, "no snapshot at 100 events"
            time.sleep(0.02)
        snapshot = info()["snapshot_version"]
        with serve(settings(redis_url).model_copy(update={"run_learner": False})) as replica:
            _, replica_admin = clients(replica)
            data = b"".join(replica_admin.export_model(signed=True))
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            (entry,) = json.loads(z.read("manifest.json"))["models"]
        assert entry["version"] == snapshot < 120
        admin.import_model(data)  # a replica's file imports like any other
        assert wait_swapped(base, snapshot) == snapshot


@pytest.mark.slow
def test_a_file_of_another_endpoints_models_is_refused(redis_url: str) -> None:
    shop = settings(redis_url).model_copy(update={"personalizer_model": "shop"})
    with serve(shop) as base:
        created = httpx.post(f"{base}/v1/models", timeout=10, json={
            "name": "shop", "booster": "adabandit", "actions": ACTIONS,
            "params": {"n_learners": 3, "seed": 1}})
        assert created.status_code == 201, created.text
        client, admin = clients(base)
        client.rank(request(0, 1, "e0"))
        signed = b"".join(admin.export_model(signed=True))
    redis.Redis.from_url(redis_url).flushdb()
    with serve(settings(redis_url)) as base:  # one model per action set: "shop" is not one
        _, admin = clients(base)
        refused(lambda: admin.import_model(signed), "InvalidModelFile")
        assert EventLog(redis.Redis.from_url(redis_url)).configs() == {}


# --- concurrent writes of a model's config and seed; crafted files ---------------------------
def local(redis_url: str) -> tuple[EventLog, Settings, ModelConfig]:
    """An event log with one model of the endpoint (the ``personalizer_model``)."""
    log = EventLog(redis.Redis.from_url(redis_url))
    config = ModelConfig("shop", "adabandit", ACTIONS, {"n_learners": 3, "seed": 1})
    assert log.add_config(config)
    return log, settings(redis_url).model_copy(update={"personalizer_model": "shop"}), config


def seeded(config: ModelConfig) -> snapshots.Snapshot:
    booster = config.build()
    return snapshots.Snapshot(snapshots.dumps_whole(booster), dumps_serving(booster), 7, "0-0")


def entry(config: ModelConfig) -> modelfile.ModelEntry:
    return modelfile.ModelEntry(json.loads(config.to_json()), 7, "0-0",
                                modeldata.dumps(config.build()))


def test_replace_config_is_compare_and_set(redis_url: str) -> None:
    log, _, config = local(redis_url)
    first = config.renewed()
    assert log.replace_config(first, config.uid)
    assert not log.replace_config(config.renewed(), config.uid)  # built from a stale read
    assert log.config("shop") == first
    assert not log.replace_config(ModelConfig("gone", "uniform", ["a"], {}), "u")


def test_a_stale_import_or_reset_answers_409_and_config_and_seed_agree(redis_url: str) -> None:
    log, cfg, config = local(redis_url)
    store = ModelStore(log)
    # two imports both read the model as `config`: the first lands, the second is refused
    a, b = config.renewed(), config.renewed()
    models._land(log, a, config, seeded(a))
    with pytest.raises(PersonalizerFailure) as info:
        models._land(log, b, config, seeded(b))
    assert (info.value.status_code, info.value.code) == (409, "Conflict")
    assert log.config("shop").uid == a.uid
    assert log.load_seed("shop", a.uid)["version"] == 7
    assert log.load_seed("shop", b.uid) is None  # the refused import left nothing behind
    # an import that read `a` while a reset replaced it: refused, the reset's model stays
    assert models.reset(log, store, cfg) == ["shop"]
    reset = log.config("shop")
    assert reset.uid != a.uid and log.load_seed("shop", a.uid) is None  # replaced: dropped
    c = a.renewed()
    with pytest.raises(PersonalizerFailure):
        models._land(log, c, a, seeded(c))
    assert log.config("shop") == reset and log.load_seed("shop", c.uid) is None
    # an import racing the model's creation by a rank (it read no model)
    with pytest.raises(PersonalizerFailure):
        models._land(log, c, None, seeded(c))


def test_apply_recomputes_from_the_config_stored_meanwhile(redis_url: str) -> None:
    log, cfg, _ = local(redis_url)
    loop.apply(log, ModelStore(log), cfg)
    stale = log.config("shop")
    renewed = stale.renewed()
    assert log.replace_config(renewed, stale.uid)  # e.g. a reset after apply's read
    log.set_personalizer_doc("service", {"learning_mode": "Apprentice"})
    assert loop._apply_one(log, cfg, stale, 0) == "updated"
    now = log.config("shop")
    assert now.uid == renewed.uid and now.learning_mode == "Apprentice"  # the reset kept


def encrypted(data: bytes) -> bytes:
    """``data`` (a zip) with the "encrypted" flag set on every entry, local and central."""
    out = bytearray(data)
    for signature, flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = out.find(signature)
        while at >= 0:
            out[at + flags] |= 1
            at = out.find(signature, at + 4)
    return bytes(out)


def test_an_encrypted_entry_is_an_invalid_file_not_a_500(redis_url: str) -> None:
    one = entry(ModelConfig("shop", "adabandit", ACTIONS, {"n_learners": 3, "seed": 1}))
    crafted = encrypted(modelfile.pack([one], KEY.encode(), 0.0))
    with zipfile.ZipFile(io.BytesIO(crafted)) as z, pytest.raises(RuntimeError):
        z.read("manifest.json")  # what the unverified file raises
    with pytest.raises(modelfile.ModelFileError) as info:
        modelfile.unpack(crafted, KEY.encode())
    assert info.value.code == "InvalidModelFile"
    with serve(settings(redis_url)) as base:
        _, admin = clients(base)
        refused(lambda: admin.import_model(crafted), "InvalidModelFile")
        assert EventLog(redis.Redis.from_url(redis_url)).configs() == {}
