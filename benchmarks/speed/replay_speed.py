"""Replay, import and export throughput on a synthetic million-event log.

The script writes a synthetic log of ``--events`` joined events (default 1,000,000; our JSON
lines, the format ``boostbandit export`` writes) to a temporary directory: 10 actions, contexts of
4 numeric features and one categorical one, one correct action per context (the argmax of a fixed
seeded linear score, 10% of the labels replaced at random), uniform logging (p = 0.1), reward 1
iff the logged action is the label. Then, in one run, with repeats that alternate each measure
and its baseline, medians reported:

1. **parse floor**: reading and validating every line with the import parsers
   (:func:`service.replay.iter_log`), nothing else: the baseline of the estimator replay;
2. **policy replay** (``boostbandit replay policy``): a BOPL policy (``bopl-regr``, 20 rounds of
   depth-4 trees, trained by the worker's code on the first 20,000 events) replayed over the
   whole log: IPS and SNIPS, and with DR (its reward model, 50 rounds of XGBoost, cross-fitted on
   the two halves of the log), ratio = parse floor time / replay time;
3. **AdaBandit N = 10** (``--booster adabandit --learners 10``, rho 0.1): on a prefix of
   ``--learner-events`` events (default 20,000; the whole million would take tens of minutes per
   repeat, see the numbers), in both modes (rejection sampling: decide on every event, learn on
   the ~10% that match; weighted, forced: decide and learn on every event); baseline = the same
   booster's decide/learn calls on the same contexts held in memory (no parsing, no bookkeeping);
4. **import / export through Redis** (:func:`service.eventlog.transfer.import_events` /
   :func:`~service.eventlog.transfer.export_events`) on a prefix of ``--io-events`` events (default
   200,000), against a ``redis-server`` the script starts on a free loopback port in a temporary
   directory (no persistence); baselines: the parse floor on the same lines (import validates
   every line, then parses it again to write it) and a bare XRANGE page loop over the same stream
   (export).

    python -m benchmarks.speed.replay_speed                 # the full run (~15-20 min on 2 cores)
    python -m benchmarks.speed.replay_speed --quick         # 20k events, 1 repeat (smoke run)
    python -m benchmarks.speed.replay_speed --results       # also update benchmarks/RESULTS.md
    python -m benchmarks.speed.replay_speed --report-only --results   # the block again, from --out
    python -m benchmarks.speed.replay_speed --trees --results  # AdaBandit: River leaves vs arrays

``--trees`` runs only part 3 on a log of ``--learner-events`` events: the AdaBandit
replay (both modes) with River's own Hoeffding-tree leaves (``fast_trees=False``, before) and with
the array leaves (``fast_trees=True``, after), alternating in each repeat; the two must give the
same estimates. Writes ``benchmarks/out/replay-speed-trees.json`` and the block
``replay-speed-trees``. ``--cores`` does the same with River's trees (array leaves)
against the compiled core (``tree_core``), into ``replay-speed-cores``.

Writes ``benchmarks/out/replay-speed.json`` (``--out``) and
``benchmarks/figures/replay_adabandit.png`` (the AdaBandit replays' estimated reward over the
prefix, both modes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import ROOT
from benchmarks.results import replace_block
from benchmarks.stats import median
from boosters.base import Decision
from boosters.registry import make_booster
from service.api.server import free_port
from service.eventlog.keys import keys
from service.events import decision_event, dumps, joined_event
from service.replay import LoggedEvent, iter_log, replay_learner, replay_policy

K = 10
ACTIONS = [f"item{i}" for i in range(K)]
SEGMENTS = ["new", "returning", "loyal", "churned", "trial"]
LEARNERS = 10
RHO = 0.1


def write_log(path: Path, n: int, seed: int = 0) -> float:
    """Write ``n`` joined events of the synthetic world to ``path``; seconds taken."""
    from tqdm import tqdm

    rng = np.random.default_rng(seed)
    W = rng.normal(size=(4 + len(SEGMENTS), K))
    started = time.perf_counter()
    uniform = np.full(K, 1.0 / K)
    block = 50_000
    with open(path, "w") as out, tqdm(total=n, unit="ev", desc="write log", file=sys.stderr) as bar:
        for lo in range(0, n, block):
            m = min(block, n - lo)
            X = rng.normal(size=(m, 4)).round(4)
            seg = rng.integers(len(SEGMENTS), size=m)
            Z = np.hstack([X, np.eye(len(SEGMENTS))[seg]])
            labels = (Z @ W).argmax(axis=1)
            noisy = rng.random(m) < 0.1
            labels[noisy] = rng.integers(K, size=int(noisy.sum()))
            actions = rng.integers(K, size=m)
            lines = []
            for j in range(m):
                i = lo + j
                x = X[j]
                context = {
                    "x0": float(x[0]),
                    "x1": float(x[1]),
                    "x2": float(x[2]),
                    "x3": float(x[3]),
                    "segment": SEGMENTS[seg[j]],
                }
                ts = 1.7e9 + i * 0.01
                ev = decision_event(
                    f"e{i}", ts, 0, ACTIONS, context, Decision(int(actions[j]), uniform)
                )
                reward = float(actions[j] == labels[j])
                joined = joined_event(
                    ev, reward=reward, label=None, source="feedback", learn=True, ts=ts
                )
                lines.append(dumps(joined))
            out.write("\n".join(lines) + "\n")
            bar.update(m)
    return time.perf_counter() - started


def head(src: Path, dst: Path, n: int) -> Path:
    """The first ``n`` lines of ``src`` in ``dst``."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for i, line in enumerate(fin):
            if i >= n:
                break
            fout.write(line)
    return dst


class Times:
    """Wall-clock and CPU seconds (this process) of repeated measures, by name.

    CPU time is the stable figure on a shared machine: it does not count other people's load or
    the times the process is paused; wall time does (both are kept).
    """

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        """Call ``fn`` and record its times under ``name``; its result."""
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        self.cpu.setdefault(name, []).append(time.process_time() - cpu)
        self.wall.setdefault(name, []).append(time.perf_counter() - wall)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"cpu_seconds": self.cpu, "wall_seconds": self.wall}


def check(condition: bool, message: str) -> None:
    """A sanity check of the run (not an ``assert``: it must hold under ``python -O`` too)."""
    if not condition:
        raise RuntimeError(message)


def parse_floor(path: Path) -> int:
    """Read and validate every line (the import parsers); the event count."""
    return sum(1 for _, ev in iter_log(path, "jsonl", ACTIONS) if isinstance(ev, LoggedEvent))


def train_policy(path: Path, n: int) -> Any:
    """A BOPL policy trained by the worker's code on the first ``n`` events of ``path``."""
    from service.training import TrainConfig, train_and_evaluate

    events = []
    with open(path) as handle:
        for i, line in enumerate(handle):
            if i >= n:
                break
            events.append(json.loads(line))
    config = TrainConfig(n_rounds=20, max_depth=4, min_propensity=0.01, seed=0)
    return train_and_evaluate(events, ACTIONS, config).bundle


def booster_floor(events: list[LoggedEvent], mode: str) -> int:
    """The booster's own calls on in-memory events, as the replay makes them; events learned."""
    booster = make_booster("adabandit", n_actions=K, n_learners=LEARNERS, rho=RHO, seed=0)
    decide, learn = booster.decide_one, booster.learn_one
    learned = 0
    for ev in events:
        d = decide(ev.context)
        if mode == "rejection":
            if d.action == ev.action:
                learn(ev.context, d, reward=ev.reward)
                learned += 1
        else:
            learn(ev.context, Decision(ev.action, ev.probabilities, d.internals), reward=ev.reward)
            learned += 1
    return learned


def learner_replay(path: Path, mode: str, fast_trees: bool = True, **params: Any) -> Any:
    """The whole ``replay learner --booster adabandit`` call (validation pass and replay pass)."""
    booster = make_booster(
        "adabandit", n_actions=K, n_learners=LEARNERS, rho=RHO, seed=0, fast_trees=fast_trees,
        **params,
    )
    return replay_learner(path, booster, name="adabandit", mode=mode, progress=True)  # type: ignore[arg-type]


def start_redis(tmp: Path) -> tuple[subprocess.Popen, int]:
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found (apt-get install -y redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(tmp),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis(port=port, socket_timeout=0.5).ping()
            return proc, port
        except redis.RedisError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("redis-server did not start") from None
            time.sleep(0.05)


def io_bench(path: Path, n: int, repeats: int, tmp: Path) -> dict[str, Any]:
    """Import and export throughput through a fresh redis-server, with their baselines."""
    import redis

    from service.domain import ModelConfig
    from service.eventlog import EventLog
    from service.eventlog.transfer import export_events, import_events

    proc, port = start_redis(tmp)
    try:
        client = redis.Redis(port=port)
        name = "bench"
        EventLog(client).add_config(
            ModelConfig(name=name, booster="uniform", actions=ACTIONS, params={"seed": 0})
        )
        stream = keys(name)["joined"]
        times = Times()

        def read_pages() -> int:
            after, count = "-", 0
            while True:
                lo = after if after == "-" else f"({after}"
                page = client.xrange(stream, min=lo, max="+", count=1000)
                if not page:
                    return count
                count += len(page)
                after = page[-1][0].decode()

        def export(fmt: str) -> int:
            with open(tmp / f"export.{fmt}", "w") as handle:
                return export_events(EventLog(client), name, fmt, handle, progress=False).exported  # type: ignore[arg-type]

        for r in range(repeats):
            print(f"io repeat {r + 1}/{repeats}", file=sys.stderr, flush=True)
            parsed = times.run("parse", lambda: parse_floor(path))
            check(parsed == n, f"parsed {parsed} events, expected {n}")
            client.delete(stream, f"bb:{{{name}}}:imports")
            report = times.run(
                "import",
                lambda: import_events(
                    EventLog(client), name, path, "jsonl", force=True, progress=False
                ),
            )
            check(report.imported == n, f"imported {report.imported} events, expected {n}")
            read = times.run("xrange", read_pages)
            check(read == n, f"read {read} stream entries, expected {n}")
            for fmt in ("jsonl", "dsjson"):
                exported = times.run(f"export_{fmt}", lambda fmt=fmt: export(fmt))
                check(exported == n, f"exported {exported} events, expected {n}")
                (tmp / f"export.{fmt}").unlink()
        info = client.info("server")
        memory = client.info("memory")["used_memory_human"]
        client.delete(stream)
        return {
            **times.to_dict(),
            "redis_version": info["redis_version"],
            "redis_memory_with_stream": memory,
        }
    finally:
        proc.terminate()
        proc.wait(10)


#: ``--trees`` and ``--cores``: label -> booster parameters, before first
VARIANTS = {
    "trees": {"river": {"fast_trees": False, "tree_core": "river"},
              "array": {"fast_trees": True, "tree_core": "river"}},
    "cores": {"river": {"tree_core": "river"}, "compiled": {"tree_core": "compiled"}},
}


def trees_bench(args: argparse.Namespace, which: str = "trees") -> dict[str, Any]:
    """AdaBandit replay of a ``--learner-events`` log in two settings (:data:`VARIANTS`)."""
    variants = VARIANTS[which]
    from learners.compiled import warm_up

    warm_up()  # the compiled kernels loaded (or compiled, once) before any timing
    tmp = Path(tempfile.mkdtemp(prefix="replay-trees-", dir=args.tmp))
    load_start = os.getloadavg()
    started = time.perf_counter()
    try:
        log = tmp / "log.jsonl"
        write_log(log, args.learner_events)
        out: dict[str, Any] = {}
        for mode in ("rejection", "weighted"):
            times = Times()
            estimates = {}
            for r in range(args.repeats):
                print(
                    f"adabandit {mode} repeat {r + 1}/{args.repeats}", file=sys.stderr, flush=True
                )
                for label, params in variants.items():
                    res = times.run(
                        label, lambda mode=mode, params=params: learner_replay(log, mode, **params)
                    )
                    info = res.to_dict(curve=False)
                    estimates[label] = (info["estimates"], info["learned"], info["matches"])
            before, after = list(variants)
            out[mode] = {
                "events": args.learner_events,
                **times.to_dict(),
                "same_estimates": estimates[before] == estimates[after],
                "estimates": estimates[after][0],
                "estimates_before": estimates[before][0],
                "learned": estimates[after][1],
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "command": "python -m benchmarks.speed.replay_speed " + " ".join(sys.argv[1:]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_start": load_start,
            "load_end": os.getloadavg(),
            "wall_minutes": (time.perf_counter() - started) / 60,
        },
        "repeats": args.repeats,
        "variants": variants,
        "adabandit": out,
    }


def trees_report(res: dict[str, Any]) -> str:
    if "compiled" in res.get("variants", {}):
        return cores_report(res)
    m = res["machine"]
    lines = [
        f"Command: `{res['command']}` ({res['date']}; {m['cpus']} CPUs, shared; CPython "
        f"{m['python']}; load average {[round(x, 2) for x in m['load_start']]} at the start, "
        f"{[round(x, 2) for x in m['load_end']]} at the end; {m['wall_minutes']:.1f} min). "
        f"Repeats: {res['repeats']}, River and array alternating; medians; events per CPU second.",
        "",
        "| AdaBandit N=10 replay | events | learned | River leaves events/s (CPU) | array leaves "
        "events/s (CPU) | after/before | CPU s per repeat (River; array) | same estimates |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, row in res["adabandit"].items():
        cpu = row["cpu_seconds"]
        river, array = median(cpu["river"]), median(cpu["array"])
        ratios = [r / a for r, a in zip(cpu["river"], cpu["array"])]
        lines.append(
            f"| {mode} | {row['events']:,} | {row['learned']:,} | {row['events'] / river:,.0f} | "
            f"**{row['events'] / array:,.0f}** | {median(ratios):.2f}x | "
            f"{', '.join(f'{x:.1f}' for x in cpu['river'])}; "
            f"{', '.join(f'{x:.1f}' for x in cpu['array'])} | "
            f"{'yes' if row['same_estimates'] else 'NO'} |"
        )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--learner-events", type=int, default=20_000)
    parser.add_argument("--io-events", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20k events, 1 repeat")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/replay-speed.json")
    parser.add_argument(
        "--plot", type=Path, default=ROOT / "benchmarks/figures/replay_adabandit.png"
    )
    parser.add_argument("--results", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument(
        "--tmp",
        type=Path,
        default=None,
        help="where the log goes (default: a temporary directory, removed at the end)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="print (and with --results write) the report of --out, run nothing",
    )
    parser.add_argument(
        "--trees",
        action="store_true",
        help="only the AdaBandit replay, River's tree leaves against the array leaves",
    )
    parser.add_argument(
        "--cores",
        action="store_true",
        help="only the AdaBandit replay, River's trees against the compiled core",
    )
    return parser


def _policy_part(log: Path, args: argparse.Namespace) -> dict[str, Any]:
    """1-2. The parse floor and the policy replays (IPS/SNIPS, then with DR), alternating."""
    bundle = train_policy(log, min(20_000, args.events))
    times = Times()
    last: Any = None
    dr_fit = []
    for r in range(args.repeats):
        print(f"policy repeat {r + 1}/{args.repeats}", file=sys.stderr, flush=True)
        parsed = times.run("parse", lambda: parse_floor(log))
        check(parsed == args.events, f"parsed {parsed} events, expected {args.events}")
        times.run(
            "ips_snips",
            lambda: replay_policy(log, bundle, name="bopl-regr", dr=False, progress=True),
        )
        last = times.run(
            "with_dr",
            lambda: replay_policy(log, bundle, name="bopl-regr", dr=True, progress=True),
        )
        dr_fit.append(last.extra["dr_seconds"])
    return {
        "events": args.events,
        **times.to_dict(),
        "dr_fit_wall_seconds": dr_fit,
        "estimates": last.to_dict(curve=False)["estimates"],
    }


def _learner_part(prefix: Path, args: argparse.Namespace) -> dict[str, Any]:
    """3. AdaBandit N = 10 on the prefix, both modes, against the booster calls alone."""
    events = [ev for _, ev in iter_log(prefix, "jsonl", ACTIONS) if isinstance(ev, LoggedEvent)]
    learner: dict[str, Any] = {}
    curves = {}
    for mode in ("rejection", "weighted"):
        times = Times()
        res: Any = None
        for r in range(args.repeats):
            print(
                f"adabandit {mode} repeat {r + 1}/{args.repeats}", file=sys.stderr, flush=True
            )
            res = times.run("replay", lambda mode=mode: learner_replay(prefix, mode))
            learned = times.run("floor", lambda mode=mode: booster_floor(events, mode))
            check(learned == res.learned, f"floor learned {learned}, replay {res.learned}")
            curves[mode] = res
        info = res.to_dict(curve=False)
        learner[mode] = {
            "events": args.learner_events,
            **times.to_dict(),
            "learned": info["learned"],
            "matches": info["matches"],
            "estimates": info["estimates"],
            "ess": info["ess"],
        }
    if args.plot:
        plot_curves(curves, args.plot)
    return learner


def _record(args: argparse.Namespace, argv: list[str] | None, results: dict[str, Any],
            log_info: dict[str, Any], load_start: tuple, started_all: float) -> dict[str, Any]:
    """The JSON of the run: command, machine, log, results."""
    size, write_seconds = log_info["bytes"], log_info["write_seconds"]
    return {
        "command": " ".join(
            ["python -m benchmarks.speed.replay_speed", *(sys.argv[1:] if argv is None else argv)]
        ),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "numpy": np.__version__,
            "river": metadata.version("river"),
            "xgboost": __import__("xgboost").__version__,
            "load_average_start": [round(v, 2) for v in load_start],
            "load_average_end": [round(v, 2) for v in os.getloadavg()],
        },
        "log": {
            "events": args.events,
            "bytes": size,
            "write_seconds": round(write_seconds, 1),
            "actions": K,
            "format": "jsonl",
        },
        "repeats": args.repeats,
        "results": results,
        "total_seconds": round(time.perf_counter() - started_all, 1),
    }


def cores_report(res: dict[str, Any]) -> str:
    """The ``--cores`` table: River's trees (array leaves) against the compiled core."""
    m = res["machine"]
    lines = [
        f"Command: `{res['command']}` ({res['date']}; {m['cpus']} CPUs; CPython {m['python']}; "
        f"load average {[round(x, 2) for x in m['load_start']]} at the start, "
        f"{[round(x, 2) for x in m['load_end']]} at the end; {m['wall_minutes']:.1f} min). "
        f"Repeats: {res['repeats']}, the two cores alternating; medians; events per CPU second.",
        "",
        "| AdaBandit N=10 replay | events | learned | River's trees events/s (CPU) | compiled "
        "events/s (CPU) | compiled / River | estimates (River; compiled) |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, row in res["adabandit"].items():
        cpu = row["cpu_seconds"]
        river, compiled = median(cpu["river"]), median(cpu["compiled"])
        ratios = [r / c for r, c in zip(cpu["river"], cpu["compiled"])]
        lines.append(
            f"| {mode} | {row['events']:,} | {row['learned']:,} | {row['events'] / river:,.0f} | "
            f"**{row['events'] / compiled:,.0f}** | {median(ratios):.1f}x | "
            f"{_estimates(row['estimates_before'])}; {_estimates(row['estimates'])} |"
        )
    return "\n".join(lines)


def _estimates(estimates: dict) -> str:
    return ", ".join(f"{k} {v['value']:.4f}" for k, v in estimates.items() if "value" in v)


def _trees_main(args: argparse.Namespace) -> int:
    which = "cores" if args.cores else "trees"
    out = args.out
    if out == ROOT / "benchmarks/out/replay-speed.json":
        out = out.with_name(f"replay-speed-{which}.json")
    if not args.report_only:
        out.write_text(json.dumps(trees_bench(args, which), indent=1))
    body = trees_report(json.loads(out.read_text()))
    print(body)
    if args.results:
        replace_block(f"replay-speed-{which}", body)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.trees or args.cores:
        return _trees_main(args)
    if args.report_only:
        body = report(json.loads(args.out.read_text()))
        print(body)
        if args.results:
            replace_block("replay-speed", body)
        return 0
    if args.quick:
        args.events, args.learner_events, args.io_events, args.repeats = 20_000, 2_000, 5_000, 1
    if min(args.events, args.learner_events, args.io_events, args.repeats) < 1:
        parser.error("counts must be >= 1")
    args.learner_events = min(args.learner_events, args.events)
    args.io_events = min(args.io_events, args.events)
    started_all = time.perf_counter()
    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="replay-speed-", dir=args.tmp))
    try:
        log = tmp / "log.jsonl"
        write_seconds = write_log(log, args.events)
        size = log.stat().st_size
        print(
            f"log: {args.events} events, {size / 1e6:.0f} MB, written in {write_seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        prefix = head(log, tmp / "prefix.jsonl", args.learner_events)
        io_log = head(log, tmp / "io.jsonl", args.io_events)
        results: dict[str, Any] = {"policy": _policy_part(log, args)}
        results["adabandit"] = _learner_part(prefix, args)
        # 4. import / export
        results["io"] = io_bench(io_log, args.io_events, args.repeats, tmp)
        results["io"]["events"] = args.io_events
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log_info = {"bytes": size, "write_seconds": write_seconds}
    record = _record(args, argv, results, log_info, load_start, started_all)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    body = report(record)
    print(body)
    if args.results:
        replace_block("replay-speed", body)
    return 0


def plot_curves(results: dict[str, Any], path: Path) -> None:
    """Both AdaBandit replays' estimates over the prefix, with the logged mean reward."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.0), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labels = {
        "rejection": "rejection sampling (matched events)",
        "weighted": "weighted (SNIPS), learning from every event",
    }
    for mode, res in results.items():
        ax.plot(*res.curve, label=f"AdaBandit N={LEARNERS}: {labels[mode]}", linewidth=1.5)
    any_result = next(iter(results.values()))
    ax.plot(
        *any_result.logged_curve,
        label="logging policy (uniform)",
        linestyle="--",
        color="gray",
        linewidth=1.2,
    )
    ax.set_xlabel("logged events replayed")
    ax.set_ylabel("estimated reward per decision")
    ax.set_ylim(0, 1)
    ax.set_title(f"replay of the synthetic log ({K} actions, uniform logging)")
    ax.grid(True, alpha=0.4)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")


def _row(what: str, n: int, times: dict[str, Any], key: str, base: str, base_key: str) -> str:
    """One table row from CPU medians: events/s, the baseline's events/s, the time ratio."""
    cpu, wall = times["cpu_seconds"][key], times["wall_seconds"][key]
    t, b = median(cpu), median(times["cpu_seconds"][base_key])
    per = ", ".join(f"{v:.1f}" for v in cpu)
    return (
        f"| {what} | {n:,} | {t:.1f} | **{n / t:,.0f}** | {n / b:,.0f} ({base}) | {b / t:.2f} "
        f"| {median(wall):.1f} | {per} |"
    )


def report(record: dict[str, Any]) -> str:
    """The RESULTS.md block."""
    res, m = record["results"], record["machine"]
    n = record["log"]["events"]
    pol, ada, io = res["policy"], res["adabandit"], res["io"]
    ni = io["events"]
    floor = "parse floor"
    rows = [
        "| what | events | CPU s | events/s (CPU) | baseline events/s (CPU) "
        "| baseline time / time | wall s | CPU s per repeat |",
        "|---|---|---|---|---|---|---|---|",
        _row("parse floor: read + validate (import parsers)", n, pol, "parse", "itself", "parse"),
        _row("policy replay: IPS + SNIPS", n, pol, "ips_snips", floor, "parse"),
        _row("policy replay: IPS + SNIPS + DR (cross-fitted)", n, pol, "with_dr", floor, "parse"),
    ]
    for mode, info in ada.items():
        what = f"AdaBandit N={LEARNERS}, {mode} (prefix; validation + replay)"
        rows.append(_row(what, info["events"], info, "replay", "booster calls alone", "floor"))
    rows.append(_row("import jsonl (validate, then write)", ni, io, "import", floor, "parse"))
    for fmt in ("jsonl", "dsjson"):
        rows.append(_row(f"export {fmt}", ni, io, f"export_{fmt}", "bare XRANGE pages", "xrange"))

    def million_minutes(mode: str) -> float:
        rate = ada[mode]["events"] / median(ada[mode]["cpu_seconds"]["replay"])
        return n / rate / 60

    est = pol["estimates"]
    rej, wei = ada["rejection"], ada["weighted"]
    lines = [
        "### Replay, import and export throughput",
        "",
        "`benchmarks/speed/replay_speed.py`.",
        "",
        f"Command: `{record['command']}` (repeats: {record['repeats']}, each measure alternating "
        "with its baseline; medians).",
        "",
        f"Log: {n:,} synthetic joined events (our JSON lines, "
        f"{record['log']['bytes'] / 1e6:.0f} MB), {K} actions, uniform logging, one correct "
        "action per context (10% label noise); see the script's docstring. The AdaBandit rows "
        f"replay the first {rej['events']:,} events: the whole million would take about "
        f"{million_minutes('rejection'):.0f} min (rejection) and "
        f"{million_minutes('weighted'):.0f} min (weighted) of CPU per repeat at the measured "
        f"rates. Import and export use the first {ni:,} events, through a local redis-server "
        f"{io['redis_version']} (no persistence).",
        "",
        "Rates are events per CPU second of the benchmark process (`time.process_time`): the "
        "machine was shared and background jobs were paused at times, which wall time counts and "
        "CPU time does not; median wall seconds are shown too. For import and export the "
        "redis-server's own CPU is not in the CPU column (it is in the wall column).",
        "",
        *rows,
        "",
        f"Estimates in the last repeat: the policy on {n:,} events: IPS {est['ips']['value']:.4f},"
        f" SNIPS {est['snips']['value']:.4f}, DR {est['dr']['value']:.4f} "
        f"[{est['dr']['low']:.4f}, {est['dr']['high']:.4f}]; logging policy "
        f"{est['logged']['value']:.4f}. AdaBandit: rejection "
        f"{rej['estimates']['replay']['value']:.4f} on {rej['matches']:,} matched events, "
        f"weighted SNIPS {wei['estimates']['snips']['value']:.4f} (effective n "
        f"{wei['ess']:,.0f}); both curves in `benchmarks/figures/replay_adabandit.png`.",
        "",
        f"Machine: {m['cpus']} CPUs, shared with other work (load average "
        f"{m['load_average_start']} at the start, {m['load_average_end']} at the end), CPython "
        f"{m['python']}, numpy {m['numpy']}, river {m['river']}, xgboost {m['xgboost']}; run "
        f"{record['date']}, {record['total_seconds'] / 60:.0f} min of wall time in all. Raw "
        "numbers: `benchmarks/out/replay-speed.json`.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
