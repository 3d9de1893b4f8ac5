"""The Azure Personalizer SDK's loop on a rotating catalogue: one model learns which
article suits which user from the articles' features, while new articles keep arriving.

The stream is :func:`benchmarks.paper.rotating_catalogue.catalogue_stream` (a pool of 30 articles
in 6 categories, one replaced by a new article with a new id in about 5% of the rounds; each rank
offers 4 articles of 4 distinct categories). Each round goes through the ``azure-ai-personalizer``
SDK: ``rank`` with the user's context (``{"user": {"pref", "budget"}}``) and the 4 articles with
their features (``cat``, ``price``, ``quality``), then ``reward`` with a Bernoulli draw of the
chosen article's reward (0.9 for the preferred category, ``0.1 * quality`` otherwise). A hit is a
rank whose ``rewardActionId`` is the article of the user's preferred category; chance is 0.25.
The service runs with its defaults for action features (``personalizer_action_features`` =
``auto``: every rank goes to the one model ``pz-action-features``); with ``--per-set`` it runs as
before (``never``: one model per distinct set of ids).

    python -m benchmarks.paper.personalizer_catalogue --rounds 1000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.paper.personalizer_rewards import _redis, _wait_version
from service.api.server import serve_in_thread as serve
from service.sim.catalogue import catalogue_stream

__all__ = ["run_catalogue"]

#: the share of the last rounds the hit rate is reported over
LAST = 200


def _features(action: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in action.items() if k != "id"}]


def run_catalogue(redis_url: str, rounds: int, seed: int, per_set: bool = False
                  ) -> tuple[list[int], list[str]]:
    """The hits of ``rounds`` SDK ranks on a flushed database ``redis_url`` (each event learned
    before the next rank), and the names of the models the service made."""
    import httpx
    import redis
    from azure.ai.personalizer import PersonalizerClient
    from azure.core.credentials import AzureKeyCredential

    from service.personalizer.mapping import ACTION_FEATURES_MODEL
    from service.settings import Settings

    client_redis = redis.Redis.from_url(redis_url)
    client_redis.flushdb()
    settings = Settings(
        redis_url=redis_url, run_learner=True, learner_block_ms=5, snapshot_every_events=10**6,
        redis_async="off", personalizer_params={"seed": seed}, learner_durable_lag_seconds=0,
        personalizer_action_features="never" if per_set else "auto",
        personalizer_action_features_params={"seed": seed}, personalizer_max_models=10**4,
    )
    rng = np.random.default_rng(seed + 1000)
    hits = []
    with serve(settings) as base, httpx.Client(base_url=base, timeout=10) as http:
        client = PersonalizerClient(base, AzureKeyCredential("unused"))
        for i, row in enumerate(catalogue_stream(rounds, seed)):
            response = client.rank({
                "contextFeatures": [{"user": row.context}], "eventId": f"ev-{i}",
                "actions": [{"id": a["id"], "features": _features(a)} for a in row.actions]})
            chosen = [a["id"] for a in row.actions].index(response["rewardActionId"])
            reward = float(rng.random() < row.rewards[chosen])
            client.reward(response["eventId"], {"value": reward})
            hits.append(int(row.actions[chosen]["cat"] == row.context["pref"]))
            if not per_set:
                _wait_version(http, ACTION_FEATURES_MODEL, i + 1)
        names = sorted(m["name"] for m in http.get("/v1/models").json())
    return hits, names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--per-set", action="store_true",
                        help="personalizer_action_features=never: one model per id set")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url, stop = _redis(Path(tmp))
        try:
            print("| seed | hit rate, first 200 | hit rate, last 200 | models |")
            print("|---|---|---|---|")
            for seed in args.seeds:
                hits, names = run_catalogue(url, args.rounds, seed, args.per_set)
                print(f"| {seed} | {np.mean(hits[:LAST]):.3f} | {np.mean(hits[-LAST:]):.3f} "
                      f"| {len(names)} |", flush=True)
        finally:
            stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
