"""A change of the world halfway through a quality cell: how fast a booster finds the new labels.

The duplicated protocol's stream of a quality cell plays as usual until the change; from then
on every row's class is shifted, ``y -> (y + 1) mod k``, so the action the booster learned to
play is wrong on every row and the right one must be found again by exploring. Per seed: the
played action's accuracy over the ``window`` rounds before the change, over consecutive
windows after it, and over the last 20% of the run; the rounds after the change until the
accuracy over the last ``window`` rounds is back to ``--recover`` (0.8) times the one before it;
and the alarms of the booster's ``drift_restart`` test (``boosters.exploration.MissDrift``)
before and after the change. Comparing settings (a column per ``--compare``, e.g.
``drift_restart=null``, the booster without the test, or ``rho_min=null``) shows what each
costs when the world moves.

    python -m benchmarks.paper.quality.drift --stream car --seeds 1 2 3 --compare drift_restart=null

>>> shifted(2, 3), shifted(0, 3)
(0, 1)
>>> rounds_to_recover(np.array([1, 1, 0, 0, 0, 1, 1, 1], dtype=bool), 2, 2, 0.8)
5
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.paper.quality.__main__ import parse_param
from benchmarks.stats import median
from boosters.registry import make_booster
from service.sim.loop import SimulationResult, shuffled_order
from service.sim.streams import STREAMS, dup_of, load_stream

__all__ = ["drift_run", "rounds_to_recover", "shifted"]


def shifted(y: int, k: int) -> int:
    """The class of a row after the change."""
    return (y + 1) % k


def rounds_to_recover(hits: np.ndarray, at: int, window: int, recover: float) -> int | None:
    """The rounds after the change at ``at`` until the hit rate over the last ``window`` rounds
    (all after it) is ``recover`` times the rate over the ``window`` rounds before it or more
    (None: never)."""
    sums = np.concatenate(([0], np.cumsum(hits)))
    ends = np.arange(at + window, len(hits) + 1)
    rates = (sums[ends] - sums[ends - window]) / window
    back = np.flatnonzero(rates >= recover * hits[at - window : at].mean())
    return int(ends[back[0]] - at) if back.size else None


def _alarms(model) -> tuple[int, int]:
    """The alarms of ``model``'s ``drift_restart`` test so far, and the learning round of the
    last one."""
    drift = getattr(model, "miss_drift", None)
    return (0, 0) if drift is None else (drift.restarts, drift.start)


def drift_run(stream: str, seed: int, booster: str = "adabandit", params: dict | None = None,
              change: float = 0.5, window: int = 100, max_rows: int = 500,
              recover: float = 0.8) -> dict:
    """One seed: the played action's hit rate over ``window`` rounds before and per ``window``
    rounds after the change at the fraction ``change`` of the duplicated stream, the rounds to
    recover (:func:`rounds_to_recover`) and the booster's alarms before and after the change
    (and the rounds after it of the last one)."""
    data = load_stream(stream, max_rows)
    model = make_booster(booster, n_actions=data.n_classes, seed=seed, **(params or {}))
    order = shuffled_order(len(data), dup_of(stream), seed)
    at = int(change * len(order))
    hits = np.zeros(len(order), dtype=bool)
    for t, i in enumerate(order.tolist()):
        x, y = data.X[i], int(data.y[i])
        if t == at:
            alarms_before = _alarms(model)
        if t >= at:
            y = shifted(y, data.n_classes)
        d = model.decide_one(x)
        hits[t] = d.action == y
        model.learn_one(x, d, reward=float(hits[t]))
    after, hits_after = _alarms(model), hits[at:]
    windows = [float(hits_after[s:s + window].mean())
               for s in range(0, len(hits_after) - window + 1, window)]
    return {"seed": seed, "before": float(hits[at - window:at].mean()), "after": windows,
            "last20": SimulationResult.from_correct(hits, 0.0).last20_accuracy,
            "rounds": len(hits), "at": at, "recover": rounds_to_recover(hits, at, window, recover),
            "alarms": (alarms_before[0], after[0] - alarms_before[0],
                       after[1] - at if after[0] > alarms_before[0] else None)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stream", required=True, choices=STREAMS)
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--booster", default="adabandit")
    p.add_argument("--compare", type=parse_param, action="append", default=[],
                   metavar="NAME=VALUE", help="a second column with this parameter (repeatable)")
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--recover", type=float, default=0.8,
                   help="recovered: this fraction of the accuracy before the change")
    args = p.parse_args(argv)
    columns = {"defaults": {}}
    columns.update({f"{n}={v}": {n: v} for n, v in args.compare})
    for label, params in columns.items():
        runs = [drift_run(args.stream, s, args.booster, params, window=args.window,
                          recover=args.recover) for s in args.seeds]
        after = np.array([r["after"] for r in runs])
        print(f"{label}: {runs[0]['rounds']} rounds, change at {runs[0]['at']}; medians over "
              f"seeds {args.seeds}: before {median([r['before'] for r in runs]):.3f}, "
              f"windows of {args.window} after "
              f"{' '.join(f'{v:.3f}' for v in np.median(after, axis=0))}, "
              f"last 20% {median([r['last20'] for r in runs]):.3f}; rounds to recover "
              f"{args.recover} of before, per seed: {[r['recover'] for r in runs]}; alarms "
              f"(before the change, after it, the last one's rounds after it): "
              f"{[r['alarms'] for r in runs]}", flush=True)


if __name__ == "__main__":
    main()
