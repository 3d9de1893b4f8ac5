"""What the size bounds of ``boosters._params`` guard against: time, memory and pickle sizes of
online boosters near and above their bounds, measured on this machine.

Every case runs in a fresh child process (``--child``), so caches start empty and its memory is
its own. Memory is the growth of the child's peak RSS (``ru_maxrss``) above its RSS just before
the measured step, except for one decision's memory, which is tracemalloc's peak (numpy reports
its arrays to tracemalloc). Cases:

* ``adabandit``: one AdaBandit learning round (decide, then learn) at 1,000 actions;
* ``banditbbm``: BanditBBM at k = 10 over a synthetic stream; its slowest round and the median;
* ``oco``: OCOBandit at 1,000 actions (``n_actions * n_learners`` trees): build, pickle (whole
  and serving copy), one decision;
* ``thompson``: ``river_thompson``, one decision at ``mc_samples x n_actions`` Beta draws;
* ``bopl``: BOPL-regr on digits: scoring with one XGBoost booster against T separate trees;
* ``release``: freeing a serving copy of the load benchmark's AdaBandit (20 grown trees) at once
  against :func:`learners.frozen.release`, with the longest pause of another thread.

Cases above a bound build the classes directly (``make_booster`` would refuse them).

    python -m benchmarks.speed.size_limits --quick       # about a minute, prints the table
    python -m benchmarks.speed.size_limits --results     # the full run, writes RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from benchmarks import ROOT
from benchmarks.results import replace_block
from benchmarks.stats import median

MB = 1e6


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    """The process's peak RSS: Linux updates ``ru_maxrss`` lazily (its high-water mark can lag
    the current RSS by some pages), so never less than the RSS now."""
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, _rss_bytes())


def _stream(k: int, rounds: int) -> tuple[list[dict], list[int]]:
    from benchmarks.speed.banditbbm_k import synthetic_stream

    return synthetic_stream(k, rounds)


def _decision_memory(booster: Any, x: dict) -> float:
    """tracemalloc's peak over one decision, bytes."""
    tracemalloc.start()
    booster.decide_one(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def case_adabandit(k: int, n: int, repeats: int) -> dict:
    from boosters.online.adabandit import AdaBandit

    xs, ys = _stream(k, repeats)
    booster = AdaBandit(n_actions=k, n_learners=n, seed=0)
    before = _rss_bytes()
    decide, learn = [], []
    for x, y in zip(xs, ys):
        start = time.perf_counter()
        d = booster.decide_one(x)
        decide.append(time.perf_counter() - start)
        start = time.perf_counter()
        booster.learn_one(x, d, reward=float(d.action == y))
        learn.append(time.perf_counter() - start)
    return {"decide_s": median(decide), "learn_s": median(learn), "learn_max_s": max(learn),
            "rss_growth": _peak_rss_bytes() - before, "repeats": repeats}


def case_banditbbm(k: int, n: int, rounds: int, budget: float = 600.0) -> dict:
    from boosters.online.banditbbm import BanditBBM

    xs, ys = _stream(k, rounds)
    booster = BanditBBM(n_actions=k, n_learners=n, seed=0)
    before = _rss_bytes()
    times = []
    for x, y in zip(xs, ys):
        start = time.perf_counter()
        d = booster.decide_one(x)
        booster.learn_one(x, d, reward=float(d.action == y))
        times.append(time.perf_counter() - start)
        if sum(times) > budget:  # checked between rounds: a round itself is not cut short
            break
    return {"round_median_s": median(times), "round_max_s": max(times), "total_s": sum(times),
            "round_max_at": times.index(max(times)) + 1, "rounds": len(times), "of_rounds": rounds,
            "rss_growth": _peak_rss_bytes() - before}


def case_oco(k: int, n: int, repeats: int) -> dict:
    import pickle

    from boosters.online.oco_bandit import OCOBandit
    from learners.frozen import dumps_serving

    xs, _ = _stream(k, repeats)
    before = _rss_bytes()
    start = time.perf_counter()
    booster = OCOBandit(n_actions=k, n_learners=n, seed=0)
    build = time.perf_counter() - start
    grown = _peak_rss_bytes() - before
    start = time.perf_counter()
    whole = pickle.dumps(booster, protocol=5)
    pickle_s = time.perf_counter() - start
    start = time.perf_counter()
    serving = dumps_serving(booster)
    serving_s = time.perf_counter() - start
    decide = []
    for x in xs:
        start = time.perf_counter()
        booster.decide_one(x)
        decide.append(time.perf_counter() - start)
    return {"trees": k * n, "build_s": build, "build_rss_growth": grown, "pickle_s": pickle_s,
            "pickle_bytes": len(whole), "serving_s": serving_s, "serving_bytes": len(serving),
            "decide_s": median(decide), "decide_mem": _decision_memory(booster, xs[0]),
            "repeats": repeats}


def case_thompson(k: int, samples: int, repeats: int) -> dict:
    from boosters.online.baselines import RiverPolicy

    xs, ys = _stream(k, repeats + 20)
    booster = RiverPolicy(n_actions=k, policy="thompson", seed=0)
    booster.mc_samples = samples
    for x, y in zip(xs[repeats:], ys[repeats:]):  # some posteriors away from the prior
        d = booster.decide_one(x)
        booster.learn_one(x, d, reward=float(d.action == y))
    decide = []
    for x in xs[:repeats]:
        start = time.perf_counter()
        booster.decide_one(x)
        decide.append(time.perf_counter() - start)
    return {"draws": k * samples, "decide_s": median(decide),
            "decide_mem": _decision_memory(booster, xs[0]), "repeats": repeats}


def case_bopl(rounds: int, repeats: int) -> dict:
    import numpy as np
    from sklearn.datasets import load_digits

    from boosters.batch.bopl import BOPL

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 10, size=len(y))  # uniform logging policy
    rewards = (actions == y).astype(float)
    out: dict[str, Any] = {"rows": len(y), "rounds": rounds, "repeats": repeats}
    scores = {}
    for solver in ("xgb-objective", "per-round"):
        start = time.perf_counter()
        model = BOPL(n_actions=10, n_rounds=rounds, reward_translation=-0.5, solver=solver)
        model.fit(X, actions, np.full(len(y), 0.1), rewards)
        out[f"{solver}_fit_s"] = time.perf_counter() - start
        out[f"{solver}_trees"] = model.n_rounds_
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            scores[solver] = model.scores(X)
            times.append(time.perf_counter() - start)
        out[f"{solver}_score_s"] = median(times)
    out["same_scores"] = bool(np.allclose(scores["xgb-objective"], scores["per-round"],
                                          atol=1e-4))
    return out


def case_release(events: int, repeats: int) -> dict:
    import gc
    import pickle

    from benchmarks.load.swap_stall import longest_pause, trained_model
    from learners.frozen import dumps_serving, release

    model, _ = trained_model(events)
    blob = dumps_serving(model.booster)
    del model
    gc.collect()
    holder: dict[str, Any] = {}
    runs: dict[str, list] = {"drop": [], "release": []}
    emptied: list[int] = []
    sys.setswitchinterval(0.0005)  # as the service sets it (gil_switch_ms)
    for _ in range(repeats):
        for name in runs:
            holder["copy"] = pickle.loads(blob)
            if name == "drop":
                runs[name].append(longest_pause(lambda: holder.pop("copy")))
            else:
                runs[name].append(longest_pause(lambda: emptied.append(release(holder["copy"]))))
                holder.pop("copy")
    trees = emptied[0]
    out: dict[str, Any] = {"events": events, "serving_bytes": len(blob), "trees": trees,
                           "repeats": repeats}
    for name, values in runs.items():
        out[f"{name}_s"] = median(v[0] for v in values)
        out[f"{name}_pause_s"] = median(v[1] for v in values)
    return out


CASES = {"adabandit": case_adabandit, "banditbbm": case_banditbbm, "oco": case_oco,
         "thompson": case_thompson, "bopl": case_bopl, "release": case_release}


def plan(quick: bool) -> list[tuple[str, dict]]:
    """The cases and their arguments: full, or ``quick`` (small sizes, one or two repeats)."""
    if quick:
        return [("adabandit", {"k": 300, "n": 20, "repeats": 2}),
                ("banditbbm", {"k": 10, "n": 20, "rounds": 50}),
                ("oco", {"k": 200, "n": 20, "repeats": 3}),
                ("thompson", {"k": 1000, "samples": 1000, "repeats": 3}),
                ("bopl", {"rounds": 5, "repeats": 3}),
                ("release", {"events": 500, "repeats": 2})]
    return [("adabandit", {"k": 1000, "n": 20, "repeats": 3}),
            ("adabandit", {"k": 1000, "n": 100, "repeats": 2}),
            *[("banditbbm", {"k": 10, "n": n, "rounds": 300}) for n in (30, 33, 36)],
            ("banditbbm", {"k": 10, "n": 40, "rounds": 300, "budget": 120.0}),
            ("oco", {"k": 1000, "n": 20, "repeats": 5}),
            ("oco", {"k": 1000, "n": 100, "repeats": 3}),
            ("thompson", {"k": 1000, "samples": 1000, "repeats": 5}),
            ("bopl", {"rounds": 40, "repeats": 5}),
            ("release", {"events": 20_000, "repeats": 5})]


def run_child(case: str, kwargs: dict, timeout: float) -> dict:
    """Run one case in a fresh interpreter; its result, or ``{"error": ...}``."""
    cmd = [sys.executable, "-m", "benchmarks.speed.size_limits", "--child", case,
           json.dumps(kwargs)]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not end in {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def rows(case: str, a: dict, r: dict) -> list[str]:
    """Markdown table rows of one case's result."""
    if "error" in r:
        return [f"| {case} {a} | {r['error']} | | |"]
    if case == "adabandit":
        return [f"| AdaBandit, k = {a['k']}, N = {a['n']}: one learning round | "
                f"{_fmt(r['learn_s'])} (max {_fmt(r['learn_max_s'])}; decide "
                f"{_fmt(r['decide_s'])}) | {r['rss_growth'] / MB:.0f} MB (RSS) | "
                f"{r['repeats']} rounds |"]
    if case == "banditbbm":
        cut = "" if r["rounds"] == r["of_rounds"] else f" (stopped after {a['budget']:.0f} s)"
        return [f"| BanditBBM, k = {a['k']}, N = {a['n']}: slowest round (#{r['round_max_at']}) of "
                f"{r['rounds']}{cut} | "
                f"{_fmt(r['round_max_s'])} (median {_fmt(r['round_median_s'])}, all "
                f"{_fmt(r['total_s'])}) | {r['rss_growth'] / MB:.0f} MB (RSS) | 1 run |"]
    if case == "oco":
        t = f"OCOBandit, {r['trees']:,} trees ({a['k']} x {a['n']})"
        return [f"| {t}: build | {_fmt(r['build_s'])} | {r['build_rss_growth'] / MB:.0f} MB "
                "(RSS) | 1 |",
                f"| {t}: pickle whole / serving copy | {_fmt(r['pickle_s'])} / "
                f"{_fmt(r['serving_s'])} | {r['pickle_bytes'] / MB:.1f} MB / "
                f"{r['serving_bytes'] / MB:.1f} MB (pickled) | 1 |",
                f"| {t}: one decision | {_fmt(r['decide_s'])} | "
                f"{r['decide_mem'] / MB:.1f} MB (tracemalloc) | {r['repeats']} |"]
    if case == "thompson":
        return [f"| river_thompson, {r['draws']:,} draws ({a['samples']} x {a['k']}): one "
                f"decision | {_fmt(r['decide_s'])} | {r['decide_mem'] / MB:.1f} MB (tracemalloc)"
                f" | {r['repeats']} |"]
    if case == "bopl":
        fast, slow = r["xgb-objective_score_s"], r["per-round_score_s"]
        return [f"| BOPL-regr, digits ({r['rows']:,} rows), {r['rounds']} rounds: scores, one "
                f"booster / {r['per-round_trees']} separate trees | {_fmt(fast)} / "
                f"{_fmt(slow)} = **{slow / fast:.1f}x** (fit {r['xgb-objective_fit_s']:.1f} s / "
                f"{r['per-round_fit_s']:.1f} s; same scores: "
                f"{'yes' if r['same_scores'] else 'NO'}) | | {r['repeats']} |"]
    per_tree = r["release_s"] / max(r["trees"], 1)
    return [f"| serving copy ({r['serving_bytes'] / MB:.1f} MB, {r['trees']} trees, "
            f"{r['events']:,} events): dropped at once | {_fmt(r['drop_s'])} (longest pause of "
            f"another thread {_fmt(r['drop_pause_s'])}) | | {r['repeats']} |",
            f"| same, emptied by `learners.frozen.release` | {_fmt(r['release_s'])}, "
            f"{per_tree * 1000:.1f} ms per tree (longest pause {_fmt(r['release_pause_s'])}) "
            f"| | {r['repeats']} |"]


def report(results: list[tuple[str, dict, dict]], command: str, elapsed: float,
           load: tuple[float, float] = (math.nan, math.nan)) -> str:
    lines = [
        "## Size limits: what the bounds of `boosters._params` guard against",
        "",
        f"Command: `{command}` ({elapsed / 60:.1f} min). Machine: {os.cpu_count()} cores shared "
        f"with other jobs (noisy: 1-minute load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end), 24 GiB, "
        f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}. "
        "Each case in a fresh process; memory is peak RSS growth above the RSS before the step "
        "(RSS), tracemalloc's peak over one decision (tracemalloc), or the pickle's length. "
        "Times are medians over the runs column (slowest-round and build figures: one run).",
        "",
        "| case | time | memory | runs |",
        "|---|---|---|---|",
    ]
    for case, a, r in results:
        lines += rows(case, a, r)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--results", action="store_true",
                        help="write the size-limits block of benchmarks/RESULTS.md")
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="run only these cases")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(CASES[args.child[0]](**json.loads(args.child[1]))))
        return 0
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    results = []
    for case, kwargs in plan(args.quick):
        if args.only and case not in args.only:
            continue
        result = run_child(case, kwargs, args.timeout)
        print(case, kwargs, json.dumps(result), file=sys.stderr, flush=True)
        results.append((case, kwargs, result))
    command = "python -m benchmarks.speed.size_limits" + (" --quick" if args.quick else "")
    text = report(results, command + (" --results" if args.results else ""),
                  time.perf_counter() - start, (load_start, os.getloadavg()[0]))
    print(text)
    if args.results:
        replace_block("size-limits", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
