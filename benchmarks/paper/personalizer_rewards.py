"""How fast a Personalizer client learns through the Azure Personalizer SDK, against the native API.

One problem, four actions, a deterministic rule: the context ``{"user": {"segment": "s<k>"},
"visit": {"hour": h}}`` has the best action ``a<k>`` (the hour is noise). Each arm streams the same
seeded contexts and event ids to a fresh database, with the same booster and parameters:

* ``sdk-01``: the Azure Personalizer SDK (``PersonalizerClient.rank`` / ``events.reward``),
  reward 1 for a hit, 0 for a miss, the model created by the first rank (``clip`` mapping);
* ``native``: ``POST /v1/models``, then ``/predict`` and ``/feedback`` (reward 1 / 0);
* ``sdk-01-rescale``: the SDK with 0/1 under ``negative_rewards = rescale``, the mapping every
  Personalizer model had before (a miss is 0.5 on the model);
* ``sdk-pm1-rescale``: the SDK with 1 / -1 under ``rescale``.

The service is the real app under uvicorn on a free 127.0.0.1 port (API and learner in one
process, as ``boostbandit serve`` runs it). With ``sync`` (the default) each event waits until the
learner has applied the previous one, so the arms see the same model at each decision and the
figures are deterministic; ``--no-sync`` lets the learner lag as it would in production.

    python -m benchmarks.paper.personalizer_rewards                       # 1000 events, 3 seeds
    python -m benchmarks.paper.personalizer_rewards --events 400 --seeds 1

Prints, per arm, the hit rate per window of 100 events and the first event after which the hit
rate over the last 100 stays above 0.8; writes ``benchmarks/out/personalizer_rewards.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks import ROOT
from benchmarks.stats import median
from service.api.server import serve_in_thread

OUT = ROOT / "benchmarks" / "out" / "personalizer_rewards.json"
ACTIONS = ["a0", "a1", "a2", "a3"]
PARAMS = {"n_learners": 5}
ARMS = ("sdk-01", "native", "sdk-01-rescale", "sdk-pm1-rescale")


def contexts(n: int, seed: int) -> list[tuple[dict[str, Any], int]]:
    """``n`` seeded (Personalizer context, best action index) pairs."""
    rng = np.random.default_rng(seed)
    out = []
    for k, hour in zip(rng.integers(0, len(ACTIONS), n), rng.integers(0, 24, n), strict=True):
        out.append(({"user": {"segment": f"s{k}"}, "visit": {"hour": int(hour)}}, int(k)))
    return out


def _wait_version(http: httpx.Client, name: str, version: int, timeout: float = 10.0) -> None:
    """Until the learner applied ``version`` events of ``name``."""
    deadline = time.monotonic() + timeout
    while True:
        r = http.get(f"/v1/models/{name}")
        if r.status_code == 200 and r.json()["version"] >= version:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: the learner did not reach version {version}")
        time.sleep(0.002)


def run_sdk(base: str, data: list[tuple[dict, int]], miss: float, sync: bool) -> list[int]:
    """Rank then reward each context through the Azure Personalizer SDK; 1 per hit."""
    from azure.cognitiveservices.personalizer import PersonalizerClient
    from azure.cognitiveservices.personalizer.models import RankableAction, RankRequest
    from msrest.authentication import CognitiveServicesCredentials

    from service.personalizer.mapping import action_set_model_name

    client = PersonalizerClient(base, CognitiveServicesCredentials("unused-key"))
    actions = [RankableAction(id=a, features=[{"name": a}]) for a in ACTIONS]
    name = action_set_model_name(ACTIONS)
    hits = []
    with httpx.Client(base_url=base, timeout=10) as http:
        for i, (context, best) in enumerate(data):
            features = [{"user": context["user"]}, {"visit": context["visit"]}]
            response = client.rank(RankRequest(actions=actions, context_features=features,
                                               event_id=f"ev-{i}"))
            hit = int(response.reward_action_id == ACTIONS[best])
            client.events.reward(response.event_id, 1.0 if hit else miss)
            hits.append(hit)
            if sync:
                _wait_version(http, name, i + 1)
    return hits


def run_native(base: str, data: list[tuple[dict, int]], seed: int, sync: bool) -> list[int]:
    """The same stream through ``/v1/models/{name}/predict`` and ``/feedback``."""
    name = "native"
    hits = []
    with httpx.Client(base_url=base, timeout=10) as http:
        r = http.post("/v1/models", json={"name": name, "booster": "adabandit",
                                          "actions": ACTIONS, "params": {**PARAMS, "seed": seed}})
        r.raise_for_status()
        for i, (context, best) in enumerate(data):
            flat = {"user.segment": context["user"]["segment"],
                    "visit.hour": context["visit"]["hour"]}
            r = http.post(f"/v1/models/{name}/predict", json={"context": flat,
                                                               "event_id": f"ev-{i}"})
            r.raise_for_status()
            hit = int(r.json()["action"] == ACTIONS[best])
            http.post(f"/v1/models/{name}/feedback",
                      json={"event_id": f"ev-{i}", "reward": float(hit)}).raise_for_status()
            hits.append(hit)
            if sync:
                _wait_version(http, name, i + 1)
    return hits


def run_arm(arm: str, redis_url: str, events: int, seed: int, sync: bool = True) -> list[int]:
    """The hits of one arm on a flushed database ``redis_url``."""
    import redis

    from service.settings import Settings

    redis.Redis.from_url(redis_url).flushdb()
    settings = Settings(
        redis_url=redis_url, run_learner=True, learner_block_ms=5, snapshot_every_events=10**6,
        redis_async="off", personalizer_booster="adabandit",
        personalizer_params={**PARAMS, "seed": seed}, personalizer_action_features="never",
        personalizer_negative_rewards="rescale" if arm.endswith("rescale") else "clip",
    )
    data = contexts(events, seed)
    with serve_in_thread(settings) as base:
        if arm == "native":
            return run_native(base, data, seed, sync)
        return run_sdk(base, data, -1.0 if "pm1" in arm else 0.0, sync)


def window_rates(hits: list[int], window: int = 100) -> list[float]:
    """Hit rate per consecutive window."""
    return [float(np.mean(hits[i:i + window])) for i in range(0, len(hits), window)]


def learned_at(hits: list[int], level: float = 0.8, window: int = 100) -> int | None:
    """The first event count after which the trailing-``window`` hit rate stays > ``level``."""
    trailing = np.convolve(hits, np.ones(window) / window, mode="valid")
    above = trailing > level
    if not above[-1:].all():
        return None
    below = np.flatnonzero(~above)
    return window + (int(below[-1]) + 1 if below.size else 0)


def _redis(tmp: Path) -> tuple[str, Callable[[], None]]:
    from tests.conftest import start_redis

    server = start_redis(tmp)
    import redis

    redis.Redis.from_url(server.url).config_set("appendfsync", "no")
    return server.url, server.stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--no-sync", dest="sync", action="store_false")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"events": args.events, "sync": args.sync, "params": PARAMS,
                               "arms": {}}
    with tempfile.TemporaryDirectory() as tmp:
        url, stop = _redis(Path(tmp))
        try:
            for arm in args.arms:
                runs = []
                for seed in range(args.seeds):
                    start = time.perf_counter()
                    hits = run_arm(arm, url, args.events, seed, args.sync)
                    runs.append({"seed": seed, "seconds": time.perf_counter() - start,
                                 "windows": window_rates(hits), "learned_at": learned_at(hits),
                                 "last_200": float(np.mean(hits[-200:]))})
                    print(f"{arm:16s} seed {seed}: windows "
                          + " ".join(f"{w:.2f}" for w in runs[-1]["windows"])
                          + f"  learned at {runs[-1]['learned_at']}"
                          + f"  ({runs[-1]['seconds']:.1f} s)", flush=True)
                last = [r["last_200"] for r in runs]
                results["arms"][arm] = {"runs": runs, "last_200_median": median(last)}
        finally:
            stop()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1))
    print(f"\n{'arm':16s} hit rate, last 200 (median over seeds)  learned at (> 0.8 over 100)")
    for arm, r in results["arms"].items():
        print(f"{arm:16s} {r['last_200_median']:.3f}  {[x['learned_at'] for x in r['runs']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
