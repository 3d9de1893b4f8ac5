"""What a replay estimated (:class:`ReplayResult`: its JSON and table forms, :func:`plot_replay`),
and the per-event arithmetic the replays share: curves over the stream, importance weights."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from boosters.ope import Estimate, estimate_all
from service.formats.reader import LineError
from service.replay.reading import LogScan

__all__ = [
    "CURVE_POINTS",
    "ReplayResult",
    "downsample",
    "effective_size",
    "logged_column",
    "plot_replay",
    "running_mean",
    "running_ratio",
    "scan_fields",
    "undefined_notes",
    "weighted",
]

#: Points kept in a result's curves (the per-event arrays are downsampled to this many).
CURVE_POINTS = 500


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def downsample(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(event number, value)`` at up to :data:`CURVE_POINTS` evenly spread events."""
    n = values.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    idx = np.unique(np.linspace(0, n - 1, min(n, CURVE_POINTS)).round().astype(np.int64))
    return idx + 1, values[idx]


def logged_column(pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(actions, target)`` for :mod:`boosters.ope` from pi(a_t|x_t) alone.

    IPS and SNIPS read only the target's probability of each logged action, so a one-column
    target holding pi(a_t|x_t), with every logged action mapped to that column, gives the same
    estimate as the full (n, k) matrix without building it.
    """
    return np.zeros(pi.shape[0], dtype=np.intp), pi[:, None]


def scan_fields(scan: LogScan, path: Path, fmt: str, actions: list[str]) -> dict[str, Any]:
    """The :class:`ReplayResult` fields that come from the validation pass ``scan``."""
    return {
        "log": str(path), "format": fmt, "actions": actions, "uniform_log": scan.uniform,
        "lines": scan.lines, "ignored": scan.ignored, "skipped": scan.errors,
        "scan_seconds": scan.seconds,
    }


def effective_size(w: np.ndarray) -> float:
    """Effective sample size of the importance weights ``w``: (sum w)^2 / sum w^2 (0 if all 0).

    >>> effective_size(np.array([1.0, 1.0, 0.0])), effective_size(np.zeros(2))
    (2.0, 0.0)
    """
    total, squares = float(w.sum()), float(np.dot(w, w))
    return total * total / squares if squares > 0 else 0.0


def running_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``sum num[: i + 1] / sum den[: i + 1]`` for every i (NaN while the denominator is 0)."""
    cn, cd = np.cumsum(num), np.cumsum(den)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cd > 0, cn / np.where(cd > 0, cd, 1.0), np.nan)


def running_mean(x: np.ndarray) -> np.ndarray:
    """Mean of ``x[: i + 1]`` for every i (empty for an empty ``x``)."""
    return running_ratio(x, np.ones(len(x)))


def weighted(
    pi: np.ndarray, p: np.ndarray, r: np.ndarray, estimators: tuple[str, ...], level: float
) -> tuple[dict[str, Estimate], dict[str, str], np.ndarray]:
    """``(estimates, undefined, weights)`` of a policy known by pi(a_t|x_t) alone on events
    logged with propensities ``p`` and rewards ``r`` (:func:`boosters.ope.estimate_all`)."""
    column, target = logged_column(pi)
    estimates, undefined = estimate_all(column, p, r, target, estimators=estimators, level=level)
    return estimates, undefined, pi / p


def undefined_notes(undefined: dict[str, str]) -> list[str]:
    """The notes of the estimates :func:`boosters.ope.estimate_all` found undefined."""
    return [f"{name.upper()} undefined: {reason}" for name, reason in undefined.items()]


@dataclass
class ReplayResult:
    """What a replay estimated.

    ``estimates`` by name: ``replay`` (rejection sampling: mean reward of the matched events),
    ``snips`` and ``ips`` (importance-weighted), ``dr`` (doubly robust, policies), ``logged``
    (the logging policy's on-policy mean reward, the baseline). ``primary`` names the one to read.
    ``curve`` is the primary estimate over the stream (event number, value), ``logged_curve`` the
    logged mean reward over the stream.
    """

    kind: str  # "learner", "policy" or "target"
    name: str
    mode: str  # "rejection", "weighted", "policy" or "target"
    log: str
    format: str
    actions: list[str]
    uniform_log: bool
    lines: int
    events: int
    ignored: int
    skipped: list[LineError]
    estimates: dict[str, Estimate]
    primary: str
    seconds: float
    scan_seconds: float = 0.0
    matches: int | None = None
    learned: int | None = None
    ess: float | None = None
    curve: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0, dtype=np.int64), np.zeros(0))
    )
    logged_curve: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0, dtype=np.int64), np.zeros(0))
    )
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def events_per_second(self) -> float:
        """Events replayed per second of :attr:`seconds` (the replay pass)."""
        return self.events / max(self.seconds, 1e-9)

    def to_dict(self, curve: bool = True, max_errors: int = 100) -> dict[str, Any]:
        """JSON-ready form (non-finite numbers become None)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "mode": self.mode,
            "log": self.log,
            "format": self.format,
            "actions": self.actions,
            "uniform_log": self.uniform_log,
            "lines": self.lines,
            "events": self.events,
            "ignored": self.ignored,
            "skipped_lines": len(self.skipped),
            "first_skipped": [str(e) for e in self.skipped[:max_errors]],
            "primary": self.primary,
            "estimates": {k: v.to_dict() for k, v in self.estimates.items()},
            "matches": self.matches,
            "learned": self.learned,
            "ess": None if self.ess is None else _finite(self.ess),
            "seconds": round(self.seconds, 4),
            "scan_seconds": round(self.scan_seconds, 4),
            "events_per_second": round(self.events_per_second, 1),
            "params": self.params,
            **self.extra,
        }
        if self.notes:
            out["notes"] = self.notes
        if curve:
            out["curve"] = {
                "events": self.curve[0].tolist(),
                "estimate": [_finite(v) for v in self.curve[1].tolist()],
                "logged": [_finite(v) for v in self.logged_curve[1].tolist()],
            }
        return out

    def table(self) -> str:
        """The human-readable summary."""
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        modes = {
            "rejection": "rejection sampling (Li et al. 2011): kept when the action matches",
            "weighted": "importance-weighted progressive estimate (SNIPS), learning off-policy",
            "policy": "off-policy estimates of a fixed policy (IPS, SNIPS, DR)",
            "target": "live service: decisions, logged reward on matching actions",
        }
        logging = "uniform" if self.uniform_log else "non-uniform"
        lines = [
            f"replay:       {self.kind} {self.name}" + (f" ({shown})" if shown else ""),
            f"log:          {self.log} ({self.format}): {self.events} events, {logging} logging "
            f"over {len(self.actions)} actions"
            + (f", {len(self.skipped)} bad line(s) skipped" if self.skipped else "")
            + (f", {self.ignored} ignored" if self.ignored else ""),
            f"mode:         {modes.get(self.mode, self.mode)}",
            "",
            f"{'estimator':<14}{'value':>9}  {'interval (' + format(self.level, '.0%') + ')':<20}"
            f"{'n':>9}",
        ]
        labels = {
            "replay": "replay",
            "snips": "SNIPS",
            "ips": "IPS",
            "dr": "DR",
            "logged": "logging policy",
        }
        for key, est in self.estimates.items():
            value = "-" if not math.isfinite(est.value) else f"{est.value:.4f}"
            if math.isfinite(est.low) and math.isfinite(est.high):
                interval = f"[{est.low:.4f}, {est.high:.4f}]"
            else:
                interval = "-"
            mark = " *" if key == self.primary else ""
            lines.append(f"{labels.get(key, key) + mark:<14}{value:>9}  {interval:<20}{est.n:>9}")
        lines.append("")
        if self.matches is not None:
            share = self.matches / self.events if self.events else 0.0
            lines.append(f"matches:      {self.matches} / {self.events} ({share:.1%})")
        if self.learned is not None:
            lines.append(f"learned:      {self.learned} events")
        if self.ess is not None and math.isfinite(self.ess):
            how = "matched events" if self.mode == "rejection" else "(sum w)^2 / sum w^2"
            lines.append(f"effective n:  {self.ess:.1f} ({how})")
        for key, value in self.extra.items():
            if key == "latency_ms":
                for call, q in value.items():
                    lines.append(f"{call + ' ms:':<14}p50 {q['p50']:.2f}, p99 {q['p99']:.2f}")
            elif key == "decisions_per_second":
                lines.append(f"decisions/s:  {value}")
            elif key == "http_errors":
                lines.append(f"HTTP errors:  {value}")
        lines.append(
            f"events/s:     {self.events_per_second:.1f} "
            f"(replay {self.seconds:.2f} s, validation {self.scan_seconds:.2f} s)"
        )
        lines.extend(f"note:         {note}" for note in self.notes)
        lines.append("* primary estimate")
        return "\n".join(lines)

    @property
    def level(self) -> float:
        """The intervals' level."""
        return next(iter(self.estimates.values())).level if self.estimates else 0.95


def plot_replay(result: ReplayResult, path: str | Path) -> Path:
    """The primary estimate over the stream, and the logged policy's mean reward, as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    steps, values = result.curve
    if steps.size == 0:
        raise ValueError("the replay has no curve to plot (no event)")
    path = Path(path)
    fig = Figure(figsize=(7.0, 4.2), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    label = {"replay": "replay (matched events)", "snips": "SNIPS", "dr": "DR"}.get(
        result.primary, result.primary
    )
    ax.plot(steps, values, label=f"{result.name}: {label}", linewidth=1.5)
    if result.logged_curve[0].size:
        ax.plot(
            *result.logged_curve,
            label="logging policy (mean logged reward)",
            linewidth=1.2,
            linestyle="--",
            color="gray",
        )
    est = result.estimates[result.primary]
    if math.isfinite(est.low) and math.isfinite(est.high):
        ax.axhspan(
            est.low,
            est.high,
            color="C0",
            alpha=0.12,
            label=f"final {format(est.level, '.0%')} interval",
        )
    ax.set_xlabel("logged events replayed")
    ax.set_ylabel("estimated reward per decision")
    finite = values[np.isfinite(values)]
    top = max(1.0, float(finite.max()) if finite.size else 1.0)
    ax.set_ylim(0.0, min(top * 1.05, 2.0))
    ax.set_title(f"replay of {Path(result.log).name} ({result.mode}, {result.events} events)")
    ax.grid(True, alpha=0.4)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path
