"""The OnlineBooster protocol (boosters/base.py), checked on every registered booster.

Parametrised over :func:`boosters.registry.names`, so a newly registered booster is covered
without editing this file. The stream is small and deterministic: 3 actions, two numeric
features and one nominal one, action ``i % 3`` right, a fractional reward on some rounds and
the label on others.
"""

from __future__ import annotations

import copy
import pickle
import types

import numpy as np
import pytest

from boosters.registry import booster_class, booster_params, make_booster, names

K = 3
N_EVENTS = 60
MID = 30
SMALL = {"n_learners": 3, "nominal_attributes": ["colour"], "grace_period": 10}


def _make(name: str, seed: int = 0):
    accepted = booster_params(name)
    return make_booster(
        name, n_actions=K, seed=seed, **{k: v for k, v in SMALL.items() if k in accepted}
    )


def _x(i: int) -> dict:
    return {"a": float(i % 3), "b": float((7 * i) % 11) / 11, "colour": ("red", "green")[i % 2]}


def _feedback(booster, i: int, action: int) -> dict:
    """The label for full-information boosters and on every 4th round, else a reward
    (fractional on every 5th round)."""
    if booster.full_information or i % 4 == 0:
        return {"label": i % 3}
    reward = float(action == i % 3)
    return {"reward": 0.75 * reward if i % 5 == 0 else reward}


def _key(d) -> tuple:
    return (d.action, d.probabilities.tolist())


def _run(booster, start: int, stop: int) -> list[tuple]:
    trace = []
    for i in range(start, stop):
        d = booster.decide_one(_x(i))
        trace.append(_key(d))
        booster.learn_one(_x(i), d, **_feedback(booster, i, d.action))
    return trace


def _canon(obj, path=()):
    """A comparable value of ``obj``'s whole state, by the route pickle takes (``__reduce_ex__``),
    so the digest does not depend on pickle's memo (shared objects) the way its bytes do."""
    if obj is None or isinstance(obj, bool | int | str | bytes):
        return obj
    if isinstance(obj, float):
        return obj.hex()
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return ("ndarray", obj.shape, tuple(_canon(v, path) for v in obj.ravel()))
        return ("ndarray", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, np.generic):
        return _canon(obj.item(), path)
    if isinstance(obj, np.random.Generator):
        return _canon(obj.bit_generator.state, path)
    if id(obj) in path:
        return "<cycle>"
    path = (*path, id(obj))
    if isinstance(obj, list | tuple):
        return (type(obj).__name__, tuple(_canon(v, path) for v in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((_canon(k, path), _canon(v, path)) for k, v in obj.items()))
    if isinstance(obj, set | frozenset):
        return ("set", tuple(sorted(repr(_canon(v, path)) for v in obj)))
    if isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType):
        return ("global", obj.__module__, obj.__qualname__)
    reduced = obj.__reduce_ex__(4)
    if isinstance(reduced, str):
        return ("global", reduced)
    return (type(obj).__qualname__, tuple(_canon(part, path) for part in reduced[1:]))


def _state(booster):
    """``_canon`` of the booster, less River's Thompson reward prototype's generator: River
    seeds it from the OS, but only clones of the prototype (seeded) ever draw."""
    prototype = getattr(getattr(booster, "_bandit", None), "reward_obj", None)
    if hasattr(prototype, "_rng"):
        booster = copy.deepcopy(booster)
        booster._bandit.reward_obj._rng = None
    return _canon(booster)


def _probe(booster, seed: int = 99) -> list[tuple]:
    """Decisions on fresh contexts with a private generator (reads the booster only)."""
    return [
        _key(booster.decide_one(_x(i), rng=np.random.default_rng(seed + i)))
        for i in range(N_EVENTS, N_EVENTS + 15)
    ]


@pytest.fixture(params=names())
def name(request):
    return request.param


def test_registry_covers_every_protocol_property():
    assert len(names()) >= 12  # the suite below runs on each; a shrinking registry is a bug


def test_pickle_round_trip_mid_stream(name):
    booster = _make(name, seed=3)
    _run(booster, 0, MID)
    clone = pickle.loads(pickle.dumps(booster))
    assert _state(clone) == _state(booster)
    assert _run(clone, MID, N_EVENTS) == _run(booster, MID, N_EVENTS)
    assert _probe(clone) == _probe(booster)


def test_deciding_with_a_given_rng_writes_nothing(name):
    booster = _make(name, seed=4)
    _run(booster, 0, MID)
    before = pickle.dumps(booster)
    state = _state(booster)
    decisions = [booster.decide_one(_x(i), rng=np.random.default_rng(i)) for i in range(40)]
    assert _state(booster) == state
    # with the same generator state, the decision is the one the own generator would give
    gen_state = pickle.loads(before)._rng.bit_generator.state
    rng = np.random.default_rng()
    rng.bit_generator.state = gen_state
    own = pickle.loads(before)
    assert _key(own.decide_one(_x(0))) == _key(pickle.loads(before).decide_one(_x(0), rng=rng))
    assert all(0 <= d.action < K for d in decisions)


def test_same_seed_same_decisions(name):
    a, b = _make(name, seed=11), _make(name, seed=11)
    assert _run(a, 0, N_EVENTS) == _run(b, 0, N_EVENTS)
    assert _state(a) == _state(b)


def test_different_seed_different_decisions(name):
    """Every booster draws from its generator somewhere: when deciding (exploration) or, for
    the full-information twins (greedy, rho = 0), when learning, which then shows in the
    decisions."""
    a, b = _make(name, seed=11), _make(name, seed=12)
    trace_a, trace_b = _run(a, 0, N_EVENTS), _run(b, 0, N_EVENTS)
    assert [act for act, _ in trace_a] != [act for act, _ in trace_b]


def test_delayed_reward_learns_the_same_as_an_immediate_one(name):
    """A decision's feedback learned after other decisions were made (not yet learned) gives
    the model that learning it at once gives: the Decision carries what learning needs."""
    immediate = _make(name, seed=5)
    _run(immediate, 0, MID)
    delayed = pickle.loads(pickle.dumps(immediate))
    d = immediate.decide_one(_x(MID), rng=np.random.default_rng(0))
    immediate.learn_one(_x(MID), d, **_feedback(immediate, MID, d.action))
    # the delayed copy decides the same event, then serves other requests before the reward
    d_late = delayed.decide_one(_x(MID), rng=np.random.default_rng(0))
    assert _key(d_late) == _key(d)
    snapshot = _canon(d_late)
    for i in range(MID + 1, MID + 10):
        delayed.decide_one(_x(i), rng=np.random.default_rng(i))
    delayed.learn_one(_x(MID), d_late, **_feedback(delayed, MID, d_late.action))
    assert _canon(d_late) == snapshot  # learning leaves the decision as it was
    assert _state(delayed) == _state(immediate)
    assert _probe(delayed) == _probe(immediate)


def test_delayed_rewards_in_order_match_interleaved_learning_of_the_same_decisions(name):
    """Learning the same decisions in the same order gives the same model whether the
    decisions were all made first or each was learned right after it was made."""
    first = _make(name, seed=6)
    _run(first, 0, MID)
    interleaved = pickle.loads(pickle.dumps(first))
    batch = [(i, first.decide_one(_x(i), rng=np.random.default_rng(i))) for i in range(MID, 45)]
    for i, d in batch:
        first.learn_one(_x(i), d, **_feedback(first, i, d.action))
    for i, d in batch:
        interleaved.decide_one(_x(i), rng=np.random.default_rng(i))
        interleaved.learn_one(_x(i), d, **_feedback(interleaved, i, d.action))
    assert _state(first) == _state(interleaved)
    assert _probe(first) == _probe(interleaved)


def test_feedback_kind_follows_full_information(name):
    booster = _make(name, seed=7)
    _run(booster, 0, 10)
    d = booster.decide_one(_x(10))
    if booster_class(name).full_information:
        before = _state(booster)
        for reward in (0.0, 0.25, 0.5, 0.75, 0.999):  # refused every time, never by luck
            with pytest.raises(ValueError, match="full-information.*label"):
                booster.learn_one(_x(10), d, reward=reward)
        assert _state(booster) == before  # a refused call learns nothing
        booster.learn_one(_x(10), d, reward=1.0)  # a reward of 1 reveals the label
        assert _state(booster) != before
        booster.learn_one(_x(10), d, label=10 % 3)
    else:  # a bandit booster also takes the true label (full information on this round)
        booster.learn_one(_x(10), d, label=10 % 3)
    assert _state(booster) != _state(_make(name, seed=7))
    with pytest.raises(ValueError, match="label"):
        booster.learn_one(_x(10), d, label=K)
    with pytest.raises(ValueError, match="exactly one"):
        booster.learn_one(_x(10), d, reward=1.0, label=0)
    with pytest.raises(ValueError, match="reward"):
        booster.learn_one(_x(10), d, reward=1.5)


def test_decisions_are_distributions_over_the_allowed_actions(name):
    booster = _make(name, seed=8)
    for i in range(N_EVENTS):
        allowed = None if i % 2 else [i % 3, (i + 1) % 3]
        d = booster.decide_one(_x(i), allowed=allowed)
        p = d.probabilities
        assert p.shape == (K,)
        assert (p >= 0).all()
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert d.propensity == p[d.action] > 0
        if allowed is not None:
            assert d.action in allowed
            assert p[[a for a in range(K) if a not in allowed]].tolist() == [0.0]
        booster.learn_one(_x(i), d, **_feedback(booster, i, d.action))


@pytest.mark.parametrize("name", names())
def test_constructor_lists_every_parameter(name):
    """River's convention: explicit parameters, no ``*args``; the ``**flat`` of a booster with
    parameter groups (boosters/groups.py) takes only its groups' declared fields. The registry's
    view is the class's signature with those fields in place of the groups, each declared in
    ``_parameter_constraints``, and every parameter is kept as an attribute of the same name."""
    import inspect

    from boosters.groups import GROUPS

    cls = booster_class(name)
    signature = inspect.signature(cls.__init__).parameters.values()
    assert inspect.Parameter.VAR_POSITIONAL not in {p.kind for p in signature}
    own = {p.name for p in signature if p.kind is not p.VAR_KEYWORD} - {"self", "n_actions"}
    grouped = set(booster_params(name)) - own
    assert grouped <= {f for g in GROUPS.values() for f in g.__dataclass_fields__}
    assert set(booster_params(name)) <= set(cls._parameter_constraints) | {"policy"}
    booster = make_booster(name, n_actions=3, seed=0)
    for param in booster_params(name):
        assert hasattr(booster, param), param
