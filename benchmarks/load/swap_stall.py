"""How long an API replica stops its other threads when it swaps in a new snapshot.

The model is the load benchmark's (AdaBandit, N = 20, Car, ``tree_profile="bandit"``), trained
on ``--events`` joined events through :class:`service.models.runtime.ServedModel` exactly as
the learner applies them. Three ways to replace the served booster with a newly loaded one are
timed while a ticker thread (standing for the event loop) wakes every 0.2 ms. The longest gap
between two of its ticks is how long a request would have waited for the GIL:

* ``whole``: unpickle the whole snapshot (what replicas did before serving copies) and swap;
* ``serving, naive``: unpickle the serving copy (:func:`learners.frozen.dumps_serving`) with the
  collector on, and drop the old copy at once;
* ``serving, replica path``: the refresh path of :meth:`service.models.store.ModelStore.
  refresh_from_snapshots`: load inside :meth:`service.models.snapshots.HeapFreezer.loading`, then
  empty the replaced copy tree by tree (:func:`learners.frozen.release`).

The heap is frozen first, as a replica's :class:`~service.models.snapshots.HeapFreezer` keeps
it. Sizes, load times and the time of one decision (whole against serving copy) are reported
too, with medians over ``--repeats`` swaps.

    python -m benchmarks.load.swap_stall --events 2000 --repeats 2   # quick
    python -m benchmarks.load.swap_stall --results                    # 20,000 events, RESULTS.md
"""

from __future__ import annotations

import argparse
import gc
import json
import pickle
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.stats import median
from learners.frozen import dumps_serving, release
from service.domain import ModelConfig
from service.events import decision_event, joined_event
from service.models.runtime import ServedModel
from service.models.snapshots import HeapFreezer
from service.sim.datasets import load_dataset


def trained_model(events: int, seed: int = 0) -> tuple[ServedModel, list[dict]]:
    """The load benchmark's model after ``events`` joined events; and the contexts."""
    from tqdm import tqdm

    ds = load_dataset("car")
    order = list(range(len(ds)))
    random.Random(seed).shuffle(order)
    config = ModelConfig(
        name="swap",
        booster="adabandit",
        actions=list(ds.classes),
        params={
            "n_learners": 20,
            "rho": 0.001,
            "seed": 4,
            "tree_profile": "bandit",
            "nominal_attributes": list(ds.nominal),
        },
    )
    model = ServedModel(config, config.build())
    contexts = []
    for j in tqdm(range(events), desc="training", unit="event", leave=False):
        i = order[j % len(order)]
        x = ds.X[i]
        contexts.append(x)
        decision, version = model.decide(x, f"e{j}")
        logged = decision_event(f"e{j}", 0.0, version, config.actions, x, decision)
        reward = float(decision.action == int(ds.y[i]))
        event = joined_event(
            logged, reward=reward, label=None, source="feedback", learn=True, ts=0.0
        )
        model.apply(event, f"{j + 1}-0")
    return model, contexts


def longest_pause(work) -> tuple[float, float]:
    """``(seconds of work, longest gap between ticks of a 0.2 ms ticker thread)``."""
    gaps: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.0002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.05)
    start = time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    time.sleep(0.02)
    stop.set()
    ticker.join()
    return elapsed, max(gaps)


def measure(events: int, repeats: int) -> dict[str, Any]:
    model, contexts = trained_model(events)
    config = model.config
    whole_blob = pickle.dumps(model.booster, protocol=5)
    serving_blob = dumps_serving(model.booster)
    whole, serving = pickle.loads(whole_blob), pickle.loads(serving_blob)
    probes = contexts[:1000]

    def decide_us(booster: Any) -> float:
        served = ServedModel(config, booster)
        start = time.perf_counter()
        for j, x in enumerate(probes):
            served.decide(x, f"p{j}")
        return (time.perf_counter() - start) / len(probes) * 1e6

    same = all(
        ServedModel(config, whole).decide(x, f"p{j}")[0].action
        == ServedModel(config, serving).decide(x, f"p{j}")[0].action
        for j, x in enumerate(probes)
    )
    out: dict[str, Any] = {
        "events": events,
        "whole_bytes": len(whole_blob),
        "serving_bytes": len(serving_blob),
        "decide_us": {"whole": decide_us(whole), "serving": decide_us(serving)},
        "same_decisions": same,
    }
    del model, whole, serving
    sys.setswitchinterval(0.0005)  # as the service sets it (gil_switch_ms)
    freezer = HeapFreezer(5.0)
    current: dict[str, Any] = {"whole": pickle.loads(whole_blob)}
    current["serving"] = pickle.loads(serving_blob)
    gc.collect()
    gc.freeze()

    def swap_whole() -> None:
        current["whole"] = pickle.loads(whole_blob)

    def swap_naive() -> None:
        current["serving"] = pickle.loads(serving_blob)

    def swap_replica() -> None:
        with freezer.loading():
            fresh = pickle.loads(serving_blob)
        replaced, current["serving"] = current["serving"], fresh
        release(replaced)

    for name, work in (
        ("whole", swap_whole),
        ("serving, naive", swap_naive),
        ("serving, replica path", swap_replica),
    ):
        runs = [longest_pause(work) for _ in range(repeats)]
        out[name] = {
            "work_ms": median(r[0] for r in runs) * 1000,
            "longest_pause_ms": median(r[1] for r in runs) * 1000,
            "longest_pause_ms_max": max(r[1] for r in runs) * 1000,
        }
    return out


def summary(result: dict[str, Any], command: str) -> str:
    import os
    import platform

    lines = [
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} CPUs, {platform.python_implementation()} "
        f"{platform.python_version()}; medians over the swaps. Model after {result['events']:,} "
        "events.",
        "",
        f"- whole snapshot {result['whole_bytes'] / 1e6:.1f} MB, serving copy "
        f"{result['serving_bytes'] / 1e6:.1f} MB",
        f"- one decision: {result['decide_us']['whole']:.0f} us on the whole booster, "
        f"{result['decide_us']['serving']:.0f} us on the serving copy; same decisions on 1,000 "
        f"contexts: {'yes' if result['same_decisions'] else 'NO'}",
        "",
        "| swap | work ms | longest pause of another thread, ms (median) | (max) |",
        "|---|---|---|---|",
    ]
    for name in ("whole", "serving, naive", "serving, replica path"):
        r = result[name]
        lines.append(
            f"| {name} | {r['work_ms']:.0f} | {r['longest_pause_ms']:.1f} | "
            f"{r['longest_pause_ms_max']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/swap_stall.json")
    parser.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1:
        parser.error("--events and --repeats must be >= 1")
    result = measure(args.events, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    command = "python -m benchmarks.load.swap_stall" + "".join(
        f" {a}" for a in (argv or sys.argv[1:])
    )
    text = summary(result, command)
    print(text)
    if args.results:
        from benchmarks.results import replace_block

        replace_block("swap", text)
        print("updated benchmarks/RESULTS.md (swap block)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
