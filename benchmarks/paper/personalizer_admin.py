"""Figures of Personalizer's administration surface through the official ``azure-ai-personalizer``
SDK, on the scenarios the tests assert (a redis-server of its own, the app under uvicorn on a free
127.0.0.1 port):

- ``apprentice``: 500 Apprentice-mode events (8 actions, 8 user segments, the application's
  baseline right 70% of the time), the agreement with the baseline per 100 events, then the hit
  rate of the next 100 events in Online mode against a fresh model's first 100
  (tests/service/personalizer/test_personalizer_configuration.py);
- ``evaluations``: an offline evaluation of the auto-optimization candidates and a tree policy
  on a uniformly logged stream whose best action is known, and on one of coin flips
  (tests/service/personalizer/test_personalizer_evaluations.py), with the offline worker running.

    python -m benchmarks.paper.personalizer_admin apprentice --seeds 3
    python -m benchmarks.paper.personalizer_admin evaluations
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def apprentice(url: str, seed: int) -> dict:
    """One seed of the apprentice scenario."""
    import httpx

    from tests.service.personalizer.test_personalizer_configuration import (
        clients,
        hits,
        service,
        wait_version,
    )

    with service(url, personalizer_reward_wait_seconds=5.0) as (base, _):
        client, admin = clients(base)
        config = admin.get_service_configuration()
        admin.update_service_configuration({**config, "learningMode": "Apprentice"})
        rng = np.random.default_rng(seed)
        played = hits(client, rng, 500, 0, baseline_accuracy=0.7)
        wait_version(base, 500)
        rows = httpx.get(f"{base}/personalizer/configurations/service/apprenticeMetrics",
                         params={"window": 100}).json()
        admin.update_service_configuration({**config, "learningMode": "Online"})
        warm = hits(client, rng, 100, 500)
    with service(url) as (base, _):
        fresh = hits(clients(base)[0], np.random.default_rng(seed), 100, 0)
    return {"seed": seed, "apprentice_hit_rate": float(np.mean(played)),
            "agreement": [round(r["agreement"], 2) for r in rows],
            "online_after": float(np.mean(warm)), "fresh_first_100": float(np.mean(fresh))}


def evaluations(url: str) -> None:
    """Both evaluation scenarios, printed."""
    import redis
    from azure.ai.personalizer import PersonalizerAdministrationClient
    from azure.core.credentials import AzureKeyCredential

    from service.api.server import serve_in_thread as serve
    from service.personalizer.evaluations import AUTO_CANDIDATES
    from tests import test_personalizer_evaluations as t

    for label, informative, seed in (("known best", True, 0), ("noise", False, 2)):
        redis.Redis.from_url(url).flushdb()
        with serve(t.settings(url)) as base, t.running_worker(url):
            t.simulated_log(url, base, informative=informative, seed=seed)
            admin = PersonalizerAdministrationClient(base, AzureKeyCredential("k"))
            policies = [dict(name=n, arguments=a) for n, a in AUTO_CANDIDATES] + [t.TREES]
            started = time.monotonic()
            admin.create_evaluation("m", t.contract(policies=policies))
            doc = t.wait_done(admin, "m", 600)
            print(f"{label} (seed {seed}): {doc['status']} in "
                  f"{time.monotonic() - started:.1f} s, {t.EVENTS} events")
            for result in doc["policyResults"]:
                total = result["totalSummary"]
                print(f"  {result['name']:22s} {result['policySource']:8s} "
                      f"{total['averageReward']:.3f} ± {total['confidenceInterval']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", choices=["apprentice", "evaluations"])
    parser.add_argument("--seeds", type=int, default=3, help="apprentice: seeds 0..N-1")
    args = parser.parse_args(argv)
    from service.api.server import free_port
    from tests.conftest import RedisServer

    server = RedisServer(free_port(), Path(tempfile.mkdtemp(prefix="bb-pz-admin-")))
    server.start()
    try:
        if args.scenario == "apprentice":
            for seed in range(args.seeds):
                print(apprentice(server.db_url(1), seed))
        else:
            evaluations(server.db_url(1))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
