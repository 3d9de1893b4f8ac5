"""The offline worker (``boostbandit worker``): BOPL policies trained from the joined stream.

Per model it holds a lease in Redis (``worker_lease``: one worker trains a model; several worker
processes spread the models between them) and consumes the model's joined stream with the
consumer group ``worker``, keeping the last ``worker_window`` joined events in memory. Every
``worker_retrain_events`` new events, or every ``worker_retrain_seconds`` when there are new
events, once the window holds ``worker_min_events``, it trains the configured BOPL variant on the
window minus its most recent ``worker_holdout_fraction`` and evaluates it on that hold-out slice
(:func:`service.training.train_and_evaluate`: SNIPS and DR with intervals, for the new policy and
for the logging policy). Every trained policy is recorded with a new version, its metrics and
training metadata; it is *published* (its pickle stored and the model's ``published`` pointer
moved) only when the one-sided lower bound of the paired difference (new policy minus logging
policy, per hold-out event) at ``worker_level`` is above zero.
``GET /v1/models/{name}/policies`` lists them; ``PUT /v1/models/{name}/serving`` switches a model
to serve its latest published policy.

Restarts lose nothing (docs/training.md, "Restarts of the worker").

It also runs the Personalizer endpoint's offline evaluations and its scheduled auto-optimization
(:mod:`service.personalizer.evaluations`; docs/personalizer.md, "Policy and evaluations").

Where it trains (``worker_device``: XGBoost on the CPU or a GPU; ``worker_dask_scheduler``: the
-regr variants on a Dask cluster) is checked, and the Dask client connected, at start-up by
:func:`service.training.compute.start_compute`; the client is passed in (docs/training.md, "Bigger
hardware: a GPU, a Dask cluster").

Progress goes to the ``boostbandit.worker`` logger and to the model's ``worker_status`` key (shown
by the policies route).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service import metrics
from service.domain import ModelConfig
from service.eventlog import EventLog, Redis, RedisError, ResponseError
from service.eventlog.consumer import StreamConsumer
from service.eventlog.keys import keys
from service.events import loads
from service.models.snapshots import dumps_whole
from service.models.store import ModelStore
from service.personalizer import evaluations, importances
from service.settings import Settings, apply_split_helper
from service.training import TrainConfig, train_and_evaluate

__all__ = ["Worker", "train_config"]

log = logging.getLogger("boostbandit.worker")

_STATUS_EVERY_SECONDS = 5.0


def _sid(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def train_config(settings: Settings, config: ModelConfig) -> TrainConfig:
    """The training configuration of ``config``'s model under ``settings``."""
    return TrainConfig(
        variant=settings.worker_variant,
        n_rounds=settings.worker_n_rounds,
        max_depth=settings.worker_max_depth,
        reward_translation=settings.worker_reward_translation,
        holdout_fraction=settings.worker_holdout_fraction,
        level=settings.worker_level,
        temperature=settings.worker_temperature,
        min_propensity=min(settings.worker_min_propensity, 1.0 / len(config.actions)),
        publish_estimator=settings.worker_publish_estimator,
        reward_model_rounds=settings.worker_reward_model_rounds,
        max_categories=settings.worker_max_categories,
        seed=config.seed % (2**31 - 1),
        device=settings.worker_device,
    )


@dataclass
class _ModelState:
    """What the worker holds for one model."""

    config: ModelConfig
    window: deque[tuple[str, dict[str, Any]]]
    new_events: int = 0
    last_train: float = 0.0  # wall clock of the last training (0: never)
    last_policy: dict[str, Any] | None = None
    last_error: str | None = None
    status_written: float = 0.0


class Worker(StreamConsumer):
    """The offline worker loop over the models whose worker lease it holds.

    ``models`` restricts it to those names (all models when empty). ``dask_client``: the Dask
    client of :func:`service.training.compute.start_compute` the trainings run on (None:
    in-process).
    """

    GROUP = "worker"
    CONSUMER = "worker"
    LEASE_KIND = "worker_lease"
    RETRY_SECONDS = 1.0
    #: how often the worker looks for pending Personalizer evaluations and auto-optimization
    EVALUATION_POLL_SECONDS = 1.0

    def __init__(
        self,
        client: Redis,
        settings: Settings,
        models: Sequence[str] | None = None,
        dask_client: Any = None,
    ) -> None:
        super().__init__(EventLog(client), settings.worker_lease_seconds, "worker")
        self.settings = settings
        apply_split_helper(settings)  # the evaluations' replays learn trees
        self.dask_client = dask_client
        self.models = list(models or [])
        self.states: dict[str, _ModelState] = {}
        self.evaluations_polled = 0.0
        self.evaluating: threading.Thread | None = None

    # --- one-shot ------------------------------------------------------------------------------
    def window_events(self, name: str, max_id: str = "+") -> list[tuple[str, dict[str, Any]]]:
        """The last ``worker_window`` joined events of ``name`` up to ``max_id``, oldest first."""
        return self.log.joined_tail(name, self.settings.worker_window, max_id)

    def train_once(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Train every selected model once on its current window; one summary per model.

        Models whose window is smaller than ``worker_min_events`` are skipped. Unlike
        :meth:`run`, this takes no lease (an explicit, one-off run).
        """
        configs = self.log.configs()
        out = []
        for name in names or self.models or sorted(configs):
            config = configs.get(name)
            if config is None:
                raise KeyError(name)
            if config.action_features:
                out.append({"model": name, "status": "skipped", "reason": "action features: "
                            "no offline policy over candidate sets yet"})
                continue
            events = self.window_events(name)
            if len(events) < self.settings.worker_min_events:
                out.append(
                    {
                        "model": name,
                        "status": "skipped",
                        "reason": f"{len(events)} joined events < worker_min_events "
                        f"{self.settings.worker_min_events}",
                    }
                )
                continue
            meta = self.train(config, events)
            out.append(_summary(name, meta))
        return out

    def train(self, config: ModelConfig, events: list[tuple[str, dict[str, Any]]]) -> dict:
        """Train, evaluate and store one policy on ``events``; its stored metadata."""
        name = config.name
        log.info("%s: training %s on %d joined events", name, self.settings.worker_variant,
                 len(events))
        started = time.monotonic()
        result = train_and_evaluate(
            [e for _, e in events],
            config.actions,
            train_config(self.settings, config),
            model_uid=config.uid,
            dask_client=self.dask_client,
        )
        current = self.log.config(name)
        if current is None or current.uid != config.uid:
            raise LookupError(f"model {name!r} was deleted or recreated during training")
        result.meta["training"]["last_stream_id"] = events[-1][0]
        result.meta["training"]["window"] = len(events)
        version = self.log.next_policy_version(name)
        result.bundle.version = version
        blob = dumps_whole(result.bundle) if result.published else None
        meta = self.log.store_policy(name, version, result.meta, blob, result.published)
        metrics.count_training(name, result.published, time.monotonic() - started, time.time())
        _log_result(name, meta)
        return meta

    # --- the loop ------------------------------------------------------------------------------
    def on_error(self) -> None:
        self.states.clear()  # rebuilt from the stream at the next step

    def on_lease_lost(self, name: str) -> None:
        self.states.pop(name, None)

    def endpoint(self):
        """``/healthz`` and ``/metrics`` on ``host:worker_metrics_port`` (0: none)."""
        port = self.settings.worker_metrics_port
        return (self.settings.host, port, self.settings.worker_stuck_seconds, None) if port \
            else None

    def stop(self) -> None:
        """Release the leases this worker holds."""
        self.stop_event.set()
        self.close_endpoint()
        try:
            self.release_all()
        except RedisError as exc:
            log.warning("could not release worker leases: %s", exc)
        self.states.clear()

    def owned(self) -> dict[str, _ModelState]:
        """Sync with the stored configs, take/renew leases; the states of the models we train."""
        configs = self.log.configs()
        selected = [n for n in self.models if n in configs] if self.models else sorted(configs)
        # no offline policy over per-request candidate sets yet (action features)
        selected = [n for n in selected if not configs[n].action_features]
        for name in list(self.states):
            if name not in selected or configs[name].uid != self.states[name].config.uid:
                log.info("%s: deleted or recreated; dropping its window", name)
                del self.states[name]
        for name in selected:
            lease = self.hold(name)
            if lease == 0:
                self.states.pop(name, None)
            elif name not in self.states or lease == 2:
                self.states[name] = self.bootstrap(configs[name])
        return dict(self.states)

    def bootstrap(self, config: ModelConfig) -> _ModelState:
        """Create or join the consumer group and rebuild the window from the stream."""
        name, stream = config.name, keys(config.name)["joined"]
        last = self._last_delivered(stream)
        if last is None:
            last = self.log.newest_id(stream)
            if not self.log.ensure_group(stream, self.GROUP, start=last):
                last = self._last_delivered(stream) or last
        window = deque(
            self.window_events(name, max_id=last) if last != "0-0" else [],
            maxlen=self.settings.worker_window,
        )
        while True:  # delivered before a restart, never acknowledged: already in the window
            resp = self.log.read_group(self.GROUP, self.CONSUMER, {stream: "0"}, 500, None)
            ids = [entry_id for _, entries in resp for entry_id, _ in entries]
            if not ids:
                break
            self.log.ack(stream, self.GROUP, *ids)
        state = _ModelState(config, window)
        policies = self.log.policies(name)
        if policies:
            newest = policies[0]
            state.last_policy = _summary(name, newest)
            state.last_train = float(newest.get("created", 0.0))
            after = newest.get("training", {}).get("last_stream_id")
            if after:
                state.new_events = sum(1 for sid, _ in window if _sid(sid) > _sid(after))
            else:
                state.new_events = len(window)
        else:
            state.new_events = len(window)
        log.info(
            "%s: worker %s took over; window %d events, %d new", name, self.owner,
            len(window), state.new_events,
        )
        self._status(state, force=True)
        return state

    def _last_delivered(self, stream: str) -> str | None:
        info = self.log.group_info(stream, self.GROUP)
        return None if info is None else info["last-delivered-id"]

    def run_evaluations(self, now: float) -> None:
        """Start running the Personalizer endpoint's pending evaluations, and its Auto
        evaluation when auto-optimization is on and due, in a thread (a long replay does not
        hold up training or the leases; :mod:`service.personalizer.evaluations`)."""
        if now - self.evaluations_polled < self.EVALUATION_POLL_SECONDS:
            return
        self.evaluations_polled = now
        if self.evaluating is not None and self.evaluating.is_alive():
            return
        self.evaluating = threading.Thread(target=self.evaluate, args=(now,), daemon=True,
                                           name="evaluations")
        self.evaluating.start()

    def evaluate(self, now: float) -> None:
        """One round of :meth:`run_evaluations` (errors are logged: retried next round)."""
        try:
            evaluations.run_pending(self.log, self.settings, self.owner)
            # each model as its snapshot and the joined events after it (nothing is loaded
            # until a feature importance is due)
            importances.run_pending(self.log, ModelStore(self.log), self.settings, self.owner)
            # a store of this process (none loaded): applying a policy renews stored configs
            evaluations.auto_optimize(self.log, ModelStore(self.log), self.settings,
                                      self.owner, now)
            metrics.EVALUATION_ROUNDS.labels("done").inc()
        except RedisError as exc:
            metrics.EVALUATION_ROUNDS.labels("redis_unavailable").inc()
            log.warning("evaluations: event log unavailable: %s", exc)
        except Exception:  # a bug: logged, the worker goes on training
            metrics.EVALUATION_ROUNDS.labels("failed").inc()
            log.exception("evaluations failed")

    def step(self) -> None:
        """Run the evaluations that are due, read new joined events, then train the models
        that are due."""
        self.run_evaluations(time.time())
        states = self.owned()
        if not states:
            self.stop_event.wait(self.settings.worker_block_ms / 1000)
            return
        by_stream = {keys(name)["joined"]: state for name, state in states.items()}
        try:
            resp = self.log.read_group(
                self.GROUP,
                self.CONSUMER,
                {stream: ">" for stream in by_stream},
                1000,
                self.settings.worker_block_ms,
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self.states.clear()  # a model was deleted under us: resync next step
            return
        for stream, entries in resp:
            state = by_stream[stream]
            ids = []
            for entry_id, fields in entries:
                ids.append(entry_id)
                if fields:
                    state.window.append((entry_id, loads(fields[b"e"])))
                    state.new_events += 1
            self.log.ack(stream, self.GROUP, *ids)
        now = time.time()
        for state in states.values():
            self.maybe_train(state, now)
            self._status(state)

    def due(self, state: _ModelState, now: float) -> bool:
        """Whether ``state``'s model should be trained now."""
        s = self.settings
        if len(state.window) < s.worker_min_events or state.new_events == 0:
            return False
        return (
            state.new_events >= s.worker_retrain_events
            or now - state.last_train >= s.worker_retrain_seconds
        )

    def maybe_train(self, state: _ModelState, now: float) -> None:
        """Train if due; errors are logged and recorded, then retried at the next trigger."""
        if not self.due(state, now):
            return
        events = list(state.window)
        state.new_events, state.last_train = 0, now
        try:
            meta = self.train(state.config, events)
        except RedisError:
            raise
        except (ValueError, LookupError) as exc:
            state.last_error = str(exc)
            log.warning("%s: training failed: %s", state.config.name, exc)
        except Exception as exc:  # a bug or a base-learner failure: retried at the next trigger
            state.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("%s: training failed", state.config.name)
        else:
            state.last_error = None
            state.last_policy = _summary(state.config.name, meta)
        self._status(state, force=True)

    def _status(self, state: _ModelState, force: bool = False) -> None:
        now = time.time()
        if not force and now - state.status_written < _STATUS_EVERY_SECONDS:
            return
        s = self.settings
        self.log.set_worker_status(
            state.config.name,
            {
                "owner": self.owner,
                "updated": now,
                "window": len(state.window),
                "new_events": state.new_events,
                "last_trained": state.last_train or None,
                "last_policy": state.last_policy,
                "last_error": state.last_error,
                "settings": {
                    "variant": s.worker_variant,
                    "window": s.worker_window,
                    "holdout_fraction": s.worker_holdout_fraction,
                    "retrain_events": s.worker_retrain_events,
                    "retrain_seconds": s.worker_retrain_seconds,
                    "min_events": s.worker_min_events,
                    "device": s.worker_device,
                    "dask_scheduler": s.worker_dask_scheduler,
                },
            },
        )
        state.status_written = now


def _summary(name: str, meta: dict[str, Any]) -> dict[str, Any]:
    """A short account of a stored policy (CLI output, worker status).

    ``difference`` is what the publish rule decided on: the paired estimate of policy - logging
    policy and its one-sided lower bound at ``level`` (published iff ``low`` > 0); None for
    policies stored before the rule recorded it.
    """
    est = meta["estimates"]
    rule = meta["params"]["publish_estimator"]
    diff = meta.get("difference")
    return {
        "model": name,
        "status": "published" if meta["published"] else "rejected",
        "version": meta["version"],
        "variant": meta["variant"],
        "n_train": meta["n_train"],
        "n_holdout": meta["n_holdout"],
        "estimator": rule,
        "policy": est["policy"][rule],
        "logging": meta["baseline"],
        "difference": (
            None
            if diff is None
            else {k: diff[k] for k in ("value", "low", "level", "p_value") if k in diff}
        ),
    }


def _log_result(name: str, meta: dict[str, Any]) -> None:
    s = _summary(name, meta)
    p, d = s["policy"], s["difference"] or {}
    log.info(
        "%s: policy v%d (%s, %d train / %d hold-out): %s %.4f [%s, %s] vs logging %.4f; "
        "difference %s, one-sided %s lower bound %s -> %s",
        name, s["version"], s["variant"], s["n_train"], s["n_holdout"], s["estimator"],
        p["value"], p["low"], p["high"], s["logging"], d.get("value"), d.get("level"),
        d.get("low"), s["status"],
    )
