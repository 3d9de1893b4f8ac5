"""FastHoeffdingTreeClassifier grows exactly River's trees (learners/vfdt.py)."""

from __future__ import annotations

import numpy as np
import pytest
from river.tree import HoeffdingTreeClassifier

from learners.vfdt import FastHoeffdingTreeClassifier

pytestmark = pytest.mark.slow  # real processes or long runs: the full suite only


def _stream(n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        c = "pqrs"[int(rng.integers(4))]
        v = float(rng.normal())
        u = float(rng.integers(5))
        y = int((c in "pq") + (v > 0.3) + (u > 2)) % 3 if rng.random() > 0.1 else int(
            rng.integers(3)
        )
        w = float(rng.choice([1.0, 1.0, 4.0, 40.0]))  # importance weights, as the boosters give
        yield {"c": c, "v": v, "u": u}, y, w


PROBES = [{"c": c, "v": v, "u": u} for c in "pqrs" for v in (-1.0, 0.0, 0.5, 2.0) for u in (0, 4)]


@pytest.mark.parametrize(
    "params",
    [
        {"grace_period": 5, "delta": 0.1, "tau": 0.05},  # splits often; pre-pruning on
        {"grace_period": 3, "delta": 0.3, "tau": 0.1, "max_depth": 3},  # depth-inactive leaves
        {  # the memory limit is hit
            "grace_period": 5,
            "delta": 0.2,
            "tau": 0.05,
            "max_size": 0.05,
            "memory_estimate_period": 10,
        },
    ],
)
def test_same_tree_as_river(params: dict) -> None:
    common = {"split_criterion": "info_gain", "leaf_prediction": "mc", "nominal_attributes": ["c"]}
    ours = FastHoeffdingTreeClassifier(**common, **params)
    river = HoeffdingTreeClassifier(**common, **params)
    inactive_seen = 0
    for i, (x, y, w) in enumerate(_stream(3000, seed=len(params))):
        ours.learn_one(x, y, w=w)
        river.learn_one(x, y, w=w)
        if i % 50 == 0 or i > 2900:
            assert ours.summary == river.summary, i
            for probe in PROBES:
                assert ours.predict_proba_one(probe) == river.predict_proba_one(probe)
        inactive_seen = max(inactive_seen, river.summary["n_inactive_leaves"])
    assert river.summary["n_leaves"] > 5  # the trees did grow
    assert ours._n_active_leaves + ours._n_inactive_leaves == ours.summary["n_leaves"]
    if "max_depth" in params or "max_size" in params:
        assert inactive_seen > 0  # the re-activation / limit paths were exercised
