"""A round's split searches: in two halves around the search, shared with a helper thread."""

from __future__ import annotations

import time

import numpy as np
import pytest
import redis

from learners import split_search
from learners._core_search import SCREENED
from learners.compiled import TreeEnsemble, kernels
from learners.split_search import helper_on, set_helper


def _numeric_stream(n, seed=0, features=24, classes=5):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, features))
    for _ in range(n):
        y = int(rng.integers(classes))
        x = centres[y] + rng.normal(scale=1.5, size=features)
        x[rng.random(features) < 0.05] = np.nan  # missing values
        row = {f"f{j}": float(v) for j, v in enumerate(x)}
        row["c"] = "pqr"[int(rng.integers(3))]
        yield row, y, float(rng.choice([0.0, 1.0, 3.0, 40.0]))  # importance-like weights


def _ensemble():
    return TreeEnsemble(4, 5, grace_periods=[5, 10, 20, 40], deltas=[0.5, 0.1, 0.01, 0.3],
                        taus=[0.05, 0.3, 0.9, 0.01], leaf_prediction="nba", max_size=0.05)


def _learn(trees, data):
    for x, y, w in data:
        trees.learn(trees.transform(x, learn=True), np.full(trees.n_trees, y),
                    np.full(trees.n_trees, w))
    return trees


def _assert_same_state(a, b):
    sa, sb = a.__getstate__(), b.__getstate__()
    for key in ("ni", "nf", "cls", "edges", "stat", "tree_i"):
        np.testing.assert_array_equal(sa[key], sb[key])


@pytest.fixture
def helper():
    """The helper setting and the shared-work threshold, restored after the test."""
    before, floor = helper_on(), split_search.MIN_SHARED_WORK
    yield
    set_helper(before)
    split_search.MIN_SHARED_WORK = floor


@pytest.mark.parametrize("shared", [False, True])
def test_a_tree_learns_in_an_ensemble_as_it_learns_alone(shared, helper):
    """Every tree's leaf update comes before any split attempt of the round: a tree's splits,
    statistics and predictions are those of the same tree learning alone (River's order), the
    search in the round's one call or shared with the helper."""
    split_search.MIN_SHARED_WORK = 1 if shared else split_search.MIN_SHARED_WORK
    set_helper(shared)
    data = list(_numeric_stream(700))
    together = _learn(_ensemble(), data)
    assert together.n_leaves().min() >= 3  # the bound deactivated leaves too
    for t in range(together.n_trees):
        alone = TreeEnsemble(1, 5, grace_periods=together.tree_f[t, 0],
                             deltas=together.tree_f[t, 1], taus=together.tree_f[t, 2],
                             leaf_prediction="nba", max_size=0.05)
        _learn(alone, data)
        assert alone.splits(0) == together.splits(t)
        assert alone.n_active_leaves()[0] == together.n_active_leaves()[t]
        for x, _, _ in data[:150]:
            np.testing.assert_array_equal(alone.predict_proba(alone.transform(x))[0],
                                          together.predict_proba(together.transform(x))[t])


def test_a_search_shared_when_the_interpreter_shuts_down_is_the_callers_alone(monkeypatch,
                                                                              helper):
    class Closed:
        def submit(self, *args):
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    data = list(_numeric_stream(300))
    set_helper(False)
    plain = _learn(_ensemble(), data)
    set_helper(True)
    split_search.MIN_SHARED_WORK = 1
    monkeypatch.setattr(split_search, "_pool", Closed)
    _assert_same_state(plain, _learn(_ensemble(), data))


def test_the_helper_runs_each_call_and_hands_back_its_error():
    ran = []
    helper = split_search._pool()
    helper.submit(ran.append, 1).result()
    assert ran == [1]

    def fails(x):
        raise ValueError(x)

    with pytest.raises(ValueError, match="bad"):
        helper.submit(fails, "bad").result()
    helper.submit(ran.append, 2).result()  # the thread goes on after an error
    assert ran == [1, 2]


def test_pairs_taken_from_both_ends_give_the_one_thread_search():
    trees = _learn(_ensemble(), list(_numeric_stream(300)))
    active = np.flatnonzero((trees.ni[: trees.ctr[0], 0] == 0) & (trees.ni[: trees.ctr[0], 5] >= 0))
    search = trees._searcher
    n_att = min(len(active), trees.n_trees)
    search.nodes[:n_att] = active[:n_att]
    args = (trees.ni, trees.cls, trees.present, trees.stat_blocks, trees.count_blocks, trees.seen,
            trees.block_of, trees.kinds, trees.feat_rows, trees.feat_nrows, trees.row_other,
            trees.multi_ok, trees.cfg, search.nodes, n_att)
    kernel = kernels().search_share

    def run(forward, claimed, out=None):
        out = out or (np.full_like(search.merits, 7.0), np.full_like(search.values, 7.0),
                      np.full_like(search.flags, -1))
        state = np.zeros(3, dtype=np.int64)
        assert kernel(*args, forward, claimed, *out, search.dists[0], state) == 0
        return out

    n_pairs = n_att * trees.kinds.shape[0]
    alone = run(True, np.zeros(n_pairs + 3, dtype=np.int8))
    assert (alone[2][:n_att] & 1).any() and (alone[2][:n_att] != -1).all()
    cut = n_pairs // 3
    claimed = np.zeros(n_pairs, dtype=np.int8)
    claimed[:cut] = 1  # the caller's pairs, taken before the helper starts
    shared = run(False, claimed)
    assert claimed.all() and (shared[2][:n_att].ravel()[:cut] == -1).all()
    claimed[:cut] = 0
    run(True, claimed, shared)  # the caller's pairs, then the exact search of the candidates
    for a in range(n_att):  # each thread prunes by its own floor: the same attempts
        assert _attempt(alone, a) == _attempt(shared, a)
        exact = ((alone[2][a] | shared[2][a]) & SCREENED) == 0
        for x, y in zip(alone, shared, strict=True):
            np.testing.assert_array_equal(x[a][exact], y[a][exact])
        np.testing.assert_array_equal(alone[2][a] & 1, shared[2][a] & 1)


def _attempt(search, a):
    """What leaf ``a``'s attempt reads of a search: the suggestions, the best two merits, the
    best feature (the last of equal merits), its value and whether it is a real split."""
    merits, values, flags = (arr[a] for arr in search)
    n, top, second, best = 0, -np.inf, -np.inf, -1
    for j in np.flatnonzero(flags & 1):
        n += 1
        if merits[j] >= top:
            second, top, best = top, merits[j], j
        elif merits[j] > second:
            second = merits[j]
    return n, top, second, best, repr(float(values[best])), bool(flags[best] & 2)


def test_the_caller_closes_the_search_and_waits_only_for_a_helper_that_entered():
    trees = _learn(_ensemble(), list(_numeric_stream(300)))
    search = trees._searcher
    search.nodes[0] = np.flatnonzero(trees.ni[: trees.ctr[0], 5] >= 0)[0]
    args = (trees.ni, trees.cls, trees.present, trees.stat_blocks, trees.count_blocks, trees.seen,
            trees.block_of, trees.kinds, trees.feat_rows, trees.feat_nrows, trees.row_other,
            trees.multi_ok, trees.cfg, search.nodes, 1)
    kernel = kernels().search_share

    def run(forward, state):
        claimed = np.zeros(trees.kinds.shape[0], dtype=np.int8)
        out = (np.full_like(search.merits, 7.0), np.full_like(search.values, 7.0),
               np.full_like(search.flags, 7))
        waited = kernel(*args, forward, claimed, *out, search.dists[0], state)
        return waited, claimed.sum(), state.tolist()

    n = trees.kinds.shape[0]
    assert run(True, np.zeros(3, dtype=np.int64)) == (0, n, [0, 0, 1])  # no helper: closed
    assert run(False, np.zeros(3, dtype=np.int64)) == (0, n, [1, 1, 0])  # a helper alone
    assert run(False, np.array([0, 0, 1])) == (0, 0, [1, 1, 1])  # too late: nothing done
    assert run(True, np.array([1, 1, 0])) == (0, n, [1, 1, 1])  # the helper had finished
    assert run(True, np.array([1, 0, 0])) == (1, n, [1, 0, 1])  # still at work: caller waits


def test_the_helper_thread_changes_nothing(monkeypatch, helper):
    """The caller's share starts late (the helper takes pairs first, from the end) in some rounds,
    and the helper is off in the other ensemble: the trees are the same to the bit."""
    data = list(_numeric_stream(400, seed=1))
    set_helper(False)
    plain = _learn(_ensemble(), data)
    set_helper(True)
    split_search.MIN_SHARED_WORK = 1  # every search shared
    real, rounds = kernels().search_share, {"waited": 0, "helped": 0}

    def late_caller(*args):
        forward, n_pairs, claimed = args[15], args[14] * args[7].shape[0], args[16]
        if forward and rounds["waited"] < 40:  # the first rounds: the helper's pairs come first
            rounds["waited"] += 1
            deadline = time.monotonic() + 2.0
            while not claimed[:n_pairs].any() and time.monotonic() < deadline:
                time.sleep(0.001)
            rounds["helped"] += bool(claimed[:n_pairs].any())
        return real(*args)

    monkeypatch.setattr(kernels(), "search_share", late_caller)
    shared = _learn(_ensemble(), data)
    assert rounds["helped"] > 20  # the helper searched before the caller in those rounds
    _assert_same_state(plain, shared)


def test_a_short_search_or_no_helper_keeps_the_round_in_one_call(monkeypatch, helper):
    def shared(*args):
        raise AssertionError("the search was shared")

    monkeypatch.setattr(kernels(), "search_share", shared)
    data = list(_numeric_stream(200))
    set_helper(True)  # 4 trees x 24 features x 5 classes < MIN_SHARED_WORK
    assert _learn(_ensemble(), data).n_leaves().sum() > 4
    set_helper(False)
    split_search.MIN_SHARED_WORK = 1
    assert _learn(_ensemble(), data).n_leaves().sum() > 4


def test_the_learner_setting_turns_the_helper_off(redis_url, helper):
    from service.eventlog import EventLog
    from service.learner import Learner, limits
    from service.models.store import ModelStore
    from service.settings import Settings

    settings = Settings(redis_url=redis_url, split_helper=False)
    client = redis.Redis.from_url(redis_url)
    set_helper(True)
    Learner(ModelStore(EventLog(client, limits=limits(settings))), settings, client)
    assert not helper_on()
    client.close()



def test_learning_and_searching_release_the_gil():
    """The service's learner joins feedback in another thread while the trees learn, and the
    helper searches beside its caller: the kernels of a round run without the GIL."""
    k = kernels()
    for kernel in (k.learn_round, k.learn_splits, k.search_share, k.refine):
        assert kernel.targetoptions.get("nogil") is True, kernel.__name__
