"""Zhang et al. 2019 Table 1: the array-leaf trees against the stored River-leaf run.

Matches the rows of a new run (default ``benchmarks/out/table1-fast.jsonl``, written by ``python -m
benchmarks.paper.table1 --out``) with the stored rows of the old run
(``benchmarks/out/table1.jsonl`` and ``table1-nm.jsonl``, River's own Hoeffding-tree leaves) by
(dataset, booster, seed) and reports, per dataset and booster: how many seeds give exactly the same
accuracy and last-20% accuracy (the streams are identical when the trees are), the largest
difference, and the summed seconds of the runs, old against new (each row's ``seconds`` is the wall
time of that one run, so the sums compare the work whatever the number of parallel jobs; both runs
were on the same shared 2-core machine).

    python -m benchmarks.paper.table1_compare --untimed car:banditbbm:4 \
        --curves benchmarks/out/curves-fast --results
    python -m benchmarks.paper.table1_compare --old benchmarks/out/table1-river.jsonl --results \
        --block table1-river-rerun      # against River's leaves re-run now (--river-trees)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from benchmarks import ROOT
from benchmarks.results import replace_block

OUT = ROOT / "benchmarks" / "out"
BOOSTERS = ["banditbbm", "adabandit", "onlinembbm", "adaboostolm"]


def load(paths: list[Path]) -> dict[tuple[str, str, int], dict]:
    rows = {}
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                row = json.loads(line)
                rows[(row["dataset"], row["booster"], row["seed"])] = row
    return rows


def same_curve(key: tuple[str, str, int], new_dir: Path | None, old_dir: Path) -> bool | None:
    """Whether a Car run's per-round correctness (``curves/*.npy``) is identical; None if absent."""
    if new_dir is None:
        return None
    name = f"{key[0]}-{key[1]}-{key[2]}.npy"
    a, b = new_dir / name, old_dir / name
    if not (a.exists() and b.exists()):
        return None
    return a.read_bytes() == b.read_bytes()


def compare(
    new: dict,
    old: dict,
    untimed: set[tuple[str, str, int]] = frozenset(),
    curves: Path | None = None,
) -> list[dict]:
    cells: dict[tuple[str, str], list] = defaultdict(list)
    for key, row in new.items():
        cells[key[:2]].append((key[2], row, old.get(key)))
    out = []
    order = ["balance", "car", "nursery", "mice"]
    for (dataset, booster), items in sorted(
        cells.items(),
        key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 9, kv[0][1]),
    ):
        matched = [(s, n, o) for s, n, o in items if o is not None]
        same = [
            s
            for s, n, o in matched
            if n["accuracy"] == o["accuracy"] and n["last20_accuracy"] == o["last20_accuracy"]
        ]
        diff = max(
            (
                max(
                    abs(n["accuracy"] - o["accuracy"]),
                    abs(n["last20_accuracy"] - o["last20_accuracy"]),
                )
                for _, n, o in matched
            ),
            default=float("nan"),
        )
        timed = [(s, n, o) for s, n, o in matched if (dataset, booster, s) not in untimed]
        curve_checks = [
            same_curve((dataset, booster, s), curves, OUT / "curves") for s, _, _ in items
        ]
        curve_checks = [c for c in curve_checks if c is not None]
        out.append(
            {
                "curves_checked": len(curve_checks),
                "curves_identical": sum(curve_checks),
                "untimed": sorted(s for s, _, _ in matched if (dataset, booster, s) in untimed),
                "dataset": dataset,
                "booster": booster,
                "seeds": sorted(s for s, _, _ in items),
                "matched": len(matched),
                "identical": len(same),
                "different_seeds": sorted(s for s, _, _ in matched if s not in same),
                "max_abs_diff": diff,
                "old_seconds": sum(o["seconds"] for _, _, o in timed),
                "new_seconds": sum(n["seconds"] for _, n, o in timed),
                "new_last20_mean": (
                    sum(n["last20_accuracy"] for _, n, _ in matched) / len(matched)
                    if matched
                    else float("nan")
                ),
                "old_last20_mean": (
                    sum(o["last20_accuracy"] for _, _, o in matched) / len(matched)
                    if matched
                    else float("nan")
                ),
            }
        )
    return out


def report(cells: list[dict], command: str) -> str:
    lines = [
        f"Command: `{command}`",
        "",
        "| data | booster | seeds (new run) | identical (acc. and last-20%) | largest difference | "
        "last-20% mean over the matched seeds, array / River | "
        "seconds, River run -> array run (sum over those seeds) "
        "| speed-up | per-round correctness (Car curves) identical |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tot_old = tot_new = 0.0
    unmatched = sum(len(c["seeds"]) - c["matched"] for c in cells)
    for c in cells:
        if not c["matched"]:
            continue
        seeds = c["seeds"]
        span = f"{seeds[0]}-{seeds[-1]} ({len(seeds)})" if seeds else "-"
        lines.append(
            f"| {c['dataset']} | {c['booster']} | {span} | {c['identical']} of {c['matched']}"
            + (f" (differ: {c['different_seeds']})" if c["different_seeds"] else "")
            + f" | {c['max_abs_diff']:.2g} | {c['new_last20_mean']:.4f} / "
            f"{c['old_last20_mean']:.4f} | {c['old_seconds']:.0f} -> {c['new_seconds']:.0f} | "
            + (f"{c['old_seconds'] / c['new_seconds']:.1f}x" if c["new_seconds"] else "-")
            + (f" (untimed seeds {c['untimed']})" if c["untimed"] else "")
            + (
                f" | {c['curves_identical']} of {c['curves_checked']} |"
                if c["curves_checked"]
                else " | - |"
            )
        )
        tot_old += c["old_seconds"]
        tot_new += c["new_seconds"]
    n_same = sum(c["identical"] for c in cells)
    n_matched = sum(c["matched"] for c in cells)
    lines += [
        "",
        f"All cells: {n_same} of {n_matched} runs identical; summed run seconds "
        f"{tot_old:.0f} (River leaves, --old) -> {tot_new:.0f} (array leaves), "
        f"{tot_old / tot_new:.1f}x."
        + (
            f" {unmatched} new runs without a stored counterpart are not shown."
            if unmatched
            else ""
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=Path, nargs="*", default=[OUT / "table1-fast.jsonl"])
    parser.add_argument(
        "--old", type=Path, nargs="*", default=[OUT / "table1.jsonl", OUT / "table1-nm.jsonl"]
    )
    parser.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--block", default="table1-fast-trees")
    parser.add_argument(
        "--untimed",
        nargs="*",
        default=[],
        metavar="DATASET:BOOSTER:SEED",
        help="runs left out of the seconds sums (e.g. paused while another benchmark ran)",
    )
    parser.add_argument(
        "--curves", type=Path, default=None, help="the new run's curves/ directory (Car)"
    )
    args = parser.parse_args()
    untimed = set()
    for item in args.untimed:
        dataset, booster, seed = item.split(":")
        untimed.add((dataset, booster, int(seed)))
    new = {k: v for k, v in load(args.new).items() if k[1] in BOOSTERS}
    cells = compare(new, load(args.old), untimed, args.curves)
    body = report(cells, "python -m benchmarks.paper.table1_compare " + " ".join(sys.argv[1:]))
    print(body)
    if args.results:
        replace_block(args.block, body)


if __name__ == "__main__":
    main()
