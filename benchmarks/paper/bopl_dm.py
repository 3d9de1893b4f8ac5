"""BOPL's Table 2 and Figure 1 (London et al. 2023) on the datasets available here.

- **Table 2**: the direct-method (DM) estimate of each learned policy's test reward, from a
  BRR-xgb reward model fitted on the same logged data (Table 5's BRR-xgb settings), against the
  policy's true test reward. The paper does not say whether DM is computed on the test set; here
  it is (docs/papers.md).
- **Figure 1**: by boosting round, the gradient norm, the training reward (SNIPS on the logged
  training data, the paper's estimate) and the test reward of BOPL-regr, BOPL-S-regr and
  BOPL-CS-regr (BOPL-S without reward translation), mean over trials.

The trials, splits, logging policies and hyperparameters are :mod:`benchmarks.paper.bopl_repro`'s.
One JSON line per (dataset, method, trial) goes to ``benchmarks/out/bopl-dm.jsonl`` (resumable);
``--report`` writes the ``bopl-dm`` block of benchmarks/notes/history.md and
benchmarks/figures/bopl_figure1_<dataset>.png:

    python -m benchmarks.paper.bopl_dm --datasets digits --trials 3
    python -m benchmarks.paper.bopl_dm --report
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import ROOT
from benchmarks.paper.bopl_repro import (
    HYPERPARAMETERS,
    LABELS,
    argmax_reward,
    make_method,
    staged_scores,
    trial_data,
)
from learners.batch_trees import augment_actions

OUT = ROOT / "benchmarks" / "out" / "bopl-dm.jsonl"
METHODS = ("brr-xgb", "bopl-regr", "bopls-regr", "boplcs-regr", "drr", "banditnet")
#: Figure 1's methods
FIGURE1 = ("bopl-regr", "bopls-regr", "boplcs-regr")


def snips(scores: np.ndarray, actions: np.ndarray, propensities: np.ndarray,
          rewards: np.ndarray) -> float:
    """SNIPS estimate of the argmax policy of ``scores`` on logged data.

    >>> snips(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 0]), np.array([0.5, 0.5]),
    ...       np.array([1.0, 0.0]))
    1.0
    """
    match = np.argmax(scores, axis=1) == actions
    weights = match / propensities
    return float(weights @ rewards / weights.sum()) if weights.sum() > 0 else 0.0


def run_unit(dataset: str, method: str, trial: int) -> dict[str, Any]:
    """Fit ``method`` on one trial's logged data; its curves, test reward and DM estimate."""
    split, bandit = trial_data(dataset, trial)
    k = split.n_actions
    X, a, p, r = bandit.X, bandit.actions, bandit.propensities, bandit.rewards
    model = make_method(method, dict(HYPERPARAMETERS[dataset][method]), k, trial)
    start = time.perf_counter()
    model.fit(X, a, p, r)
    seconds = time.perf_counter() - start
    reward_model = make_method("brr-xgb", dict(HYPERPARAMETERS[dataset]["brr-xgb"]), k, trial)
    reward_model.fit(X, a, p, r)
    train = [snips(F, a, p, r) for F in staged_scores(model, augment_actions(X, k), k)]
    test, chosen = [], np.zeros(split.X_test.shape[0], dtype=int)
    for F in staged_scores(model, augment_actions(split.X_test, k), k):  # F may be reused
        test.append(argmax_reward(F, split.R_test))
        chosen = np.argmax(F, axis=1)
    guess = reward_model.scores(split.X_test)
    row = {
        "dataset": dataset, "method": method, "trial": trial, "seconds": seconds,
        "test_reward": test[-1],
        "dm_test_reward": float(guess[np.arange(chosen.size), chosen].mean()),
        "train_snips_curve": train,
        "test_curve": test,
    }
    if hasattr(model, "gradient_norm_"):
        row["gradient_norm"] = model.gradient_norm_.tolist()
    return row


def table2(rows: list[dict[str, Any]]) -> list[str]:
    """Per dataset and method: the DM estimate against the true test reward."""
    lines = ["| data | method | n | DM estimate | true test reward | DM - true |",
             "|---|---|---|---|---|---|"]
    for dataset in sorted({r["dataset"] for r in rows}):
        for method in METHODS:
            group = [r for r in rows if (r["dataset"], r["method"]) == (dataset, method)]
            if not group:
                continue
            dm = [r["dm_test_reward"] for r in group]
            true = [r["test_reward"] for r in group]
            gap = [d - t for d, t in zip(dm, true)]
            lines.append(
                f"| {dataset} | {LABELS[method]} | {len(group)} | {_ms(dm)} | {_ms(true)} | "
                f"{statistics.mean(gap):+.4f} |")
    return lines


def _ms(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {sd:.4f}"


def figure1(dataset: str, rows: list[dict[str, Any]], plot_dir: Path) -> Path | None:
    """Gradient norm, SNIPS training reward and test reward by round, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {m: [r for r in rows if (r["dataset"], r["method"]) == (dataset, m)]
              for m in FIGURE1}
    if not any(groups.values()):
        return None
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = (("gradient_norm", "gradient norm"), ("train_snips_curve", "training reward (SNIPS)"),
              ("test_curve", "test reward"))
    for method, group in groups.items():
        for ax, (key, label) in zip(axes, panels):
            if group and all(key in r for r in group):
                T = min(len(r[key]) for r in group)
                ax.plot(np.arange(1, T + 1), np.mean([r[key][:T] for r in group], axis=0),
                        label=f"{LABELS[method]} ({len(group)} trials)", lw=1.2)
                ax.set(xlabel="round", ylabel=label, title=f"{dataset}: {label}")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    out = plot_dir / f"bopl_figure1_{dataset}.png"
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def report(rows: list[dict[str, Any]]) -> str:
    figures = [p for d in sorted({r["dataset"] for r in rows})
               if (p := figure1(d, rows, ROOT / "benchmarks" / "figures"))]
    return "\n".join([
        "Table 2 of London et al. 2023 on the datasets here: the DM estimate (a BRR-xgb reward "
        "model fitted on the same logged data, on the test contexts) of each learned argmax "
        "policy against its true test reward, mean ± std over trials (the paper's Table 2 has "
        "BRR-xgb and BOPL-regr; the other rows are this project's). Command: `python -m "
        "benchmarks.paper.bopl_dm --datasets digits yeast --trials 3`, then `--report`.",
        "",
        *table2(rows),
        "",
        "Figure 1 (gradient norm, SNIPS training reward and test reward by round of BOPL-regr, "
        "BOPL-S-regr and BOPL-CS-regr): "
        + ", ".join(f"`{p.relative_to(ROOT)}`" for p in figures) + ".",
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["digits"])
    parser.add_argument("--methods", nargs="*", default=list(METHODS), choices=METHODS)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args(argv)
    rows = [json.loads(x) for x in args.out.read_text().splitlines()] if args.out.exists() else []
    if not args.report:
        done = {(r["dataset"], r["method"], r["trial"]) for r in rows}
        with args.out.open("a") as out:
            for trial in range(args.trials):
                for dataset in args.datasets:
                    for method in args.methods:
                        if (dataset, method, trial) in done:
                            continue
                        row = run_unit(dataset, method, trial)
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                        rows.append(row)
                        print(f"{dataset} {method} trial {trial}: test {row['test_reward']:.4f} "
                              f"DM {row['dm_test_reward']:.4f} ({row['seconds']:.0f} s)")
    from benchmarks.results import NOTES, replace_block

    replace_block("bopl-dm", report(rows), NOTES / "history.md")


if __name__ == "__main__":
    main()
