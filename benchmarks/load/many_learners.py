"""Several learner processes sharing the models (docs/consistency.md, "Several learners"): how
the models spread over the learners, and what killing one costs.

The script starts a redis-server, an API process and ``--learners`` learner processes (``python
-m service learner``, short leases), creates ``--models`` models, sends predict + feedback
pairs to every model, then ``kill -9``s one learner while the pairs go on. It reports the
models each learner holds before and after, how long until every model of the dead learner was
held again, and the acknowledged feedback against the events joined in the end (lost = 0).

    python -m benchmarks.load.many_learners                 # 3 learners, 30 models
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import redis

from benchmarks.load.supervisor import Processes, start_redis, start_service

CONTEXT = {"x": 1.0, "s": "a"}


def holders(r: redis.Redis, models: int) -> Counter:
    """Models per learner owner (the owner part of each lease, "-" for none)."""
    out: Counter = Counter()
    for i in range(models):
        value = r.get(f"bb:{{m{i}}}:lease")
        out["-" if value is None else value.decode().split("|")[0]] += 1
    return out


def pairs(client: httpx.Client, models: int, rounds: int, acked: Counter) -> None:
    """``rounds`` predict + feedback pairs per model; counts acknowledged feedback."""
    for _ in range(rounds):
        for i in range(models):
            body = client.post(f"/v1/models/m{i}/predict", json={"context": CONTEXT}).json()
            done = client.post(f"/v1/models/m{i}/feedback",
                               json={"event_id": body["event_id"], "reward": 1.0})
            acked[i] += done.status_code == 200


def run(args: argparse.Namespace) -> dict[str, Any]:
    procs = Processes(Path(tempfile.mkdtemp(prefix="boostbandit-learners-")))
    try:
        url, _ = start_redis(procs, aof=False)
        env = {"BOOSTBANDIT_LEARNER_LEASE_SECONDS": str(args.lease),
               "BOOSTBANDIT_LEARNER_METRICS_PORT": "0"}
        base, _ = start_service(procs, url, split=True, extra_env=env)
        learners = [procs.children[-2][1]]  # the learner start_service started
        for _ in range(args.learners - 1):
            learners.append(procs.spawn(f"learner{len(learners)}",
                                        [sys.executable, "-m", "service", "learner"],
                                        env={**os.environ, **env, "REDIS_URL": url,
                                             "PYTHONPATH": str(Path.cwd())}))
        r = redis.Redis.from_url(url)
        acked: Counter = Counter()
        with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
            for i in range(args.models):
                client.post("/v1/models", json={"name": f"m{i}", "booster": "adabandit",
                                                "actions": ["a", "b"],
                                                "reward_wait_seconds": 3600}).raise_for_status()
            time.sleep(2 * args.lease)
            pairs(client, args.models, 3, acked)
            before = holders(r, args.models)
            victim = max((o for o in before if o != "-"), key=before.get)
            pid = int(victim.split(":")[1])
            os.kill(pid, signal.SIGKILL)
            killed_at = time.monotonic()
            taken_over = None
            while time.monotonic() - killed_at < 10 * args.lease:
                pairs(client, args.models, 1, acked)
                now = holders(r, args.models)
                if taken_over is None and victim not in now and "-" not in now:
                    taken_over = time.monotonic() - killed_at
                    break
            pairs(client, args.models, 3, acked)
            after = holders(r, args.models)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                joined = sum(r.xlen(f"bb:{{m{i}}}:joined") for i in range(args.models))
                if joined >= sum(acked.values()):
                    break
                time.sleep(0.2)
        return {"command": "python -m benchmarks.load.many_learners " + " ".join(sys.argv[1:]),
                "learners": args.learners, "models": args.models, "lease_seconds": args.lease,
                "held_before": dict(before), "killed": victim,
                "held_after": dict(after), "taken_over_seconds": taken_over,
                "feedback_acknowledged": sum(acked.values()), "joined": joined,
                "lost": max(0, sum(acked.values()) - joined)}
    finally:
        procs.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=3)
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--lease", type=float, default=2.0, help="learner lease, seconds")
    print(json.dumps(run(parser.parse_args(argv)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
