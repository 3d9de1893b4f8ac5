"""Reproduce Table 3 of Ghai & Singh 2024, *Sample-Efficient Agnostic Boosting* (docs/papers.md).

Protocol of the paper's experiments (Section 7, App. J): decision stumps (scikit-learn) as weak
learners; k-fold cross-validation (30 folds); classification noise of 0/5/10/20% added to the
*training* folds only (exactly ``round(noise * n)`` training labels, chosen at random, are flipped:
:func:`flip_labels`; the test fold stays clean); a grid search over T in {25, 50, 100} for every
algorithm and over sigma in {0.1, 0.25, 0.5} for Algorithm 1. Algorithms
(boosters/batch/sample_efficient.py):

- ``ours``: :class:`SampleEfficientBooster` with the paper's experimental settings
  (``PAPER_EXPERIMENT``: fractional relabelling with the unnormalised weights ``(1 +- w) / 2``,
  the adaptive step ``eta_t = c_t`` and App. K's "better of ``W_t`` and ``-sign(H_t)``");
- ``kk09``: :class:`KanadeKalaiBooster` (fresh chunk per round, Madaboost weights);
- ``bchm20``: :class:`StatisticalAgnosticBooster` with Madaboost weights, as the paper ran it;
  ``bchm20-oco`` (its own OGD weights, Algorithm 2) and ``ours-alg1`` (Algorithm 1 as written:
  sampled labels, fixed step, threshold tau = 0, gamma = 0.3, eta = sigma * gamma) are available
  as extra columns;
- ``adaboost``: a reference that is not in the paper: scikit-learn's ``AdaBoostClassifier`` (SAMME)
  with T decision stumps, trained on the whole (noisy) training fold, no hold-out. It shows what
  plain boosted stumps reach on the same folds and noise.

Every algorithm selects its output round on a hold-out of 20% of the training fold (the
paper does not say how it did this). The reported cell is the grid point with the best mean
cross-validated accuracy (the paper reports neither the selected values nor whether the search
was nested), as mean ± standard deviation over folds.

Datasets: Ionosphere, Diabetes, German (ARFF copies in benchmarks/data/seed003/, read with
scipy.io.arff; German's nominal attributes one-hot encoded) and Waveform (River's generator,
5000 rows like the UCI file, class 0 against the other two: the paper does not say how it made
the 3-class set binary). Spambase and Sonar are not available offline and are left out.

One JSON line per (dataset, noise, fold, algorithm, T, sigma) goes to benchmarks/out/table3.jsonl
(cells already there are skipped, so an interrupted run resumes); the report block
``table3`` of benchmarks/RESULTS.md is rewritten from that file at the end.

    python -m benchmarks.paper.table3 --jobs 2            # the full reproduction
    python -m benchmarks.paper.table3 --report-only       # only rewrite the RESULTS.md block
    python -m benchmarks.paper.table3 --quick             # smoke test: Ionosphere, T = 25, 2 folds

The figure benchmarks/figures/table3.png (accuracy against noise, ours beside the paper's) is
redrawn with the report.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks import ROOT
from benchmarks.stats import median
from boosters.batch.sample_efficient import (
    PAPER_EXPERIMENT,
    KanadeKalaiBooster,
    SampleEfficientBooster,
    StatisticalAgnosticBooster,
)

OUT = ROOT / "benchmarks" / "out"
DATA = ROOT / "benchmarks" / "data" / "seed003"

DATASETS = ["ionosphere", "diabetes", "german", "waveform"]
NOISE = [0.0, 0.05, 0.10, 0.20]
ROUNDS = [25, 50, 100]
SIGMAS = [0.1, 0.25, 0.5]
ALGORITHMS = ["kk09", "bchm20", "ours"]
EXTRA_ALGORITHMS = ["bchm20-oco", "ours-alg1", "adaboost"]
LABELS = {
    "kk09": "KK09",
    "bchm20": "BCHM20",
    "ours": "Alg. 1",
    "bchm20-oco": "BCHM20 (OCO)",
    "ours-alg1": "Alg. 1 (as written)",
    "adaboost": "AdaBoost stumps (ref.)",
}
WAVEFORM_ROWS = 5000
HOLDOUT = 0.2

#: Table 3 of the paper: dataset -> noise -> algorithm -> (mean, spread)
PAPER: dict[str, dict[float, dict[str, tuple[float, float]]]] = {
    "ionosphere": {
        0.0: {"kk09": (0.92, 0.02), "bchm20": (0.89, 0.03), "ours": (0.97, 0.02)},
        0.05: {"kk09": (0.90, 0.03), "bchm20": (0.88, 0.03), "ours": (0.97, 0.03)},
        0.10: {"kk09": (0.93, 0.02), "bchm20": (0.89, 0.02), "ours": (0.97, 0.02)},
        0.20: {"kk09": (0.92, 0.03), "bchm20": (0.90, 0.03), "ours": (0.96, 0.03)},
    },
    "diabetes": {
        0.0: {"kk09": (0.83, 0.03), "bchm20": (0.78, 0.02), "ours": (0.87, 0.03)},
        0.05: {"kk09": (0.83, 0.03), "bchm20": (0.77, 0.02), "ours": (0.88, 0.03)},
        0.10: {"kk09": (0.83, 0.03), "bchm20": (0.78, 0.02), "ours": (0.88, 0.03)},
        0.20: {"kk09": (0.82, 0.02), "bchm20": (0.78, 0.02), "ours": (0.88, 0.02)},
    },
    "german": {
        0.0: {"kk09": (0.77, 0.02), "bchm20": (0.75, 0.02), "ours": (0.83, 0.02)},
        0.05: {"kk09": (0.78, 0.02), "bchm20": (0.75, 0.02), "ours": (0.85, 0.02)},
        0.10: {"kk09": (0.78, 0.02), "bchm20": (0.75, 0.02), "ours": (0.84, 0.02)},
        0.20: {"kk09": (0.78, 0.02), "bchm20": (0.74, 0.02), "ours": (0.84, 0.02)},
    },
    "waveform": {
        0.0: {"kk09": (0.88, 0.01), "bchm20": (0.78, 0.01), "ours": (0.91, 0.01)},
        0.05: {"kk09": (0.88, 0.01), "bchm20": (0.77, 0.01), "ours": (0.90, 0.01)},
        0.10: {"kk09": (0.88, 0.01), "bchm20": (0.77, 0.01), "ours": (0.91, 0.01)},
        0.20: {"kk09": (0.88, 0.01), "bchm20": (0.77, 0.01), "ours": (0.90, 0.01)},
    },
}


# ---- data ---------------------------------------------------------------------------------------


def flip_labels(y: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A copy of the 0/1 labels ``y`` with exactly ``round(fraction * len(y))`` of them flipped.

    The flipped rows are a uniformly random subset drawn with ``rng`` (classification noise on
    the training folds, as in the paper's Sec. 7).

    >>> y = np.zeros(10, dtype=int)
    >>> int(flip_labels(y, 0.2, np.random.default_rng(0)).sum())
    2
    >>> flip_labels(y, 1.5, np.random.default_rng(0))
    Traceback (most recent call last):
    ...
    ValueError: fraction must be in [0, 1], got 1.5
    """
    y = np.asarray(y)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    flipped = y.copy()
    idx = rng.choice(y.size, size=int(round(fraction * y.size)), replace=False)
    flipped[idx] = 1 - flipped[idx]
    return flipped


def _read_arff(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Numeric columns as they are, nominal ones one-hot; the label is the last attribute,
    1 for its second declared value."""
    from scipy.io import arff

    data, meta = arff.loadarff(path)
    names = meta.names()
    columns = []
    for name in names[:-1]:
        kind, values = meta[name]
        col = data[name]
        if kind == "nominal":
            col = np.char.decode(col.astype(bytes), "utf-8")
            columns.append(np.stack([(col == v).astype(float) for v in values], axis=1))
        else:
            columns.append(np.asarray(col, dtype=float)[:, None])
    label_values = meta[names[-1]][1]
    labels = np.char.decode(data[names[-1]].astype(bytes), "utf-8")
    return np.hstack(columns), (labels == label_values[1]).astype(int)


@functools.cache
def load(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` with ``y`` in {0, 1}."""
    if dataset == "waveform":
        from river.datasets import synth

        rows = list(itertools.islice(synth.Waveform(seed=42), WAVEFORM_ROWS))
        X = np.array([[x[k] for k in sorted(x)] for x, _ in rows])
        return X, np.array([int(c == 0) for _, c in rows])
    file = {"ionosphere": "ionosphere.arff", "diabetes": "diabetes.arff", "german": "credit-g.arff"}
    return _read_arff(DATA / file[dataset])


def folds(y: np.ndarray, n_folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedKFold

    return list(StratifiedKFold(n_folds, shuffle=True, random_state=0).split(np.zeros(len(y)), y))


# ---- one job: an algorithm's grid on one fold --------------------------------------------------


class AdaBoostStumps:
    """scikit-learn's AdaBoost (SAMME) over ``n_rounds`` stumps: the reference column.

    Exposes the attributes :func:`run_job` records (``best_round_`` is T: no round selection).
    """

    def __init__(self, n_rounds: int, seed: int):
        from sklearn.ensemble import AdaBoostClassifier
        from sklearn.tree import DecisionTreeClassifier

        self.model = AdaBoostClassifier(
            DecisionTreeClassifier(max_depth=1), n_estimators=n_rounds, random_state=seed
        )
        self.best_round_, self.steps_, self.n_clipped_ = n_rounds, [], 0

    def fit(self, X: np.ndarray, y: np.ndarray) -> AdaBoostStumps:
        self.model.fit(X, y)
        return self

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        return float(self.model.score(X, y))


def make(algorithm: str, n_rounds: int, sigma: float | None, seed: int):
    if algorithm == "adaboost":
        return AdaBoostStumps(n_rounds, seed)
    common = {"n_rounds": n_rounds, "holdout": HOLDOUT, "random_state": seed}
    if algorithm == "ours":
        return SampleEfficientBooster(sigma=sigma, **PAPER_EXPERIMENT, **common)
    if algorithm == "ours-alg1":
        return SampleEfficientBooster(sigma=sigma, gamma=0.3, eta=sigma * 0.3, **common)
    if algorithm == "kk09":
        return KanadeKalaiBooster(**common)
    if algorithm == "bchm20":
        return StatisticalAgnosticBooster(weights="madaboost", **common)
    if algorithm == "bchm20-oco":
        return StatisticalAgnosticBooster(weights="oco", **common)
    raise ValueError(f"unknown algorithm {algorithm!r}")


def grid(algorithm: str, rounds: list[int], sigmas: list[float]) -> list[tuple[int, float | None]]:
    uses_sigma = algorithm.startswith("ours")
    return [(T, s) for T in rounds for s in (sigmas if uses_sigma else [None])]


def run_job(job: tuple) -> list[dict]:
    dataset, noise, fold, n_folds, algorithm, cells = job
    X, y = load(dataset)
    train, test = folds(y, n_folds)[fold]
    seed = 1000 * int(round(noise * 100)) + fold
    rng = np.random.default_rng([DATASETS.index(dataset), int(round(noise * 100)), fold])
    y_train = flip_labels(y[train], noise, rng)
    rows = []
    for n_rounds, sigma in cells:
        start = time.perf_counter()
        model = make(algorithm, n_rounds, sigma, seed).fit(X[train], y_train)
        rows.append(
            {
                "dataset": dataset,
                "noise": noise,
                "fold": fold,
                "folds": n_folds,
                "algorithm": algorithm,
                "T": n_rounds,
                "sigma": sigma,
                "accuracy": model.score(X[test], y[test]),
                "train_accuracy_noisy": model.score(X[train], y_train),
                "best_round": model.best_round_,
                "backward_steps": sum(kind == "backward" for kind, _, _ in model.steps_),
                "clipped": model.n_clipped_,
                "seconds": time.perf_counter() - start,
            }
        )
    return rows


# ---- report -------------------------------------------------------------------------------------

#: the start of the ``table3`` block: heading, protocol, the commands that made the numbers
HEADER = """### Ghai & Singh 2024, Table 3 (batch agnostic boosting under label noise)

`benchmarks/paper/table3.py`, protocol of the paper's Section 7 / App. J as we read it
(docs/papers.md): scikit-learn decision stumps as weak learners;
stratified k-fold cross-validation; exactly 0/5/10/20% of the training fold's labels flipped (the
test fold stays clean); grid T in {25, 50, 100} for every algorithm and sigma in {0.1, 0.25, 0.5}
for Alg. 1; every booster picks its output round on a 20% hold-out of the training fold. Alg. 1 =
`SampleEfficientBooster` with the paper's experimental settings (fractional labels with the
unnormalised weights (1 ± w)/2, adaptive step, App. K's branching); KK09 = `KanadeKalaiBooster`
(a fresh chunk of n/T rows per round, Madaboost weights); BCHM20 = `StatisticalAgnosticBooster`
(all rows every round, Madaboost weights, as the paper ran it). Waveform: River's generator, 5000
rows, class 0 against the rest (the paper does not say how it made the 3-class set binary), 5
folds instead of 30 to fit the time budget. Spambase and Sonar are not available offline.

Commands (each resumes where it stopped; the last one only rewrites this block and
`benchmarks/figures/table3.png`):

```bash
python -m benchmarks.paper.table3 --jobs 2 --datasets ionosphere diabetes german \\
    --algorithms kk09 bchm20 ours adaboost
python -m benchmarks.paper.table3 --jobs 2 --datasets waveform --folds 5 \\
    --algorithms kk09 bchm20 ours
python -m benchmarks.paper.table3 --jobs 2 --datasets ionosphere diabetes german --max-folds 10 \\
    --algorithms bchm20-oco ours-alg1
python -m benchmarks.paper.table3 --report-only
```

Figure: `benchmarks/figures/table3.png` (ours solid, the paper dashed)."""

#: the reading of the committed runs, appended to the block (the runs are deterministic)
NOTES = """Reading:

- **Target: met by BCHM20, missed by KK09 and Alg. 1.** BCHM20 lies within the paper's spread in
  9 of 16 cells: all of Ionosphere, 3 of German, 2 of Diabetes. On Waveform it is 0.08-0.10 above
  the paper. KK09 and Alg. 1 are below the paper in every cell, by 0.04-0.20. The paper's
  ordering does not hold either: here Alg. 1 beats both baselines in 2 of 16 cases, the paper
  claims 18 of 24. The misses, explained as far as the paper allows:
- **The paper's Alg. 1 numbers are out of reach of boosted stumps on these data.** Diabetes
  0.87-0.88 and German 0.83-0.85 are far above every method run here. Plain AdaBoost over the
  same stumps on the same folds reaches 0.77 and 0.75 on clean labels. They are not in-sample
  accuracies either: no method here fits its own training folds that well (see the in-sample
  line above; AdaBoost reaches 0.80 and 0.78). The paper's numbers also stay flat from 0% to 20%
  label noise, while our KK09 and AdaBoost lose up to 0.09. No T, sigma or reading of the paper
  closes gaps that large. Without the authors' code we cannot say where they come from.
- **KK09 and Alg. 1 see few fresh rows per round, by design.** Both take n/T fresh rows each
  round (App. K: "T implicitly limits the algorithm to m_total/T fresh samples each round"). On
  Ionosphere that is about 11 of the roughly 270 training rows at T = 25, and under 3 at T = 100.
  KK09 fits each stump on those rows alone. Alg. 1 adds the older chunks, with geometrically
  decaying mass and frozen labels. BCHM20 fits every stump on all rows, which is why it is the
  strongest of the three here and the one that matches the paper. The paper's KK09 (0.92 on
  Ionosphere) implies more data per round than n/T, by a procedure it does not describe.
- **The experimental variant is weaker than Algorithm 1 as written.** The paper's experimental
  weights (1 ± w)/2 correlate a fresh chunk's labels with the true ones by only w = sigma while
  H is small, against 1 for chunk 1. The normalised rule of Algorithm 1 gives
  w / (eta + sigma) = 1 / (1 + gamma) = 0.77 there (eta = gamma sigma). Run as written
  (sampled labels, fixed step, gamma = 0.3), it scores higher on most of the shared folds (line
  above), at 2.6-4.2 stump fits per round instead of 0.7-2.2 (batch-speed block).
- **The paper's spread is most likely a standard error.** The standard deviation over our 30
  folds is 0.04-0.13 on these small sets, 2-5 times the paper's ±0.02-0.03, because a test fold
  holds 11-34 rows. Our standard errors (0.008-0.023) are the size of the paper's spread, so the
  tables show mean ± s.e.
- **Waveform differs in set-up.** The paper does not say how it made Waveform binary (here:
  class 0 against the rest), and it is run with 5 folds here for time."""


def key(row: dict) -> tuple:
    return (row["dataset"], row["noise"], row["fold"], row["algorithm"], row["T"], row["sigma"])


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def best_cells(rows: list[dict]) -> dict[tuple, dict]:
    """(dataset, noise, algorithm) -> the grid cell with the best mean accuracy over folds."""
    cells: dict[tuple, list[float]] = {}
    train: dict[tuple, list[float]] = {}
    for r in rows:
        k = (r["dataset"], r["noise"], r["algorithm"], r["T"], r["sigma"])
        cells.setdefault(k, []).append(r["accuracy"])
        train.setdefault(k, []).append(r.get("train_accuracy_noisy", float("nan")))
    best: dict[tuple, dict] = {}
    for (d, noise, a, T, s), accs in sorted(cells.items(), key=lambda kv: str(kv[0])):
        mean = float(np.mean(accs))
        cur = best.get((d, noise, a))
        if cur is None or mean > cur["mean"]:
            best[(d, noise, a)] = {
                "mean": mean,
                "std": float(np.std(accs)),
                "se": float(np.std(accs, ddof=1) / np.sqrt(len(accs))) if len(accs) > 1 else 0.0,
                "n": len(accs),
                "T": T,
                "sigma": s,
                "train": float(np.mean(train[(d, noise, a, T, s)])),
            }
    return best


def _cell(b: dict | None, n_folds: int) -> str:
    if b is None:
        return ""
    grid_point = f"T={b['T']}" + (f", σ={b['sigma']}" if b["sigma"] else "")
    partial = "" if b["n"] == n_folds else f", {b['n']} folds"
    return f"{b['mean']:.3f} ± {b['se']:.3f} (sd {b['std']:.2f}; {grid_point}{partial})"


def within_spread(ours: float, paper: tuple[float, float]) -> bool:
    """Whether ``ours`` lies in the paper's ``mean ± spread`` (its 2-decimal rounding allowed).

    >>> within_spread(0.905, (0.88, 0.02)), within_spread(0.91, (0.88, 0.02))
    (True, False)
    """
    return abs(ours - paper[0]) <= paper[1] + 0.005 + 1e-9


def _grid_rows(best: dict, datasets: list[str], noises: list[float], n_folds: int,
               main: list[str]) -> tuple[list[str], dict[str, list[bool]]]:
    """The rows of the main table, and for each algorithm whether each cell is in the paper's
    spread."""
    lines: list[str] = []
    inside: dict[str, list[bool]] = {a: [] for a in main}
    for d in datasets:
        for noise in noises:
            cells = [d.capitalize(), f"{noise:.0%}"]
            for a in main:
                b = best.get((d, noise, a))
                p = PAPER.get(d, {}).get(noise, {}).get(a)
                text = _cell(b, n_folds)
                if b is not None and p is not None:
                    ok = within_spread(b["mean"], p)
                    inside[a].append(ok)
                    text = text if ok else f"**{text}**"
                cells += [text, f"{p[0]:.2f} ± {p[1]:.2f}" if p else ""]
            lines.append("| " + " | ".join(cells) + " |")
    return lines, inside


def _wins_lines(best: dict, datasets: list[str], noises: list[float],
                inside: dict[str, list[bool]]) -> list[str]:
    lines: list[str] = []
    wins = total = 0
    for d in datasets:
        for noise in noises:
            got = {a: best.get((d, noise, a)) for a in ALGORITHMS}
            if all(got.values()):
                total += 1
                wins += got["ours"]["mean"] > max(got["kk09"]["mean"], got["bchm20"]["mean"])
    lines += [
        "",
        "Within the paper's spread: "
        + ", ".join(f"{LABELS[a]} {sum(v)} of {len(v)}" for a, v in inside.items())
        + f". Alg. 1 beats both baselines in {wins} of {total} (dataset, noise) instances here "
        "(the paper: 18 of 24, on six datasets).",
    ]
    return lines


def _extra_lines(best: dict, datasets: list[str], noises: list[float], n_folds: int,
                 extra: list[str]) -> list[str]:
    """The table of the algorithms the paper does not have."""
    lines: list[str] = []
    if extra:
        lines += [
            "",
            "Extra columns (same protocol and selection, on the folds a cell states; not in "
            "the paper's table): " + "; ".join(f"{LABELS[a]}" for a in extra) + ".",
            "",
            "| Dataset | Noise | " + " | ".join(LABELS[a] for a in extra) + " |",
            "|" + "---|" * (2 + len(extra)),
        ]
        for d in datasets:
            for noise in noises:
                if not any((d, noise, a) in best for a in extra):
                    continue
                cells = [d.capitalize(), f"{noise:.0%}"]
                cells += [_cell(best.get((d, noise, a)), n_folds) for a in extra]
                lines.append("| " + " | ".join(cells) + " |")
    return lines


def _alg1_lines(rows: list[dict], datasets: list[str], noises: list[float]) -> list[str]:
    """Algorithm 1 as written against the paper's variant, on the folds where both ran."""
    lines: list[str] = []
    ran = {(r["dataset"], r["fold"]) for r in rows if r["algorithm"] == "ours-alg1"}
    same = best_cells([r for r in rows if (r["dataset"], r["fold"]) in ran])
    diffs = [
        same[(d, n, "ours-alg1")]["mean"] - same[(d, n, "ours")]["mean"]
        for d in datasets
        for n in noises
        if (d, n, "ours-alg1") in same and (d, n, "ours") in same
    ]
    if diffs:
        lines += [
            "",
            f"{LABELS['ours-alg1']} against {LABELS['ours']} on the same folds: higher in "
            f"{sum(x > 0 for x in diffs)} of {len(diffs)} cells, by "
            f"{median(diffs):+.3f} (median; range {min(diffs):+.3f} to {max(diffs):+.3f}).",
        ]
    return lines


def _train_lines(best: dict, datasets: list[str], main: list[str], extra: list[str]) -> list[str]:
    """In-sample accuracy at 0% noise."""
    lines: list[str] = []
    clean = [(d, a) for d in datasets for a in main + extra if (d, 0.0, a) in best]
    if clean:
        lines += [
            "",
            "Accuracy on the training fold itself (in-sample) at 0% noise, same cells, to check "
            "whether the paper's numbers could be in-sample ones: "
            + "; ".join(
                f"{d.capitalize()} "
                + ", ".join(
                    f"{LABELS[a]} {best[(d, 0.0, a)]['train']:.3f}" for dd, a in clean if dd == d
                )
                for d in datasets
                if any(dd == d for dd, _ in clean)
            )
            + ".",
        ]
    return lines


def report(rows: list[dict]) -> str:
    """The ``table3`` block: our numbers with the paper's beside them, then the extra columns."""
    if not rows:
        return "No runs yet: `python -m benchmarks.paper.table3 --jobs 2`."
    best = best_cells(rows)
    datasets = [d for d in DATASETS if any(k[0] == d for k in best)]
    noises = sorted({k[1] for k in best})
    n_folds = max(r["folds"] for r in rows)
    main = [a for a in ALGORITHMS if any(k[2] == a for k in best)]
    extra = [a for a in EXTRA_ALGORITHMS if any(k[2] == a for k in best)]
    header = ["Dataset", "Noise"]
    for a in main:
        header += [LABELS[a], "paper"]
    lines = [
        HEADER,
        "",
        f"Cross-validated test accuracy ({n_folds} folds unless a cell says otherwise): mean ± "
        "standard error over folds (sd: standard deviation over folds), for the grid cell "
        "with the best mean test accuracy (its T and sigma in brackets; chosen on the test "
        "folds, as the paper appears to have done, so slightly optimistic); label noise on "
        "the training folds only. 'paper': Table 3 of Ghai & Singh 2024 (mean ± spread as printed; "
        "the paper does not say what the spread is). A bold cell is outside the paper's "
        "spread (±0.005 for its rounding).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    grid, inside = _grid_rows(best, datasets, noises, n_folds, main)
    lines += grid
    lines += _wins_lines(best, datasets, noises, inside)
    lines += _extra_lines(best, datasets, noises, n_folds, extra)
    if "ours-alg1" in extra and "ours" in main:
        lines += _alg1_lines(rows, datasets, noises)
    lines += _train_lines(best, datasets, main, extra)
    cpu = sum(r["seconds"] for r in rows)
    lines += ["", f"{len(rows)} fits, {cpu / 3600:.2f} hours of fitting (sum of wall times)."]
    if NOTES:
        lines += ["", NOTES]
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> Path | None:
    """Accuracy against training-label noise per dataset: ours (lines) and the paper (dashed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best = best_cells(rows)
    datasets = [d for d in DATASETS if any(k[0] == d for k in best)]
    if not datasets:
        return None
    fig = Figure(figsize=(3.2 * len(datasets), 3.4), dpi=80)
    FigureCanvasAgg(fig)
    colours = {"kk09": "tab:blue", "bchm20": "tab:orange", "ours": "tab:green"}
    colours |= {"ours-alg1": "tab:olive", "bchm20-oco": "tab:brown", "adaboost": "tab:gray"}
    for i, d in enumerate(datasets, 1):
        ax = fig.add_subplot(1, len(datasets), i)
        for a in ALGORITHMS + EXTRA_ALGORITHMS:
            pts = sorted((k[1], v["mean"]) for k, v in best.items() if k[0] == d and k[2] == a)
            if pts:
                x, y = zip(*pts)
                style = "-o" if a in ALGORITHMS else ":."
                ax.plot(x, y, style, color=colours[a], label=LABELS[a], markersize=4)
            paper = sorted((n, v[a][0]) for n, v in PAPER.get(d, {}).items() if a in v)
            if paper:
                x, y = zip(*paper)
                ax.plot(x, y, "--x", color=colours[a], alpha=0.6, markersize=4)
        ax.set_title(d.capitalize())
        ax.set_xlabel("training label noise")
        ax.grid(True, alpha=0.4)
        if i == 1:
            ax.set_ylabel("CV test accuracy (dashed: paper)")
    fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="lower center", ncol=6, fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, format="png")
    return path


# ---- main ---------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    parser.add_argument("--noise", nargs="*", type=float, default=NOISE)
    parser.add_argument("--rounds", nargs="*", type=int, default=ROUNDS)
    parser.add_argument("--sigmas", nargs="*", type=float, default=SIGMAS)
    parser.add_argument(
        "--algorithms", nargs="*", default=ALGORITHMS, choices=ALGORITHMS + EXTRA_ALGORITHMS
    )
    parser.add_argument("--folds", type=int, default=30, help="number of CV folds")
    parser.add_argument("--max-folds", type=int, default=None, help="run only the first folds")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=None, help="RESULTS.md to write into")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: Ionosphere, T = 25, 2 folds, noise 0 and 10%%; "
        "writes benchmarks/out/table3-quick.{jsonl,md}, not RESULTS.md",
    )
    return parser


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """The fits of ``args`` not yet in ``args.out``, appended to it as they finish."""
    existing = read_rows(args.out)
    for d in args.datasets:
        other = sorted({r["folds"] for r in existing if r["dataset"] == d} - {args.folds})
        if other:  # fold i of a k-fold split is another fold for another k
            parser.error(
                f"{args.out} holds {d} runs with {other} folds, not {args.folds}: use "
                f"--folds {other[0]}, or another --out"
            )
    done = {key(r) for r in existing}
    jobs = []
    for d in args.datasets:
        for noise in args.noise:
            for fold in range(min(args.folds, args.max_folds or args.folds)):
                for a in args.algorithms:
                    cells = [
                        c
                        for c in grid(a, args.rounds, args.sigmas)
                        if (d, noise, fold, a, *c) not in done
                    ]
                    if cells:
                        jobs.append((d, noise, fold, args.folds, a, cells))
    # fold by fold, so every cell fills evenly if the run is stopped early
    jobs.sort(key=lambda j: (j[2], -len(load(j[0])[1])))
    print(
        f"{len(jobs)} jobs ({sum(len(j[5]) for j in jobs)} fits; {len(done)} done) "
        f"on {platform.machine()}, {args.jobs} processes",
        file=sys.stderr,
    )
    start = time.perf_counter()
    with mp.Pool(args.jobs) as pool, args.out.open("a") as out:
        bar = tqdm(pool.imap_unordered(run_job, jobs), total=len(jobs), file=sys.stderr)
        for i, rows in enumerate(bar, 1):
            for row in rows:
                out.write(json.dumps(row) + "\n")
            out.flush()
            r = rows[0]
            bar.write(
                f"[{i}/{len(jobs)}] {r['dataset']:10s} noise {r['noise']:.2f} fold "
                f"{r['fold']:2d} {r['algorithm']:8s} "
                + " ".join(f"{x['accuracy']:.3f}" for x in rows)
                + f" ({sum(x['seconds'] for x in rows):.1f} s; "
                f"{time.perf_counter() - start:.0f} s elapsed)",
                file=sys.stderr,
            )


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.quick:
        args.datasets, args.rounds, args.folds, args.noise = ["ionosphere"], [25], 2, [0.0, 0.1]
        args.out = args.out or OUT / "table3-quick.jsonl"
        args.results = args.results or OUT / "table3-quick.md"
    args.out = args.out or OUT / "table3.jsonl"
    args.out.parent.mkdir(parents=True, exist_ok=True)

    if not args.report_only:
        _run(args, parser)
    body = report(read_rows(args.out))
    print(body)
    if args.results is not None and args.results.suffix == ".md" and args.quick:
        args.results.write_text(body + "\n")
    else:
        from benchmarks.results import RESULTS, replace_block

        replace_block("table3", body, args.results or RESULTS)
        if args.results is None:
            figure = plot(read_rows(args.out), ROOT / "benchmarks" / "figures" / "table3.png")
            print(f"figure: {figure}", file=sys.stderr)


if __name__ == "__main__":
    main()
