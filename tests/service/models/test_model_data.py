"""Models as data (service/models/modeldata.py) and the allow-listed unpickler
(service/models/snapshots.py): every booster kind round-trips with the same decisions, nothing
outside the allow-list is ever named (let alone called) by a model file or a stored pickle, and
the Personalizer model file holds data only (a version-1 file of pickles is refused unless the
setting allows it, and then read with the allow-listed unpickler)."""

from __future__ import annotations

import collections
import functools
import hashlib
import hmac
import io
import json
import os
import pickle
import random
import zipfile

import numpy as np
import pytest
import redis

from boosters.batch.bopl import BOPL, BOPLS
from boosters.registry import booster_params, make_booster, names
from learners import frozen
from learners.batch_trees import LeastSquaresTree, WeightedTreeClassifier
from learners.frozen import dumps_serving
from service.domain import ModelConfig
from service.eventlog import EventLog
from service.models import modeldata, snapshots
from service.models.store import ModelStore
from service.personalizer import modelfile, models
from service.personalizer.errors import PersonalizerFailure
from service.settings import Settings

K = 3
KEY = "test-signing-key-0123456789"
#: variants of the boosters that hold other objects (River's trees, reward models, experts)
VARIANTS = [{}, {"tree_core": "river"}, {"tree_core": "river", "fast_trees": False},
            {"leaf_prediction": "mc"}, {"guess_model": "linear"}, {"quadratic_expert": True},
            {"grace_by": "count"}, {"fixed_trees": True}]


def cases() -> list[tuple[str, dict]]:
    out = []
    for name in names():
        accepted = booster_params(name)
        out += [(name, v) for v in VARIANTS if set(v) <= set(accepted)]
    return out


def make(name: str, variant: dict):
    accepted = booster_params(name)
    small = {"n_learners": 3, "nominal_attributes": ["colour"], **variant}
    return make_booster(name, n_actions=K, seed=1,
                        **{k: v for k, v in small.items() if k in accepted})


def x(i: int) -> dict:
    out = {"a": float(i % 3), "b": float((7 * i) % 11) / 11, "colour": "rgb"[i % 3],
           "user": f"u{i % 5}"}
    if i % 7 == 0:
        del out["b"]  # a missing feature now and then
    return out


def trace(booster, start: int, stop: int) -> list[tuple]:
    """Decide and learn events ``start..stop``: the actions and probability vectors, bitwise."""
    out = []
    for i in range(start, stop):
        d = booster.decide_one(x(i))
        out.append((d.action, d.probabilities.tobytes()))
        if booster.full_information or i % 4 == 0:
            booster.learn_one(x(i), d, label=i % K)
        else:
            booster.learn_one(x(i), d, reward=float(d.action == i % K))
    return out


# --- the codec --------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), cases(), ids=lambda c: str(c))
def test_every_booster_round_trips_with_the_same_decisions(name: str, variant: dict) -> None:
    booster = make(name, variant)
    trace(booster, 0, 150)
    data = modeldata.dumps(booster)
    back = modeldata.loads(data)
    twin = pickle.loads(pickle.dumps(booster, protocol=5))  # what a snapshot restores
    assert type(back) is type(booster)
    assert modeldata.dumps(back) == modeldata.dumps(twin)  # the same state as pickle's
    serving = [modeldata.dumps(pickle.loads(dumps_serving(b))) for b in (back, twin)]
    assert serving[0] == serving[1]  # and the same serving copy
    assert trace(back, 150, 230) == trace(booster, 150, 230)  # decides and learns the same
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.namelist() == ["data.json", "arrays.bin"]
        assert b"pickle" not in z.read("data.json")


def test_shared_objects_and_cycles_are_kept() -> None:
    policy = make_booster("uniform", n_actions=2, seed=0)
    shared, loop = np.arange(4.0), []
    loop.append(loop)
    policy.notes = {"a": shared, "b": shared, "me": policy, "loop": loop, 1: {2, 3}, (4,): b"x"}
    back = modeldata.loads(modeldata.dumps(policy))
    assert back.notes["a"] is back.notes["b"] and back.notes["me"] is back
    assert back.notes["loop"][0] is back.notes["loop"]
    assert back.notes[1] == {2, 3} and back.notes[(4,)] == b"x"
    np.testing.assert_array_equal(back.notes["a"], shared)
    assert back.notes["a"].flags.writeable and back.notes["a"].flags.owndata


def test_numbers_keep_their_types_and_bits() -> None:
    values = [0, -1, 2**70, -(2**64), 1.0, -0.0, float("inf"), float("-inf"), 1e-310, 2 + 3j,
              True, None, "s", np.float32(0.1), np.int64(-7), np.bool_(True), np.uint8(255),
              np.zeros((2, 3), dtype=np.float32, order="F"), np.array(5, dtype=np.int16),
              np.zeros((0, 4)), np.arange(6).reshape(2, 3)[:, ::2]]
    back = modeldata.loads(modeldata.dumps(values))
    for a, b in zip(values, back, strict=True):
        assert type(a) is type(b) and repr(a) == repr(b)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.flags.f_contiguous == b.flags.f_contiguous
    nan = modeldata.loads(modeldata.dumps(float("nan")))
    assert nan != nan


def test_the_standard_library_objects_boosters_hold() -> None:
    rng = random.Random(5)
    rng.random()
    objects = [rng, collections.Counter("abca"), collections.defaultdict(float, {"a": 1.0}),
               collections.OrderedDict(b=1, a=2), collections.deque([1, 2], maxlen=3),
               functools.partial(float, 1), slice(1, None, 2), np.random.default_rng(3)]
    objects[-1].random(7)
    back = modeldata.loads(modeldata.dumps(objects))
    assert back[0].random() == rng.random()
    assert back[1:5] == objects[1:5] and back[6] == objects[6]
    assert back[2].default_factory is float and back[4].maxlen == 3
    assert (back[5].func, back[5].args, back[5]()) == (float, (1,), 1.0)
    assert back[7].random() == objects[7].random()
    assert back[7].bit_generator.seed_seq.entropy == 3


def test_what_has_no_data_form_is_refused_when_written() -> None:
    import fractions

    for obj, said in [(lambda: 0, "has no data form"),
                      (np.array([object()]), "dtype object"),
                      (fractions.Fraction(1, 2), "fractions.Fraction is not allowed"),
                      (np.random.Generator(np.random.MT19937(1)), "PCG64")]:
        with pytest.raises(modeldata.ModelDataError, match=said):
            modeldata.dumps(obj)
    inner: list = []
    cycle = (inner,)
    inner.append(cycle)  # a tuple that contains itself cannot be made from its parts
    with pytest.raises(modeldata.ModelDataError, match="contains itself"):
        modeldata.dumps(cycle)


def data_file(root) -> bytes:
    """Model data with ``root`` as its tree (a crafted file)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("data.json", json.dumps({"format": modeldata.FORMAT,
                                            "version": modeldata.VERSION, "root": root}))
        z.writestr("arrays.bin", b"\0" * 16)
    return out.getvalue()


@pytest.mark.parametrize(("root", "said"), [
    ({"object": "os:system", "call": ["touch {canary}"]}, "os.system is not allowed"),
    ({"object": "builtins:eval", "call": ["open('{canary}', 'w')"]}, "builtins.eval is not"),
    ({"object": "subprocess:Popen", "new": []}, "subprocess.Popen is not allowed"),
    ({"class": "posix:system"}, "posix.system is not allowed"),
    ({"function": "builtins:eval"}, "builtins.eval is not allowed"),
    ({"function": "os:system"}, "os.system is not allowed"),
    ({"object": "learners.compiled:np", "new": []}, "learners.compiled.np is not allowed"),
    ({"object": "learners.frozen:pickle.loads", "new": []}, "pickle.loads is not allowed"),
    ({"object": "service.__main__:main", "new": []}, "service.__main__.main is not allowed"),
    ({"method": "__init__", "of": {"list": []}}, "__init__ is not allowed"),
    ({"object": "learners.compiled:TreeEnsemble", "call": [1, 2]}, "is not made by a call"),
    ({"array": ["|O", [1], 0, "C"]}, "dtype"),
    ({"array": ["<f8", [1000], 0, "C"]}, "outside the buffer"),
    ({"ref": 3}, "before its object"),
    ({"eval": "1"}, "not a node"),
], ids=lambda p: str(p)[:40])
def test_crafted_data_naming_anything_else_is_refused(root, said, tmp_path) -> None:
    canary = tmp_path / "ran"
    text = json.dumps(root).replace("{canary}", str(canary))
    with pytest.raises(modeldata.ModelDataError, match=said):
        modeldata.loads(data_file(json.loads(text)))
    assert not canary.exists()


def test_data_that_is_no_model_data_is_refused() -> None:
    for data in (b"", b"PK\x05\x06" + b"\0" * 18, pickle.dumps([1])):
        with pytest.raises(modeldata.ModelDataError, match="not valid model data"):
            modeldata.loads(data)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("data.json", "{}")
        z.writestr("arrays.bin", b"")
    with pytest.raises(modeldata.ModelDataError, match="compressed"):
        modeldata.loads(out.getvalue())


# --- the allow-listed unpickler ---------------------------------------------------------------
class Call:
    """An object that unpickles as ``func(*args)``: what a crafted pickle does."""

    def __init__(self, func, *args) -> None:
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


@pytest.mark.parametrize("crafted", [
    Call(os.system, "touch {canary}"), Call(eval, "open('{canary}', 'w')"),
    Call(exec, "open('{canary}', 'w')"), Call(__import__("subprocess").Popen, ["touch", "x"]),
    Call(getattr, [], "__class__"), Call(getattr, random.Random(1), "seed"),
    Call(__import__("codecs").encode, "x", "rot13"), Call(snapshots.pickle_isolated, 1),
], ids=lambda c: f"{c.func.__module__}.{c.func.__name__}")
def test_the_unpickler_refuses_anything_else(crafted: Call, tmp_path) -> None:
    canary = tmp_path / "ran"
    crafted.args = tuple(a.replace("{canary}", str(canary)) if isinstance(a, str) else a
                         for a in crafted.args)
    for protocol in (0, 2, 5):
        with pytest.raises(snapshots.ForbiddenName, match="is not allowed in a stored model"):
            snapshots.loads(pickle.dumps(crafted, protocol=protocol))
    assert not canary.exists()
    assert issubclass(snapshots.ForbiddenName, pickle.UnpicklingError)


def test_a_serving_copys_inner_pickles_are_read_with_the_allow_list(tmp_path) -> None:
    canary = tmp_path / "ran"
    inner = pickle.dumps(Call(os.system, f"touch {canary}"))
    blob = pickle.dumps(Call(frozen._thaw, inner))
    assert b"learners.frozen" in blob
    with pytest.raises(snapshots.ForbiddenName, match="system is not allowed"):
        snapshots.loads(blob)
    assert not canary.exists()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), cases(), ids=lambda c: str(c))
def test_the_unpickler_reads_every_snapshot_and_serving_copy(name: str, variant: dict) -> None:
    booster = make(name, variant)
    trace(booster, 0, 100)
    for protocol in (2, 5):
        whole = snapshots.loads(pickle.dumps(booster, protocol=protocol))
        assert trace(whole, 100, 130) == trace(pickle.loads(pickle.dumps(booster)), 100, 130)
    serving = snapshots.loads(dumps_serving(booster))
    probe = [serving.decide_one(x(i), rng=np.random.default_rng(i)) for i in range(5)]
    assert [d.action for d in probe] == [
        booster.decide_one(x(i), rng=np.random.default_rng(i)).action for i in range(5)]


def test_the_unpickler_reads_published_policies_and_old_names() -> None:
    rng = np.random.default_rng(0)
    n = 200
    X = rng.normal(size=(n, 4))
    a = rng.integers(0, K, n)
    r = (a == (X[:, 0] > 0)).astype(float)
    for cls, base in ((BOPL, LeastSquaresTree(max_depth=3)),
                      (BOPLS, WeightedTreeClassifier(max_depth=3))):
        policy = cls(n_actions=K, base_learner=base, n_rounds=3, random_state=0)
        policy.fit(X, a, np.full(n, 1 / K), r)
        back = snapshots.loads(snapshots.dumps_whole(policy))
        np.testing.assert_array_equal(back.predict_proba(X), policy.predict_proba(X))
    # a class renamed when it became public, in a pickle of protocol 0 (text names)
    from boosters.online.oco import OCOParams

    old = pickle.dumps(OCOParams.__new__(OCOParams), protocol=0)
    old = old.replace(b"boosters.online.oco\nOCOParams", b"boosters.oco\n_OCOParams")
    assert type(snapshots.loads(old)) is OCOParams


# --- the Personalizer model file --------------------------------------------------------------
def version_1(config: ModelConfig, booster_pickle: bytes, key: str | None = KEY) -> bytes:
    """A model file as version 1 wrote it: pickles of the booster and its serving copy."""
    parts = {"booster": booster_pickle, "serving": b"unused"}
    model = {"name": config.name, "uid": config.uid, "version": 7, "joinedId": "0-0",
             "config": json.loads(config.to_json()), "featureTypes": {},
             **{p: {"path": f"models/{config.name}/{p}.pkl", "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest()} for p, data in parts.items()}}
    manifest = json.dumps({"format": modelfile.FORMAT, "formatVersion": 1, "created": "x",
                           "models": [model]}).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("manifest.json", manifest)
        for p, data in parts.items():
            z.writestr(model[p]["path"], data)
        if key is not None:
            mac = hmac.new(key.encode(), manifest, hashlib.sha256).hexdigest()
            z.writestr("signature.json", json.dumps({"algorithm": "HMAC-SHA256", "hmac": mac}))
    return out.getvalue()


def endpoint(redis_url: str, allow_pickle: bool = False):
    log = EventLog(redis.Redis.from_url(redis_url))
    config = ModelConfig("shop", "adabandit", ["a0", "a1", "a2"], {"n_learners": 3, "seed": 1})
    assert log.add_config(config)
    settings = Settings(redis_url=redis_url, personalizer_model="shop",
                        personalizer_model_signing_key=KEY,
                        personalizer_model_allow_pickle=allow_pickle)
    return log, ModelStore(log), settings, config


def imported(redis_url: str, data: bytes, allow_pickle: bool = False) -> tuple[int, str, str]:
    log, store, settings, _ = endpoint(redis_url, allow_pickle)
    with pytest.raises(PersonalizerFailure) as info:
        models.import_file(log, store, settings, data)
    return info.value.status_code, info.value.code, info.value.message


def test_a_version_1_file_is_refused_unless_the_setting_allows_it(redis_url, tmp_path) -> None:
    canary = tmp_path / "ran"
    config = ModelConfig("shop", "adabandit", ["a0", "a1", "a2"], {"n_learners": 3, "seed": 1})
    crafted = pickle.dumps(Call(os.system, f"touch {canary}"))
    for data, allow, code in [
            (version_1(config, crafted, key=None), False, "ModelFileNotSigned"),
            (version_1(config, crafted, key="another-key-0123456"), True, "InvalidModelSignature"),
            (version_1(config, crafted), False, "PickledModelFileNotAllowed"),
            (version_1(config, crafted), True, "InvalidModelFile")]:
        redis.Redis.from_url(redis_url).flushdb()
        status, got, message = imported(redis_url, data, allow)
        assert (status, got) == (400, code), message
        if got == "PickledModelFileNotAllowed":
            assert "personalizer_model_allow_pickle" in message
        if allow and got == "InvalidModelFile":
            assert "system is not allowed in a stored model" in message
    assert not canary.exists()
    # a genuine file of version 1: imported with the setting, and decides as it did
    redis.Redis.from_url(redis_url).flushdb()
    booster = config.build()
    trace(booster, 0, 80)
    log, store, settings, _ = endpoint(redis_url, allow_pickle=True)
    assert models.import_file(log, store, settings, version_1(
        config, snapshots.dumps_whole(booster))) == ["shop"]
    seed = log.load_seed("shop", log.config("shop").uid)
    assert trace(snapshots.loads(seed["blob"]), 80, 120) == trace(booster, 80, 120)


def signed(entries: list[modelfile.ModelEntry]) -> bytes:
    return modelfile.pack(entries, KEY.encode(), 0.0)


def test_a_data_file_naming_a_foreign_class_or_no_booster_is_refused(redis_url) -> None:
    _, _, _, config = endpoint(redis_url)
    as_dict = json.loads(config.to_json())
    for booster, said in [
            (data_file({"object": "os:system", "call": ["true"]}), "os.system is not allowed"),
            (data_file({"function": "builtins:eval"}), "builtins.eval is not allowed"),
            (modeldata.dumps({"not": "a booster"}), "is a dict, not a adabandit"),
            (modeldata.dumps(make_booster("uniform", 3, seed=1)), "not a adabandit"),
            (modeldata.dumps(make_booster("adabandit", 2, seed=1)), "does not match its actions"),
            (b"not data", "not valid model data")]:
        redis.Redis.from_url(redis_url).flushdb()
        entry = modelfile.ModelEntry(as_dict, 7, "0-0", booster)
        status, code, message = imported(redis_url, signed([entry]))
        assert (status, code) == (400, "InvalidModelFile") and said in message, message


def test_a_data_file_imports_the_exact_booster(redis_url) -> None:
    log, store, settings, config = endpoint(redis_url)
    booster = config.build()
    trace(booster, 0, 120)
    entry = modelfile.ModelEntry(json.loads(config.to_json()), 120, "0-0",
                                 modeldata.dumps(booster), {"a": "n"})
    (back,) = modelfile.unpack(signed([entry]), KEY.encode())
    assert back == entry and back.encoding == modelfile.DATA
    assert models.import_file(log, store, settings, signed([entry])) == ["shop"]
    seed = log.load_seed("shop", log.config("shop").uid)
    assert seed["version"] == 120
    twin = pickle.loads(pickle.dumps(booster))
    assert trace(snapshots.loads(seed["blob"]), 120, 160) == trace(twin, 120, 160)
    served = snapshots.loads(log.load_seed("shop", log.config("shop").uid, serving=True)[
        "blob"])
    assert [served.decide_one(x(i), rng=np.random.default_rng(i)).action for i in range(5)] == [
        booster.decide_one(x(i), rng=np.random.default_rng(i)).action for i in range(5)]
