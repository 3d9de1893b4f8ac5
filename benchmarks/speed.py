"""Booster overhead: rounds per second of a booster against its floor, in the same run.

The floor is the same N River trees doing exactly the predict and learn calls the booster made
(same contexts, same labels, same weights, recorded from an identical seeded run), with no booster
around them. booster/floor = floor time / booster time; 1.0 means the booster's own arithmetic is
free. Repeats alternate booster and floor runs; medians are reported.

    python benchmarks/speed.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import pickle
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results import replace_block  # noqa: E402
from boosters.registry import make_booster  # noqa: E402
from service.datasets import load_dataset  # noqa: E402
from service.simulate import shuffled_order  # noqa: E402

#: dataset -> (duplication for the timed stream, rho, tree profile) as in seed 001's Table 4
SETTINGS = {"car": (2, 0.001, "bandit"), "mice": (1, 0.1, "numeric")}  # dup, rho, profile


def stream(dataset, dup, seed):
    order = shuffled_order(len(dataset), dup, seed)
    return [dataset.X[i] for i in order], [int(dataset.y[i]) for i in order]


def run_booster(booster, xs, ys) -> float:
    full = booster.full_information
    start = time.perf_counter()
    for x, y in zip(xs, ys):
        d = booster.decide_one(x)
        if full:
            booster.learn_one(x, d, label=y)
        else:
            booster.learn_one(x, d, reward=1.0 if d.action == y else 0.0)
    return time.perf_counter() - start


def record_calls(booster, xs, ys) -> list[list[tuple[int, int, float]]]:
    """Run the booster once with every tree's learn_one recorded: per round (tree, label, w)."""
    calls: list[list[tuple[int, int, float]]] = []
    current: list[tuple[int, int, float]] = []
    for index, tree in enumerate(booster._trees):
        original = tree.learn_one

        def learn(x, y, *, w=1.0, _original=original, _index=index):
            current.append((_index, y, w))
            return _original(x, y, w=w)

        tree.learn_one = learn
    for x, y in zip(xs, ys):
        current = []
        d = booster.decide_one(x)
        if booster.full_information:
            booster.learn_one(x, d, label=y)
        else:
            booster.learn_one(x, d, reward=1.0 if d.action == y else 0.0)
        calls.append(current)
    return calls


def run_floor(trees, xs, calls) -> float:
    start = time.perf_counter()
    for x, round_calls in zip(xs, calls):
        for tree in trees:
            tree.predict_proba_one(x)
        for index, label, w in round_calls:
            trees[index].learn_one(x, label, w=w)
    return time.perf_counter() - start


def measure(name: str, dataset_name: str, n_learners: int, repeats: int, seed: int = 4) -> dict:
    data = load_dataset(dataset_name)
    dup, rho, profile = SETTINGS[dataset_name]
    xs, ys = stream(data, dup, seed)
    booster = make_booster(
        name,
        n_actions=data.n_classes,
        n_learners=n_learners,
        rho=rho,
        seed=seed,
        tree_profile=profile,
        nominal_attributes=data.nominal or None,
    )
    blob = pickle.dumps(booster)
    calls = record_calls(pickle.loads(blob), xs, ys)
    booster_times, floor_times = [], []
    for _ in range(repeats):
        booster_times.append(run_booster(pickle.loads(blob), xs, ys))
        floor_times.append(run_floor(pickle.loads(blob)._trees, xs, calls))
    b, f = statistics.median(booster_times), statistics.median(floor_times)
    ratios = [ft / bt for bt, ft in zip(booster_times, floor_times)]
    return {
        "booster": name,
        "dataset": dataset_name,
        "n_learners": n_learners,
        "rounds": len(xs),
        "booster_rounds_per_second": len(xs) / b,
        "floor_rounds_per_second": len(xs) / f,
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
    }


def write_results(rows: list[dict], command: str) -> None:
    """Replace the speed block of benchmarks/RESULTS.md with a table of ``rows``."""
    lines = [
        f"Command: `{command}`",
        "",
        "| booster | data | N | rounds | booster rounds/s | floor rounds/s | booster/floor "
        "(median) | per repeat |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['booster']} | {r['dataset']} | {r['n_learners']} | {r['rounds']} | "
            f"{r['booster_rounds_per_second']:.0f} | {r['floor_rounds_per_second']:.0f} | "
            f"{r['ratio_median']:.2f} | {', '.join(f'{x:.2f}' for x in r['ratios'])} |"
        )
    replace_block("speed", "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--learners", type=int, default=20)
    parser.add_argument("--boosters", nargs="*", default=["adabandit", "banditbbm"])
    parser.add_argument("--datasets", nargs="*", default=["car", "mice"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "speed.jsonl")
    parser.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"python {platform.python_version()} on {platform.machine()}, numpy {np.__version__}")
    rows = []
    with args.out.open("w") as out:
        for dataset_name in args.datasets:
            for name in args.boosters:
                row = measure(name, dataset_name, args.learners, args.repeats)
                rows.append(row)
                out.write(json.dumps(row) + "\n")
                print(
                    f"{name:10s} {dataset_name:5s} N={args.learners} "
                    f"booster {row['booster_rounds_per_second']:7.1f} r/s  "
                    f"floor {row['floor_rounds_per_second']:7.1f} r/s  "
                    f"ratio {row['ratio_median']:.3f} "
                    f"({', '.join(f'{r:.2f}' for r in row['ratios'])})",
                    flush=True,
                )
    if args.results:
        write_results(rows, "python benchmarks/speed.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
