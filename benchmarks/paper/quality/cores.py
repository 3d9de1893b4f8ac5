"""The quality benchmark's cells of one column against the stored defaults, cell by cell.

The check that the compiled tree core leaves quality as it was: the cells of a column
(``--label``, e.g. the defaults on the compiled core, run into their own file) against the
``default`` cells of ``benchmarks/out/quality.jsonl`` (recorded on River's trees), the median over
the seeds both have, for the last-20% and the whole-stream accuracy:

    python -m benchmarks.paper.quality --boosters adabandit banditbbm adaboostolm \\
        --label compiled --param tree_core=compiled --protocols plain --max-rows 1000 \\
        --seeds 1 2 3 4 5 6 7 8 9 --out benchmarks/out/quality-compiled.jsonl
    # the same with --protocols duplicated --max-rows 500
    python -m benchmarks.paper.quality.cores benchmarks/out/quality-compiled.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from benchmarks import OUT

KEYS = ("last20_accuracy", "accuracy")


def _cells(path: Path, label: str) -> dict:
    cells: dict = defaultdict(dict)
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["label"] == label:
            cells[(row["method"], row["stream"], row["protocol"])][row["seed"]] = row
    return cells


def compare(new: Path, label: str, base: Path, tolerance: float = 0.005) -> str:
    """A markdown table per booster: the medians before and after, and a summary line."""
    before, after = _cells(base, "default"), _cells(new, label)
    lines = ["| booster | stream | protocol | seeds | last 20% | whole stream |",
             "|---|---|---|---|---|---|"]
    worse: dict = defaultdict(list)
    counted: dict = defaultdict(int)
    for key in sorted(after):
        seeds = sorted(set(after[key]) & set(before.get(key, {})))
        if not seeds:
            continue
        pairs = []
        for metric in KEYS:
            old = statistics.median(before[key][s][metric] for s in seeds)
            now = statistics.median(after[key][s][metric] for s in seeds)
            pairs.append(f"{old:.3f} -> {now:.3f}")
            counted[key[0]] += 1
            if now - old < -tolerance:
                worse[key[0]].append(f"{key[1]} {key[2]} {metric} {now - old:+.3f}")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {len(seeds)} | {' | '.join(pairs)} |")
    lines.append("")
    for booster, n in counted.items():
        below = worse.get(booster, [])
        lines.append(f"- {booster}: {n - len(below)} of {n} medians within {tolerance} or better"
                     + (f"; below: {', '.join(below)}" if below else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("new", type=Path, help="the column's JSON lines")
    p.add_argument("--label", default="compiled")
    p.add_argument("--base", type=Path, default=OUT / "quality.jsonl")
    args = p.parse_args(argv)
    print(compare(args.new, args.label, args.base))


if __name__ == "__main__":
    main()
