"""AdaBandit with many actions: exploration rate, importance weights and the fixes.

Plain streams (each row once, shuffled by the seed): ``rbf26``, River's
``RandomRBF(n_classes=26)`` (10 numeric features, 50 centroids, generator seeded by the run's
seed; 26 actions) and ``digits``, scikit-learn's bundled digits (64 pixels, 10 actions). AdaBandit
(the paper's algorithm with the defaults, ``paper``, and the variants of :data:`VARIANTS`) plays
every ``rho`` of ``--rhos`` on every seed; one JSON line per run goes to
benchmarks/out/many_actions.jsonl (runs already there are skipped), and the table gives the mean
last-20% and whole-stream accuracy of the played action over the seeds.

    python -m benchmarks.paper.many_actions                 # rbf26 (4,000 rows) and digits
    python -m benchmarks.paper.many_actions --quick         # 2,000 rows, one seed, 2 rhos
    python -m benchmarks.paper.many_actions --table         # the table of the runs done
    python -m benchmarks.paper.many_actions --diagnose rbf26 --rhos 0.01 0.1 --seeds 1

``--diagnose`` runs instrumented boosters (no JSONL) and prints, per fifth of the stream, what the
trees receive (the importance weights of the cost reduction), the learner weights ``alpha`` and
the step size, the Hedge distribution over the experts and how often the trees, the explored
labels and the played actions are right. docs/boosters.md, "Many actions", reads them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time

import numpy as np

from benchmarks import OUT
from boosters.online.adabandit import PAPER_ALPHA_MIN, AdaBandit
from service.sim.datasets import Dataset
from service.sim.loop import simulate

#: variant name -> AdaBandit parameters (a function of the number of actions ``k``) on top of
#: ``n_actions``, ``rho`` and ``seed``
VARIANTS = {
    "paper": lambda k: {"alpha_min": PAPER_ALPHA_MIN, "leaf_prediction": "mc",
                        "estimator": "proposed", "rho_decay": None},
    "lclipk": lambda k: {"loss_clip": float(k), "alpha_min": PAPER_ALPHA_MIN,
                         "leaf_prediction": "mc", "estimator": "proposed", "rho_decay": None},
    "nonneg": lambda k: {"alpha_min": 0.0, "leaf_prediction": "mc", "estimator": "proposed",
                         "rho_decay": None},
}


def rbf26(rows: int, seed: int) -> Dataset:
    """``rows`` rows of RandomRBF(n_classes=26), model and sample seeded by ``seed``."""
    from river.datasets import synth

    gen = synth.RandomRBF(seed_model=seed, seed_sample=seed + 1000, n_classes=26)
    X, y = [], []
    for x, c in gen.take(rows):
        X.append({f"x{j}": float(v) for j, v in x.items()})
        y.append(int(c))
    return Dataset("rbf26", X, np.array(y), [str(c) for c in range(26)], [])


def digits(rows: int, seed: int) -> Dataset:
    """scikit-learn's digits (1,797 rows; ``rows`` caps them), pixels as numeric features."""
    from sklearn.datasets import load_digits

    data = load_digits()
    X = [{f"p{j}": float(v) for j, v in enumerate(row)} for row in data.data[:rows]]
    return Dataset("digits", X, data.target[:rows].astype(np.int64), list("0123456789"), [])


STREAMS = {"rbf26": rbf26, "digits": digits}


def run_one(job: tuple[str, str, float, int, int]) -> dict:
    stream, variant, rho, seed, rows = job
    data = STREAMS[stream](rows, seed)
    params = VARIANTS[variant](data.n_classes)
    booster = AdaBandit(data.n_classes, rho=rho, seed=seed, **params)
    result = simulate(booster, data, dup=1, seed=seed)
    return {
        "stream": stream,
        "variant": variant,
        "params": params,
        "rho": rho,
        "seed": seed,
        "rows": rows,
        "n_actions": data.n_classes,
        "last20_accuracy": result.last20_accuracy,
        "accuracy": result.accuracy,
        "seconds": result.seconds,
    }


class Probe(AdaBandit):
    """AdaBandit that records, every learning round, what its parts receive."""

    def _labels_weights(self, costs, u, known_label):
        labels, weights = super()._labels_weights(costs, u, known_label)
        self.probe.update(weights=weights, labels=labels, cost_max=float(np.abs(costs).max()))
        return labels, weights

    def _update(self, votes, weak, experts, lhat, costs, true_label) -> None:
        grads = self._gradients(votes, weak, costs, 1.0 - lhat)
        super()._update(votes, weak, experts, lhat, costs, true_label)
        v = np.exp(self.log_v - self.log_v.max())
        v /= v.sum()
        self.probe.update(
            lhat_max=float(lhat.max()), grad_max=float(np.abs(grads).max()),
            eta=self._step_size(), hedge_max=float(v.max()), hedge_top=int(v.argmax()) + 1,
            alpha_absmax=float(np.abs(self.alpha).max()), alpha_neg=float((self.alpha < 0).mean()),
        )


def _probe_rows(data: Dataset, rho: float, seed: int, variant: str) -> list[dict]:
    booster = Probe(data.n_classes, rho=rho, seed=seed, **VARIANTS[variant](data.n_classes))
    rows = []
    for i in np.random.default_rng(seed).permutation(len(data)).tolist():
        x, y = data.X[i], int(data.y[i])
        decision = booster.decide_one(x)
        yhat, weak = decision.internals["yhat"], decision.internals["weak"]
        booster.probe = {}
        booster.learn_one(x, decision, reward=float(decision.action == y))
        p = booster.probe
        rows.append({
            "explored": decision.action != yhat, "hit": decision.action == y,
            "yhat_ok": yhat == y, "weak_ok": float((weak == y).mean()),
            "label_ok": float((p["labels"] == y).mean()),
            "w_median": float(np.median(p["weights"])),
            "w_max": float(p["weights"].max()),
            **{key: p[key] for key in ("lhat_max", "cost_max", "grad_max", "eta", "hedge_max",
                                      "hedge_top", "alpha_absmax", "alpha_neg")},
        })
    return rows


def diagnose(data: Dataset, rho: float, seed: int, variant: str) -> str:
    """The instrumented run's summary: the rounds by kind, then per fifth of the stream."""
    rows = _probe_rows(data, rho, seed, variant)
    a = {key: np.array([r[key] for r in rows], dtype=float) for key in rows[0]}
    explored, hit, ok = a["explored"] > 0, a["hit"] > 0, a["yhat_ok"] > 0
    kinds = {"yhat right": ok, "yhat wrong, not explored": ~ok & ~explored,
             "explored, right": explored & hit, "explored, wrong": explored & ~hit}
    out = [f"== {data.name} k={data.n_classes} rho={rho:g} seed={seed} variant={variant} "
           f"rounds={len(rows)}",
           "round kind | rounds | median tree weight | max weight | tree label right | lhat max"]
    for name, mask in kinds.items():
        if mask.any():
            out.append(f"{name} | {int(mask.sum())} | {np.median(a['w_median'][mask]):.3g} | "
                       f"{a['w_max'][mask].max():.4g} | {a['label_ok'][mask].mean():.3f} | "
                       f"{a['lhat_max'][mask].max():.4g}")
    cols = ["hit", "yhat_ok", "weak_ok", "w_median", "grad_max", "eta", "hedge_max",
            "alpha_absmax", "alpha_neg"]
    out.append("fifth | " + " | ".join(cols) + " | Hedge's top expert")
    for f in range(5):
        part = slice(f * len(rows) // 5, (f + 1) * len(rows) // 5)
        top = np.bincount(a["hedge_top"][part].astype(int)).argmax()
        out.append(f"{f + 1} | " + " | ".join(f"{a[c][part].mean():.3g}" for c in cols)
                   + f" | {top}")
    return "\n".join(out)


def table(rows: list[dict]) -> str:
    """Mean (min-max over seeds) last-20% and whole accuracy per stream, variant and rho."""
    cells: dict[tuple, dict[int, dict]] = {}
    for row in rows:  # the first run of a seed counts (a repeated run is the same run)
        cells.setdefault((row["stream"], row["variant"], row["rho"]), {}).setdefault(
            row["seed"], row
        )
    lines = [
        "| stream | variant | rho | seeds | last-20% mean (min-max) | whole mean |",
        "|---|---|---|---|---|---|",
    ]
    for (stream, variant, rho), by_seed in sorted(cells.items()):
        runs = list(by_seed.values())
        last = [r["last20_accuracy"] for r in runs]
        whole = [r["accuracy"] for r in runs]
        lines.append(
            f"| {stream} | {variant} | {rho:g} | {len(runs)} | {np.mean(last):.3f} "
            f"({min(last):.2f}-{max(last):.2f}) | {np.mean(whole):.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", nargs="*", default=list(STREAMS))
    parser.add_argument("--variants", nargs="*", default=["paper", "nonneg"], choices=VARIANTS)
    parser.add_argument("--rhos", type=float, nargs="*", default=[0.01, 0.05, 0.1, 0.2])
    parser.add_argument("--seeds", type=int, nargs="*", default=[1, 2, 3])
    parser.add_argument("--rows", type=int, default=4000, help="rows per stream (digits: <= 1797)")
    parser.add_argument("--quick", action="store_true", help="2,000 rows, seed 1, rho 0.01 0.1")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=str(OUT / "many_actions.jsonl"))
    parser.add_argument("--diagnose", metavar="STREAM", help="instrumented runs, no JSONL")
    parser.add_argument("--table", action="store_true", help="only the table of the JSONL's runs")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.seeds, args.rhos = 2000, [1], [0.01, 0.1]
    if args.diagnose:
        for rho in args.rhos:
            for seed in args.seeds:
                for variant in args.variants:
                    data = STREAMS[args.diagnose](args.rows, seed)
                    print(diagnose(data, rho, seed, variant), flush=True)
        return
    done, old = set(), []
    try:
        with open(args.out) as f:
            old = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        pass
    wanted = []
    for stream in args.streams:
        rows = min(args.rows, 1797) if stream == "digits" else args.rows
        for variant in args.variants:
            for rho in args.rhos:
                for seed in args.seeds:
                    wanted.append((stream, variant, rho, seed, rows))
    key = lambda r: (r["stream"], r["variant"], r["rho"], r["seed"], r["rows"])  # noqa: E731
    done = {key(r) for r in old}
    jobs = [] if args.table else [job for job in wanted if job not in done]
    print(f"{len(jobs)} runs to do ({len(wanted) - len(jobs)} done)", file=sys.stderr)
    start = time.perf_counter()
    with mp.Pool(max(1, min(args.jobs, len(jobs))), maxtasksperchild=1) as pool, open(
        args.out, "a"
    ) as out:
        for row in pool.imap_unordered(run_one, jobs):
            out.write(json.dumps(row) + "\n")
            out.flush()
            old.append(row)
            print(
                f"{row['stream']} {row['variant']} rho={row['rho']:g} seed={row['seed']} "
                f"last20 {row['last20_accuracy']:.3f} whole {row['accuracy']:.3f} "
                f"({row['seconds']:.0f} s; {time.perf_counter() - start:.0f} s so far)",
                file=sys.stderr,
                flush=True,
            )
    wanted_set = set(wanted)
    print(table([r for r in old if key(r) in wanted_set]))


if __name__ == "__main__":
    main()
