"""Load benchmark of the decision service: predict + feedback pairs against ``boostbandit serve``.

The script starts its own ``redis-server`` (temporary directory, free loopback port, no RDB
snapshots; AOF off unless ``--redis-aof``) and the service exactly as production runs it, one
process with the API and the learner thread (``python -m service serve`` = ``boostbandit serve``)
with ``REDIS_URL`` pointing at that Redis. A second process, the load generator (httpx, asyncio;
``--generators K`` splits the connections over K processes that measure the same window), then
runs the phases below against it, everything on 127.0.0.1:

1. **bare** - closed loop, ``--concurrency`` connections, ``GET /healthz`` (a constant
   ``{"status": "ok"}``, no Redis, same server, same middlewares and threadpool as predict);
2. **predicts** - closed loop, ``--concurrency`` connections, predicts alone (no feedback, so
   the learner idles): the cost of a decision against the bare endpoint's;
3. **pairs** - closed loop, ``--concurrency`` connections, each sending predict then feedback for
   an AdaBandit model (N = 20, seed 4) on the rows of the bundled Car dataset (reward 1 iff the
   played action is the row's class) -> saturation throughput;
4. **open** - open loop at half the saturation pair rate (seeded Poisson arrivals, or
   ``--schedule fixed``; at most ``--open-max-inflight`` pairs in flight, default
   ``--concurrency``); latency is measured from each pair's *scheduled* send time, so queueing in
   the client counts (no coordinated omission);
5. **learner lag** - the unapplied feedback (``rewards - version`` of ``GET /v1/models/{name}``)
   is polled during the run, taken at the end of the saturation and open-loop phases, and the time
   until the learner has applied all of it is measured (bounded by ``--drain-timeout``).

Targets (the issue's speed target): predict/s under the pair load >= 0.5 x bare req/s (a pair is
two requests, so 0.5 is the ceiling of a predict and a feedback that cost no more than the bare
request; the predicts-alone ratio is reported beside it); p99 predict
latency <= 10 ms at half the saturation rate; the learner keeps up (backlog at the end of the open
loop <= 1 s of feedback and drained), otherwise the report says how far behind it is.

    python -m benchmarks.load.service_load --quick          # 5 s phases, smoke run
    python -m benchmarks.load.service_load                  # 20 s phases, 16 connections
    python -m benchmarks.load.service_load --results        # also update benchmarks/RESULTS.md

Writes ``benchmarks/out/load.json``; every process it starts is stopped on exit, Ctrl-C, SIGTERM
or error (on Linux redis-server and the service also get SIGTERM if this script is killed; the
load-generator processes end with their phase, which is bounded in time).

The bare endpoint is the app's own ``GET /healthz``: a sync FastAPI route returning a constant, so
it runs through the same middlewares (metrics, body limit) and threadpool as predict and feedback;
the app needs no benchmark-only route. Redis runs with ``--save '' --appendonly no`` (no
persistence, which only removes disk writes from the measurement); ``--redis-aof`` turns on AOF
with ``appendfsync everysec``, the embedded server's default.
"""


from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from benchmarks import ROOT
from benchmarks.load.client import BARE_PATH, MODEL, TARGET_P99_MS
from benchmarks.load.phases import Poller, closed_phase, drain, learner_ceiling, open_phase
from benchmarks.load.report import evaluate, machine_notes, repeat_lines, repeat_row, summary_lines
from benchmarks.load.supervisor import Processes, start_redis, start_service


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    parser.add_argument("--concurrency", type=int, default=16, help="closed-loop connections")
    parser.add_argument("--quick", action="store_true", help="5 s phases (smoke run)")
    parser.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "load.json")
    parser.add_argument("--rho", type=float, default=0.001, help="AdaBandit exploration rate")
    parser.add_argument("--schedule", choices=("poisson", "fixed"), default="poisson")
    parser.add_argument(
        "--open-max-inflight",
        type=int,
        default=None,
        help="most pairs in flight in the open loop (default: --concurrency)",
    )
    parser.add_argument("--drain-timeout", type=float, default=60.0, help="learner drain bound")
    parser.add_argument(
        "--redis-aof", action="store_true", help="Redis AOF on (appendfsync everysec)"
    )
    parser.add_argument(
        "--generators",
        type=int,
        default=1,
        help="load-generator processes sharing the connections (raise it on a machine with "
        "spare cores if the load-gen CPU column reads ~100%%)",
    )
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument(
        "--workload",
        choices=("car", "numeric20"),
        default="car",
        help="the contexts: Car's rows (6 nominal features, 4 actions) or 20 numeric features "
        "and 6 actions",
    )
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="load-generator HTTP client: a minimal keep-alive HTTP/1.1 client (default, cheap "
        "enough that the server saturates first) or httpx",
    )
    parser.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment of the service processes (e.g. BOOSTBANDIT_GIL_SWITCH_MS=5)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run everything this many times (fresh Redis and service each time); the report "
        "adds a table of the runs and their medians (this machine is shared and noisy)",
    )
    parser.add_argument(
        "--learner-nice",
        type=int,
        default=0,
        help="with --split: run the learner process at this niceness (decisions first when "
        "cores are short; its backlog is reported)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="API (uvicorn) and learner in separate processes, as docker-compose.yml runs them",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds = 5.0
        args.drain_timeout = min(args.drain_timeout, 30.0)
    if args.seconds <= 0 or args.concurrency < 1:
        parser.error("--seconds must be > 0 and --concurrency >= 1")
    if not 1 <= args.generators <= args.concurrency:
        parser.error("--generators must be in 1 .. --concurrency")
    if any("=" not in item for item in args.service_env):
        parser.error("--service-env takes KEY=VALUE")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.open_max_inflight is None:
        args.open_max_inflight = args.concurrency
    return args


def _workload(args: argparse.Namespace) -> tuple[Any, list, list, dict[str, Any]]:
    """Car's rows in a seeded order (or ``--workload numeric20``'s), their classes, and the
    model's parameters."""
    if args.workload == "numeric20":
        return _numeric_workload(args)
    from service.sim.datasets import load_dataset

    dataset = load_dataset("car")
    order = list(range(len(dataset)))
    random.Random(args.seed).shuffle(order)
    contexts = [dataset.X[i] for i in order]
    labels = [dataset.classes[int(dataset.y[i])] for i in order]
    params = {
        "n_learners": 20,
        "rho": args.rho,
        "seed": 4,
        "tree_profile": "bandit",
        "nominal_attributes": list(dataset.nominal),
    }
    return dataset, contexts, labels, params


def _numeric_workload(args: argparse.Namespace) -> tuple[Any, list, list, dict[str, Any]]:
    """5,000 contexts of 20 standard-normal features and 6 actions; the label is the argmax of
    a fixed random linear score (seeded), the reward 1 iff it is played."""
    import numpy as np

    rng = np.random.default_rng(args.seed)
    X = rng.normal(size=(5000, 20)).round(4)
    labels = (X @ rng.normal(size=(20, 6))).argmax(axis=1)
    classes = [f"a{i}" for i in range(6)]
    contexts = [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X]
    params = {"n_learners": 20, "rho": args.rho, "seed": 4, "tree_profile": "bandit"}
    return SimpleNamespace(classes=classes), contexts, [classes[i] for i in labels], params


def _config(args: argparse.Namespace, classes: list, params: dict[str, Any], warmup: float,
            service_env: dict[str, str]) -> dict[str, Any]:
    """What the report says about the run's set-up."""
    command = "python -m benchmarks.load.service_load" + "".join(f" {a}" for a in sys.argv[1:])
    return {
        "command": command,
        "split": args.split,
        "seconds": args.seconds,
        "warmup": warmup,
        "concurrency": args.concurrency,
        "open_max_inflight": args.open_max_inflight,
        "generators": args.generators,
        "schedule": args.schedule,
        "seed": args.seed,
        "model": MODEL,
        "workload": args.workload,
        "booster": "adabandit",
        "model_params": params,
        "actions": classes,
        "redis_persistence": "AOF everysec, no RDB"
        if args.redis_aof
        else "--save '' --appendonly no: no persistence",
        "bare_endpoint": f"GET {BARE_PATH}",
        "client": args.client,
        "learner_nice": args.learner_nice if args.split else None,
        "service_env": service_env,
    }


def _create_model(base: str, classes: list, params: dict[str, Any]) -> None:
    with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
        created = client.post(
            "/v1/models",
            json={
                "name": MODEL,
                "booster": "adabandit",
                "actions": classes,
                "params": params,
                "reward_wait_seconds": 3600,
            },
        )
        if created.status_code != 201:
            raise RuntimeError(f"cannot create the model: {created.status_code} {created.text}")


def _measure(
    procs: Processes, base: str, common: dict[str, Any], args: argparse.Namespace, warmup: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The phases in order (bare, predicts alone, saturation, open loop(s)), the pair phases
    each followed by a learner drain."""
    phases: dict[str, Any] = {}
    learner: dict[str, Any] = {}
    gens = f"{args.generators} load-generator process{'es' if args.generators > 1 else ''}"

    print(
        f"[1/5] bare GET {BARE_PATH}: {args.concurrency} connections ({gens}), "
        f"{args.seconds:g} s"
    )
    phases["bare"] = closed_phase(procs, "bare", common, args, warmup)
    print(f"      {phases['bare']['requests_per_second']:.0f} req/s")

    print(f"[2/5] predicts alone (no feedback), saturation: {args.concurrency} connections")
    phases["predicts"] = closed_phase(procs, "predicts", common, args, warmup)
    print(f"      {phases['predicts']['predict_per_second']:.0f} predicts/s")

    print(f"[3/5] predict+feedback pairs, saturation: {args.concurrency} connections")
    phases["pairs"] = closed_phase(procs, "pairs", common, args, warmup)
    learner["pairs"] = drain(base, args.drain_timeout)
    sat = phases["pairs"]["pairs_per_second"]
    print(
        f"      {sat:.0f} pairs/s; learner backlog {learner['pairs']['backlog_at_end']}, "
        f"drained: {learner['pairs']['drained']}"
    )
    if sat <= 0:
        raise RuntimeError(f"no pair completed: {phases['pairs']['errors']}")

    # the closed loop outruns the learner (it learns what is left after the requests), so
    # the rate the service sustains *with its learning* is the work of the window spread
    # over the window plus the time the learner needed to catch up afterwards
    drained_in = learner["pairs"]["drain_seconds"]
    sustained = None if drained_in is None else sat * args.seconds / (args.seconds + drained_in)
    phases["pairs"]["sustained_pairs_per_second"] = sustained
    rate = (sustained or sat) / 2
    print(
        f"[4/5] open loop at {rate:.0f} pairs/s (half the sustained rate "
        f"{(sustained or sat):.0f}/s; {args.schedule}), {args.seconds:g} s"
    )
    phases["open"] = open_phase(procs, common, args, rate)
    learner["open"] = drain(base, args.drain_timeout)
    if sat / 2 > 1.1 * rate:
        print(f"[5/5] open loop at {sat / 2:.0f} pairs/s (half the closed-loop rate)")
        phases["open_fast"] = open_phase(procs, common, args, sat / 2)
        learner["open_fast"] = drain(base, args.drain_timeout)
    if args.split:
        print("[+] the learner alone: paused while pairs fill the log, then resumed")
        learner["ceiling"] = learner_ceiling(procs, base, common, args, warmup)
        print(f"      {learner['ceiling']['learned_per_second'] or 0:.0f} events/s")
    return phases, learner


def _windows(poller: Poller, phases: dict[str, Any]) -> dict[str, Any]:
    """The poller's figures over each phase's window; the open loops' slow spots printed."""
    windows = {}
    for key in phases:
        a, b = phases[key]["window"]
        windows[key] = poller.window(a, b)
        if phases[key]["kind"] == "open":
            bursts = ", ".join(
                f"{b['from_s']:.1f}-{b['to_s']:.1f} s: {b['count']} (max {b['max_ms']:.0f} ms)"
                for b in phases[key]["slow_bursts"]
            )
            swaps = ", ".join(f"{t:.1f}" for t in windows[key].get("version_changes_s", []))
            print(f"      {key}: predicts over {TARGET_P99_MS:g} ms by time: {bursts or '-'}")
            print(f"      {key}: serving model version moved at (s): {swaps or '-'}")
    return windows


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One run: fresh Redis and service, the phases, the report with its verdicts."""
    started = time.monotonic()
    started_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    dataset, contexts, labels, params = _workload(args)
    warmup = min(2.0, max(0.5, args.seconds / 5))
    service_env = dict(item.split("=", 1) for item in args.service_env)
    if args.split:
        # the learner-alone phase pauses the learner for a warm-up and a phase: its lease must
        # outlast that, or the measure is a takeover (a rebuild from the snapshot) instead
        service_env.setdefault("BOOSTBANDIT_LEARNER_LEASE_SECONDS",
                               f"{max(10.0, 3 * (args.seconds + warmup)):g}")
    config = _config(args, dataset.classes, params, warmup, service_env)
    machine = machine_notes()
    tmp = Path(tempfile.mkdtemp(prefix="boostbandit-load-"))
    procs = Processes(tmp)
    poller: Poller | None = None
    try:
        redis_url, redis_proc = start_redis(procs, args.redis_aof)
        base, service_proc = start_service(
            procs,
            redis_url,
            split=args.split,
            learner_nice=args.learner_nice,
            extra_env=service_env,
        )
        print(f"redis {redis_url} (pid {redis_proc.pid}), service {base} (pid {service_proc.pid})")
        _create_model(base, dataset.classes, params)
        poller = Poller(base, {"service": service_proc.pid, "redis": redis_proc.pid})
        poller.start()
        common = {
            "base": base,
            "timeout": 10.0,
            "client": args.client,
            "contexts": contexts,
            "labels": labels,
            "predict_path": f"/v1/models/{MODEL}/predict",
            "feedback_path": f"/v1/models/{MODEL}/feedback",
        }
        phases, learner = _measure(procs, base, common, args, warmup)
        poller.stop()
        report: dict[str, Any] = {
            "started_at": started_at,
            "config": config,
            "machine": machine,
            "phases": phases,
            "learner": learner,
            "windows": _windows(poller, phases),
            "poll_failures": poller.failures,
        }
    except Exception:
        for name in ("service", "redis"):
            tail = procs.log_tail(name)
            if tail:
                print(f"--- last lines of the {name} log ---\n{tail}", file=sys.stderr)
        raise
    finally:
        if poller is not None and poller.is_alive():
            poller.stop()
        procs.close()
        shutil.rmtree(tmp, ignore_errors=True)
    report["machine"]["loadavg_at_end"] = (
        list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    )
    report["elapsed_seconds"] = time.monotonic() - started
    report["targets"] = evaluate(report)
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM/SIGHUP unwind like Ctrl-C so that every started process is stopped
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    reports = []
    try:
        for i in range(args.repeats):
            if args.repeats > 1:
                print(f"=== run {i + 1} of {args.repeats} ===")
            reports.append(run(args))
    except KeyboardInterrupt:
        print("\ninterrupted; every process the benchmark started was stopped", file=sys.stderr)
        return 130
    report = reports[-1]
    if len(reports) > 1:
        report = {**report, "repeats": [repeat_row(r) for r in reports]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    lines = summary_lines(report)
    if len(reports) > 1:
        lines += ["", *repeat_lines(report["repeats"])]
    print()
    print("\n".join(lines))
    print(f"\nwrote {args.out}")
    if args.results:
        from benchmarks.results import replace_block

        replace_block("load-split" if args.split else "load", "\n".join(lines))
        print("updated benchmarks/RESULTS.md (load block)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
