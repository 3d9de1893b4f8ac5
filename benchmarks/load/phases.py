"""The phases of :mod:`benchmarks.load.service_load`: load-generator processes started on a common
start time, their results merged (rates, latency summaries, slow bursts), and the learner's side
polled from the orchestrator (model counters, lag gauge, CPU of the servers, drain)."""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import queue as queue_mod
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.load.client import MODEL, generator_main, merge_errors
from benchmarks.load.supervisor import Processes
from benchmarks.stats import percentiles


def latency_summary(seconds: list[float]) -> dict[str, Any]:
    """Count, mean, p50, p90, p99 and max of latencies given in seconds, in milliseconds.

    >>> latency_summary([0.001, 0.002, 0.003, 0.004])["p50_ms"]
    2.5
    """
    if not seconds:
        return {"n": 0}
    ms = [s * 1000 for s in seconds]
    p50, p90, p99 = percentiles(ms, [50, 90, 99])
    return {"n": len(ms), "mean_ms": sum(ms) / len(ms), "p50_ms": p50, "p90_ms": p90,
            "p99_ms": p99, "max_ms": max(ms)}


def run_phase(
    procs: Processes, phase: str, cfgs: list[dict[str, Any]], timeout: float
) -> tuple[float, list[dict[str, Any]]]:
    """Run one phase in ``len(cfgs)`` fresh load-generator processes.

    Returns the common start time (monotonic) and each process's result. ``timeout`` bounds the
    whole phase, process start-up included.
    """
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    gos = [ctx.Queue() for _ in cfgs]
    processes = [
        ctx.Process(
            target=generator_main,
            args=(results, gos[k], k, phase, cfg),
            name=f"load-{phase}-{k}",
            daemon=True,
        )
        for k, cfg in enumerate(cfgs)
    ]
    procs.generators = processes
    for process in processes:
        process.start()
    deadline = time.monotonic() + timeout
    ready: set[int] = set()
    out: dict[int, dict[str, Any]] = {}
    start_at = math.nan
    try:
        while len(out) < len(cfgs):
            try:
                kind, k, payload = results.get(timeout=0.5)
            except queue_mod.Empty:
                gone = [k for k, pr in enumerate(processes) if k not in out and not pr.is_alive()]
                if gone:
                    try:  # a result may still be in the pipe
                        kind, k, payload = results.get(timeout=1)
                    except queue_mod.Empty:
                        codes = [processes[k].exitcode for k in gone]
                        raise RuntimeError(
                            f"load generator(s) {gone} exited with {codes}"
                        ) from None
                elif time.monotonic() > deadline:
                    raise RuntimeError(f"load phase {phase!r} took over {timeout:.0f} s") from None
                else:
                    continue
            if kind == "ready":
                ready.add(k)
                if len(ready) == len(cfgs):
                    start_at = time.monotonic() + 0.2
                    for go in gos:
                        go.put(start_at)
            elif kind == "ok":
                out[k] = payload
            else:
                raise RuntimeError(f"load generator {k} ({phase}) failed: {payload}")
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join(5)
        procs.generators = []
    return start_at, [out[k] for k in range(len(cfgs))]


def split(total: int, parts: int) -> list[int]:
    """``total`` spread over ``parts`` as evenly as possible."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


def closed_phase(
    procs: Processes, kind: str, common: dict[str, Any], args: argparse.Namespace, warmup: float
) -> dict[str, Any]:
    """A closed-loop phase over ``args.generators`` processes, merged."""
    n_rows = max(1, len(common["contexts"]))
    cfgs, worker = [], 0
    for conns in split(args.concurrency, args.generators):
        rows = [(worker + w) * n_rows // args.concurrency for w in range(conns)]
        worker += conns
        cfgs.append(
            {
                **common,
                "kind": kind,
                "connections": conns,
                "first_rows": rows,
                "warmup": warmup,
                "seconds": args.seconds,
            }
        )
    if kind == "bare":  # no need to ship the dataset
        cfgs = [{**c, "contexts": [], "labels": []} for c in cfgs]
    start, parts = run_phase(procs, "closed", cfgs, 60 + warmup + args.seconds + 30)
    seconds = args.seconds
    lat = {k: [x for p in parts for x in p["lat"][k]] for k in parts[0]["lat"]}
    rewards = [r for p in parts for r in p["rewards"]]
    out: dict[str, Any] = {
        "kind": kind,
        "concurrency": args.concurrency,
        "generators": args.generators,
        "seconds": seconds,
        "warmup_seconds": warmup,
        "window": [start + warmup, start + warmup + seconds],
        "client_cpu_utilisation": sum(p["cpu_seconds"] for p in parts) / seconds,
        "client_cpu_utilisation_max_process": max(p["cpu_seconds"] for p in parts) / seconds,
        "errors": merge_errors([p["errors"] for p in parts]),
    }
    if kind == "bare":
        out["requests_per_second"] = len(lat["bare"]) / seconds
        out["latency"] = latency_summary(lat["bare"])
    elif kind == "predicts":
        out["requests_per_second"] = out["predict_per_second"] = len(lat["predict"]) / seconds
        out["latency"] = {"predict": latency_summary(lat["predict"])}
    else:
        out["predict_per_second"] = len(lat["predict"]) / seconds
        out["feedback_per_second"] = len(lat["feedback"]) / seconds
        out["pairs_per_second"] = len(lat["pair"]) / seconds
        out["requests_per_second"] = out["predict_per_second"] + out["feedback_per_second"]
        out["latency"] = {k: latency_summary(lat[k]) for k in ("predict", "feedback", "pair")}
        out["mean_reward"] = sum(rewards) / len(rewards) if rewards else None
    return out


def open_phase(
    procs: Processes, common: dict[str, Any], args: argparse.Namespace, rate: float
) -> dict[str, Any]:
    """The open-loop phase at ``rate`` pairs/s over ``args.generators`` processes, merged.

    The schedule (Poisson or fixed interval, seeded) is drawn here and dealt round-robin to the
    processes, so the offered load is the same whatever their number.
    """
    rng = random.Random(args.seed)
    schedule: list[float] = []
    t = 0.0
    while len(schedule) < 1_000_000:
        t += rng.expovariate(rate) if args.schedule == "poisson" else 1.0 / rate
        if t >= args.seconds:
            break
        schedule.append(t)
    k_procs = args.generators
    cfgs = [
        {
            **common,
            "connections": conns,
            "seconds": args.seconds,
            "schedule": schedule[k::k_procs],
            "rows": list(range(len(schedule)))[k::k_procs],
        }
        for k, conns in enumerate(split(args.open_max_inflight, k_procs))
    ]
    start, parts = run_phase(procs, "open", cfgs, 60 + args.seconds + 30)
    seconds = args.seconds
    lat = {k: [x for p in parts for x in p["lat"][k]] for k in parts[0]["lat"]}
    rewards = [r for p in parts for r in p["rewards"]]
    slow = sorted((due - start, latency) for p in parts for due, latency in p["slow"])
    return {
        "kind": "open",
        "slow_bursts": slow_bursts(slow),
        "schedule": args.schedule,
        "offered_pairs_per_second": rate,
        "scheduled_pairs": len(schedule),
        "seconds": seconds,
        "max_inflight": args.open_max_inflight,
        "generators": k_procs,
        "window": [start, start + seconds],
        "completed_pairs": len(lat["pair"]),
        "achieved_pairs_per_second": len(lat["pair"]) / seconds,
        "incomplete_pairs": sum(p["incomplete"] for p in parts),
        "last_send_late_seconds": max(p["last_send_late_seconds"] for p in parts),
        "finished_after_window_seconds": max(p["finished_after_window_seconds"] for p in parts),
        "client_cpu_utilisation": sum(p["cpu_seconds"] for p in parts) / seconds,
        "client_cpu_utilisation_max_process": max(p["cpu_seconds"] for p in parts) / seconds,
        "latency": {k: latency_summary(v) for k, v in lat.items()},
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "errors": merge_errors([p["errors"] for p in parts]),
    }


def slow_bursts(slow: list[tuple[float, float]], gap: float = 0.5) -> list[dict[str, Any]]:
    """Group slow predicts ``(seconds into the window, latency)`` into bursts ``gap`` apart.

    >>> [b["count"] for b in slow_bursts([(1.0, 0.03), (1.2, 0.05), (4.0, 0.025)])]
    [2, 1]
    >>> slow_bursts([(1.0, 0.03), (1.2, 0.05)])[0]
    {'from_s': 1.0, 'to_s': 1.2, 'count': 2, 'max_ms': 50.0}
    """
    bursts: list[dict[str, Any]] = []
    for at, latency in slow:
        ms = round(latency * 1000, 1)
        if bursts and at - bursts[-1]["to_s"] <= gap:
            last = bursts[-1]
            last["to_s"] = round(at, 2)
            last["count"] += 1
            last["max_ms"] = max(last["max_ms"], ms)
        else:
            bursts.append({"from_s": round(at, 2), "to_s": round(at, 2), "count": 1, "max_ms": ms})
    return bursts



_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of ``pid`` (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


def model_counts(client: httpx.Client) -> dict[str, Any]:
    """decisions, rewards, joined, version of the benchmark model, plus the learner backlog."""
    info = client.get(f"/v1/models/{MODEL}")
    info.raise_for_status()
    body = info.json()
    out = {k: body[k] for k in ("decisions", "rewards", "joined", "version")}
    # joined events are applied by the learner right after it appends them; an API replica's
    # own version only moves with the snapshots it reloads, so count from the log
    out["backlog"] = max(0, out["rewards"] - out["joined"])
    return out


def learner_lag_gauge(client: httpx.Client) -> float | None:
    """``boostbandit_learner_lag_seconds`` of the model from /metrics (None if absent)."""
    text = client.get("/metrics").text
    prefix = f'boostbandit_learner_lag_seconds{{model="{MODEL}"}}'
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return None


class Poller(threading.Thread):
    """Samples the model counters (every ``interval``), the lag gauge and the CPU of the servers."""

    def __init__(self, base: str, pids: dict[str, int], interval: float = 0.25) -> None:
        super().__init__(name="load-poller", daemon=True)
        self.base, self.pids, self.interval = base, pids, interval
        self.samples: list[dict[str, Any]] = []
        self.failures = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()

    def run(self) -> None:
        next_metrics = 0.0
        lag: float | None = None
        with httpx.Client(base_url=self.base, timeout=5, trust_env=False) as client:
            while not self.stop_event.is_set() and len(self.samples) < 100_000:
                try:
                    counts = model_counts(client)
                    if time.monotonic() >= next_metrics:
                        lag = learner_lag_gauge(client)
                        next_metrics = time.monotonic() + 1.0
                except (httpx.HTTPError, KeyError, ValueError):
                    self.failures += 1
                    self.stop_event.wait(self.interval)
                    continue
                sample = {"t": time.monotonic(), **counts, "lag_gauge_seconds": lag}
                for name, pid in self.pids.items():
                    sample[f"cpu_{name}"] = process_cpu_seconds(pid)
                with self.lock:
                    self.samples.append(sample)
                self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Learner and CPU figures between monotonic times ``start`` and ``end``."""
        with self.lock:
            inside = [s for s in self.samples if start <= s["t"] <= end]
        if len(inside) < 2:
            return {"samples": len(inside)}
        a, b = inside[0], inside[-1]
        dt = b["t"] - a["t"]
        out: dict[str, Any] = {
            "samples": len(inside),
            # when the serving process's model version moved (an API replica: a snapshot
            # swapped in), in seconds into the window
            "version_changes_s": [
                round(s1["t"] - start, 2)
                for s0, s1 in zip(inside, inside[1:])
                if s1["version"] != s0["version"]
            ],
            "feedback_per_second": (b["rewards"] - a["rewards"]) / dt,
            "learned_per_second": (b["joined"] - a["joined"]) / dt,
            "max_backlog": max(s["backlog"] for s in inside),
            "max_lag_gauge_seconds": max(
                (s["lag_gauge_seconds"] for s in inside if s["lag_gauge_seconds"] is not None),
                default=None,
            ),
        }
        for name in self.pids:
            key = f"cpu_{name}"
            if a.get(key) is not None and b.get(key) is not None:
                out[f"{name}_cpu_utilisation"] = (b[key] - a[key]) / dt
        return out


def drain(base: str, timeout: float) -> dict[str, Any]:
    """Backlog now, then poll until the learner has applied every feedback (or ``timeout``)."""
    with httpx.Client(base_url=base, timeout=5, trust_env=False) as client:
        t0 = time.monotonic()
        first = counts = model_counts(client)
        while counts["backlog"] > 0 and time.monotonic() - t0 < timeout:
            time.sleep(0.05)
            counts = model_counts(client)
        elapsed = time.monotonic() - t0
        lag = learner_lag_gauge(client)
    return {
        "backlog_at_end": first["backlog"],
        "counts_at_end": first,
        "drained": counts["backlog"] == 0,
        "drain_seconds": elapsed if counts["backlog"] == 0 else None,
        "remaining_after_timeout": counts["backlog"],
        "drain_timeout_seconds": timeout,
        "lag_gauge_seconds_after": lag,
    }



def learner_ceiling(procs: Processes, base: str, common: dict[str, Any],
                    args: argparse.Namespace, warmup: float) -> dict[str, Any]:
    """The split shape's learner at full speed: it is paused (SIGSTOP) while a closed loop of
    pairs fills the log, then resumed; the backlog over the time it takes to apply it is the
    rate the learner sustains on its own (the API idles meanwhile). The split shape's learner
    holds a lease longer than the pause (``service_load``), so it resumes with its model."""
    learner = next(p for name, p, _ in procs.children if name == "learner")
    learner.send_signal(signal.SIGSTOP)
    try:
        phase = closed_phase(procs, "pairs", common, args, warmup)
    finally:
        learner.send_signal(signal.SIGCONT)
    lag = drain(base, args.drain_timeout)
    seconds = lag["drain_seconds"]
    rate = lag["backlog_at_end"] / seconds if seconds else None
    return {"pairs_per_second": phase["pairs_per_second"], "backlog": lag["backlog_at_end"],
            "drain_seconds": seconds, "learned_per_second": rate}
