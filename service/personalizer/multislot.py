"""Personalizer's multi-slot events onto our models: one decision per slot, in slot order, by the
model of the request's action set, each logged as its own event ``<eventId>/<slotId>`` with the
slot id (``slot``) and the slot's features (``slot.<name>``) in its context and the earlier
slots' actions excluded; the rewards and the activation of a multi-slot event reach its slots'
events. docs/personalizer.md ("Multi-slot") describes it; the routes are in
:mod:`service.personalizer.routes.multislot`."""

from __future__ import annotations

import uuid
from typing import Any

from service.api.deps import key_matches
from service.eventlog import EventLog
from service.models.runtime import ServedModel
from service.models.store import ModelStore
from service.personalizer import mapping
from service.personalizer.failures import PersonalizerFailure, bad
from service.personalizer.schemas import (
    MultiSlotRankRequest,
    MultiSlotRankResponse,
    MultiSlotRewardRequest,
    RewardRequest,
    SlotRequest,
    SlotResponse,
)
from service.settings import Settings

__all__ = ["SLOT_FEATURE", "activate", "rank", "reward", "slot_event_id", "starved_slot"]

#: The context feature holding the slot id; a slot's ``features`` become ``slot.<name>``. The
#: request's own context may not use these names (a 400 says so). Not ``_``-prefixed: DSJSON
#: (our export, VW) reserves those keys, and would drop the slot from the context.
SLOT_FEATURE = "slot"


def slot_event_id(event_id: str, slot_id: str) -> str:
    """The event of one slot. A request's event id has no ``/`` (and single-slot event ids
    neither), so it is distinct from every other event id.

    >>> slot_event_id("75269AD0", "Main Article")
    '75269AD0/Main Article'
    """
    return f"{event_id}/{slot_id}"


def starved_slot(allowed: list[set[str]]) -> int | None:
    """The first slot the earlier slots could leave without an action, whatever they choose:
    one allowing no more actions than there are earlier slots allowing some of them.

    >>> starved_slot([{"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}]) is None
    True
    >>> starved_slot([{"a", "b"}, {"a", "b"}, {"a", "b"}])
    2
    >>> starved_slot([{"a"}, {"b"}, {"c"}]) is None  # disjoint: nothing taken from another
    True
    >>> starved_slot([{"a", "b"}, {"b"}])
    1
    """
    for k, mine in enumerate(allowed):
        rivals = sum(1 for earlier in allowed[:k] if earlier & mine)
        if rivals >= len(mine):
            return k
    return None


def _check_cost(slots: int, actions: int, settings: Settings, token: str | None) -> None:
    """A user key's multi-slot rank does at most ``personalizer_max_slot_actions`` slots x
    actions of work (400 otherwise, saying so)."""
    if not settings.auth_enabled or key_matches(token or "", settings.admins):
        return
    if slots * actions > settings.personalizer_max_slot_actions:
        raise bad("InvalidRankRequest",
                  f"{slots} slots x {actions} actions is more than a user key may rank at once "
                  f"(personalizer_max_slot_actions: {settings.personalizer_max_slot_actions}); "
                  "send fewer slots or actions, or use an admin key")


def _checked_slots(body: MultiSlotRankRequest, ids: list[str], settings: Settings
                   ) -> list[list[str]]:
    """Each slot's excluded action ids, or a 400 naming the slot and the rule."""
    seen: set[str] = set()
    dups = sorted({s.id for s in body.slots if s.id in seen or seen.add(s.id)})
    if dups:
        raise bad("InvalidRankRequest", f"slot ids must be distinct; repeated: {', '.join(dups)}")
    baselines = [s.baselineAction for s in body.slots]
    repeated = sorted({b for b in baselines if baselines.count(b) > 1})
    if repeated:
        raise bad("InvalidRankRequest", "each slot needs its own baselineAction; shared: "
                  + ", ".join(repeated))
    excluded = []
    for slot in body.slots:
        try:
            mine = mapping.excluded_ids(slot.excludedActions, ids, settings)
        except PersonalizerFailure as exc:
            raise bad(exc.code, f"slot {slot.id!r}: {exc.message}") from None
        if slot.baselineAction not in ids:
            raise bad("InvalidRankRequest", f"slot {slot.id!r}: baselineAction "
                      f"{slot.baselineAction!r} is not among actions")
        if slot.baselineAction in mine:
            raise bad("InvalidRankRequest", f"slot {slot.id!r}: baselineAction "
                      f"{slot.baselineAction!r} is among its excludedActions")
        excluded.append(mine)
    starved = starved_slot([set(ids) - set(mine) for mine in excluded])
    if starved is not None:
        raise bad("InvalidRankRequest",
                  f"slot {body.slots[starved].id!r} may have no action left: the slots before "
                  "it can take every action it allows (each action fills one slot at most); "
                  "allow it more actions, or remove slots")
    return excluded


def _slot_context(context: dict[str, Any], slot: SlotRequest, settings: Settings
                  ) -> dict[str, Any]:
    """The context of one slot's decision: the request's, the slot id and its features."""
    try:
        own = mapping.request_context(slot.features, settings)
    except PersonalizerFailure as exc:
        raise bad(exc.code, f"slot {slot.id!r} features: {exc.message}") from None
    out = {**context, SLOT_FEATURE: slot.id,
           **{f"{SLOT_FEATURE}.{k}": v for k, v in own.items()}}
    return mapping.check_limits(out, settings, f"slot {slot.id!r} (with the slot's features)")


def _slot_contexts(body: MultiSlotRankRequest, model: ServedModel, log: EventLog,
                   settings: Settings) -> list[dict[str, Any]]:
    """Every slot's context, checked before any is logged (a feature of another type than the
    model knows is kept apart when its slot is decided: :func:`mapping.typed_context`)."""
    context = mapping.request_context(body.contextFeatures, settings)
    reserved = [k for k in context if k == SLOT_FEATURE or k.startswith(SLOT_FEATURE + ".")]
    if reserved:
        raise bad("InvalidRankRequest", f"contextFeatures: {', '.join(reserved)}: the feature "
                  f"{SLOT_FEATURE!r} and its namespace are the slot's in a multi-slot rank "
                  "(the slot id and the slot's features); rename them")
    return [_slot_context(context, slot, settings) for slot in body.slots]


def rank(body: MultiSlotRankRequest, log: EventLog, store: ModelStore, settings: Settings,
         token: str | None) -> MultiSlotRankResponse:
    """Fill the slots in order, each by one decision of the action set's model among the
    actions its slot allows and no earlier slot took; each is logged (or deferred) as the
    event ``<eventId>/<slotId>``."""
    ids = [a.id for a in body.actions]
    _check_cost(len(body.slots), len(ids), settings, token)
    excluded = _checked_slots(body, ids, settings)
    model = mapping.resolve_model(ids, log, store, settings,
                                  mapping.may_create_models(token, settings),
                                  mapping.wants_action_features(body.actions, settings))
    candidates = mapping.rank_candidates(model, body.actions, settings)
    slot_contexts = _slot_contexts(body, model, log, settings)
    event_id = body.eventId or uuid.uuid4().hex
    defer = bool(body.deferActivation)
    record = {"model": model.name, "slots": [s.id for s in body.slots], "deferred": defer}
    retention = model.config.reward_wait_seconds + settings.event_retention_seconds
    if not log.claim_multislot_event(event_id, record, retention):
        raise PersonalizerFailure(409, "Conflict", _used(event_id, log))
    chosen: list[str] = []
    try:
        for slot, ctx, mine in zip(body.slots, slot_contexts, excluded, strict=True):
            chosen.append(_fill(model, log, store, settings, event_id, slot, ctx,
                                [*mine, *chosen], ids, defer, candidates))
    except Exception:
        _failed(event_id, record, log)
        raise
    return MultiSlotRankResponse(
        slots=[SlotResponse(id=s.id, rewardActionId=a) for s, a in zip(body.slots, chosen,
                                                                        strict=True)],
        eventId=event_id)


def _logged(event_id: str, slots: list[str], log: EventLog) -> list[str]:
    """The slots among ``slots`` whose event was logged (or deferred)."""
    return [s for s in slots if log.model_of_event(slot_event_id(event_id, s)) is not None]


def _failed(event_id: str, record: dict[str, Any], log: EventLog) -> None:
    """After a rank failed: give the event id back if no slot was logged, else keep only the
    logged slots in its record, marked ``partial`` (their rewards and activation still work)."""
    logged = _logged(event_id, record["slots"], log)
    if not logged:
        log.release_multislot_event(event_id)
    else:
        log.replace_multislot_event(event_id, {**record, "slots": logged, "partial": True})


def _used(event_id: str, log: EventLog) -> str:
    """Why ``event_id`` cannot be ranked again (the 409's message)."""
    record = log.multislot_event(event_id) or {}
    if record.get("partial"):
        return (f"eventId {event_id!r} was partly used: its multi-slot rank failed after "
                f"logging slot(s) {', '.join(record['slots'])} (their rewards and activation "
                "still work); rank again with another eventId")
    return f"eventId {event_id!r} was already used"


def _fill(model: ServedModel, log: EventLog, store: ModelStore, settings: Settings,
          event_id: str, slot: SlotRequest, context: dict[str, Any], taken: list[str],
          ids: list[str], defer: bool, candidates: mapping.Candidates | None) -> str:
    """Decide and log one slot among the request's actions not in ``taken``; its action id.
    ``candidates``: the request's, for a model with action features
    (:func:`mapping.rank_candidates`)."""
    actions = model.config.actions if candidates is None else candidates[0]
    offered = [a for a in ids if a not in set(taken)]
    if not offered:  # pragma: no cover - starved_slot refuses such requests beforehand
        raise bad("InvalidRankRequest", f"slot {slot.id!r} has no action left")
    excluded = [i for i, a in enumerate(actions) if a not in set(offered)]
    # the baseline may have been taken by an earlier slot (Online mode only: the other modes
    # play every slot's own baseline, and baselines are distinct)
    baseline = slot.baselineAction if slot.baselineAction in offered else offered[0]
    context, new_types = mapping.typed_context(model, log, context)
    decision = mapping.rank_event(
        model, log, store, settings, slot_event_id(event_id, slot.id), context, new_types,
        excluded, baseline, defer, extra={"multislot": event_id, "slot": slot.id},
        candidates=candidates)
    return actions[decision.action]


def _slots_of(event_id: str, log: EventLog, code: str) -> list[str]:
    record = log.multislot_event(event_id)
    if record is None:
        raise PersonalizerFailure(404, code, f"unknown or expired multi-slot eventId "
                                  f"{event_id!r}")
    return record["slots"]


def reward(event_id: str, body: MultiSlotRewardRequest, log: EventLog) -> None:
    """Each listed slot's reward goes to that slot's event (as a single-slot ``reward``
    would); every slot id, and its slot's logged event, is checked before any reward is
    recorded."""
    slots = set(_slots_of(event_id, log, "NotFound"))
    unknown = list(dict.fromkeys(r.slotId for r in body.reward if r.slotId not in slots))
    if unknown:
        raise bad("InvalidRewardRequest", f"slotId not among the slots of event {event_id!r}: "
                  + ", ".join(repr(s) for s in unknown))
    listed = list(dict.fromkeys(r.slotId for r in body.reward))
    missing = [s for s in listed if s not in _logged(event_id, listed, log)]
    if missing:
        raise PersonalizerFailure(404, "NotFound", f"event {event_id!r}: no logged event of "
                                  f"slot(s) {', '.join(repr(s) for s in missing)} (its rank is "
                                  "still running, or expired); no reward recorded")
    for r in body.reward:
        mapping.reward(slot_event_id(event_id, r.slotId), RewardRequest(value=r.value), log)


def activate(event_id: str, log: EventLog) -> None:
    """Activate every slot's event (logged from now on, with a reward sent before)."""
    for slot_id in _slots_of(event_id, log, "InvalidEventIdToActivate"):
        mapping.activate(slot_event_id(event_id, slot_id), log)
