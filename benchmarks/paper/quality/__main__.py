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
from benchmarks.paper.quality.streams import STREAMS
from benchmarks.paper.quality.vw import GRID
from benchmarks.results import replace_block

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


INTRO = """Quality without tuning (issue 15; `python -m benchmarks.paper.quality`, module docstrings
in benchmarks/paper/quality/ say how each stream is made). Cells: last-20% / whole-stream accuracy
of the played action, median over seeds; `(n)`: only n seeds ran. Boosters as a new user gets them
(`make_booster(name, n_actions=k, seed=s)`, the defaults of docs/boosters.md, "Defaults");
`old`: the defaults before issue 15 (rho = 0.1, majority-class leaves and, for AdaBandit,
alpha_min = -2: `--param rho=0.1 --param alpha_min=-2 --param leaf_prediction=mc --label old`,
with `estimator=proposed` and `rho_decay=null` since those options came); `paper`: the
per-dataset settings of benchmarks/paper/table1.py; `adaboostolm`: AdaBandit's full-information
twin, which sees the label every round (a ceiling for trees that learn from bandit feedback;
the authors' majority-class leaves).
VW: the best of its grid per stream and protocol by median last-20% accuracy (chosen on the same
stream: optimistic for VW), numeric features standardised with running statistics, strings as
indicator features. Duplicated protocol: the paper's x10/x6/x4/x8 on its four sets, x5
elsewhere; plain: each row once; both shuffled by the seed. The settings each pass of issue 15
tried are in the history tables below the notes ("quality-history")."""

HISTORY_INTRO = """The settings issue 15's passes tried on the quality benchmark (the same cells
as the tables of "quality", `python -m benchmarks.paper.quality --report` writes both), beside
the defaults and VW. Labels: `mc`: the defaults with majority-class leaves (`--param
leaf_prediction=mc --label mc`, the defaults before naive-Bayes leaves); `dr`: the defaults of
issue 15's fourth pass (the doubly robust estimate at a constant rate and no reward-model
expert: AdaBandit at rho = 0.05, `--param rho=0.05 --param rho_decay=null --param
guess_expert=false --label dr`, BanditBBM at rho = 0.1, `--param rho_decay=null --param
guess_expert=false`); `rho0.1`: `oco`'s defaults before the sixth pass (a constant rate,
`--param rho_decay=null`); `no-model`: `oco`'s defaults before the eighth pass (no reward model:
`--param guess_model=null`; every earlier `oco` row records it); `pass6`: the defaults of
AdaBandit and BanditBBM before the seventh pass (the logistic reward model, the paper's Hedge
and the switch on hit counts: `--param guess_model=linear --param hedge_weight=null`, for
BanditBBM `switch_weight=null`; every earlier row of the two with the doubly robust estimate
records them); `pass7`: AdaBandit's and BanditBBM's defaults on the id stream and nursery before
the eighth pass (the ridge model's offsets a constant per value; no parameter: the code of
commit baefff7; on the other streams no value passes its feature's cap or arrives once the
model's map is full, so the eighth pass left their cells as they were); `pass5`: AdaBandit's
defaults of the fifth pass, whose doubly robust switch also used the guess on a tie of its hit
counts (the code before the sixth pass; no parameter; every earlier row of the two boosters with
the doubly robust estimate ran with that rule), and BanditBBM's `gx-d100` the same rule with
today's BanditBBM defaults; `pass8`: AdaBandit's, BanditBBM's and `oco`'s defaults before the
ninth pass on the streams of fewer than 10 actions (the rate's decay 100 rounds whatever the
number of actions, `--param rho_decay=100`; every earlier row of the three records the
`rho_decay` it ran with; from 10 actions on `rho_decay="auto"` is those 100 rounds, so those
cells stayed `default`); `d5k`: AdaBandit with the decay at 5 rounds per action (`--param
rho_decay=15` on balance and wine, 20 on car and the id stream, 25 on nursery), `d260`: at 260
rounds on RandomRBF-26 (10 per action without the cap of 100); `pass10`: AdaBandit's,
BanditBBM's and `oco`'s defaults before the eleventh pass (the ridge model's products unscaled
and its offsets taught one by one, the rate's decay 10 rounds per action: the code of commit
2f84746; `hits` and `offset2` are earlier passes', RESULTS.md's notes say which); `model11` and
`d3`: the eleventh pass's reward model with 10 and with 3 rounds per action (its notes);
`pass11`: AdaBandit's, BanditBBM's and `oco`'s defaults before the twelfth pass (the rate not
scaled by the prediction's misses, `--param rho_by_misses=false`); `miss50`: the twelfth pass
with a miss reference of 0.5 and `l2-3` with the ridge model's `l2=3`; `fw-none`: the twelfth
pass's first change alone on the six streams of more than 8 features (the ridge model's map
unscaled, `feature_weight=None`; its notes); `pass12`: AdaBandit's, BanditBBM's and `oco`'s
defaults on the id stream and nursery before the thirteenth pass (the ridge model's map learning
before its offsets, `joint_offsets=False` of learners/ridge.py, no booster parameter; no value
of the other streams gets an offset, so their cells stayed `default`); `pairs13`: the same three
on those two streams with the thirteenth pass's second change, reverted (pairs of nominal
values, one of them past its cap, given constant offsets: the code of commit 551fd30);
`joint13`: the same three on those two streams before the fourteenth pass (the thirteenth's
joint step, offsets' penalty 0.1, no pairs: `offset_l2=0.1, pair_offset_l2=None` of
learners/ridge.py, no booster parameter); `pass14`: `egreedy_tree` on Car, nursery and the id
stream before the fifteenth pass (trees alone, `--param offset_l2=null`; the streams without
nominal values are the same to the bit); `pass15`: `egreedy_tree` before the sixteenth pass (a
grace period of 50 and a tie threshold of 0.05: `--param grace_period=50 --param tau=0.05`; its
rows record no parameter, as they ran with the defaults of their day; its grid of grace periods
and tie thresholds is in `benchmarks/out/quality-egreedy-grid.jsonl`, docs/boosters.md);
`floor17`: AdaBandit's, BanditBBM's and `oco`'s defaults before the eighteenth pass (the floor of
0.01 fixed, not following the prediction's misses: `--param rho_min=null`; its rows record no
parameter, as they ran with the defaults of their day); `min001`: AdaBandit with the floor
following the misses down to 0.001 (`--param rho_min=0.001`); other
labels: the `--param` settings their rows record (majority-class leaves unless the label says
`nba`; AdaBandit's rows before the fifth pass, BanditBBM's and `oco`'s before the sixth, record
`rho`, `rho_decay` and `guess_expert` as they ran); `adaboostolm nba`: the full-information twin
with naive-Bayes leaves."""


HELDOUT_INTRO = """AdaBandit's defaults against VW on held-out seeds (issue 15, seventeenth pass;
`benchmarks/paper/quality/heldout.py`; AdaBandit's rows rerun with the eighteenth pass's
defaults, those before it labelled `floor17` in the file). VW's configuration per stream and
protocol is the one the main tables chose on seeds 1-9; here it and AdaBandit play seeds 10-18,
which took no part in the choice: `python -m benchmarks.paper.quality --seeds 10 11 12 13 14 15
16 17 18 --boosters adabandit --vw --protocols duplicated --max-rows 500 --out
benchmarks/out/quality-heldout.jsonl --jobs 2`, the same with `--protocols plain --max-rows
1000`. Medians and means of the last-20% accuracy of the played action; the paired difference
is seed by seed (one round of the last 20% is 1/36 on wine played once, 1/178 duplicated). The
last column is VW's best of grid chosen again on these seeds, the main tables' rule
(optimistic for VW)."""


if __name__ == "__main__":
    main()
