"""The report of :mod:`benchmarks.load.service_load`: the machine, the verdicts against the
targets, and the Markdown tables (the RESULTS.md block) of one run and of repeated runs."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.load.client import BARE_PATH, TARGET_P99_MS
from benchmarks.stats import median

#: predict/s under the pair load against bare req/s
TARGET_RATIO = 0.5


def machine_notes() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {}
    for dist in ("fastapi", "starlette", "uvicorn", "httpx", "redis", "river", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    redis_version = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        redis_version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    from importlib.util import find_spec

    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu": cpu,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "versions": versions,
        "redis_server": redis_version,
        "uvicorn_extras": {m: find_spec(m) is not None for m in ("uvloop", "httptools")},
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _learner_verdict(lag: dict[str, Any], rate: float) -> tuple[bool, str]:
    """Whether the learner kept up with the open loop at ``rate`` pairs/s, and how far behind."""
    allowed = max(10, math.ceil(rate))  # one second of feedback at the offered rate
    keeps_up = lag["drained"] and lag["backlog_at_end"] <= allowed
    if keeps_up:
        return True, (
            f"backlog {lag['backlog_at_end']} at the end of the open loop "
            f"(<= {allowed}, 1 s of feedback), drained in {lag['drain_seconds']:.2f} s"
        )
    if lag["drained"]:
        return False, (
            f"behind by {lag['backlog_at_end']} feedback events "
            f"({lag['backlog_at_end'] / rate:.1f} s of feedback) at the end of the open loop; "
            f"drained in {lag['drain_seconds']:.1f} s"
        )
    return False, (
        f"behind by {lag['backlog_at_end']} feedback events "
        f"({lag['backlog_at_end'] / rate:.1f} s of feedback); "
        f"{lag['remaining_after_timeout']} still unapplied after "
        f"{lag['drain_timeout_seconds']:.0f} s"
    )


def _notes(report: dict[str, Any], completed: float) -> list[str]:
    """What may bias the figures: a busy client, an idle service, errors, late or lost pairs."""
    bare, open_ = report["phases"]["bare"], report["phases"]["open"]
    notes = []
    client_max = bare.get("client_cpu_utilisation_max_process", 0.0)
    service_cpu = report["windows"]["bare"].get("service_cpu_utilisation")
    if client_max >= 0.9:
        notes.append(
            f"a load-generator process used {client_max:.0%} of a core in the bare phase: bare "
            "req/s may be client-bound, which would overstate the ratio (try --generators 2+)"
        )
    if service_cpu is not None and service_cpu < 0.8:
        notes.append(
            f"the service used only {service_cpu:.0%} of a core in the bare phase, so bare req/s "
            "was limited by the load generator or by CPU contention, not by the service: the "
            "ratio is then an upper bound"
        )
    total_errors = sum(phase["errors"]["total"] for phase in report["phases"].values())
    if total_errors:
        notes.append(f"{total_errors} failed requests (see phases.*.errors in the JSON)")
    late = open_["latency"]["start_delay"].get("p99_ms")
    if late is not None and late > 5:
        notes.append(
            f"open-loop pairs started up to {late:.0f} ms after their scheduled time (p99; busy "
            "load generator or all connections in flight); this wait is part of the latencies"
        )
    if completed < 0.99:
        notes.append(f"only {completed:.1%} of the scheduled open-loop pairs completed")
    return notes


def _saturation_text(sat: dict[str, Any]) -> str:
    drained = (
        f", drained in {sat['drain_seconds']:.1f} s"
        if sat["drained"]
        else f", {sat['remaining_after_timeout']} left after {sat['drain_timeout_seconds']:.0f} s"
    )
    return f"at saturation: backlog {sat['backlog_at_end']} at the end" + drained


def evaluate(report: dict[str, Any]) -> dict[str, Any]:
    """Pass/fail against the targets, with the numbers behind each verdict."""
    bare = report["phases"]["bare"]
    pairs = report["phases"]["pairs"]
    open_ = report["phases"]["open"]
    ratio = pairs["predict_per_second"] / bare["requests_per_second"]
    p99 = open_["latency"]["predict"].get("p99_ms")
    completed = open_["completed_pairs"] / max(1, open_["scheduled_pairs"])
    rate = open_["offered_pairs_per_second"]
    keeps_up, lag_text = _learner_verdict(report["learner"]["open"], rate)
    out = {
        "ratio": {
            "value": ratio,
            "target": f">= {TARGET_RATIO}",
            "pass": ratio >= TARGET_RATIO,
            "text": f"predict/s under pair load / bare req/s = {pairs['predict_per_second']:.0f} "
            f"/ {bare['requests_per_second']:.0f} = {ratio:.2f}",
        },
        "p99": {
            "value": p99,
            "target": f"<= {TARGET_P99_MS} ms",
            "pass": p99 is not None and p99 <= TARGET_P99_MS and completed >= 0.99,
            "text": f"p99 predict latency at {rate:.0f} pairs/s (half the sustained saturation "
            f"rate) = {_ms(p99)} ms",
        },
        "learner": {
            "pass": keeps_up,
            "text": lag_text,
            "saturation_text": _saturation_text(report["learner"]["pairs"]),
        },
        "notes": _notes(report, completed),
    }
    alone = report["phases"].get("predicts")
    if alone is not None:
        value = alone["predict_per_second"] / bare["requests_per_second"]
        out["ratio_alone"] = {
            "value": value,
            "text": f"predicts alone / bare req/s = {alone['predict_per_second']:.0f} / "
            f"{bare['requests_per_second']:.0f} = {value:.2f}",
        }
    fast = report["phases"].get("open_fast")
    if fast is not None:
        fast_p99 = fast["latency"]["predict"].get("p99_ms")
        fast_lag = report["learner"]["open_fast"]
        out["p99_closed_half"] = {
            "value": fast_p99,
            "text": f"p99 predict latency at {fast['offered_pairs_per_second']:.0f} pairs/s (half "
            f"the closed-loop rate) = {_ms(fast_p99)} ms; learner backlog at its end "
            f"{fast_lag['backlog_at_end']}",
        }
    return out


def _row(name: str, rate: str, lat: dict[str, Any], client: float, server: Any) -> str:
    server_text = "-" if server is None else f"{server:.0%}"
    return (
        f"| {name} | {rate} | {_ms(lat.get('p50_ms'))} | {_ms(lat.get('p99_ms'))} | "
        f"{_ms(lat.get('max_ms'))} | {lat.get('n', 0)} | {client:.0%} | {server_text} |"
    )


def _intro_lines(report: dict[str, Any]) -> list[str]:
    """The command, the set-up and the machine."""
    cfg, m = report["config"], report["machine"]
    return [
        f"Command: `{cfg['command']}`",
        "",
        f"Phases of {cfg['seconds']:g} s (after a {cfg['warmup']:g} s warm-up in closed loops), "
        f"{cfg['concurrency']} connections in the closed loops, open loop at half the sustained "
        f"saturation pair rate ({cfg['schedule']} arrivals, up to {cfg['open_max_inflight']} "
        "pairs in flight, latency from the scheduled send time), and a second one at half the "
        "closed-loop rate when that is higher. "
        f"Model: adabandit, {json.dumps(cfg['model_params'])}, "
        + (
            f"{len(cfg['actions'])} actions; contexts of 20 standard-normal features, the best "
            "action the argmax of a fixed random linear score, reward 1 iff it is played"
            if cfg.get("workload") == "numeric20"
            else f"actions = Car's {len(cfg['actions'])} classes; contexts = Car rows (seeded "
            "shuffle), reward 1 iff the played action is the row's class"
        )
        + ". Service: "
        + (
            "`uvicorn --factory service.api.app:create_app` (API, one worker) and a separate "
            "`python -m service learner` process"
            if cfg.get("split")
            else "`python -m service serve` (API + learner thread, one process)"
        )
        + f" against its own redis-server ({cfg['redis_persistence']}); "
        f"load generator: {cfg['generators']} separate Python process(es) "
        f"({cfg.get('client', 'httpx')} HTTP/1.1 client, asyncio); "
        "all on 127.0.0.1. Load-gen CPU = CPU of the generator process(es), service CPU = CPU "
        "of the service process (1 = 100% of one core). "
        f"Bare endpoint: `GET {BARE_PATH}` of the same server (constant body, no Redis).",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['python']}, {m['platform']}; "
        f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_at_start'] or [])}; "
        f"uvicorn {m['versions'].get('uvicorn', '?')} "
        f"(uvloop {'yes' if m['uvicorn_extras']['uvloop'] else 'no'}, "
        f"httptools {'yes' if m['uvicorn_extras']['httptools'] else 'no'}), "
        f"fastapi {m['versions'].get('fastapi', '?')}, {m['redis_server'].split(' sha=')[0]}. "
        f"Run {report['started_at']}, {report['elapsed_seconds']:.0f} s in all.",
        "",
    ]


def _phase_table(report: dict[str, Any]) -> list[str]:
    """Throughput, latency and CPU of every phase."""
    bare, pairs, open_ = (report["phases"][k] for k in ("bare", "pairs", "open"))
    win = report["windows"]
    lines = [
        "| phase | throughput | p50 ms | p99 ms | max ms | n | load-gen CPU | service CPU |",
        "|---|---|---|---|---|---|---|---|",
        _row(
            f"bare `GET {BARE_PATH}`, closed loop",
            f"{bare['requests_per_second']:.0f} req/s",
            bare["latency"],
            bare["client_cpu_utilisation"],
            win["bare"].get("service_cpu_utilisation"),
        ),
        *_predicts_row(report),
        _row(
            "predict (in pairs), closed loop",
            f"{pairs['predict_per_second']:.0f} req/s ({pairs['pairs_per_second']:.0f} pairs/s)",
            pairs["latency"]["predict"],
            pairs["client_cpu_utilisation"],
            win["pairs"].get("service_cpu_utilisation"),
        ),
        _row(
            "feedback (in pairs), closed loop",
            f"{pairs['feedback_per_second']:.0f} req/s",
            pairs["latency"]["feedback"],
            pairs["client_cpu_utilisation"],
            win["pairs"].get("service_cpu_utilisation"),
        ),
        _row(
            f"predict, open loop @ {open_['offered_pairs_per_second']:.0f} pairs/s",
            f"{open_['achieved_pairs_per_second']:.0f} pairs/s",
            open_["latency"]["predict"],
            open_["client_cpu_utilisation"],
            win["open"].get("service_cpu_utilisation"),
        ),
        _row(
            "feedback, open loop",
            "",
            open_["latency"]["feedback"],
            open_["client_cpu_utilisation"],
            win["open"].get("service_cpu_utilisation"),
        ),
        _row(
            "pair (predict + feedback), open loop",
            "",
            open_["latency"]["pair"],
            open_["client_cpu_utilisation"],
            win["open"].get("service_cpu_utilisation"),
        ),
    ]
    fast = report["phases"].get("open_fast")
    if fast is not None:
        lines += [
            _row(
                f"predict, open loop @ {fast['offered_pairs_per_second']:.0f} pairs/s "
                "(half the closed-loop rate)",
                f"{fast['achieved_pairs_per_second']:.0f} pairs/s",
                fast["latency"]["predict"],
                fast["client_cpu_utilisation"],
                win["open_fast"].get("service_cpu_utilisation"),
            ),
            _row(
                "feedback, same open loop",
                "",
                fast["latency"]["feedback"],
                fast["client_cpu_utilisation"],
                win["open_fast"].get("service_cpu_utilisation"),
            ),
        ]
    return lines


def _predicts_row(report: dict[str, Any]) -> list[str]:
    """The predicts-alone phase's row (none in reports made before it existed)."""
    alone = report["phases"].get("predicts")
    if alone is None:
        return []
    return [_row("predict alone (no feedback), closed loop",
                 f"{alone['predict_per_second']:.0f} req/s", alone["latency"]["predict"],
                 alone["client_cpu_utilisation"],
                 report["windows"]["predicts"].get("service_cpu_utilisation"))]


def _learner_lines(report: dict[str, Any]) -> list[str]:
    """The sustained rate and the learner's backlog by phase."""
    pairs, win = report["phases"]["pairs"], report["windows"]
    lines: list[str] = []
    sustained = pairs.get("sustained_pairs_per_second")
    lines += [
        "",
        "Sustained rate (the closed loop's pairs spread over its window plus the learner's "
        "drain time afterwards): "
        + ("-" if sustained is None else f"{sustained:.0f} pairs/s")
        + f" against {pairs['pairs_per_second']:.0f} pairs/s answered in the closed loop.",
        "",
        "Learner (backlog = feedback recorded - feedback joined and applied by the learner):",
        "",
        "| phase | feedback/s | learned/s | max backlog seen | backlog at end | drained in |",
        "|---|---|---|---|---|---|",
    ]
    for key, name in (
        ("pairs", "saturation"),
        ("open", "open loop"),
        ("open_fast", "open loop at half the closed-loop rate"),
    ):
        if key not in win:
            continue
        w, d = win[key], report["learner"][key]
        drained = (
            f"{d['drain_seconds']:.2f} s"
            if d["drained"]
            else f"not in {d['drain_timeout_seconds']:.0f} s ({d['remaining_after_timeout']} left)"
        )
        lines.append(
            f"| {name} | {w.get('feedback_per_second', 0):.0f} | "
            f"{w.get('learned_per_second', 0):.0f} | {w.get('max_backlog', '-')} | "
            f"{d['backlog_at_end']} | {drained} |"
        )
    return lines


def _slow_lines(report: dict[str, Any]) -> list[str]:
    """When predicts were slow in the open loops, and when the serving model changed."""
    win = report["windows"]
    lines: list[str] = []
    lines += ["", f"When predicts took over {TARGET_P99_MS:g} ms in the open loops (seconds into "
              "the window, count, slowest), and when the serving process's model changed (in "
              "the split shape: a snapshot swapped into the API replica):", ""]
    for key, name in (("open", "open loop"), ("open_fast", "open loop at half the closed-loop "
                                                          "rate")):
        if key not in report["phases"]:
            continue
        bursts = "; ".join(
            f"{b['from_s']:.1f}-{b['to_s']:.1f} s: {b['count']} ({b['max_ms']:.0f} ms)"
            for b in report["phases"][key].get("slow_bursts", [])
        )
        changes = win.get(key, {}).get("version_changes_s", [])
        moved = (
            f"{len(changes)} times (every learned event)"
            if not report["config"]["split"]
            else ", ".join(f"{t:.1f} s" for t in changes) or "never"
        )
        lines.append(f"- {name}: slow predicts {bursts or 'none'}; model changed {moved}")
    return lines


def _target_lines(report: dict[str, Any]) -> list[str]:
    """The verdicts against the targets, and the notes."""
    bare, pairs = report["phases"]["bare"], report["phases"]["pairs"]
    verdict = report["targets"]
    lines: list[str] = []
    lines += [
        "",
        "Targets:",
        "",
    ]
    for key, label in (
        ("ratio", f"predict throughput >= {TARGET_RATIO} x bare"),
        ("p99", f"p99 predict latency <= {TARGET_P99_MS:g} ms at half saturation"),
        ("learner", "learner keeps up"),
    ):
        v = verdict[key]
        lines.append(f"- {label}: **{'PASS' if v['pass'] else 'FAIL'}** - {v['text']}")
    lines.append(f"- (learner {verdict['learner']['saturation_text']})")
    if "p99_closed_half" in verdict:
        lines.append(f"- ({verdict['p99_closed_half']['text']})")
    if "ratio_alone" in verdict:
        lines.append(f"- ({verdict['ratio_alone']['text']})")
    ceiling = report["learner"].get("ceiling")
    if ceiling is not None and ceiling["learned_per_second"] is not None:
        lines.append(f"- (the learner alone: {ceiling['learned_per_second']:.0f} events/s, a "
                     f"backlog of {ceiling['backlog']} applied in "
                     f"{ceiling['drain_seconds']:.1f} s)")
    total_ratio = pairs["requests_per_second"] / bare["requests_per_second"]
    lines.append(
        f"- (all requests under pair load, predict + feedback: "
        f"{pairs['requests_per_second']:.0f} req/s = {total_ratio:.2f} x bare)"
    )
    for note in verdict["notes"]:
        lines.append(f"- note: {note}")
    return lines


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The human-readable table (also the body of the RESULTS.md block)."""
    return [*_intro_lines(report), *_phase_table(report), *_learner_lines(report),
            *_slow_lines(report), *_target_lines(report)]


def repeat_row(report: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run that the targets read."""
    verdict = evaluate(report)
    phases = report["phases"]
    return {
        "bare_req_per_s": phases["bare"]["requests_per_second"],
        "pairs_per_s": phases["pairs"]["pairs_per_second"],
        "sustained_pairs_per_s": phases["pairs"].get("sustained_pairs_per_second"),
        "ratio": verdict["ratio"]["value"],
        "alone": verdict.get("ratio_alone", {}).get("value"),
        "learner_alone": (report["learner"].get("ceiling") or {}).get("learned_per_second"),
        "open_rate": phases["open"]["offered_pairs_per_second"],
        "p99_ms": phases["open"]["latency"]["predict"].get("p99_ms"),
        "p50_ms": phases["open"]["latency"]["predict"].get("p50_ms"),
        "learner_keeps_up": verdict["learner"]["pass"],
    }


def _two(value: float | None) -> str:
    """Two decimals, or "-" for a figure the run did not measure."""
    return "-" if value is None or value != value else f"{value:.2f}"


def repeat_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A table of the repeated runs (the tables above are the last run's) and their medians.

    >>> rows = [dict(bare_req_per_s=b, pairs_per_s=1.0, sustained_pairs_per_s=1.0, ratio=r,
    ...              alone=2 * r, open_rate=0.5, p99_ms=p, p50_ms=1.0, learner_keeps_up=True)
    ...         for b, r, p in ((10.0, 0.1, 30.0), (20.0, 0.2, 10.0), (30.0, 0.3, 20.0))]
    >>> repeat_lines(rows)[-1]
    '| **median** | 20 | 1 | 1 | **0.20** | 0.40 | 0 | 1.0 | **20.0** | 3 of 3 |'
    """
    def med(key: str) -> float:
        values = [r[key] for r in rows if r.get(key) is not None]
        return median(values) if values else float("nan")

    lines = [
        f"Repeated runs ({len(rows)}; the tables above are the last one's), and their medians:",
        "",
        "| run | bare req/s | pairs/s | sustained pairs/s | predict/bare | alone/bare "
        "| open loop pairs/s | p50 ms | p99 ms | learner keeps up |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {r['bare_req_per_s']:.0f} | {r['pairs_per_s']:.0f} | "
            f"{r['sustained_pairs_per_s'] or 0:.0f} | {r['ratio']:.2f} | "
            f"{_two(r.get('alone'))} | {r['open_rate']:.0f} | "
            f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {'yes' if r['learner_keeps_up'] else 'no'} |"
        )
    kept = sum(bool(r["learner_keeps_up"]) for r in rows)
    lines.append(
        f"| **median** | {med('bare_req_per_s'):.0f} | {med('pairs_per_s'):.0f} | "
        f"{med('sustained_pairs_per_s'):.0f} | **{med('ratio'):.2f}** | "
        f"{_two(med('alone'))} | {med('open_rate'):.0f} | "
        f"{med('p50_ms'):.1f} | **{med('p99_ms'):.1f}** | {kept} of {len(rows)} |"
    )
    return lines
