"""The quality benchmark on held-out seeds: VW's configuration chosen on the benchmark's seeds,
then AdaBandit's defaults and that configuration compared on seeds that took no part in the choice.

The main tables pick VW's best of grid per cell on the same seeds they report, which favours VW:
the best of seven noisy medians is biased upwards, most where the configurations are close. Here
the choice is made on the main file's seeds (``benchmarks/out/quality.jsonl``) and judged on the
seeds of a second file (``benchmarks/out/quality-heldout.jsonl``), as a user who tuned VW once and
then ran it would see it. Per stream and protocol: the median and mean last-20% accuracy over the
held-out seeds, the paired difference (AdaBandit - VW, seed by seed: mean and standard error),
and VW's best of grid chosen again on the held-out seeds themselves (the main tables' rule).

>>> rows = [{"seed": s, "last20_accuracy": a} for s, a in [(1, 0.5), (2, 0.7), (3, 0.6)]]
>>> other = [{"seed": s, "last20_accuracy": a} for s, a in [(1, 0.4), (2, 0.7), (4, 0.9)]]
>>> [round(v, 6) for v in paired(rows, other)]
[0.05, 0.05, 1, 0]
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from benchmarks.paper.quality.report import by_column, load_rows, stream_order, vw_best
from benchmarks.stats import median

__all__ = ["heldout_report", "paired"]

BOOSTER = "adabandit:default"


def paired(ours: list[dict], theirs: list[dict]) -> tuple[float, float, int, int]:
    """Mean and standard error of ``ours - theirs`` over the seeds both ran, and the number of
    seeds ours is ahead on and behind on."""
    by_seed = {r["seed"]: r["last20_accuracy"] for r in theirs}
    diffs = np.array(
        [r["last20_accuracy"] - by_seed[r["seed"]] for r in ours if r["seed"] in by_seed]
    )
    if diffs.size == 0:
        return math.nan, math.nan, 0, 0
    se = float(diffs.std(ddof=1) / math.sqrt(diffs.size)) if diffs.size > 1 else math.nan
    return float(diffs.mean()), se, int((diffs > 0).sum()), int((diffs < 0).sum())


def _summary(rows: list[dict]) -> str:
    values = [r["last20_accuracy"] for r in rows]
    return f"{median(values):.3f} / {sum(values) / len(values):.3f}"


def heldout_report(main: Path, heldout: Path, intro: str = "") -> str:
    """The markdown body of the held-out block, or a line saying it has not run."""
    if not heldout.exists():
        return f"{intro}\n\nNot run yet: `{heldout.name}` is missing.".strip()
    main_rows, rows = load_rows(main), load_rows(heldout)
    chosen_from, cells = by_column(main_rows), by_column(rows)
    order = stream_order(main_rows + rows)  # the main tables' order
    lines = [
        "| stream | protocol | seeds | VW's choice (main seeds) | AdaBandit median / mean "
        "| VW median / mean | AdaBandit - VW (mean ± se; seeds ahead / behind) | AdaBandit >= VW "
        "| VW best of grid on these seeds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    wins = total = wins_best = 0
    pairs = sorted({(r["stream"], r["protocol"]) for r in rows}, key=lambda sp: (order[sp[0]], sp))
    for stream, protocol in pairs:
        ours = cells[(stream, protocol, BOOSTER)]
        config, _ = vw_best(chosen_from[(stream, protocol, "vw")])
        theirs = [r for r in cells[(stream, protocol, "vw")] if r["label"] == config]
        if not ours or not theirs:
            continue
        best_config, best = vw_best(cells[(stream, protocol, "vw")])
        mean, se, ahead, behind = paired(ours, theirs)
        ada, vw = (median(r["last20_accuracy"] for r in rs) for rs in (ours, theirs))
        best_median = median(r["last20_accuracy"] for r in best)
        total += 1
        wins += ada >= vw
        wins_best += ada >= best_median
        lines.append(
            f"| {stream} | {protocol} | {len(ours)} | {config} | {_summary(ours)} | "
            f"{_summary(theirs)} | {mean:+.3f} ± {se:.3f} ({ahead} / {behind}) | "
            f"{'yes' if ada >= vw else 'no'} | {best_median:.3f} {best_config} |"
        )
    lines += [
        "",
        f"AdaBandit's median at or above VW's configuration chosen on the main seeds: {wins} of "
        f"{total} cells; at or above VW's best of grid chosen on the held-out seeds themselves: "
        f"{wins_best} of {total}.",
    ]
    return "\n".join([intro, "", *lines] if intro else lines)
