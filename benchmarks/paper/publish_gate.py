"""The worker's publish gate under a null and an alternative.

A hold-out of ``n`` events on k = 3 actions (the rewards do not depend on the context). The
logging policy plays action 0 and explores actions 1 and 2 with probability ``floor`` each (a
floor of 1/3 is the uniform logger); the new policy plays action 2, the one the logger rarely
explores (probability 0.98, the worker's floor 0.01 on the others). DR's reward model, fitted on
other events as the worker's is, is right on actions 0 and 1 and 0.1 too high on action 2.

- ``null-bernoulli``: every action pays Bernoulli(0.5): the new policy is no better, so every
  publish is a false one; ``null-constant``: every reward is exactly 0.5;
- ``alternative``: action 2 pays Bernoulli(0.8), the others Bernoulli(0.5) (the new policy is
  better by about 0.3 (1 - 2 floor)).

With constant rewards SNIPS's difference is exactly 0 up to round-off (every weighted mean of
0.5 is 0.5): the ``null-constant`` SNIPS column is the audit's exact-zero case.

Every hold-out goes through the worker's gate, :func:`service.training.publish_decision` (both
estimators of :data:`boosters.ope_difference.DIFFERENCE_ESTIMATORS` on the same events):
``new`` is its
verdict (the betting bound ``low`` > 0: bets on the per-event differences plus the control
variate ``boosters.ope_difference.LIFT``, rejecting when the capital reaches 1 / (1 - level)
anywhere in the hold-out), ``old`` the earlier rule (the normal-approximation bound
``normal_low`` > 0, which the gate still records). ``kept`` is the
share of the hold-outs the old rule published that the new one publishes too. One JSON row per
cell goes to benchmarks/out/publish_gate.json; the markdown table goes to stdout.

    python -m benchmarks.paper.publish_gate                  # 2,000 hold-outs per cell
    python -m benchmarks.paper.publish_gate --runs 200       # a quick look
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import OUT
from boosters.ope_difference import DIFFERENCE_ESTIMATORS
from service.training import LoggedData, TrainConfig, publish_decision

__all__ = ["SCENARIOS", "gate_rates", "hold_outs", "report"]

K = 3
#: the new policy: action 2 (rarely explored by the logger), the worker's floor on the others
NEW_POLICY = np.array([0.01, 0.01, 0.98])
#: DR's reward model: the true means plus this on action 2
MODEL_ERROR = np.array([0.0, 0.0, 0.1])
#: scenario -> (mean reward of each action, Bernoulli rewards?)
SCENARIOS: dict[str, tuple[tuple[float, ...], bool]] = {
    "null-bernoulli": ((0.5, 0.5, 0.5), True),
    "null-constant": ((0.5, 0.5, 0.5), False),
    "alternative": ((0.5, 0.5, 0.8), True),
}
FLOORS = (0.02, 0.01, 0.002, 0.1, 1 / 3)
SIZES = (300, 1000, 3000)


def logging_policy(floor: float) -> np.ndarray:
    """Action 0, exploring the two others with probability ``floor`` each.

    >>> logging_policy(0.01).tolist()
    [0.98, 0.01, 0.01]
    """
    return np.array([1.0 - 2.0 * floor, floor, floor])


def hold_outs(
    scenario: str, floor: float, n: int, runs: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``runs`` hold-outs of ``n`` events: the logged actions and rewards, each (runs, n).

    >>> a, r = hold_outs("null-constant", 0.002, 300, 4, np.random.default_rng(0))
    >>> a.shape, set(r.ravel().tolist())
    ((4, 300), {0.5})
    """
    means, bernoulli = SCENARIOS[scenario]
    cum = np.cumsum(logging_policy(floor))
    actions = np.minimum(np.searchsorted(cum, rng.random((runs, n)), side="right"), K - 1)
    mean = np.asarray(means)[actions]
    rewards = (rng.random((runs, n)) < mean).astype(np.float64) if bernoulli else mean
    return actions, rewards


def gate_rates(
    scenario: str, floor: float, n: int, runs: int, seed: int = 0, level: float = 0.95
) -> dict[str, dict[str, int]]:
    """How many of ``runs`` simulated hold-outs the old and the new rule publish on, per
    estimator: ``{estimator: {"old": count, "new": count, "both": count}}``.

    >>> counts = gate_rates("null-constant", 0.002, 300, 20)
    >>> counts["dr"], counts["snips"]["new"]
    ({'old': 11, 'new': 0, 'both': 0}, 0)
    """
    rng = np.random.default_rng([seed, list(SCENARIOS).index(scenario), round(floor * 1e6), n])
    actions, rewards = hold_outs(scenario, floor, n, runs, rng)
    mu = logging_policy(floor)
    logged = np.tile(mu, (n, 1))
    target = np.tile(NEW_POLICY, (n, 1))
    q = np.tile(np.asarray(SCENARIOS[scenario][0]) + MODEL_ERROR, (n, 1))
    config = TrainConfig(level=level)
    counts = {name: {"old": 0, "new": 0, "both": 0} for name in DIFFERENCE_ESTIMATORS}
    allowed = np.ones((n, K), dtype=bool)
    for a, r in zip(actions, rewards, strict=True):
        hold = LoggedData([{}] * n, a, mu[a], r, logged, allowed)
        _, differences = publish_decision(hold, target, q, config)
        for name, d in differences.items():
            old, new = d.normal_low > 0, d.positive
            counts[name]["old"] += old
            counts[name]["new"] += new
            counts[name]["both"] += old and new
    return counts


def _rate(count: int, runs: int) -> str:
    return f"{100 * count / runs:.1f}%"


def _kept(c: dict[str, int]) -> str:
    return f"{100 * c['both'] / c['old']:.0f}%" if c["old"] else "-"


def report(rows: list[dict]) -> str:
    """The markdown table of the cells in ``rows`` (publish rates, old -> new)."""
    names = list(DIFFERENCE_ESTIMATORS)
    head = ["scenario", "logger floor", "hold-out", "runs"]
    for name in names:
        head += [f"{name} old", f"{name} new", f"{name} kept"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["scenario"], f"{row['floor']:.3g}", f"{row['n']:,}", f"{row['runs']:,}"]
        for name in names:
            c = row["counts"][name]
            kept = _kept(c) if row["scenario"] == "alternative" else ""
            cells += [_rate(c["old"], row["runs"]), _rate(c["new"], row["runs"]), kept]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="hold-outs per cell")
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--floors", nargs="*", type=float, default=FLOORS)
    parser.add_argument("--sizes", nargs="*", type=int, default=SIZES)
    parser.add_argument("--level", type=float, default=0.95, help="the worker's worker_level")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT / "publish_gate.json")
    return parser


def main() -> None:
    args = _parser().parse_args()
    cells = [(s, f, n) for s in args.scenarios for f in args.floors for n in args.sizes]
    rows, start = [], time.perf_counter()
    for i, (scenario, floor, n) in enumerate(cells, 1):
        counts = gate_rates(scenario, floor, n, args.runs, args.seed, args.level)
        rows.append({"scenario": scenario, "floor": floor, "n": n, "runs": args.runs,
                     "level": args.level, "seed": args.seed, "counts": counts})
        rates = " ".join(f"{k} {c['old']}->{c['new']}" for k, c in counts.items())
        print(f"[{i}/{len(cells)}] {scenario} floor {floor:.3g} n {n}: {rates} "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(report(rows))


if __name__ == "__main__":
    main()
