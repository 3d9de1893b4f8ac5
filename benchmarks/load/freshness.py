"""Replica freshness under load: how far an API replica's served model trails the joined stream.

The scaled-out shape on one machine, everything on 127.0.0.1: its own ``redis-server`` (no
persistence), ``boostbandit learner`` alone (``python -m service learner``), and one API replica
(``uvicorn --factory service.api.app:create_app``, no learner in it: it serves the serving copies
the learner publishes, or the full snapshots). An open-loop generator sends predict + feedback
pairs at ``--rate`` pairs/s (at most ``--max-inflight`` at once) for an AdaBandit model (N = 20,
seed 4) on the bundled Car dataset (reward 1 iff the played action is the row's class), while a
sampler, every ``--sample-ms``, reads

- the replica's served version (``GET /v1/models/{name}``: joined events its copy applied),
- the joined stream (incrementally, so version v maps to the v-th joined id, a Redis-clock
  timestamp),

and records the replica's staleness: **events** = joined events not in the served copy, and
**seconds** = the age of the oldest of them (0 when the copy holds every joined event). Each run
(one per ``--publish`` value: ``serving_publish_seconds``; 0 means the replica follows full
snapshots only, every ``snapshot_every_seconds`` = 60 s or 5,000 events) reports the median, p95
and max after a warm-up.

    python -m benchmarks.load.freshness --quick          # 10 s per run
    python -m benchmarks.load.freshness                  # 40 s per run, publish 1 s and 0 (off)
    python -m benchmarks.load.freshness --results        # also update benchmarks/RESULTS.md

Writes ``benchmarks/out/freshness.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis

from benchmarks import ROOT
from benchmarks.load.supervisor import LOOPBACK, Processes, free_port, start_redis
from benchmarks.results import replace_block
from benchmarks.stats import median, percentiles
from service.eventlog import keys
from service.sim.datasets import load_dataset

MODEL = "fresh-car"
SECTION = "### Replica freshness"


def _ms(stream_id: bytes) -> int:
    return int(stream_id.split(b"-", 1)[0])


def summary(values: list[float]) -> dict[str, float]:
    """Median, p95 and max of ``values`` (:func:`benchmarks.stats.percentiles`)."""
    mid, p95, top = percentiles(values, [50, 95, 100])
    return {"median": mid, "p95": p95, "max": top, "samples": len(values)}


async def _wait_ready(client: httpx.AsyncClient, url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if (await client.get(url)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout} s")


async def _create_model(client: httpx.AsyncClient, dataset: Any) -> None:
    params = {"n_learners": 20, "rho": 0.001, "seed": 4, "tree_profile": "bandit",
              "nominal_attributes": list(dataset.nominal)}
    created = await client.post("/v1/models", json={
        "name": MODEL, "booster": "adabandit", "actions": dataset.classes, "params": params})
    created.raise_for_status()


async def drive(api: str, redis_url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Create the model, run the load and the sampler; the staleness samples after warm-up."""
    dataset = load_dataset("car")
    rng = random.Random(args.seed)
    rows = [(dataset.X[i], dataset.classes[int(dataset.y[i])]) for i in range(len(dataset.y))]
    r = redis.asyncio.Redis.from_url(redis_url)
    joined_key = keys(MODEL)["joined"]
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(base_url=api, timeout=10, limits=limits) as client:
        await _wait_ready(client, "/readyz")
        await _create_model(client, dataset)
        stop = time.monotonic() + args.seconds
        errors = 0

        inflight = asyncio.Semaphore(args.max_inflight)

        async def pair(context: dict, label: str) -> None:
            nonlocal errors
            async with inflight:
                await _pair(context, label)

        async def _pair(context: dict, label: str) -> None:
            nonlocal errors
            try:
                d = (await client.post(f"/v1/models/{MODEL}/predict",
                                       json={"context": context})).json()
                reward = 1.0 if d["action"] == label else 0.0
                await client.post(f"/v1/models/{MODEL}/feedback",
                                  json={"event_id": d["event_id"], "reward": reward})
            except (httpx.HTTPError, KeyError):
                errors += 1

        async def load() -> int:
            tasks, sent, start = set(), 0, time.monotonic()
            while time.monotonic() < stop:
                context, label = rows[rng.randrange(len(rows))]
                task = asyncio.create_task(pair(dict(context), label))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent += 1
                await asyncio.sleep(max(0.0, start + sent / args.rate - time.monotonic()))
            await asyncio.gather(*tasks)
            return sent

        # the sampler's own connection, so it does not queue behind the load's requests
        probe = httpx.AsyncClient(base_url=api, timeout=10)

        async def sample() -> list[tuple[float, int, float]]:
            ids: list[bytes] = []  # joined ids in stream order: version v applied ids[:v]
            out = []
            started = time.monotonic()
            while time.monotonic() < stop:
                await asyncio.sleep(args.sample_ms / 1000)
                version = (await probe.get(f"/v1/models/{MODEL}")).json()["version"]
                last = ids[-1] if ids else b"0-0"
                while batch := await r.xrange(joined_key, b"(" + last, "+", count=10_000):
                    ids.extend(entry_id for entry_id, _ in batch)
                    last = ids[-1]
                now_ms = int(time.time() * 1000)
                behind = max(0, len(ids) - version)
                age = (now_ms - _ms(ids[version])) / 1000 if behind else 0.0
                out.append((time.monotonic() - started, behind, max(0.0, age)))
            return out

        started = time.monotonic()
        sent, samples = await asyncio.gather(load(), sample())
        elapsed = time.monotonic() - started
        version = (await client.get(f"/v1/models/{MODEL}")).json()["version"]
    await probe.aclose()
    await r.aclose()
    kept = [s for s in samples if s[0] >= args.warmup]
    return {
        "pairs_sent": sent, "pairs_per_second": sent / elapsed, "pair_errors": errors,
        "final_replica_version": version,
        "staleness_events": summary([float(s[1]) for s in kept]),
        "staleness_seconds": summary([s[2] for s in kept]),
    }


def publish_cost(events: int = 3000, repeats: int = 5) -> dict[str, float]:
    """Bytes and pickling time (median of ``repeats``) of one serving copy against one full
    snapshot, for the benchmark's model grown on ``events`` Car rows in this process."""
    import pickle

    import numpy as np

    from boosters.registry import make_booster
    from learners.frozen import dumps_serving

    dataset = load_dataset("car")
    booster = make_booster("adabandit", n_actions=len(dataset.classes), n_learners=20,
                           rho=0.001, seed=4, tree_profile="bandit",
                           nominal_attributes=list(dataset.nominal))
    rng = np.random.default_rng(4)
    for i in range(events):
        j = i % len(dataset.y)
        context = dict(dataset.X[j])
        decision = booster.decide_one(context, rng=rng)
        booster.learn_one(context, decision, reward=float(decision.action == int(dataset.y[j])))
    out: dict[str, float] = {"events": events}
    for name, dump in (("serving", dumps_serving),
                       ("whole", lambda b: pickle.dumps(b, protocol=5))):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            blob = dump(booster)
            times.append(time.perf_counter() - start)
        out[f"{name}_bytes"] = len(blob)
        out[f"{name}_ms"] = median(times) * 1000
    return out


def run_once(args: argparse.Namespace, publish: float) -> dict[str, Any]:
    """One run with ``serving_publish_seconds = publish`` (fresh Redis and processes)."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = Processes(Path(tmp))
        try:
            redis_url, _ = start_redis(procs, aof=False)
            env = {**os.environ, "PYTHONPATH": str(ROOT), "REDIS_URL": redis_url,
                   "BOOSTBANDIT_SERVING_PUBLISH_SECONDS": str(publish),
                   "BOOSTBANDIT_LEARNER_METRICS_PORT": str(free_port())}
            procs.spawn("learner", [sys.executable, "-m", "service", "learner"], env=env,
                        cwd=ROOT)
            port = free_port()
            procs.spawn("replica", [sys.executable, "-m", "uvicorn", "--factory",
                                    "service.api.app:create_app", "--host", LOOPBACK, "--port",
                                    str(port), "--log-level", "warning"], env=env, cwd=ROOT)
            result = asyncio.run(drive(f"http://{LOOPBACK}:{port}", redis_url, args))
        finally:
            procs.close()
    return {"serving_publish_seconds": publish, **result}


def report(result: dict[str, Any]) -> str:
    """The RESULTS.md block (the section below its heading :data:`SECTION`)."""
    cfg = result["config"]
    lines = [
        f"Command: `{cfg['command']}` ({cfg['when']}). Machine: {cfg['machine']}; shared with "
        "other jobs while measured, so the figures are an upper bound for an idle machine.", "",
        f"One `boostbandit learner`, one API replica (uvicorn, 1 worker, replica refresh every "
        f"{cfg['replica_refresh_seconds']} s) and Redis on one machine; {cfg['rate']} "
        f"predict + feedback pairs/s (open loop, at most {cfg['max_inflight']} in flight) for "
        f"{cfg['seconds']} s per run, AdaBandit N = 20 "
        f"on Car; staleness sampled every {cfg['sample_ms']} ms after a {cfg['warmup']} s "
        "warm-up. Events: joined events not in the replica's served copy; seconds: age of the "
        "oldest of them (0 when it holds them all).", "",
        "| serving_publish_seconds | events behind: median / p95 / max "
        "| seconds behind: median / p95 / max | pairs/s answered | samples | errors |",
        "|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        e, s = run["staleness_events"], run["staleness_seconds"]
        label = run["serving_publish_seconds"] or "0 (off: full snapshots only)"
        lines.append(
            f"| {label} | {e['median']:.0f} / {e['p95']:.0f} / {e['max']:.0f} "
            f"| {s['median']:.2f} / {s['p95']:.2f} / {s['max']:.2f} "
            f"| {run['pairs_per_second']:.0f} | {s['samples']} | {run['pair_errors']} |")
    lines += ["", "With publishing off, the staleness grows until the next full snapshot "
              "(60 s or 5,000 events), so its figures are bounded by the run's length. Pairs/s "
              "answered is what the shared machine sustained (the generator asked for "
              f"{cfg['rate']}); it moved by up to 2x between repeated runs of this command, in "
              "both directions, so the two rows' throughputs do not measure a cost of "
              "publishing. Publishing does cost the replica one copy load per interval (not "
              "measured separately here)."]
    cost = result["publish_cost"]
    lines += ["", f"One publish against one full snapshot, the same model grown on "
              f"{cost['events']} events (median of 5, in the benchmark's process): serving "
              f"copy {cost['serving_bytes'] / 1e3:.0f} kB pickled in {cost['serving_ms']:.0f} ms, "
              f"whole booster {cost['whole_bytes'] / 1e3:.0f} kB in {cost['whole_ms']:.0f} ms. "
              "The learner pickles it in a forked child (as for snapshots), so its loop does not "
              "wait for it."]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="load seconds per run")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds not sampled")
    parser.add_argument("--rate", type=float, default=50.0, help="pairs per second")
    parser.add_argument("--max-inflight", type=int, default=32, help="pairs in flight at most")
    parser.add_argument("--sample-ms", type=float, default=100.0, help="sampling period")
    parser.add_argument("--publish", type=float, nargs="+", default=[1.0, 0.0],
                        help="serving_publish_seconds of each run (0: off)")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="10 s runs (smoke)")
    parser.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "out" / "freshness.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup = 10.0, 2.0
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from service.settings import Settings

    config = {
        "command": "python -m benchmarks.load.freshness" + "".join(f" {a}" for a in sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}",
        "seconds": args.seconds, "warmup": args.warmup, "rate": args.rate,
        "sample_ms": args.sample_ms, "seed": args.seed, "max_inflight": args.max_inflight,
        "replica_refresh_seconds": Settings().replica_refresh_seconds,
    }
    cost = publish_cost()
    print(json.dumps(cost), flush=True)
    runs = []
    for publish in args.publish:
        run = run_once(args, publish)
        runs.append(run)
        print(json.dumps(run), flush=True)
    result = {"config": config, "publish_cost": cost, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    text = report(result)
    print(f"{SECTION}\n\n{text}\n")
    if args.results:
        replace_block("freshness", text)


if __name__ == "__main__":
    main()
