"""BanditBBM at many actions: rounds per second at k = 50, N = 10 on a synthetic numeric stream.

Every timed run is a fresh subprocess (so caches start empty and memory is per run) that plays
``--rounds`` bandit rounds of BanditBBM on the same seeded stream: four uniform features, label
``floor(k (x0 + x1) / 2)``, reward 1 when the action is the label. Variants alternate within
each repeat and medians are reported. ``--before DIR`` adds a variant that imports ``boosters``
from another checkout (``mkdir DIR && git archive <commit> | tar -x -C DIR``), ``--after DIR``
times one as "after" instead of this checkout;
the played actions are hashed, so identical decisions show as identical hashes.

    python -m benchmarks.speed.banditbbm_k --rounds 2000 --repeats 3 --before /tmp/old
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT
from benchmarks.stats import median


def synthetic_stream(k: int, rounds: int, seed: int = 0) -> tuple[list[dict], list[int]]:
    """Contexts with four uniform features and the label ``floor(k (x0 + x1) / 2)``.

    >>> xs, ys = synthetic_stream(50, 3)
    >>> len(xs), sorted(xs[0]), all(0 <= y < 50 for y in ys)
    (3, ['f0', 'f1', 'f2', 'f3'], True)
    """
    import numpy as np

    X = np.random.default_rng(seed).uniform(size=(rounds, 4))
    xs = [{f"f{j}": float(v) for j, v in enumerate(row)} for row in X]
    ys = [min(k - 1, int(k * (r[0] + r[1]) / 2)) for r in X]
    return xs, ys


def one_run(
    k: int, n_learners: int, rounds: int, rho: float, seed: int, profile: bool, floor: bool = False
) -> dict:
    """Time one BanditBBM run in this process (``boosters`` as this interpreter imports it).

    With ``floor``, also time the trees alone: the same predict and learn calls (recorded from a
    second, identical run) replayed on fresh copies of the initial trees, as
    :mod:`benchmarks.speed.speed` does; booster time minus floor time is the booster's own time
    (potentials included).
    """
    from boosters.online.banditbbm import BanditBBM

    xs, ys = synthetic_stream(k, rounds)
    booster = BanditBBM(n_actions=k, n_learners=n_learners, rho=rho, seed=seed)
    blob = pickle.dumps(booster)
    actions = []
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    for x, y in zip(xs, ys, strict=True):
        d = booster.decide_one(x)
        booster.learn_one(x, d, reward=1.0 if d.action == y else 0.0)
        actions.append(d.action)
    seconds = time.perf_counter() - start
    row = {
        "rounds_per_s": rounds / seconds,
        "accuracy": sum(a == y for a, y in zip(actions, ys, strict=True)) / rounds,
        "actions_sha": hashlib.sha256(json.dumps(actions).encode()).hexdigest()[:12],
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cache": _cache_sizes(booster.potentials),
    }
    if profiler is not None:
        profiler.disable()
        row["split"] = _split(profiler, seconds)
    if floor:
        from benchmarks.speed.speed import record_calls, run_floor

        calls = record_calls(pickle.loads(blob), xs, ys)
        row["floor_rounds_per_s"] = rounds / run_floor(pickle.loads(blob)._trees, xs, calls)
        own = seconds - rounds / row["floor_rounds_per_s"]
        row["own_rounds_per_s"] = rounds / own if own > 0 else math.inf
    return row


def _cache_sizes(pot) -> dict:
    return {
        name: len(getattr(pot, name))
        for name in ("_memo", "_tables", "_matrices", "_stacks")
        if hasattr(pot, name)
    }


def _split(profiler, seconds: float) -> dict:
    """Profiled seconds in the potentials and in River's tree calls (cumulative, not nested)."""
    import pstats

    stats = pstats.Stats(profiler).stats

    def cumulative(name: str, where: str) -> float:
        return sum(v[3] for f, v in stats.items() if f[2] == name and where in f[0])

    tree_file = "hoeffding_tree_classifier.py"
    return {
        "potentials_s": cumulative("cost_matrices", "potentials"),
        "trees_s": cumulative("learn_one", tree_file) + cumulative("predict_proba_one", tree_file),
        "profiled_s": seconds,
    }


def import_root(src: Path, into: Path) -> Path:
    """``into`` made a directory that imports ``benchmarks`` from this checkout and every other
    package (``boosters``, ``learners``, ``service``) from the checkout ``src`` (symlinks)."""
    for package in sorted(src.iterdir()):
        if (package / "__init__.py").is_file() and package.name != "benchmarks":
            (into / package.name).symlink_to(package.resolve())
    (into / "benchmarks").symlink_to(ROOT / "benchmarks")
    return into


def run_variant(src: Path, args) -> dict:
    """One timed run in a fresh interpreter importing the packages of ``src``."""
    command = [sys.executable, "-m", "benchmarks.speed.banditbbm_k", "--one", "--k", str(args.k),
               "--learners", str(args.learners), "--rounds", str(args.rounds), "--rho",
               str(args.rho), "--seed", str(args.seed)]
    if args.profile:
        command.append("--profile")
    if src == args.after:
        command.append("--floor")
    with tempfile.TemporaryDirectory(prefix="banditbbm-k-") as tmp:
        root = import_root(src, Path(tmp))
        env = dict(os.environ, PYTHONPATH=str(root))
        out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=root,
                             env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--learners", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--rho", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout to time against")
    parser.add_argument("--after", type=Path, default=ROOT, help="the checkout timed as 'after'")
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help="cProfile split per run")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        row = one_run(
            args.k, args.learners, args.rounds, args.rho, args.seed, args.profile, args.floor
        )
        print(json.dumps(row))
        return
    variants = {"after": args.after} | ({"before": args.before} if args.before else {})
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for repeat in range(args.repeats):
        order = list(variants) if repeat % 2 == 0 else list(variants)[::-1]
        for name in order:
            runs[name].append(run_variant(variants[name], args))
            print(f"repeat {repeat} {name}: {json.dumps(runs[name][-1])}", file=sys.stderr)
    print(
        f"BanditBBM, k = {args.k}, N = {args.learners}, rho = {args.rho}, "
        f"{args.rounds} rounds, median of {args.repeats}"
    )
    print(
        "| code | rounds/s (median) | per repeat | trees alone, rounds/s | booster's own "
        "time, rounds/s | accuracy | actions sha | max RSS MB | cache entries |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    floors = [r["floor_rounds_per_s"] for r in runs["after"] if "floor_rounds_per_s" in r]
    floor = median(floors) if floors else math.nan
    for name, rows in runs.items():
        rates = [r["rounds_per_s"] for r in rows]
        rate = median(rates)
        own = 1.0 / (1.0 / rate - 1.0 / floor) if rate < floor else math.inf
        print(
            f"| {name} | {rate:.1f} | {', '.join(f'{x:.1f}' for x in rates)} | {floor:.1f} | "
            f"{own:.0f} | {rows[0]['accuracy']:.4f} | {rows[0]['actions_sha']} | "
            f"{max(r['max_rss_mb'] for r in rows):.0f} | {rows[-1]['cache']} |"
        )


if __name__ == "__main__":
    main()
