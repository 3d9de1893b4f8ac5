"""The endpoint's offline evaluations: submitted ``pending`` (:func:`submit`), run by the offline
worker over the joined logs of the endpoint's models (:func:`run_pending`, the arithmetic in
:mod:`service.personalizer.evaluation`), applied as the policy (:func:`apply_from`), and the
scheduled Auto evaluations of auto-optimization (:func:`auto_optimize`).
docs/personalizer.md, "Policy and evaluations".
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from service.domain import ACTION_FEATURES_BOOSTER, action_features_params
from service.eventlog import EventLog, RedisError
from service.events import iso_timestamp
from service.models import snapshots
from service.models.store import ModelStore
from service.personalizer import loop, policy
from service.personalizer.evaluation import Candidate, ModelLog, evaluate
from service.personalizer.failures import PersonalizerFailure, bad
from service.personalizer.schemas import EvaluationContract
from service.settings import Settings

__all__ = ["AUTO_CANDIDATES", "AUTO_ID_PREFIX", "MAX_EVENTS", "Budget", "Stopped", "apply_from",
           "auto_optimize", "delete", "estimate_cost", "found", "listed", "public", "run_pending",
           "submit"]

log_ = logging.getLogger("boostbandit.personalizer")

#: The most recent joined events of each model an evaluation reads.
MAX_EVENTS = 20_000
#: The sources of the policies every evaluation compares (not applicable, not custom names).
BUILT_IN = ("Online", "Baseline", "Random")
#: How long a worker's claim on an evaluation it runs lasts unless renewed (it is renewed every
#: RENEW_SECONDS while the evaluation runs): a worker that died is replaced after at most this.
CLAIM_SECONDS = 120.0
RENEW_SECONDS = 20.0
#: The candidates of an Auto evaluation (small boosters, quick to replay).
AUTO_CANDIDATES = (
    ("adabandit-5", "--booster adabandit --learners 5"),
    ("adabandit-5-rho0.2", "--booster adabandit --learners 5 --rho 0.2"),
    ("egreedy_tree-0.05", "--booster egreedy_tree --epsilon 0.05"),
    ("egreedy_tree-0.2", "--booster egreedy_tree --epsilon 0.2"),
)
#: The start of an Auto evaluation's id: ``~`` is outside the ids a user may give
#: (``routes.evaluations.NewEvaluationIdPath``), so the two never collide.
AUTO_ID_PREFIX = "auto~"
#: The date range of an Auto evaluation: the last this many seconds.
AUTO_RANGE_SECONDS = 30 * 86400.0


class Stopped(Exception):  # noqa: N818 - a verdict, not a failure
    """An evaluation stopped before its end: ``status`` says why (``timeout``, or ``claim``: the
    claim went to another worker, which runs it; nothing is stored then)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class Budget:
    """What a running evaluation (or feature importance) is allowed: a time limit and a claim
    kept renewed. :meth:`tick` is called every few replayed events; it raises :class:`Stopped`
    past the limit or when the claim was lost."""

    def __init__(self, log: EventLog, claim_id: str, owner: str, seconds: float,
                 clock=time.monotonic) -> None:
        self.log, self.claim_id, self.owner, self.clock = log, claim_id, owner, clock
        self.seconds = seconds
        self.deadline = clock() + seconds
        self.renewed = clock()

    def tick(self) -> None:
        now = self.clock()
        if now > self.deadline:
            raise Stopped("timeout", f"EvaluationTimedOut: still running after "
                          f"{self.seconds:g} s (evaluation_time_limit_seconds)")
        if now - self.renewed >= RENEW_SECONDS:
            if not self.log.renew_evaluation_claim(self.claim_id, self.owner, CLAIM_SECONDS):
                raise Stopped("claim", f"{self.claim_id}: claim lost to another worker")
            self.renewed = now


def _learners(doc: dict[str, Any]) -> int:
    """The learners a custom policy document replays (its ``n_learners``, or the booster's
    default; 1 for a booster without learners; ``adf``: its ``n_trees``)."""
    from boosters.registry import booster_params

    adf = doc["booster"] == ACTION_FEATURES_BOOSTER
    key = "n_trees" if adf else "n_learners"
    defaults = action_features_params() if adf else booster_params(doc["booster"])
    n = doc["params"].get(key, defaults.get(key))
    return max(1, int(n or 1))


def _sizes(log: EventLog, settings: Settings) -> list[tuple[bool, int]]:
    """``(action_features, events read)`` of each model (its joined events, at most
    :data:`MAX_EVENTS`)."""
    return [(c.action_features, min(log.stream_length(c.name, "joined"), MAX_EVENTS))
            for c in loop.models(log, settings)]


def _replayed(doc: dict[str, Any], sizes: list[tuple[bool, int]]) -> int:
    """The events a custom policy replays: those of the models it decides for (``adf``: the
    model with action features; the other boosters: the fixed-action models)."""
    adf = doc["booster"] == ACTION_FEATURES_BOOSTER
    return sum(n for action_features, n in sizes if action_features == adf)


def estimate_cost(log: EventLog, settings: Settings, policies: list[dict[str, Any]]
                  ) -> tuple[int, int]:
    """``(cost, events)``: the events an evaluation would read at most (each model's joined
    events, capped at :data:`MAX_EVENTS`), and the learner-events it replays: per custom
    policy, its learners times the events of the models it decides for (the built-in policies
    and the offline one cost nothing next to a replay)."""
    sizes = _sizes(log, settings)
    return sum(_learners(p) * _replayed(p, sizes) for p in policies), sum(n for _, n in sizes)


def _check_cost(log: EventLog, settings: Settings, policies: list[dict[str, Any]]) -> int:
    cost, _ = estimate_cost(log, settings, policies)
    if cost > settings.evaluation_max_cost:
        sizes = _sizes(log, settings)
        per = ", ".join(f"{p['name']}: {_learners(p)} x {_replayed(p, sizes):,}"
                        for p in policies)
        raise bad("EvaluationTooCostly",
                  f"estimated cost {cost:,} learner-events (per custom policy, its learners x "
                  f"the logged events it replays: {per}) is above evaluation_max_cost "
                  f"{settings.evaluation_max_cost:,}: evaluate fewer or smaller policies")
    return cost


def _seconds(moment: datetime) -> float:
    """Seconds since the epoch (a time without a zone is UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _custom(body: EvaluationContract, settings: Settings, counts: list[int]
            ) -> list[dict[str, Any]]:
    """The custom policies as policy documents (400 naming the first bad one)."""
    names = [p.name for p in body.policies]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise bad("DuplicateCustomPolicyNames", f"policies: repeated name(s) {repeated}")
    out = []
    for p in body.policies:
        if p.name in BUILT_IN:
            raise bad("InvalidEvaluationContract",
                      f"policies: {p.name!r} is the name of a built-in policy")
        try:
            out.append(policy.make_policy(p.name, p.arguments, settings, counts,
                                          evaluated=True))
        except ValueError as exc:
            raise bad("InvalidPolicyConfiguration", f"policy {p.name!r}: {exc}") from None
    return out


def submit(log: EventLog, settings: Settings, body: EvaluationContract,
           evaluation_id: str | None = None, kind: str = "Manual") -> dict[str, Any]:
    """Check and store a new evaluation, ``pending`` until the offline worker runs it (an Auto
    one is run by its scheduler: never queued for :func:`run_pending`)."""
    try:
        start, end = _seconds(body.startTime), _seconds(body.endTime)
        times = iso_timestamp(start), iso_timestamp(end)
    except (ValueError, OverflowError, OSError) as exc:
        raise bad("InvalidEvaluationContract", f"startTime/endTime: {exc}") from None
    if end <= start:
        raise bad("InvalidEvaluationContract", "endTime must be after startTime")
    policies = _custom(body, settings, policy.action_counts(log, settings))
    cost = _check_cost(log, settings, policies)
    doc = {
        "id": evaluation_id or uuid.uuid4().hex, "name": body.name,
        "startTime": times[0], "endTime": times[1],
        "jobId": uuid.uuid4().hex, "status": "pending", "policyResults": [],
        "featureImportance": [], "evaluationType": kind, "optimalPolicy": None,
        "creationTime": iso_timestamp(time.time()), "description": None,
        "policies": policies, "estimatedCost": cost,
        "enableOfflineExperimentation": body.experimentation,
        "range": [start, end],
    }
    if not log.add_evaluation(doc, queued=kind != "Auto"):
        raise PersonalizerFailure(409, "Conflict", f"evaluation {doc['id']!r} already exists")
    return doc


def found(log: EventLog, evaluation_id: str) -> dict[str, Any]:
    """The stored evaluation ``evaluation_id`` (404 ``EvaluationNotFound`` if none)."""
    doc = log.evaluation(evaluation_id)
    if doc is None:
        raise PersonalizerFailure(404, "EvaluationNotFound", f"no evaluation {evaluation_id!r}")
    return doc


def listed(log: EventLog, skip: int = 0, top: int | None = None) -> list[dict[str, Any]]:
    """The evaluations, oldest first, as answered: ``top`` of them after the first ``skip``."""
    docs = log.evaluations()[skip:]
    return [public(d) for d in (docs if top is None else docs[:top])]


def delete(log: EventLog, evaluation_id: str) -> None:
    """Delete an evaluation (404 if none; a running one finishes but is not stored)."""
    if not log.delete_evaluation(evaluation_id):
        raise PersonalizerFailure(404, "EvaluationNotFound", f"no evaluation {evaluation_id!r}")


def _offline(log: EventLog, settings: Settings) -> Candidate | None:
    """The worker's latest published policy of each model, as one candidate (None if none)."""
    bundles, versions = {}, []
    for config in loop.models(log, settings):
        version = log.published_version(config.name)
        blob = None if version is None else log.policy_blob(config.name, version)
        if blob is None:
            continue
        bundle = snapshots.loads(blob)
        if bundle.model_uid == config.uid and list(bundle.actions) == config.actions:
            bundles[config.name] = bundle
            versions.append(f"{config.name}:{version}")
    if not bundles:
        return None
    return Candidate("OfflineExperimentation", "OfflineExperimentation",
                     "offline policies " + " ".join(versions), bundles=bundles)


def _candidates(log: EventLog, settings: Settings, doc: dict[str, Any]) -> list[Candidate]:
    online = policy.current(log, settings)
    out = [Candidate(online["name"], "Online", online["arguments"]),
           Candidate("Baseline", "Baseline"), Candidate("Random", "Random")]
    out += [Candidate(p["name"], "Custom", p["arguments"], p["booster"], p["params"])
            for p in doc["policies"]]
    offline = _offline(log, settings) if doc["enableOfflineExperimentation"] else None
    return out + ([offline] if offline is not None else [])


def _logs(log: EventLog, settings: Settings, start: float, end: float,
          fixed_only: bool = False) -> list[ModelLog]:
    """The logs of the endpoint's models with events in the range: the model with action
    features' on each event's own candidates (left out if ``fixed_only``)."""
    out = []
    for config in loop.models(log, settings):
        if fixed_only and config.action_features:
            continue
        joined = [e for _, e in log.joined_tail(config.name, MAX_EVENTS)]
        model_log = ModelLog.of(joined, config.actions, start, end, config.name)
        if model_log.events:
            out.append(model_log)
    return out


def run(log: EventLog, settings: Settings, doc: dict[str, Any], budget: Budget | None = None
        ) -> dict[str, Any]:
    """Compute the evaluation: ``completed`` with its results, ``failed`` with the reason, or,
    past the ``budget``'s time limit, ``timeout``. An Auto evaluation reads the fixed-action
    models' logs only (its candidates are fixed-action boosters)."""
    start, end = doc["range"]
    auto = doc.get("evaluationType") == "Auto"  # fixed-action candidates: those models only
    logs = _logs(log, settings, start, end, fixed_only=auto)
    if not logs:
        which = " of a fixed-action model" if auto else ""
        return {**doc, "status": "failed", "description":
                f"NoLogsExistInDateRange: no joined event{which} between {doc['startTime']} "
                f"and {doc['endTime']}"}
    try:
        results = evaluate(logs, _candidates(log, settings, doc),
                           None if budget is None else budget.tick)
    except (ValueError, TypeError) as exc:
        return {**doc, "status": "failed", "description": f"{type(exc).__name__}: {exc}"}
    except Stopped as stop:
        if stop.status != "timeout":
            raise
        return {**doc, "status": "timeout", "description": str(stop)}
    return {**doc, "status": "completed", "policyResults": results,
            "optimalPolicy": results[0]["name"], "description": None}


def _failed(doc: dict[str, Any], exc: Exception) -> dict[str, Any]:
    """``doc`` failed with ``exc`` (logged with its traceback)."""
    log_.exception("evaluation %s failed", doc["id"])
    return {**doc, "status": "failed", "description": f"{type(exc).__name__}: {exc}"}


def run_pending(log: EventLog, settings: Settings, owner: str) -> list[str]:
    """Run every pending evaluation nobody else runs, each within its time limit and its claim
    renewed while it runs; the ids run."""
    done = []
    for doc in log.pending_evaluations():
        if not log.claim_evaluation(doc["id"], owner, CLAIM_SECONDS):
            continue
        log_.info("evaluation %s: running", doc["id"])
        budget = Budget(log, doc["id"], owner, settings.evaluation_time_limit_seconds)
        try:
            doc = run(log, settings, doc, budget)
        except RedisError:
            raise
        except Stopped as stop:  # the claim went to another worker: it stores the result
            log_.warning("evaluation %s: %s", doc["id"], stop)
            continue
        except Exception as exc:  # a bug or a booster failure: the evaluation says so
            doc = _failed(doc, exc)
        log.update_evaluation(doc)
        done.append(doc["id"])
    return done


def apply_from(log: EventLog, store: ModelStore, settings: Settings, evaluation_id: str,
               policy_name: str) -> dict[str, Any]:
    """Make a custom policy of a completed evaluation the endpoint's policy."""
    doc = found(log, evaluation_id)
    result = next((r for r in doc["policyResults"] if r["name"] == policy_name), None)
    if result is None:
        raise bad("InvalidRequest", f"evaluation {evaluation_id!r} ({doc['status']}) has no "
                  f"result of a policy named {policy_name!r}")
    if result["policySource"] != "Custom":
        raise bad("InvalidRequest", f"policy {policy_name!r} is the {result['policySource']} "
                  "policy of the evaluation; only a Custom policy (one given by its arguments) "
                  "can be applied")
    try:
        return _apply(log, store, settings, result)
    except ValueError as exc:
        raise bad("InvalidPolicyConfiguration", f"policy {policy_name!r}: {exc}") from None


def _auto_due(log: EventLog, now: float) -> dict[str, Any] | None:
    """The auto-optimization settings if an Auto evaluation is due now."""
    auto = (log.personalizer_doc("service") or {}).get("auto_optimization") or {}
    if not auto.get("enabled"):
        return None
    try:
        start = _seconds(datetime.fromisoformat(str(auto["start"]))) if auto.get("start") \
            else 0.0
    except ValueError:
        start = 0.0
    last = (log.personalizer_doc("auto_optimization_state") or {}).get("last", 0.0)
    frequency = float(auto.get("frequency_seconds") or 86400.0)
    return auto if now >= start and now - last >= frequency else None


def _decide(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The Auto evaluation's verdict, and the result to apply (None: keep the online one)."""
    results = doc["policyResults"]
    online = next(r for r in results if r["policySource"] == "Online")
    custom = [r for r in results if r["policySource"] == "Custom"
              and r["totalSummary"]["low"] is not None]
    best = custom[0] if custom else None  # results are sorted, best first
    bar = online["totalSummary"]["high"]
    if best is not None and bar is not None and best["totalSummary"]["low"] > bar:
        return {**doc, "status": "optimalPolicyApplied", "optimalPolicy": best["name"]}, best
    return {**doc, "status": "onlinePolicyRetained", "optimalPolicy": online["name"]}, None


def auto_optimize(log: EventLog, store: ModelStore, settings: Settings, owner: str,
                  now: float | None = None) -> dict[str, Any] | None:
    """Run an Auto evaluation of :data:`AUTO_CANDIDATES` when the schedule says so, and apply
    the best candidate if its interval's lower bound is above the online policy's upper bound.
    The evaluation document, or None when none was due (or another worker schedules it)."""
    now = time.time() if now is None else now
    auto = _auto_due(log, now)
    if auto is None or not log.claim_auto_schedule(owner,
                                                   float(auto.get("frequency_seconds") or 60)):
        return None
    log.set_personalizer_doc("auto_optimization_state", {"last": now})
    evaluation_id = f"{AUTO_ID_PREFIX}{int(now * 1000)}"
    if not log.claim_evaluation(evaluation_id, owner, CLAIM_SECONDS):
        return None
    body = EvaluationContract(
        name=f"auto {iso_timestamp(now)}",
        startTime=datetime.fromtimestamp(now - AUTO_RANGE_SECONDS, UTC),
        endTime=datetime.fromtimestamp(now, UTC),
        policies=[{"name": n, "arguments": a} for n, a in AUTO_CANDIDATES])
    doc = submit(log, settings, body, evaluation_id, kind="Auto")
    budget = Budget(log, evaluation_id, owner, settings.evaluation_time_limit_seconds)
    try:
        doc = _run_auto(log, store, settings, doc, budget)
    except RedisError:
        raise
    except Stopped as stop:
        log_.warning("auto-optimization: %s", stop)
        return None
    except Exception as exc:  # a bug or a booster failure: the evaluation says so
        doc = _failed(doc, exc)
    log.update_evaluation(doc)
    log_.info("auto-optimization: %s (%s)", doc["status"], doc.get("optimalPolicy"))
    return doc


def _run_auto(log: EventLog, store: ModelStore, settings: Settings, doc: dict[str, Any],
              budget: Budget | None = None) -> dict[str, Any]:
    """An Auto evaluation run, its verdict applied."""
    doc = run(log, settings, doc, budget)
    if doc["status"] != "completed":
        return doc
    doc, best = _decide(doc)
    try:
        if best is not None:
            _apply(log, store, settings, best)
    except ValueError as exc:  # the candidate does not build for these models
        doc = {**doc, "status": "onlinePolicyRetained", "description": str(exc)}
    return doc


def _apply(log: EventLog, store: ModelStore, settings: Settings,
           result: dict[str, Any]) -> dict[str, Any]:
    """Set a Custom result's arguments as the policy (ValueError if they do not build)."""
    new = policy.make_policy(result["name"], result["arguments"], settings,
                             policy.action_counts(log, settings))
    return policy.set_policy(log, store, settings, new)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A summary row as answered (Personalizer's PolicyResultSummary fields)."""
    return {k: v for k, v in row.items() if k not in ("low", "high")}


def _content(doc: dict[str, Any]) -> dict[str, Any]:
    """The results in the azure-ai-personalizer SDK's shape (``content.value``)."""
    def point(row: dict[str, Any]) -> dict[str, Any]:
        return {"timeStamp": row["timeStamp"], "expectedReward": row["averageReward"],
                "confidenceInterval": [row["low"], row["high"]]}
    value = [{"name": r["name"], "arguments": r["arguments"], "policySource": r["policySource"],
              "slotId": "", "summary": {k: v for k, v in point(r["totalSummary"]).items()
                                        if k != "timeStamp"},
              "timeseries": {"data": [point(x) for x in r["summary"]]}}
             for r in doc["policyResults"]]
    return {"startTime": doc["startTime"], "endTime": doc["endTime"], "value": value}


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """An evaluation as answered: Personalizer's Evaluation fields, and ``content``."""
    results = [{**r, "summary": [_row(x) for x in r["summary"]],
                "totalSummary": _row(r["totalSummary"])} for r in doc["policyResults"]]
    keep = ("id", "name", "startTime", "endTime", "jobId", "status", "featureImportance",
            "evaluationType", "optimalPolicy", "creationTime", "description")
    return {**{k: doc.get(k) for k in keep}, "policyResults": results,
            "content": _content(doc) if doc["policyResults"] else None}
