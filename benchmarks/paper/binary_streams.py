"""Binary streams: the online agnostic OCO booster against River's online boosters.

The OCO booster of BCHM20, *Online Agnostic Boosting via Regret Minimization* (NeurIPS 2020;
:class:`boosters.online.oco.OCOBooster`, Algorithm 1 with the project's River trees; docs/papers.md)
is used with full
information through the common booster protocol (ARCHITECTURE.md "One protocol"): per example
``decide_one(x)`` and then ``learn_one(x, decision, label=y)``. It is scored by ``sign(z)`` (ties
+1), and by its randomized prediction ``Pi(z)`` (the decision's action) as well (BCHM20 Eq. 2;
the paper's guarantee is for ``Pi(z)``).

Competitors, all River 0.26 with default settings: ``river.ensemble.AdaBoostClassifier`` and
``river.ensemble.ADWINBoostingClassifier`` over ``river.tree.HoeffdingTreeClassifier()``, and a
single ``HoeffdingTreeClassifier()``; plus one Hoeffding tree with the settings of OCO's own weak
learners (information gain, majority-class leaves, the middle of the "full" profile:
:func:`learners.hoeffding.sample_tree_params` with ``fixed=True``) to show what boosting adds to
its weak learner. Every ensemble has ``N = 10`` trees (River's default). The booster needs the
weak learners' advantage ``gamma``, which is unknown for Hoeffding trees (BCHM20 Def. 1), so OCO is
run at three fixed values, 0.2 (in our first grid), 0.5 (the class default) and 1.0 (the edge of
(0, 1]), each reported; nothing else is tuned (``p_init = 0``: learner 1 trains on fair coins, as
the paper has it).

Streams, each streamed once, a new order / generator seed per seed:

- the datasets of Ghai & Singh 2024 (Ionosphere, Diabetes, German; Waveform from River's
  generator, class 0 against the rest), as :mod:`benchmarks.paper.table3` loads them, shuffled;
- ``river.datasets.synth.Agrawal`` (classification function 0) and ``synth.SEA`` (variant 0),
  ``--rows`` examples, with label noise 0/10/20%: exactly ``round(noise * rows)`` labels, a random
  subset, flipped (:func:`benchmarks.paper.table3.flip_labels`).

Protocol: progressive validation (test-then-train): each example is predicted *before* the model
learns it (:func:`progressive_validation`). Reported: accuracy on the labels the learner sees
(noisy ones included) and, for noisy streams, on the clean labels; mean ± std over seeds.

One JSON line per (stream, noise, model, seed) goes to benchmarks/out/binary.jsonl (runs already
there are skipped, so a stopped run resumes); the block ``binary-streams`` of
benchmarks/RESULTS.md and benchmarks/figures/binary_streams.png are rewritten at the end.

    python -m benchmarks.paper.binary_streams --seeds 10 --jobs 2
    python -m benchmarks.paper.binary_streams --report-only
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm import tqdm

from benchmarks import ROOT
from benchmarks.paper.table3 import flip_labels
from benchmarks.paper.table3 import load as load_table3
from benchmarks.stats import median

OUT = ROOT / "benchmarks" / "out"

REAL = ["ionosphere", "diabetes", "german", "waveform"]
SYNTHETIC = ["agrawal", "sea"]
STREAMS = REAL + SYNTHETIC
NOISE = [0.0, 0.1, 0.2]
GAMMAS = ["0.2", "0.5", "1.0"]
#: BCHM20's other algorithms: Algorithm 4 (online, realizable) at OCO's best gamma, and
#: Algorithm 2 (batch, played as Algorithm 3's game; agnostic and realizable) at the batch
#: booster's default gamma, refitted on the rows seen so far
BCHM20 = ["alg4-1.0", "alg2-0.3", "alg2r-0.3"]
MODELS = [f"oco-{g}" for g in GAMMAS] + BCHM20 + ["adaboost", "adwin", "ht", "ht_mc"]
LABELS = {
    **{f"oco-{g}": f"OCO γ={g}" for g in GAMMAS},
    **{f"oco-{g}:pi": f"OCO γ={g} Π(z)" for g in GAMMAS},
    "alg4-1.0": "OCO Alg. 4 γ=1.0",
    "alg4-1.0:pi": "OCO Alg. 4 γ=1.0 Π(z)",
    "alg2-0.3": "Alg. 2 γ=0.3 (batch)",
    "alg2r-0.3": "Alg. 2 realizable γ=0.3 (batch)",
    "adaboost": "River AdaBoost N=10",
    "adwin": "River ADWINBoosting N=10",
    "ht": "River HT",
    "ht_mc": "HT as OCO's trees",
}
N_TREES = 10
BLOCKS = 20  # learning-curve resolution: accuracy per 1/20 of the stream


# ---- streams ------------------------------------------------------------------------------------


def make_stream(
    name: str, noise: float, seed: int, rows: int
) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """``(xs, observed labels, clean labels)`` of one stream; labels in {0, 1}.

    >>> xs, y, clean = make_stream("sea", 0.1, seed=1, rows=50)
    >>> len(xs), int((y != clean).sum())
    (50, 5)
    """
    if name not in STREAMS:
        raise ValueError(f"unknown stream {name!r}; choose from {', '.join(STREAMS)}")
    rng = np.random.default_rng([STREAMS.index(name), int(round(noise * 100)), seed])
    if name in REAL:
        X, y = load_table3(name)
        order = rng.permutation(len(y))
        xs = [{f"x{j}": float(v) for j, v in enumerate(X[i])} for i in order]
        clean = np.asarray(y[order], dtype=int)
    else:
        from river.datasets import synth

        gen = synth.Agrawal(seed=seed) if name == "agrawal" else synth.SEA(seed=seed)
        pairs = list(itertools.islice(gen, rows))
        xs = [dict(x) for x, _ in pairs]
        clean = np.array([int(y) for _, y in pairs])
    return xs, flip_labels(clean, noise, rng), clean


# ---- models behind one predict/learn interface --------------------------------------------------


class StreamModel(Protocol):
    """What progressive validation drives: predictions (one per metric), then the label."""

    metrics: tuple[str, ...]

    def predict_one(self, x: dict) -> tuple[int, ...]:
        """Predictions in {0, 1} for ``x``, one per entry of ``metrics``."""

    def learn_one(self, x: dict, y: int) -> None:
        """Learn the label of the ``x`` just predicted."""


class RiverModel:
    """A River classifier; ``None`` (nothing learnt yet) counts as a prediction of 0."""

    metrics = ("prediction",)

    def __init__(self, model):
        self.model = model

    def predict_one(self, x: dict) -> tuple[int, ...]:
        p = self.model.predict_one(x)
        return (0 if p is None else int(p),)

    def learn_one(self, x: dict, y: int) -> None:
        self.model.learn_one(x, y)


class BoosterModel:
    """A full-information booster of the common protocol with two actions (0 = -1, 1 = +1).

    ``predict_one`` decides and keeps the decision; ``learn_one`` hands that decision back with
    the true label, so the booster learns from the predictions it made (BCHM20 Algorithm 1).
    Metrics: ``sign`` (``z >= 0``, the deterministic vote) and ``pi`` (the randomized ``Pi(z)``).
    """

    metrics = ("sign", "pi")

    def __init__(self, booster):
        self.booster = booster
        self._pending: tuple[dict, object] | None = None

    def predict_one(self, x: dict) -> tuple[int, ...]:
        decision = self.booster.decide_one(x)
        self._pending = (x, decision)
        return int(decision.internals["z"] >= 0.0), int(decision.action)

    def learn_one(self, x: dict, y: int) -> None:
        if self._pending is None or self._pending[0] is not x:
            raise RuntimeError("learn_one must follow predict_one on the same example")
        decision = self._pending[1]
        self._pending = None
        self.booster.learn_one(x, decision, label=int(y))


class BatchRefit:
    """A batch booster refitted on every row seen so far at 32, 64, 128, ... rows (a doubling
    schedule: O(n log n) work in all); it predicts with its last fit, 1 before the first."""

    metrics = ("prediction",)

    def __init__(self, make):
        self.make, self.model = make, None
        self.xs: list[list[float]] = []
        self.ys: list[int] = []
        self.names: list[str] | None = None

    def predict_one(self, x: dict) -> tuple[int, ...]:
        if self.model is None:
            return (1,)
        return (int(self.model.predict(np.array([[x[k] for k in self.names]]))[0]),)

    def learn_one(self, x: dict, y: int) -> None:
        self.names = self.names or sorted(x)
        self.xs.append([float(x[k]) for k in self.names])
        self.ys.append(int(y))
        n = len(self.ys)
        if n >= 32 and n & (n - 1) == 0 and len(set(self.ys)) == 2:
            self.model = self.make().fit(np.array(self.xs), np.array(self.ys))


def make_model(name: str, seed: int) -> StreamModel:
    """One of :data:`MODELS`, seeded."""
    from river import ensemble, tree

    if name.startswith("oco-") and name[4:] in GAMMAS:
        from boosters.online.oco import OCOBooster

        return BoosterModel(OCOBooster(n_learners=N_TREES, gamma=float(name[4:]), seed=seed))
    if name == "alg4-1.0":
        from boosters.online.oco import OCOBooster

        return BoosterModel(OCOBooster(n_learners=N_TREES, gamma=1.0, realizable=True, seed=seed))
    if name in ("alg2-0.3", "alg2r-0.3"):
        from boosters.batch.sample_efficient import StatisticalAgnosticBooster

        return BatchRefit(lambda: StatisticalAgnosticBooster(
            weights="oco", realizable=name.startswith("alg2r"), gamma=0.3, holdout=0.0,
            random_state=seed))
    if name == "adaboost":
        return RiverModel(
            ensemble.AdaBoostClassifier(tree.HoeffdingTreeClassifier(), N_TREES, seed)
        )
    if name == "adwin":
        return RiverModel(
            ensemble.ADWINBoostingClassifier(tree.HoeffdingTreeClassifier(), N_TREES, seed)
        )
    if name == "ht":
        return RiverModel(tree.HoeffdingTreeClassifier())
    if name == "ht_mc":
        from learners.hoeffding import make_vfdt, sample_tree_params

        params = sample_tree_params("full", np.random.default_rng(seed), fixed=True)
        return RiverModel(make_vfdt(**params))
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")


def progressive_validation(model: StreamModel, xs: Sequence[dict], ys: Sequence[int]) -> np.ndarray:
    """Test-then-train over the stream: (rows, metrics) predictions, each made before learning.

    >>> class Majority:                      # predicts the majority of the labels seen so far
    ...     metrics = ("prediction",)
    ...     def __init__(self): self.seen = [0, 0]
    ...     def predict_one(self, x): return (int(self.seen[1] > self.seen[0]),)
    ...     def learn_one(self, x, y): self.seen[y] += 1
    >>> progressive_validation(Majority(), [{}] * 4, [1, 1, 0, 0])[:, 0].tolist()
    [0, 1, 1, 1]
    """
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} contexts but {len(ys)} labels")
    out = np.empty((len(xs), len(model.metrics)), dtype=np.int8)
    for i, (x, y) in enumerate(zip(xs, ys)):
        out[i] = model.predict_one(x)
        model.learn_one(x, int(y))
    return out


def run_one(job: tuple[str, float, str, int, int]) -> dict:
    stream, noise, model_name, seed, rows = job
    xs, ys, clean = make_stream(stream, noise, seed, rows)
    model = make_model(model_name, seed)
    start = time.perf_counter()
    preds = progressive_validation(model, xs, ys)
    seconds = time.perf_counter() - start
    correct = preds == ys[:, None]
    blocks = np.array_split(correct[:, 0], min(BLOCKS, len(ys)))
    return {
        "stream": stream,
        "noise": noise,
        "model": model_name,
        "seed": seed,
        "rows": len(ys),
        "metrics": list(model.metrics),
        "accuracy": correct.mean(axis=0).tolist(),
        "clean_accuracy": (preds == clean[:, None]).mean(axis=0).tolist(),
        "blocks": [float(b.mean()) for b in blocks],
        "seconds": seconds,
    }


# ---- report -------------------------------------------------------------------------------------

#: the reading of the committed run (5 seeds, 10 000 rows; every figure quoted is in the tables)
NOTES = """Reading (the issue asks for the comparison and sets no target):

- **gamma decides how OCO does, and nothing says which value to take.** gamma is the weak
  learners' advantage, which is unknown for Hoeffding trees (BCHM20 Def. 1); none of the values
  was tuned on these streams. gamma = 0.2, a value from our first grid, is the worst column on
  every stream. On German it scores 0.459, below the majority rate of 0.700. The cause is the
  size of the OGD step: with a small gamma, a few correct learners are enough to drive p to -1,
  so the learners after them are trained on flipped labels. gamma = 1.0 is the best OCO setting,
  or tied for best, on 9 of the 10 streams; Ionosphere is the exception (gamma = 0.5).
- **Where OCO wins.** OCO with gamma = 1.0 is the best model on Agrawal with 10% noise: 0.855 on
  the observed labels and 0.944 on the clean ones, against 0.828 and 0.910 for River's AdaBoost.
  At 20% noise it is within 0.01 of the best (0.712 against 0.717), with a large spread over
  seeds (clean sd 0.094). On German every model stays at the majority rate (about 0.70).
- **Where it loses.** On every other stream River's AdaBoost leads, and the best OCO column is
  0.02-0.17 below it (Ionosphere 0.699 against 0.872).
- **Why it trails on the small Ghai & Singh sets.** OCO's weak learners are Hoeffding trees with
  majority-class leaves and grace periods of 50-200, and in 351-1000 rows they hardly split.
  One such tree ('HT as OCO's trees') is 0.08-0.15 below River's default tree on Ionosphere,
  Diabetes and Waveform; the default tree's naive-Bayes leaves predict well from the first rows.
  The relabelling slows the trees further, because it feeds learner 1 fair coins and the later
  learners partly flipped labels. On Agrawal (10 000 rows, a few axis-aligned splits) the trees
  grow, and the relabelling then acts as boosting under label noise.
- **BCHM20's other algorithms.** Algorithm 4 (online, realizable, gamma = 1) is within 0.02 of
  Algorithm 1 at gamma = 1 on every stream. Algorithm 2 (batch, decision stumps, refitted on all
  the rows seen at 32, 64, 128, ... rows) leads on Agrawal at every noise level (0.999, 0.899,
  0.798): its function 0 is a rule of two thresholds on age, which the boosted stumps recover,
  so they predict the clean label and score one minus the noise. It also beats every OCO column
  on the Ghai & Singh sets (Ionosphere 0.856 against 0.699), as a batch learner that sees every
  row again at each refit should; River's AdaBoost still leads there. Its realizable branch is
  within 0.02 of the agnostic one everywhere.
- **Π(z) against sign(z).** The randomized prediction Π(z), which the theory analyses, is
  0.02-0.13 below sign(z) for gamma = 0.5 and 1.0. sign(z) is the one to use.
- **Speed** (indicative only: shared machine, two runs at a time). With 10 trees OCO processes
  860-960 rows/s on Agrawal. River's AdaBoost manages 610 and ADWINBoosting 480, because their
  online boosting trains each tree k ~ Poisson(lambda) times per example."""


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarise(rows: list[dict], key: str) -> dict[tuple[str, float, str], list[float]]:
    """(stream, noise, column) -> values over seeds; OCO's ``pi`` metric is column ``model:pi``."""
    out: dict[tuple[str, float, str], list[float]] = {}
    for r in rows:
        for metric, value in zip(r["metrics"], r[key]):
            column = r["model"] if metric in ("prediction", "sign") else f"{r['model']}:{metric}"
            out.setdefault((r["stream"], r["noise"], column), []).append(value)
    return out


def _table(values: dict, cases: list[tuple[str, float]], columns: list[str]) -> list[str]:
    lines = [
        "| stream | noise | " + " | ".join(LABELS[c] for c in columns) + " |",
        "|" + "---|" * (2 + len(columns)),
    ]
    for stream, noise in cases:
        cells = [stream.capitalize(), f"{noise:.0%}"]
        means = {
            c: np.mean(values[(stream, noise, c)]) for c in columns if (stream, noise, c) in values
        }
        top = max(means.values()) if means else None
        for c in columns:
            v = values.get((stream, noise, c))
            if not v:
                cells.append("")
                continue
            text = f"{np.mean(v):.3f} ± {np.std(v):.3f}"
            cells.append(f"**{text}**" if means[c] == top else text)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def headline(rows: list[dict], command: str) -> str:
    """The ``binary-streams`` block of RESULTS.md: the observed-label table alone."""
    if not rows:
        return "No runs yet: `python -m benchmarks.paper.binary_streams --seeds 10 --jobs 2`."
    full = report(rows, command).split("\n")
    start = next(i for i, line in enumerate(full) if line.startswith("| stream |"))
    stop = next(i for i in range(start, len(full)) if not full[i].startswith("|"))
    n_seeds = sorted({len({r["seed"] for r in rows if r["stream"] == s}) for s in STREAMS
                      if any(r["stream"] == s for r in rows)})
    return "\n".join([
        "### Binary streams: online agnostic boosting (BCHM20) against River's boosters",
        "BCHM20's `OCOBooster` (Algorithm 1 at three gamma, Algorithm 4; N = 10 Hoeffding "
        "trees) and its batch Algorithm 2 (played as Algorithm 3's game, agnostic and "
        "realizable; stumps, refitted on the rows seen at 32, 64, 128, ...) against River's "
        "boosters; progressive validation, mean ± std over "
        f"{'/'.join(map(str, n_seeds))} seeds, observed labels. "
        "All tables and the reading: "
        "[notes/history.md](notes/history.md#binary-streams). Figure: "
        "`benchmarks/figures/binary_streams.png`.",
        "",
        f"Command: `{command}`",
        "",
        *full[start:stop],
    ])


def report(rows: list[dict], command: str) -> str:
    """The ``binary-streams-full`` block of benchmarks/notes/history.md: every table."""
    if not rows:
        return "No runs yet: `python -m benchmarks.paper.binary_streams --seeds 10 --jobs 2`."
    present = [c for c in LABELS if any(k[2] == c for k in summarise(rows, "accuracy"))]
    columns = [c for c in present if not c.endswith(":pi")]
    pi_columns = [c for c in present if c.endswith(":pi")]
    cases = sorted(
        {(r["stream"], r["noise"]) for r in rows}, key=lambda c: (STREAMS.index(c[0]), c[1])
    )
    seeds = {c: sorted({r["seed"] for r in rows if (r["stream"], r["noise"]) == c}) for c in cases}
    n_seeds = sorted({len(s) for s in seeds.values()})
    lengths = {s: sorted({r["rows"] for r in rows if r["stream"] == s}) for s, _ in cases}
    acc = summarise(rows, "accuracy")
    clean = summarise(rows, "clean_accuracy")
    speed = {}
    for r in rows:
        if r["stream"] == "agrawal":
            speed.setdefault(r["model"], []).append(r["rows"] / r["seconds"])
    lines = [
        "`benchmarks/paper/binary_streams.py`: `OCOBooster` (BCHM20 Algorithm 1, N = 10 "
        "Hoeffding trees, full information through the common booster protocol) at three "
        "fixed gamma and with Algorithm 4 (realizable) at gamma 1; BCHM20's batch Algorithm 2 "
        "(`StatisticalAgnosticBooster(weights=\"oco\")`, played as Algorithm 3's improper "
        "game, agnostic and realizable, 50 rounds of decision stumps, gamma 0.3), refitted on "
        "all rows seen so far at 32, 64, 128, ... rows and predicting with its last fit; "
        "River's `AdaBoostClassifier` and `ADWINBoostingClassifier` (10 default "
        "Hoeffding trees), one default River Hoeffding tree ('River HT', naive-Bayes-adaptive "
        "leaves) and one tree set up like OCO's weak learners ('HT as OCO's trees': majority-"
        "class leaves). Streams: the Ghai & Singh 2024 datasets shuffled, Agrawal (function 0) "
        "and SEA (variant 0) with exactly 0/10/20% of the labels flipped.",
        "",
        f"Command: `{command}`",
        "",
        "Progressive validation (each example predicted before it is learnt), one pass; "
        f"mean ± std over {'/'.join(map(str, n_seeds))} seeds (a new shuffle or generator seed "
        "each); bold: the best mean in the row. Stream lengths: "
        + ", ".join(f"{s} {'/'.join(map(str, n))}" for s, n in lengths.items())
        + ". OCO is scored by sign(z) here. Accuracy on the labels the learner sees "
        "(noise included):",
        "",
        *_table(acc, cases, columns),
    ]
    noisy = [c for c in cases if c[1] > 0]
    if noisy:
        lines += [
            "",
            "The same predictions scored against the clean labels:",
            "",
            *_table(clean, noisy, columns),
        ]
    if pi_columns:
        lines += [
            "",
            "OCO's randomized prediction Π(z) (the theory's output, BCHM20 Eq. 2), same runs, "
            "observed labels:",
            "",
            *_table(acc, cases, pi_columns),
        ]
    if speed:
        lines += [
            "",
            "Median rows/s on Agrawal (shared 2-core machine, 2 runs at a time; indicative only): "
            + ", ".join(f"{LABELS[m]} {median(v):.0f}" for m, v in speed.items() if m in LABELS)
            + ".",
        ]
    lines += ["", "Figure: `benchmarks/figures/binary_streams.png` "
              "(learning curves on Agrawal and SEA)."]
    if NOTES:
        lines += ["", NOTES]
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> Path | None:
    """Learning curves (accuracy per 1/20 of the stream, mean over seeds) on Agrawal and SEA."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cases = sorted({(r["stream"], r["noise"]) for r in rows if r["stream"] in SYNTHETIC})
    if not cases:
        return None
    streams = [s for s in SYNTHETIC if any(c[0] == s for c in cases)]
    noises = sorted({c[1] for c in cases})
    fig = Figure(figsize=(3.3 * len(noises), 2.8 * len(streams)), dpi=80)
    FigureCanvasAgg(fig)
    for i, (stream, noise) in enumerate(itertools.product(streams, noises), 1):
        ax = fig.add_subplot(len(streams), len(noises), i)
        for model in MODELS:
            curves = [
                r["blocks"]
                for r in rows
                if (r["stream"], r["noise"], r["model"]) == (stream, noise, model)
            ]
            if curves:
                n = min(len(c) for c in curves)
                rows_per_block = max(r["rows"] for r in rows if r["stream"] == stream) / n
                x = (np.arange(n) + 1) * rows_per_block
                ax.plot(x, np.mean([c[:n] for c in curves], axis=0), label=LABELS[model])
        ax.set_title(f"{stream.capitalize()}, noise {noise:.0%}", fontsize=9)
        ax.grid(True, alpha=0.4)
        ax.tick_params(labelsize=7)
        if i > len(noises) * (len(streams) - 1):
            ax.set_xlabel("examples", fontsize=8)
        if (i - 1) % len(noises) == 0:
            ax.set_ylabel("block accuracy (observed labels)", fontsize=8)
    fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="lower center", ncol=6, fontsize=7)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, format="png")
    return path


# ---- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds, starting at 1")
    parser.add_argument("--rows", type=int, default=20_000, help="length of Agrawal/SEA")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--streams", nargs="*", default=STREAMS, choices=STREAMS)
    parser.add_argument("--models", nargs="*", default=MODELS, choices=MODELS)
    parser.add_argument("--noise", nargs="*", type=float, default=NOISE)
    parser.add_argument("--out", type=Path, default=OUT / "binary.jsonl")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--no-results", action="store_true", help="do not touch RESULTS.md")
    args = parser.parse_args()
    if args.rows < BLOCKS:
        parser.error(f"--rows must be at least {BLOCKS}")
    args.out.parent.mkdir(parents=True, exist_ok=True)

    if not args.report_only:
        done = {(r["stream"], r["noise"], r["model"], r["seed"]) for r in read_rows(args.out)}
        jobs = [
            (stream, noise, model, seed, args.rows)
            for seed in range(1, args.seeds + 1)
            for stream in args.streams
            for noise in (args.noise if stream in SYNTHETIC else [0.0])
            for model in args.models
            if (stream, noise, model, seed) not in done
        ]
        print(
            f"{len(jobs)} runs to do ({len(done)} done) on {platform.machine()}, "
            f"{args.jobs} processes",
            file=sys.stderr,
        )
        with mp.Pool(args.jobs) as pool, args.out.open("a") as out:
            bar = tqdm(pool.imap_unordered(run_one, jobs), total=len(jobs), file=sys.stderr)
            for row in bar:
                out.write(json.dumps(row) + "\n")
                out.flush()
                bar.write(
                    f"{row['stream']:10s} noise {row['noise']:.1f} {row['model']:8s} seed "
                    f"{row['seed']:2d} acc {row['accuracy'][0]:.3f} ({row['seconds']:.1f} s)",
                    file=sys.stderr,
                )

    rows = read_rows(args.out)
    seeds = max((r["seed"] for r in rows), default=args.seeds)
    rows_len = max((r["rows"] for r in rows if r["stream"] in SYNTHETIC), default=args.rows)
    command = (
        f"python -m benchmarks.paper.binary_streams --seeds {seeds} --rows {rows_len} --jobs 2"
    )
    body = report(rows, command)
    print(body)
    if not args.no_results:
        from benchmarks.results import replace_block

        replace_block("binary-streams", headline(rows, command))
        replace_block("binary-streams-full", body, ROOT / "benchmarks" / "notes" / "history.md")
        figure = plot(rows, ROOT / "benchmarks" / "figures" / "binary_streams.png")
        print(f"figure: {figure}", file=sys.stderr)


if __name__ == "__main__":
    main()
