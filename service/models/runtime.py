"""The in-memory model and THE decision path of the service.

:func:`decide` is the one decision: the online booster (which restricts and explores by its own
rule) or a published policy served at a temperature with a floor (:class:`ServedPolicy`),
restricted to the allowed actions and drawn once with the per-event generator (:func:`event_rng`).
Predict, the Personalizer rank and the replays call it. :class:`ServedModel` holds one model in
memory: its booster, its position in the joined stream and the locks deciding and learning share.

The design (who writes what, in which order, and what survives which fault) is in
docs/consistency.md.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from boosters.base import Decision, OnlineBooster
from boosters.exploration import draw, restrict
from learners.frozen import dumps_serving
from service.domain import ModelConfig, ServingConfig
from service.models.snapshots import Snapshot, dumps_whole, pickle_isolated

__all__ = [
    "ServedModel",
    "ServedPolicy",
    "apply_joined",
    "apply_steps",
    "decide",
    "event_rng",
]

log = logging.getLogger("boostbandit.store")


def event_rng(seed: int, event_id: str) -> np.random.Generator:
    """The generator of one decision: a function of the model seed and the event id only.

    >>> a = event_rng(1, "e").random(); b = event_rng(1, "e").random()
    >>> a == b, a == event_rng(1, "f").random()
    (True, False)
    """
    digest = int.from_bytes(hashlib.sha256(event_id.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, 0xDEC1DE, digest])


@dataclass(frozen=True)
class ServedPolicy:
    """A published offline policy (a :class:`~service.training.PolicyBundle`) served at
    ``temperature`` with the propensity floor ``min_propensity``."""

    bundle: Any
    temperature: float
    min_propensity: float

    @classmethod
    def of(cls, bundle: Any, serving: ServingConfig) -> ServedPolicy:
        """``bundle`` at the serving config's temperature and floor (the bundle's own where the
        config sets none)."""
        temperature = bundle.temperature if serving.temperature is None else serving.temperature
        floor = bundle.min_propensity if serving.min_propensity is None else serving.min_propensity
        return cls(bundle, temperature, floor)

    def probabilities(self, x: dict[str, Any]) -> np.ndarray:
        """The policy's probabilities for context ``x`` (softmax at the temperature + floor)."""
        return self.bundle.probabilities([x], self.temperature, self.min_propensity)[0]


def decide(
    source: OnlineBooster | ServedPolicy,
    x: dict[str, Any],
    *,
    allowed: Sequence[int] | None = None,
    rng: np.random.Generator | None = None,
    candidates: Sequence[dict[str, Any]] | None = None,
) -> Decision:
    """THE decision for context ``x`` among ``allowed`` (None: every action), drawn once from
    ``rng``; nothing changes. Without ``rng`` (a replay) a booster draws from its own generator.
    ``candidates``: a booster over candidate sets
    (:class:`boosters.online.adf.ActionFeatureBooster`) decides among them, ``allowed``
    indexing them.

    An online booster decides by its own rule (its prediction and exploration restricted to
    ``allowed``, so its loss estimate stays unbiased: :mod:`boosters.exploration`). A
    :class:`ServedPolicy`'s probabilities are restricted (excluded actions zeroed, the rest
    renormalised, which keeps every allowed propensity >= its floor) and one action is drawn;
    the decision's internals name the policy version.

    >>> from boosters.registry import booster_class
    >>> booster = booster_class("banditbbm")(n_actions=3, seed=0)
    >>> a = decide(booster, {"x": 1.0}, allowed=[0, 2], rng=event_rng(7, "e1"))
    >>> b = decide(booster, {"x": 1.0}, allowed=[0, 2], rng=event_rng(7, "e1"))
    >>> a.action == b.action, a.action != 1, a.probabilities[1]
    (True, True, np.float64(0.0))
    """
    if candidates is not None:
        gone = None if allowed is None else sorted(set(range(len(candidates))) - set(allowed))
        return source.decide(x, candidates, excluded=gone, rng=rng)  # type: ignore[union-attr]
    if not isinstance(source, ServedPolicy):
        return source.decide_one(x, allowed=allowed, rng=rng)
    if rng is None:
        raise ValueError("a served policy draws from the event's generator: pass rng")
    p = source.probabilities(x)
    if allowed is not None:
        p = restrict(p, np.asarray(allowed))
    return Decision(
        action=draw(p, rng), probabilities=p, internals={"policy_version": source.bundle.version}
    )


def apply_joined(booster: OnlineBooster, event: dict[str, Any]) -> bool:
    """Apply one joined event to ``booster`` (deterministic; False if it was not learned)."""
    steps = apply_steps(booster, event)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def apply_steps(booster: OnlineBooster, event: dict[str, Any]) -> Generator[None, None, bool]:
    """:func:`apply_joined` in the booster's :meth:`~boosters.base.OnlineBooster.learn_steps`;
    the generator's return value says whether the event was learned."""
    if event.get("_skipLearn"):
        return False
    bb = event["bb"]
    decision = Decision.from_dict(bb["decision"])
    if "candidates" in bb:  # a model with action features: the logged candidates are its actions
        steps = _one_step(booster.learn, event["c"], bb["candidates"], decision,
                          float(bb["reward"]))
    elif bb.get("label") is not None:
        steps = booster.learn_steps(event["c"], decision, label=int(bb["label"]))
    else:
        steps = booster.learn_steps(event["c"], decision, reward=float(bb["reward"]))
    try:
        yield from steps
    except (ValueError, TypeError) as exc:  # e.g. a default reward for a full-information booster
        log.debug("event %s not learned: %s", event.get("EventId"), exc)
        return False
    except Exception:  # a bug; handled the same way in a restore, so the model stays the fold
        log.exception("event %s: learning failed; counted as not learned", event.get("EventId"))
        return False
    return True


def _one_step(learn: Callable[..., None], *args: Any) -> Generator[None, None, None]:
    """``learn(*args)`` as a single learning step (a booster without ``learn_steps``)."""
    learn(*args)
    yield


class ServedModel:
    """One model in memory: its config, booster, version and lock."""

    #: longest a learning step waits for deciders queued on the lock
    YIELD_SECONDS = 0.05

    def __init__(
        self, config: ModelConfig, booster: OnlineBooster, version: int = 0, joined_id: str = "0-0"
    ) -> None:
        self.config = config
        self.booster = booster
        self.version = version  # joined events applied
        self.joined_id = joined_id  # id of the last joined event applied
        self.lock = threading.RLock()
        # held by apply() for a whole event and by dumps: a snapshot is taken between events
        self.event_lock = threading.RLock()
        self.snapshot_version = version
        self.snapshot_time = time.time()  # when the latest snapshot was written (its clock)
        # this process's monotonic clock at the latest snapshot it wrote or loaded: the snapshot
        # interval is timed with it, so another process's clock does not matter
        self.snapshot_clock = time.monotonic()
        # the learner: the version of the serving copy it published last, and this process's
        # monotonic clock then (Learner.maybe_publish)
        self.published_version = version
        self.publish_clock = time.monotonic()
        self.publish_seconds = 0.0  # how long the last serving-copy publish took
        # measured by ModelStore.measure_staleness (seconds, Redis clock; None: not yet): the
        # age of the oldest joined event this copy has not applied, and of the oldest one not
        # in the latest snapshot; 0.0 when caught up, however long the model was idle
        self.staleness: float | None = None
        self.snapshot_staleness: float | None = None
        self.owned = False  # True while this process's learner holds the model's lease
        self.serving_copy = False  # True for a booster restored from a serving copy: no learning
        self.rebuilt_from: int | None = None  # the version of a snapshot found ahead of the log
        self.last_applied_ts: float | None = None
        # the feature types the log confirmed (models/contexts.py checks contexts against them)
        self.feature_types: dict[str, str] = {}
        # deciders waiting for the lock; apply() waits for _no_deciders before learning
        self._deciders = 0
        self._deciders_lock = threading.Lock()
        self._no_deciders = threading.Event()
        self._no_deciders.set()

    @property
    def name(self) -> str:
        """The model name."""
        return self.config.name

    def adopt(self, other: ServedModel, newer_only: bool = False) -> OnlineBooster | None:
        """Take ``other``'s booster and position (a reload); returns the booster it replaced.

        With ``newer_only`` (a replica following snapshots) nothing changes if ``other`` is not
        newer or if this process's learner has taken the model over meanwhile (checked under
        the lock); None is returned then. Decisions use the booster under the lock only, so
        once this returns nothing uses the replaced one.
        """
        with self.event_lock, self.lock:
            if newer_only and (self.owned or other.version <= self.version):
                return None
            replaced = self.booster
            self.booster, self.version = other.booster, other.version
            self.joined_id, self.snapshot_time = other.joined_id, other.snapshot_time
            self.snapshot_clock = other.snapshot_clock
            self.snapshot_version, self.serving_copy = other.snapshot_version, other.serving_copy
            self.rebuilt_from = other.rebuilt_from
        return replaced

    def decide(
        self,
        context: dict[str, Any],
        event_id: str,
        excluded: list[int] | None = None,
        policy: ServedPolicy | None = None,
        candidates: list[dict[str, Any]] | None = None,
    ) -> tuple[Decision, int]:
        """:func:`decide` for ``context`` with the per-event generator of ``event_id``, by
        ``policy`` if given, else by the booster; returns ``(decision, version)``.

        ``excluded`` action indices are left out. The booster is read under the lock (a
        learning step waits for it); a policy does not consult it. Nothing changes.
        ``candidates`` (a model with action features): the request's candidates, each a dict
        of features; the booster decides among them (``excluded`` indexes them; no policy).
        """
        rng = event_rng(self.config.seed, event_id)
        k = len(self.config.actions) if candidates is None else len(candidates)
        allowed = self.allowed(excluded, k)
        if policy is not None and candidates is None:
            return decide(policy, context, allowed=allowed, rng=rng), self.version
        with self._deciding():
            return decide(self.booster, context, allowed=allowed, rng=rng,
                          candidates=candidates), self.version

    def allowed(self, excluded: list[int] | None, k: int | None = None) -> list[int] | None:
        """The indices of the ``k`` actions (default: the model's) not in ``excluded`` (None:
        every action)."""
        if not excluded:
            return None
        gone = set(excluded)
        return [i for i in range(len(self.config.actions) if k is None else k) if i not in gone]

    @contextmanager
    def _deciding(self) -> Iterator[None]:
        """Hold the lock for a decision; while waiting for it, :meth:`apply` steps aside."""
        with self._deciders_lock:
            self._deciders += 1
            self._no_deciders.clear()
        try:
            self.lock.acquire()  # held against a concurrent learn_one, never for long
        finally:
            with self._deciders_lock:
                self._deciders -= 1
                if self._deciders == 0:
                    self._no_deciders.set()
        try:
            yield
        finally:
            self.lock.release()

    def apply(self, event: dict[str, Any], joined_id: str) -> bool:
        """Apply the joined event with stream id ``joined_id`` (the learner's only write).

        Imported events (``boostbandit import``) sit in the joined stream for the offline worker
        only: the live learner never applies them, so neither does a restore (no learning, no
        version step), and a restored model equals the live one.

        Deciders come first: the update runs in the booster's
        :meth:`~boosters.base.OnlineBooster.learn_steps`, taking the lock per step, and steps
        aside (up to ``YIELD_SECONDS``) while a :meth:`decide` waits; why a decision between two
        steps is still valid: docs/consistency.md, "Deciding while learning".
        """
        if self.serving_copy:
            raise RuntimeError(
                f"{self.name}: this process holds a serving copy of the model, which cannot "
                "learn; restore the whole snapshot first (ModelStore.reload)"
            )
        if event.get("bb", {}).get("imported"):
            with self.event_lock, self.lock:
                self.joined_id = joined_id
            return False
        with self.event_lock:
            steps = apply_steps(self.booster, event)
            while True:
                self._no_deciders.wait(self.YIELD_SECONDS)  # blocks only if deciders wait
                with self.lock:
                    try:
                        next(steps)
                    except StopIteration as done:
                        learned = done.value
                        self.version += 1
                        self.joined_id = joined_id
                        break
        self.last_applied_ts = time.time()
        return learned

    def dump(self, isolated: bool = True) -> Snapshot:
        """The whole booster and its serving copy, pickled from one consistent state.

        With ``isolated`` (and ``os.fork`` available) the state is frozen by a fork taken under
        the lock, and a child process pickles it while this process goes on deciding
        (:func:`~service.models.snapshots.pickle_isolated`).
        """
        return self.begin_dump(isolated)()

    def begin_dump(self, isolated: bool = True) -> Callable[[], Snapshot]:
        """:meth:`dump` in two halves: the state is frozen now (a fork, under the lock), and
        the returned function waits for its pickles, so that wait can be another thread's.

        The state is always one between two events (:attr:`event_lock`). If the child fails,
        the collector pickles the state of that moment in this process, between events too.
        """
        if self.serving_copy:
            raise RuntimeError(f"{self.name}: a serving copy is not snapshotted")
        with self.event_lock, self.lock:
            version, joined_id = self.version, self.joined_id
            if not isolated:
                b = self.booster
                snapshot = Snapshot(dumps_whole(b), dumps_serving(b), version, joined_id)
                return lambda: snapshot
            pending = pickle_isolated(self.booster, dumps_whole, dumps_serving)

        def collect() -> Snapshot:
            try:
                return Snapshot(*pending(), version, joined_id)
            except RuntimeError as exc:
                log.warning("%s: isolated snapshot failed (%s); pickling here", self.name, exc)
                return self.dump(isolated=False)

        return collect


