"""Booster overhead: rounds per second of a booster against its floor, in the same run.

The floor is the same N River trees doing exactly the predict and learn calls the booster made
(same contexts, same labels, same weights, recorded from an identical seeded run), with no booster
around them. booster/floor = floor time / booster time; 1.0 means the booster's own arithmetic is
free. Repeats alternate booster and floor runs; medians are reported.

    python -m benchmarks.speed.speed --repeats 5

``--fast-vs-river``: AdaBandit (N = 20, rho ``--rho``, default 0.01) on Mice (one pass,
the "numeric" tree profile), Car (x2) and a 5000-row slice of Nursery (one shuffled pass, the
"bandit" profile). In every repeat, on the same stream, in turn: the booster with River's own
Hoeffding-tree leaves (``fast_trees=False``, the reference), the booster with the array leaves
(``fast_trees=True``), the floor (the array trees alone making the recorded calls) and Vowpal
Wabbit's contextual bandit (``--cb_explore K --epsilon 0.01 -q :: --quiet``, driven from a Python
loop: predict the pmf, sample an action with a seeded NumPy generator, learn
``action:cost:probability |x features`` with cost 0 if the action is the label, else 1; the
text lines are built inside the timed loop from the same dict contexts). Medians over repeats;
ratios per repeat and their medians. The two tree kinds must play identical actions (checked).

    python -m benchmarks.speed.speed --fast-vs-river --repeats 3 --results
"""

from __future__ import annotations

import argparse
import json
import pickle
import platform
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import ROOT
from benchmarks.results import replace_block
from benchmarks.stats import median
from boosters.registry import make_booster
from service.sim.datasets import load_dataset
from service.sim.loop import shuffled_order

#: dataset -> (duplication for the timed stream, rho, tree profile) as in Zhang et al. 2019, Table 4
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
    b, f = median(booster_times), median(floor_times)
    ratios = [ft / bt for bt, ft in zip(booster_times, floor_times)]
    return {
        "booster": name,
        "dataset": dataset_name,
        "n_learners": n_learners,
        "rounds": len(xs),
        "booster_rounds_per_second": len(xs) / b,
        "floor_rounds_per_second": len(xs) / f,
        "ratio_median": median(ratios),
        "ratios": ratios,
    }


#: dataset -> (duplication, rows kept of the shuffled stream or None for all, tree profile)
FVR_SETTINGS = {
    "mice": (1, None, "numeric"),
    "car": (2, None, "bandit"),
    "nursery": (1, 5000, "bandit"),
}


def run_booster_actions(booster, xs, ys) -> tuple[float, list[int]]:
    """As :func:`run_booster` (bandit feedback), also returning the played actions."""
    actions: list[int] = []
    append = actions.append
    start = time.perf_counter()
    for x, y in zip(xs, ys):
        d = booster.decide_one(x)
        append(d.action)
        booster.learn_one(x, d, reward=1.0 if d.action == y else 0.0)
    return time.perf_counter() - start, actions


def _vw_token(value) -> str:
    return str(value).replace(" ", "_").replace(":", "_").replace("|", "_")


def run_vw(xs, ys, n_actions: int, seed: int, epsilon: float = 0.01) -> tuple[float, float]:
    """Vowpal Wabbit's ``--cb_explore`` from a Python loop on the stream: (seconds, accuracy)."""
    from vowpalwabbit import Workspace

    vw = Workspace(f"--cb_explore {n_actions} --epsilon {epsilon} -q :: --quiet")
    rng = np.random.default_rng(seed)
    correct = 0
    start = time.perf_counter()
    for x, y in zip(xs, ys):
        tokens = []
        for name, value in x.items():
            if value is None:
                continue
            if isinstance(value, str):
                tokens.append(f"{_vw_token(name)}={_vw_token(value)}")
            else:
                tokens.append(f"{_vw_token(name)}:{float(value)!r}")
        features = "|x " + " ".join(tokens)
        pmf = np.asarray(vw.predict(features), dtype=float)
        pmf /= pmf.sum()
        action = int(rng.choice(n_actions, p=pmf))
        cost = 0.0 if action == y else 1.0
        correct += cost == 0.0
        vw.learn(f"{action + 1}:{cost}:{float(pmf[action])!r} {features}")
    seconds = time.perf_counter() - start
    vw.finish()
    return seconds, correct / len(xs)


def measure_fast_vs_river(
    dataset_name: str, repeats: int, rho: float, n_learners: int = 20, seed: int = 4
) -> dict:
    data = load_dataset(dataset_name)
    dup, keep, profile = FVR_SETTINGS[dataset_name]
    xs, ys = stream(data, dup, seed)
    if keep is not None:
        xs, ys = xs[:keep], ys[:keep]

    def build(fast: bool):
        return make_booster(
            "adabandit",
            n_actions=data.n_classes,
            n_learners=n_learners,
            rho=rho,
            seed=seed,
            tree_profile=profile,
            nominal_attributes=data.nominal or None,
            fast_trees=fast,
        )

    fast_blob, river_blob = pickle.dumps(build(True)), pickle.dumps(build(False))
    calls = record_calls(pickle.loads(fast_blob), xs, ys)
    times: dict[str, list[float]] = {"river": [], "fast": [], "floor": [], "vw": []}
    same_actions, accuracy, vw_accuracy = True, None, None
    for r in range(repeats):
        t, river_actions = run_booster_actions(pickle.loads(river_blob), xs, ys)
        times["river"].append(t)
        t, fast_actions = run_booster_actions(pickle.loads(fast_blob), xs, ys)
        times["fast"].append(t)
        same_actions = same_actions and river_actions == fast_actions
        accuracy = sum(a == y for a, y in zip(fast_actions, ys)) / len(ys)
        times["floor"].append(run_floor(pickle.loads(fast_blob)._trees, xs, calls))
        t, vw_accuracy = run_vw(xs, ys, data.n_classes, seed + r)
        times["vw"].append(t)
        print(
            f"  {dataset_name} repeat {r + 1}/{repeats}: "
            + "  ".join(f"{k} {len(xs) / v[-1]:8.1f} r/s" for k, v in times.items()),
            file=sys.stderr,
            flush=True,
        )
    med = {k: median(v) for k, v in times.items()}
    per = {
        "fast/river": [r / f for r, f in zip(times["river"], times["fast"])],
        "booster/floor": [fl / f for f, fl in zip(times["fast"], times["floor"])],
        "fast/vw": [v / f for f, v in zip(times["fast"], times["vw"])],
    }
    return {
        "mode": "fast-vs-river",
        "booster": "adabandit",
        "dataset": dataset_name,
        "n_learners": n_learners,
        "rho": rho,
        "profile": profile,
        "dup": dup,
        "rounds": len(xs),
        "seed": seed,
        "rounds_per_second": {k: len(xs) / v for k, v in med.items()},
        "seconds": times,
        "ratio_median": {k: median(v) for k, v in per.items()},
        "ratios": per,
        "same_actions": same_actions,
        "accuracy": accuracy,
        "vw_accuracy_last_repeat": vw_accuracy,
    }


FVR_TARGETS = {"mice": 10.0, "car": 3.0, "nursery": 2.0}


def write_fvr_results(rows: list[dict], command: str, block: str = "speed-fast-trees") -> None:
    """The fast-vs-river block of benchmarks/RESULTS.md."""
    lines = [
        f"Command: `{command}`",
        "",
        "| data | rounds | River leaves r/s | array leaves r/s | fast/River (median; target) | "
        "per repeat | floor r/s | booster/floor (median) | VW r/s | ours/VW | accuracy ours / VW "
        "| same actions |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rps, med = r["rounds_per_second"], r["ratio_median"]
        per_speedup = ", ".join(f"{x:.2f}" for x in r["ratios"]["fast/river"])
        per_floor = ", ".join(f"{x:.2f}" for x in r["ratios"]["booster/floor"])
        target = FVR_TARGETS[r["dataset"]]
        lines.append(
            f"| {r['dataset']} (x{r['dup']}, {r['profile']}) | {r['rounds']} | "
            f"{rps['river']:.0f} | {rps['fast']:.0f} | **{med['fast/river']:.2f}x** "
            f"(>= {target:g}x) | {per_speedup} | {rps['floor']:.0f} | "
            f"{med['booster/floor']:.2f} ({per_floor}) | "
            f"{rps['vw']:.0f} | {med['fast/vw']:.4f} | {r['accuracy']:.3f} / "
            f"{r['vw_accuracy_last_repeat']:.3f} | {'yes' if r['same_actions'] else 'NO'} |"
        )
    replace_block(block, "\n".join(lines))


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
    parser.add_argument(
        "--fast-vs-river",
        action="store_true",
        help="AdaBandit with array leaves against River's leaves and Vowpal Wabbit",
    )
    parser.add_argument("--rho", type=float, default=0.01, help="rho of --fast-vs-river")
    parser.add_argument("--block", default="speed-fast-trees", help="RESULTS.md block name")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"python {platform.python_version()} on {platform.machine()}, numpy {np.__version__}")
    if args.fast_vs_river:
        datasets = args.datasets if "--datasets" in sys.argv else list(FVR_SETTINGS)
        out_path = args.out if "--out" in sys.argv else args.out.with_name("speed-fast-trees.jsonl")
        fvr_rows = []
        with out_path.open("w") as out:
            for dataset_name in datasets:
                row = measure_fast_vs_river(dataset_name, args.repeats, args.rho, args.learners)
                fvr_rows.append(row)
                out.write(json.dumps(row) + "\n")
                rps, med = row["rounds_per_second"], row["ratio_median"]
                print(
                    f"adabandit {dataset_name:8s} N={args.learners} rho={args.rho} "
                    f"river {rps['river']:7.1f} fast {rps['fast']:7.1f} r/s "
                    f"(x{med['fast/river']:.2f})  floor {rps['floor']:7.1f} "
                    f"booster/floor {med['booster/floor']:.2f}  vw {rps['vw']:8.1f} "
                    f"ours/vw {med['fast/vw']:.4f}  acc {row['accuracy']:.3f} "
                    f"vw acc {row['vw_accuracy_last_repeat']:.3f} "
                    f"same actions {row['same_actions']}",
                    flush=True,
                )
        if args.results:
            command = "python -m benchmarks.speed.speed " + " ".join(sys.argv[1:])
            write_fvr_results(fvr_rows, command, args.block)
        return
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
        write_results(rows, "python -m benchmarks.speed.speed " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
