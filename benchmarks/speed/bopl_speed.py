"""BOPL speed and memory: BOPL-S-regr against plain XGBoost, and off-policy evaluation throughput.

Three measurements (the base learner of *Boosted Off-Policy Learning*, Algorithm 3 and Appendix
G, and the cost of its n*k-row design matrix; boosters/ope.py for the estimators):

1. **Training time.** :class:`boosters.batch.bopl.BOPLS` with the regression base learner
   (BOPL-S-regr, Table 5 Fashion settings: depth 20, min_child_weight 200, translation -0.4) for T
   rounds on Fashion-MNIST logged data (trial 0 of :mod:`benchmarks.paper.bopl_repro`, a random
   subset of the target rows), against XGBoost growing T trees of the same depth with its built-in
   ``reg:squarederror`` objective on the same expanded matrix ``[x_i; e_a]`` (labels: BOPL-S's
   first-round targets, weights: its d_i), same split method, one thread each, ``base_score = 0``,
   eta 1. Both timings include building the XGBoost matrix from the features. Repeats alternate the
   two; the ratio is median(BOPL-S) / median(XGBoost). BOPL-S is timed with both of its solvers: the
   default custom-objective booster and one ``xgb.train`` call per round.
2. **Peak memory**, each fit in a fresh process: peak resident set size (VmHWM) above the
   process's size just before the fit, and tracemalloc's peak of Python/NumPy allocations (XGBoost's
   C++ buffers are not traced), beside the size of the expanded matrix.
3. **OPE throughput** of every estimator of boosters/ope.py on one million synthetic logged events
   (k = 10, softmax logging policy, propensities logged from it, Bernoulli rewards, a softmax
   target policy and a reward model), median of repeats.

    python -m benchmarks.speed.bopl_speed         # all three; writes RESULTS.md block "bopl-speed"
    python -m benchmarks.speed.bopl_speed --rows 2000 --rounds 10 --repeats 3 --no-results
    python -m benchmarks.speed.bopl_speed --report-only  # rewrite the block from benchmarks/out
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import ROOT
from benchmarks.stats import median
from boosters import ope

OUT = ROOT / "benchmarks" / "out"
ESTIMATORS = ("ips", "clipped_ips", "snips", "direct_method", "doubly_robust")
#: BOPL-S-regr Fashion settings (Table 5)
DEPTH, MIN_CHILD_WEIGHT, TRANSLATION = 20, 200.0, -0.4


# ---------------------------------------------------------------------------- synthetic OPE data


def synthetic_events(
    n: int, k: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` logged events: actions, propensities, rewards, target probabilities, reward model.

    >>> a, p, r, target, rhat = synthetic_events(4, 3, seed=0)
    >>> a.shape, target.shape, bool(np.all((p > 0) & (p <= 1)))
    ((4,), (4, 3), True)
    """
    from boosters.batch.policies import sample_actions, softmax

    rng = np.random.default_rng(seed)
    mean_reward = rng.uniform(0.0, 1.0, size=(n, k))
    logging = softmax(rng.normal(size=(n, k)))
    actions, propensities = sample_actions(logging, rng)
    rewards = (rng.random(n) < mean_reward[np.arange(n), actions]).astype(np.float64)
    target = softmax(3.0 * mean_reward + rng.normal(size=(n, k)))
    rhat = np.clip(mean_reward + rng.normal(0.0, 0.1, size=(n, k)), 0.0, 1.0)
    return actions, propensities, rewards, target, rhat


def ope_throughput(n: int, k: int, repeats: int, seed: int = 0) -> list[dict[str, Any]]:
    """Median seconds and events per second of every estimator on ``n`` synthetic events."""
    a, p, r, target, rhat = synthetic_events(n, k, seed)
    rows = []
    for name in ESTIMATORS:
        fn = getattr(ope, name)
        extra = (rhat,) if name in ("direct_method", "doubly_robust") else ()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            est = fn(a, p, r, target, *extra)
            times.append(time.perf_counter() - start)
        sec = median(times)
        rows.append(
            {
                "estimator": name,
                "n": n,
                "k": k,
                "seconds": sec,
                "events_per_second": n / sec,
                "value": est.value,
                "repeats": repeats,
            }
        )
    return rows


# ---------------------------------------------------------------------------- training time


def logged_fashion(rows: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Trial 0's logged Fashion-MNIST data (:mod:`benchmarks.paper.bopl_repro`), ``rows`` rows."""
    from benchmarks.paper.bopl_repro import subsample, trial_data

    _, bandit = trial_data("fashion", 0)
    return subsample(bandit, rows, seed)


def first_round_problem(
    X: np.ndarray, a: np.ndarray, p: np.ndarray, r: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """BOPL-S-regr's first-round targets and weights on the n*k rows (Algorithm 2, App. D)."""
    from boosters.batch.bopl import BOPLS

    rt = r + TRANSLATION
    keep = rt != 0
    S, d = BOPLS(n_actions=k)._coefficients(
        np.zeros((int(keep.sum()), k)), a[keep], p[keep], rt[keep]
    )
    return (S / d[:, None]).ravel(), np.repeat(d, k)


def time_bopls(X, a, p, r, k: int, rounds: int, tree_method: str, solver: str) -> float:
    """Seconds of ``BOPLS.fit`` (BOPL-S-regr) for ``rounds`` rounds, one thread."""
    from benchmarks.paper.bopl_repro import HistLeastSquaresTree
    from boosters.batch.bopl import BOPLS
    from learners.batch_trees import LeastSquaresTree

    tree_cls = HistLeastSquaresTree if tree_method == "hist" else LeastSquaresTree
    tree = tree_cls(max_depth=DEPTH, min_child_weight=MIN_CHILD_WEIGHT)
    model = BOPLS(n_actions=k, base_learner=tree, n_rounds=rounds,
                  reward_translation=TRANSLATION, solver=solver)
    start = time.perf_counter()
    model.fit(X, a, p, r)
    elapsed = time.perf_counter() - start
    if model.n_rounds_ != rounds:
        raise RuntimeError(f"BOPL-S stopped early ({model.stop_reason_}); timing is not comparable")
    return elapsed


def time_xgboost(X, a, p, r, k: int, rounds: int, tree_method: str) -> float:
    """Seconds of XGBoost's built-in squared error: matrix build plus ``rounds`` trees."""
    import xgboost as xgb

    from learners.batch_trees import augment_actions

    y, w = first_round_problem(X, a, p, r, k)
    rt = r + TRANSLATION
    start = time.perf_counter()
    Z = augment_actions(X[rt != 0], k).astype(np.float32)
    maker = xgb.QuantileDMatrix if tree_method == "hist" else xgb.DMatrix
    data = maker(Z, label=y, weight=w, nthread=1)
    params = {
        "objective": "reg:squarederror",
        "tree_method": tree_method,
        "max_depth": DEPTH,
        "min_child_weight": MIN_CHILD_WEIGHT,
        "reg_lambda": 0.0,
        "eta": 1.0,
        "base_score": 0.0,
        "nthread": 1,
        "seed": 0,
        "verbosity": 0,
    }
    xgb.train(params, data, num_boost_round=rounds)
    return time.perf_counter() - start


def training_time(rows: int, rounds: int, repeats: int, tree_method: str) -> dict[str, Any]:
    """Alternating repeats of BOPL-S-regr (both solvers) and plain XGBoost; medians and ratios."""
    from tqdm import tqdm

    X, a, p, r = logged_fashion(rows)
    k = 10
    times: dict[str, list[float]] = {"xgboost": [], "bopls": [], "bopls-per-round": []}
    for _ in tqdm(range(repeats), desc="speed repeats", file=sys.stderr):
        times["xgboost"].append(time_xgboost(X, a, p, r, k, rounds, tree_method))
        times["bopls"].append(time_bopls(X, a, p, r, k, rounds, tree_method, "xgb-objective"))
        times["bopls-per-round"].append(time_bopls(X, a, p, r, k, rounds, tree_method, "per-round"))
    med = {name: median(v) for name, v in times.items()}
    return {
        "rows": int(r.size),
        "expanded_rows": int(r.size * k),
        "features": int(X.shape[1] + k),
        "rounds": rounds,
        "depth": DEPTH,
        "tree_method": tree_method,
        "repeats": repeats,
        "times": times,
        "median": med,
        "ratio": med["bopls"] / med["xgboost"],
        "ratio_per_round": med["bopls-per-round"] / med["xgboost"],
    }


# ---------------------------------------------------------------------------- peak memory


def _peak_rss_mb() -> float:
    """This process's peak resident set size in MB: VmHWM of /proc/self/status (Linux; it
    belongs to the current address space, unlike ru_maxrss, which a spawned child inherits from
    its forking parent), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _memory_child(kind: str, data: str, rounds: int, tree_method: str, queue: Any) -> None:
    import tracemalloc

    import xgboost  # noqa: F401  (imported before the baseline, like numpy)

    with np.load(data) as npz:
        X, a, p, r = (npz[name] for name in ("X", "a", "p", "r"))
    k = 10
    before = _peak_rss_mb()
    tracemalloc.start()
    if kind == "xgboost":
        time_xgboost(X, a, p, r, k, rounds, tree_method)
    else:
        time_bopls(X, a, p, r, k, rounds, tree_method, "xgb-objective")
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    after = _peak_rss_mb()
    queue.put(
        {
            "kind": kind,
            "rounds": rounds,
            "rss_before_mb": before,
            "peak_rss_mb": after,
            "tracemalloc_peak_mb": traced / 2**20,
        }
    )


def peak_memory(rows: int, rounds: int, tree_method: str) -> list[dict[str, Any]]:
    """Each fit in a fresh (spawned) process that loads only the logged rows, so the peak RSS
    above the pre-fit size is the fit's own."""
    import tempfile

    X, a, p, r = logged_fashion(rows)
    ctx = mp.get_context("spawn")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        data = str(Path(tmp) / "logged.npz")
        np.savez(data, X=X, a=a, p=p, r=r)
        for kind in ("xgboost", "bopls"):
            queue = ctx.Queue()
            args = (kind, data, rounds, tree_method, queue)
            proc = ctx.Process(target=_memory_child, args=args)
            proc.start()
            rec = queue.get()
            proc.join()
            out.append(rec)
    return out


# ---------------------------------------------------------------------------- report


def report(
    speed: dict[str, Any],
    memory: list[dict[str, Any]],
    ope_rows: list[dict[str, Any]],
    command: str,
    memory_command: str = "",
) -> str:
    n, f = speed["expanded_rows"], speed["features"]
    med = speed["median"]
    lines = [
        f"Reproduce: `{command}`. Machine: {platform.machine()}, {os.cpu_count()} cores shared "
        "with other jobs (noisy); every fit uses one thread.",
        "",
        f"**Training time**, BOPL-S-regr against XGBoost's built-in squared error, "
        f"{speed['rounds']} rounds of depth-{speed['depth']} trees ({speed['tree_method']} "
        f"split search) on the same expanded Fashion-MNIST matrix: {speed['rows']:,} logged "
        f"rows x 10 actions = {n:,} rows x {f} features; median of {speed['repeats']} "
        "alternating repeats, matrix build included in both. The XGBoost baseline fits fixed "
        "targets (BOPL-S's first-round ones), so its trees are not the same trees, only the "
        "same depth, min_child_weight and rows; wall times are long because each process got "
        "a fraction of a core on the shared machine.",
        "",
        "| fit | median s | ratio to XGBoost | target |",
        "|---|---|---|---|",
        f"| XGBoost `reg:squarederror` | {med['xgboost']:.2f} | 1.00 | |",
        f"| BOPL-S-regr (custom-objective solver, default) | {med['bopls']:.2f} | "
        f"{speed['ratio']:.2f} | <= 1.5 |",
        f"| BOPL-S-regr (one `xgb.train` per round) | {med['bopls-per-round']:.2f} | "
        f"{speed['ratio_per_round']:.2f} | |",
        "",
    ]
    z64 = n * f * 8
    z32 = n * f * 4
    lines += [
        f"**Peak memory** (same matrix, {memory[0].get('rounds', speed['rounds'])} rounds, "
        "each fit in a fresh process that loads only the logged rows; growth = peak RSS above "
        "the process's size just before the fit): expanded matrix "
        f"{z64 / 2**20:.0f} MB as float64 (what `augment_actions` returns), "
        f"{z32 / 2**20:.0f} MB as the float32 copy handed to XGBoost."
        + (f" Measured by `{memory_command}`." if memory_command else ""),
        "",
        "| fit | peak RSS MB | RSS before fit MB | growth MB | tracemalloc peak MB |",
        "|---|---|---|---|---|",
    ]
    for m in memory:
        label = "XGBoost `reg:squarederror`" if m["kind"] == "xgboost" else "BOPL-S-regr"
        lines.append(
            f"| {label} | {m['peak_rss_mb']:.0f} | {m['rss_before_mb']:.0f} | "
            f"{m['peak_rss_mb'] - m['rss_before_mb']:.0f} | {m['tracemalloc_peak_mb']:.0f} |"
        )
    lines += [
        "",
        f"**Off-policy evaluation throughput**, boosters/ope.py on {ope_rows[0]['n']:,} synthetic "
        f"logged events (k = {ope_rows[0]['k']}), median of {ope_rows[0]['repeats']} repeats "
        "(input validation included):",
        "",
        "| estimator | median s | million events / s |",
        "|---|---|---|",
    ]
    for o in ope_rows:
        lines.append(
            f"| {o['estimator']} | {o['seconds']:.3f} | {o['events_per_second'] / 1e6:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="logged Fashion rows (x 10 actions)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree-method", choices=("exact", "hist"), default="exact")
    parser.add_argument("--ope-events", type=int, default=1_000_000)
    parser.add_argument("--ope-repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT / "bopl_speed.json")
    parser.add_argument("--no-results", action="store_true", help="do not touch RESULTS.md")
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the RESULTS.md block from --out"
    )
    parser.add_argument(
        "--memory-only", action="store_true", help="redo only the peak-memory part of --out"
    )
    args = parser.parse_args(argv)
    if args.memory_only:
        saved = json.loads(args.out.read_text())
        saved["memory"] = peak_memory(args.rows, args.rounds, args.tree_method)
        saved["memory_command"] = "python -m benchmarks.speed.bopl_speed " + " ".join(
            a for a in (sys.argv[1:] if argv is None else argv) if a != "--no-results"
        )
        args.out.write_text(json.dumps(saved, indent=1))
        args.report_only = True
    if args.report_only:
        saved = json.loads(args.out.read_text())
        command = saved["command"].replace(" --no-results", "").strip()
        body = report(
            saved["speed"],
            saved["memory"],
            saved["ope"],
            command,
            saved.get("memory_command", "").replace(" --no-results", ""),
        )
        print(body)
        if not args.no_results:
            from benchmarks.results import replace_block

            replace_block("bopl-speed", body)
        return
    command = "python -m benchmarks.speed.bopl_speed " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    command = command.replace(" --no-results", "")

    ope_rows = ope_throughput(args.ope_events, 10, args.ope_repeats)
    print(json.dumps(ope_rows), file=sys.stderr)
    speed = training_time(args.rows, args.rounds, args.repeats, args.tree_method)
    print(json.dumps(speed), file=sys.stderr)
    memory = peak_memory(args.rows, min(args.rounds, 3), args.tree_method)
    print(json.dumps(memory), file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"speed": speed, "memory": memory, "ope": ope_rows, "command": command}, indent=1
        )
    )
    body = report(speed, memory, ope_rows, command.strip())
    print(body)
    if not args.no_results:
        from benchmarks.results import replace_block

        replace_block("bopl-speed", body)


if __name__ == "__main__":
    main()
