"""Rounds per second of two settings of a booster on one quality stream, in alternating repeats.

The quality table's rounds per second come from runs that shared the machine with other jobs;
this measures the ratio of the defaults to another setting in one process, alternating the two
so that a change in the machine's load hits both (medians of the repeats):

    python -m benchmarks.paper.quality.speed --stream digits --repeats 3
    python -m benchmarks.paper.quality.speed --stream car --against dr
    python -m benchmarks.paper.quality.speed --booster oco --stream car --against no-model
    python -m benchmarks.paper.quality.speed --stream car --duplicated --max-rows 500 \
        --against floor17
    python -m benchmarks.paper.quality.speed --stream mice --against river
    python -m benchmarks.paper.quality.speed --stream mice --against vw
    python -m benchmarks.paper.quality.speed --booster banditbbm --stream digits --against adabandit
    python -m benchmarks.paper.quality.speed --stream mice --against one-thread
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks.paper.quality.vw import run_vw
from boosters.registry import make_booster
from learners.compiled import warm_up
from learners.split_search import helper_on, set_helper
from service.sim.loop import simulate
from service.sim.streams import STREAMS, dup_of, load_stream

#: the settings the defaults are compared with: earlier defaults of AdaBandit (labels of
#: benchmarks/notes/quality.md), a booster without a reward model (``oco``'s earlier default) and
#: the fixed exploration floor (the three bandit boosters' earlier default)
SETTINGS = {
    "dr": {"rho": 0.05, "rho_decay": None, "guess_expert": False, "guess_model": "linear",
           "hedge_weight": None},
    "pass6": {"guess_model": "linear", "hedge_weight": None},
    "no-model": {"guess_model": None},
    "floor17": {"rho_min": None},
    "river": {"tree_core": "river"},
    "count": {"grace_by": "count"},
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--booster", default="adabandit", choices=["adabandit", "banditbbm", "oco"])
    p.add_argument("--stream", default="digits", choices=STREAMS)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-rows", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--duplicated", action="store_true", help="the duplicated protocol")
    p.add_argument("--against", default="dr", choices=[*SETTINGS, "vw", "adabandit", "one-thread"],
                   help="a setting of the booster, vw: VW's --cb_explore k --epsilon 0.01 -q ::, "
                   "adabandit: the default AdaBandit (for --booster banditbbm or oco), or "
                   "one-thread: the split searches without their helper thread")
    args = p.parse_args(argv)
    warm_up()  # the compiled kernels loaded (or compiled, once) before any timing
    data = load_stream(args.stream, args.max_rows)
    dup = dup_of(args.stream) if args.duplicated else 1
    settings = {"default": {}, args.against: SETTINGS.get(args.against)}
    speeds: dict[str, list[float]] = {name: [] for name in settings}
    helper = helper_on()
    for _ in range(args.repeats):
        for name, params in settings.items():
            set_helper(helper and name != "one-thread")
            if name == "vw":
                result = run_vw(data, "eps0.01-q", dup=dup, seed=args.seed)
            else:
                kind = "adabandit" if name == "adabandit" else args.booster
                booster = make_booster(kind, n_actions=data.n_classes, seed=args.seed,
                                       **(params or {}))
                result = simulate(booster, data, dup=dup, seed=args.seed)
            speeds[name].append(result.rounds_per_second)
    medians = {name: statistics.median(values) for name, values in speeds.items()}
    for name, values in speeds.items():
        print(f"{name}: {medians[name]:.1f} rounds/s (repeats {[round(v, 1) for v in values]})")
    print(f"default / {args.against}: {medians['default'] / medians[args.against]:.2f}")


if __name__ == "__main__":
    main()
