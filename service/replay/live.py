"""Replay against a running service over HTTP (:func:`replay_target`): the log's contexts sent
to ``/predict``, the logged reward to ``/feedback`` when the service's action matches; rates,
latencies and estimates (docs/replay.md, "Replay against a service")."""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from boosters.ope import Estimate, mean_estimate
from service.formats.progress import bar as progress_bar
from service.formats.reader import LineError
from service.replay.reading import (
    LogFormat,
    LoggedEvent,
    LogScan,
    OnError,
    RepeatedIds,
    Repeats,
    ReplayError,
    check_actions,
    check_common,
    iter_log,
    open_log,
    usable_scan,
)
from service.replay.result import (
    ReplayResult,
    downsample,
    effective_size,
    running_mean,
    running_ratio,
    scan_fields,
    undefined_notes,
    weighted,
)

__all__ = ["replay_target"]


def _percentiles(ms: np.ndarray) -> dict[str, float]:
    if ms.size == 0:
        return {"p50": math.nan, "p99": math.nan}
    p50, p99 = np.percentile(ms, [50, 99])
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3)}


class _Live:
    """The shared state of the closed-loop workers: the event stream, and per event the logged
    reward and propensity, the service's probability of the logged action, whether it matched,
    whether its feedback was accepted, and each call's latency."""

    def __init__(self, stream: Iterator[LoggedEvent], n: int, model: str, actions: list[str],
                 prefix: str, headers: dict[str, str]) -> None:
        self.stream, self.counter = stream, iter(range(n))
        self.model, self.actions, self.prefix, self.headers = model, actions, prefix, headers
        self.index = {aid: i for i, aid in enumerate(actions)}
        self.rewards, self.props = np.empty(n), np.empty(n)
        self.target = np.full(n, np.nan)
        self.matched = np.zeros(n, dtype=bool)
        self.done = np.zeros(n, dtype=bool)
        self.fed = np.zeros(n, dtype=bool)  # feedback accepted
        self.predict_ms, self.feedback_ms = np.full(n, np.nan), np.full(n, np.nan)
        self.failures: list[str] = []
        self.fatal: list[str] = []
        self.lock = threading.Lock()

    def _next(self) -> tuple[int, LoggedEvent] | None:
        with self.lock:
            t = next(self.counter, None)
            ev = next(self.stream, None) if t is not None else None
        return None if ev is None or t is None else (t, ev)

    def _fail(self, message: str, fatal: bool = False) -> None:
        with self.lock:
            (self.fatal if fatal else self.failures).append(message)

    def work(self, http: Any, bar: Any) -> None:
        """Replay events until the stream ends or the service refuses the replay."""
        while not self.fatal:
            item = self._next()
            if item is None:
                return
            t, ev = item
            answer = self._predict(http, t, ev)
            if answer is None:
                continue
            self.target[t] = float(answer["probabilities"].get(self.actions[ev.action], 0.0))
            self.done[t] = True
            if self.index.get(answer["action"]) == ev.action:
                self.matched[t] = True
                self._feedback(http, t, ev, answer["event_id"])
            with self.lock:
                bar.update(1)

    def _predict(self, http: Any, t: int, ev: LoggedEvent) -> dict[str, Any] | None:
        import httpx

        self.rewards[t], self.props[t] = ev.reward, ev.propensity
        body = {
            "context": ev.context,
            "event_id": f"{self.prefix}{ev.line}",
            "excluded_actions": [self.actions[i] for i in np.flatnonzero(~ev.allowed)],
        }
        start = time.perf_counter()
        try:
            resp = http.post(f"/v1/models/{self.model}/predict", json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            self._fail(f"line {ev.line}: predict: {exc}")
            return None
        self.predict_ms[t] = (time.perf_counter() - start) * 1000.0
        if resp.status_code != 200:
            self._fail(f"line {ev.line}: predict {resp.status_code}: {resp.text[:200]}",
                       fatal=resp.status_code in (401, 403, 404))
            return None
        return resp.json()

    def _feedback(self, http: Any, t: int, ev: LoggedEvent, event_id: str) -> None:
        import httpx

        start = time.perf_counter()
        try:
            fb = http.post(f"/v1/models/{self.model}/feedback", headers=self.headers,
                           json={"event_id": event_id, "reward": ev.reward})
            ok = fb.status_code == 200
            detail = "" if ok else f"{fb.status_code}: {fb.text[:200]}"
        except httpx.HTTPError as exc:
            ok, detail = False, str(exc)
        self.feedback_ms[t] = (time.perf_counter() - start) * 1000.0
        self.fed[t] = ok
        if not ok:
            self._fail(f"line {ev.line}: feedback {detail}")


def _run(live: _Live, main: Any, make_client: Any, owned: bool, concurrency: int,
         n: int, progress: bool | None) -> float:
    """Run the workers (``concurrency`` connections); the seconds it took."""
    started = time.perf_counter()
    with progress_bar(n, "replay", progress) as bar:
        if concurrency == 1:
            live.work(main, bar)
        else:
            clients = [main if not owned else make_client() for _ in range(concurrency)]
            threads = [threading.Thread(target=live.work, args=(c, bar), daemon=True)
                       for c in clients]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            if owned:
                for c in clients:
                    c.close()
    return time.perf_counter() - started


def _service_actions(main: Any, url: str, model: str, headers: dict[str, str]) -> list[str]:
    import httpx

    try:
        info = main.get(f"/v1/models/{model}", headers=headers)
    except httpx.HTTPError as exc:
        raise ReplayError(f"cannot reach {url}: {exc}") from None
    if info.status_code != 200:
        raise ReplayError(
            f"{url}: GET /v1/models/{model} answered {info.status_code}: {info.text[:200]}"
        )
    return check_actions(info.json()["actions"])


def _target_result(live: _Live, scan: LogScan, level: float) -> dict[str, Any]:
    """The estimates, curves and counts of a finished live replay (ReplayResult fields)."""
    done = live.done
    r, p, pi, m = live.rewards[done], live.props[done], live.target[done], live.matched[done]
    events = int(done.sum())
    estimates: dict[str, Estimate] = {"replay": mean_estimate(r[m], level)}
    notes: list[str] = []
    curve_w, ess = np.zeros(0), None
    if events:
        found, undefined, curve_w = weighted(pi, p, r, ("snips",), level)
        estimates.update((k, v) for k, v in found.items() if k not in undefined)
        notes += undefined_notes(undefined)
        ess = effective_size(curve_w)
    estimates["logged"] = mean_estimate(r, level)
    primary = "replay" if scan.uniform or "snips" not in estimates else "snips"
    if primary == "replay":
        curve = running_ratio(np.where(m, r, 0.0), m.astype(np.float64))
    else:
        curve = running_ratio(curve_w * r, curve_w)
    if live.failures:
        notes.append(f"{len(live.failures)} failed call(s); first: {live.failures[0]}")
    return {
        "events": events, "estimates": estimates, "primary": primary, "matches": int(m.sum()),
        "learned": int(live.fed.sum()), "ess": ess, "curve": downsample(curve),
        "logged_curve": downsample(running_mean(r)), "notes": notes + scan.repeats.notes(),
    }


def replay_target(
    path: str | Path,
    url: str,
    model: str,
    *,
    fmt: LogFormat = "auto",
    api_key: str | None = None,
    concurrency: int = 1,
    timeout: float = 10.0,
    event_prefix: str | None = None,
    level: float = 0.95,
    reward_map: str = "identity",
    action_index: bool = False,
    on_error: OnError = "fail",
    limit: int | None = None,
    progress: bool | None = False,
    client: Any = None,
    repeated_ids: RepeatedIds = "skip",
) -> ReplayResult:
    """Replay the log's contexts against the service at ``url`` (model ``model``) over HTTP.

    ``client`` (tests) is an ``httpx.Client``-like object used instead of new connections
    (relative URLs then). Raises :class:`ReplayError` when the service cannot be reached, the
    model is unknown, or the key is refused.
    """
    import httpx

    check_common(limit, level)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    path, fmt, _ = open_log(path, fmt, None, action_index)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = url.rstrip("/")

    def make_client() -> Any:
        return httpx.Client(base_url=base, headers=headers, timeout=timeout)

    owned = client is None
    main = make_client() if owned else client
    try:
        actions = _service_actions(main, url, model, headers)
        scan = usable_scan(
            path, fmt, actions, on_error, reward_map=reward_map, action_index=action_index,
            limit=limit, progress=progress, repeated_ids=repeated_ids,
        )
        prefix = event_prefix if event_prefix is not None else f"replay-{uuid.uuid4().hex[:8]}-"
        stream = (ev for _, ev in iter_log(path, fmt, actions, reward_map=reward_map,
                                          action_index=action_index, repeats=Repeats(repeated_ids))
                  if ev is not None and not isinstance(ev, LineError))
        live = _Live(stream, scan.events, model, actions, prefix, headers)
        seconds = _run(live, main, make_client, owned, concurrency, scan.events, progress)
    finally:
        if owned:
            main.close()
    if live.fatal:
        raise ReplayError(f"the service refused the replay: {live.fatal[0]}")
    fields = _target_result(live, scan, level)
    return ReplayResult(
        kind="target", name=f"{base} model {model}", mode="target",
        **scan_fields(scan, path, fmt, actions), **fields, seconds=seconds,
        params={"concurrency": concurrency, "event_prefix": prefix},
        extra={
            "decisions_per_second": round(fields["events"] / max(seconds, 1e-9), 1),
            "latency_ms": {
                "predict": _percentiles(live.predict_ms[np.isfinite(live.predict_ms)]),
                "feedback": _percentiles(live.feedback_ms[np.isfinite(live.feedback_ms)]),
            },
            "http_errors": len(live.failures),
            "repeated_ids": scan.repeats.to_dict(),
        },
    )
