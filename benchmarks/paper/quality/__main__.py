"""Run the quality benchmark's cells, resumably, and write its RESULTS.md blocks.

One JSON line per (stream, protocol, seed, column) is appended to ``--out`` (cells already there
are skipped). Columns: ``--boosters`` with the current defaults (label ``default``: only the
number of actions and the seed are given), or with ``--param name=value`` overrides under a
``--label``; ``--paper`` adds the paper's per-dataset settings (label ``paper``, Table 1 sets
only); ``--vw`` adds VW's grid (all of it, or the configurations named).

    python -m benchmarks.paper.quality --vw --boosters                  # VW only, all streams
    python -m benchmarks.paper.quality --streams balance car --boosters adabandit --max-rows 2000
    python -m benchmarks.paper.quality --boosters adabandit --param rho=0.05 --label rho0.05
    python -m benchmarks.paper.quality --report                         # the RESULTS.md blocks
    python -m benchmarks.paper.quality --quick                          # a smoke test
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks import OUT
from benchmarks.paper.quality.heldout import heldout_report
from benchmarks.paper.quality.report import report
from benchmarks.paper.quality.run import PROTOCOLS, Cell, run_cells
from benchmarks.paper.quality.vw import GRID
from benchmarks.results import replace_block
from service.sim.streams import STREAMS

DEFAULT_BOOSTERS = ["adabandit", "banditbbm", "oco", "egreedy_tree"]


def parse_param(text: str) -> tuple[str, object]:
    """``name=value``, the value read as JSON when it parses (numbers, true, null), else a string.

    >>> parse_param("rho=0.05"), parse_param("tree_profile=bandit")
    (('rho', 0.05), ('tree_profile', 'bandit'))
    """
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param needs name=value, got {text!r}")
    name, value = text.split("=", 1)
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", nargs="+", default=list(STREAMS), choices=STREAMS)
    p.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=PROTOCOLS)
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--boosters", nargs="*", default=DEFAULT_BOOSTERS)
    p.add_argument("--param", action="append", type=parse_param, default=[], metavar="NAME=VALUE")
    p.add_argument("--label", default="default", help="the column's label (with --param)")
    p.add_argument("--paper", action="store_true", help="add the paper's tuned settings")
    p.add_argument("--vw", nargs="*", choices=list(GRID), help="add VW's grid (or these configs)")
    p.add_argument("--max-rows", type=int, default=5000, help="distinct rows per stream at most")
    p.add_argument("--max-dup", type=int, help="cap the duplicated protocol's duplication")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", type=Path, help="JSON lines (default benchmarks/out/quality.jsonl)")
    p.add_argument("--quick", action="store_true", help="150 rows, seed 1, dup <= 2: a smoke test")
    p.add_argument("--report", action="store_true", help="only write the RESULTS.md blocks")
    p.add_argument("--results", type=Path, help="the RESULTS.md to write (default the project's)")
    p.add_argument(
        "--heldout", type=Path, help="the held-out seeds' JSON lines (default beside --out)"
    )
    return p


def cells_of(args: argparse.Namespace) -> list[Cell]:
    params = dict(args.param)
    if params and args.label == "default":
        raise SystemExit("error: --param changes the defaults: give the column a --label")
    columns = [(b, args.label, params) for b in args.boosters]
    if args.paper:
        columns += [(b, "paper", {}) for b in args.boosters]
    if args.vw is not None:
        columns += [("vw", config, {}) for config in (args.vw or GRID)]
    cells = [
        Cell(stream, protocol, seed, method, label, args.max_rows, args.max_dup, extra)
        for seed in args.seeds
        for method, label, extra in columns
        for stream in args.streams
        for protocol in args.protocols
    ]
    return list({cell.key(): cell for cell in cells}.values())  # each cell once


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.quick:
        args.max_rows, args.seeds, args.max_dup = min(args.max_rows, 150), args.seeds[:1], 2
    out = args.out or OUT / ("quality-quick.jsonl" if args.quick else "quality.jsonl")
    if args.report:
        kwargs = {"path": args.results} if args.results else {}
        replace_block("quality", report(out, INTRO), **kwargs)
        replace_block("quality-history", report(out, HISTORY_INTRO, history=True), **kwargs)
        heldout = args.heldout or out.with_name(out.stem + "-heldout.jsonl")
        replace_block("quality-heldout", heldout_report(out, heldout, HELDOUT_INTRO), **kwargs)
        return
    ran = run_cells(cells_of(args), out, jobs=args.jobs, progress=None)
    print(f"{ran} cells run into {out}", file=sys.stderr)


INTRO = """\
`python -m benchmarks.paper.quality` (`--report` rewrites this block; benchmarks/paper/quality/
says how each stream is made). Cells: last-20% / whole-stream accuracy of the played action,
median over seeds; `(n)`: only n seeds ran. Boosters as a new user gets them (docs/boosters.md,
"Defaults"); `old`: the earlier defaults (`--label old`: rho 0.1, majority-class leaves,
alpha_min -2); `paper`: benchmarks/paper/table1.py's settings; `adaboostolm`: the
full-information twin (a ceiling). VW: the best of its grid per stream and protocol, chosen on
the same stream (optimistic for VW). Duplicated protocol: the paper's x10/x6/x4/x8 on its four
sets, x5 elsewhere; plain: each row once. Other settings tried: benchmarks/notes/quality.md."""

HISTORY_INTRO = """\
The labelled settings tried on the quality benchmark, beside the defaults and VW (the same
cells as the main tables; `python -m benchmarks.paper.quality --report` writes both). A label
names one `--label` run; its rows in benchmarks/out/quality.jsonl record the `--param` settings
they ran with, and the notes above this block say what each label was. `adaboostolm nba`: the
full-information twin with naive-Bayes leaves."""


HELDOUT_INTRO = """\
AdaBandit's defaults against VW on seeds 10-18, which took no part in choosing VW's
configuration (the main tables' choice on seeds 1-9; `benchmarks/paper/quality/heldout.py`):
`python -m benchmarks.paper.quality --seeds 10 11 12 13 14 15 16 17 18 --boosters adabandit --vw
--protocols duplicated --max-rows 500 --out benchmarks/out/quality-heldout.jsonl --jobs 2`, the
same with `--protocols plain --max-rows 1000`. Last-20% accuracy of the played action; the
paired difference is seed by seed. The last column is VW's best of grid chosen again on these
seeds (optimistic for VW)."""


if __name__ == "__main__":
    main()
