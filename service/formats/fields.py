"""The field checks every log format shares: numbers, propensities, rewards (and their maps),
timestamps, probability vectors, event ids, and the joined event a parsed line becomes.

Each check raises ValueError with the reason a ``line N:`` error reports (docs/formats.md).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Literal, get_args

from boosters.base import Decision, check_context
from boosters.exploration import complete_probabilities
from service.domain import reward_from_client
from service.events import decision_event, joined_event

__all__ = [
    "PROB_TOL",
    "REWARD_MAPS",
    "RewardMap",
    "RewardRule",
    "build_event",
    "check_reward_map",
    "check_vector",
    "event_id",
    "number",
    "parse_timestamp",
    "probabilities",
    "propensity",
    "reward",
    "reward_rule",
]

#: How a log's rewards reach the model's [0, 1]: ``identity`` (already in [0, 1]); ``clip`` and
#: ``rescale`` (Personalizer's [-1, 1], by that ``negative_rewards`` rule); ``personalizer`` (by
#: the target model's own ``negative_rewards`` rule, as the Personalizer routes read them).
RewardMap = Literal["identity", "personalizer", "clip", "rescale"]
REWARD_MAPS: tuple[str, ...] = get_args(RewardMap)
#: A reward map resolved against a model's ``negative_rewards`` rule (:func:`reward_rule`).
RewardRule = Literal["identity", "clip", "rescale"]

#: Relative tolerance for a probability vector's sum and for ``p[0]`` vs ``_label_probability``.
PROB_TOL = 1e-3


def check_reward_map(reward_map: str) -> None:
    """ValueError naming the accepted maps when ``reward_map`` is not one of them.

    >>> check_reward_map("scaled")
    Traceback (most recent call last):
    ...
    ValueError: reward map must be one of identity, personalizer, clip, rescale; got 'scaled'
    """
    if reward_map not in REWARD_MAPS:
        raise ValueError(f"reward map must be one of {', '.join(REWARD_MAPS)}; got {reward_map!r}")


def reward_rule(reward_map: str, negative_rewards: str) -> RewardRule:
    """The rule a reward map applies for a model whose ``negative_rewards`` rule is given
    (:func:`check_reward_map` checks the map).

    >>> reward_rule("personalizer", "rescale"), reward_rule("clip", "rescale")
    ('rescale', 'clip')
    """
    return negative_rewards if reward_map == "personalizer" else reward_map  # type: ignore[return-value]


def number(value: Any, what: str) -> float:
    """``value`` as a finite float (a bool is not a number)."""
    if type(value) is float and value - value == 0.0:  # most values: finite floats, as they are
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} is not finite: {value!r}")
    return value


def propensity(value: Any) -> float:
    """A logged propensity, in (0, 1]."""
    if value is None:
        raise ValueError("missing propensity")
    p = number(value, "propensity")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"propensity must be in (0, 1], got {p!r}")
    return p


def reward(value: Any, rule: RewardRule) -> float:
    """A logged reward on the model's scale [0, 1], read by ``rule`` (:func:`reward_rule`)."""
    r = number(value, "reward")
    if rule != "identity":
        if not -1.0 <= r <= 1.0:
            raise ValueError(f"reward must be in [-1, 1] (Personalizer scale), got {r!r}")
        return reward_from_client(r, rule)
    if not 0.0 <= r <= 1.0:
        hint = ""
        if -1.0 <= r < 0.0:
            hint = " (Personalizer's [-1, 1] scale? use the personalizer reward map)"
        raise ValueError(f"reward must be in [0, 1], got {r!r}{hint}")
    return r


def parse_timestamp(value: Any) -> tuple[float, str | None]:
    """``(unix seconds, original DSJSON timestamp string or None)``.

    >>> parse_timestamp("2024-01-02T03:04:05.5Z")
    (1704164645.5, '2024-01-02T03:04:05.5Z')
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), None
    if not isinstance(value, str) or not value:
        raise ValueError(f"bad Timestamp {value!r}")
    text = value.strip()
    try:
        return float(text), None
    except ValueError:
        pass
    core = text[:-1] if text.endswith("Z") else text
    frac = ""
    if "." in core:
        core, frac = core.split(".", 1)
    try:
        base = dt.datetime.fromisoformat(core)
    except ValueError:
        raise ValueError(f"bad Timestamp {value!r} (expected yyyy-mm-ddThh:mm:ss.sssZ)") from None
    if base.tzinfo is None:
        base = base.replace(tzinfo=dt.UTC)
    seconds = base.timestamp()
    if frac:
        if not frac.isdigit():
            raise ValueError(f"bad Timestamp {value!r}")
        seconds += int(frac[:6].ljust(6, "0")) / 1e6
    return seconds, text if text.endswith("Z") else None


def check_vector(p: list[float | None], what: str) -> None:
    """Probabilities in [0, 1] summing to 1; with unknown entries (None), at most 1."""
    known = [v for v in p if v is not None]
    if any(not 0.0 <= v <= 1.0 for v in known):
        raise ValueError(f"{what} has a probability outside [0, 1]")
    if len(known) == len(p) and abs(sum(known) - 1.0) > PROB_TOL:
        raise ValueError(f"{what} sums to {sum(known):.6g}, not 1")
    if sum(known) > 1.0 + PROB_TOL:
        raise ValueError(f"{what}: its known probabilities sum to {sum(known):.6g}, over 1")


def probabilities(values: list[Any]) -> list[float | None]:
    """``p`` of a logged line: numbers, and null for a probability the log did not record
    (only the chosen action's, the first, is required)."""
    if all(type(v) is float for v in values) and math.isfinite(sum(values)):  # finite floats
        return list(values)
    return [None if v is None and i > 0 else number(v, "p[i]") for i, v in enumerate(values)]


def event_id(value: Any) -> str:
    """A logged event id: a non-empty string of at most 256 characters."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"EventId must be a non-empty string, got {value!r}")
    if len(value) > 256:
        raise ValueError("EventId is longer than 256 characters")
    return value


def build_event(
    actions: list[str],
    *,
    event_id: str,
    ts: float,
    timestamp: str | None,
    context: dict[str, Any],
    probabilities: list[float | None],
    chosen: int,
    reward: float,
    excluded: list[int],
    extra_bb: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A joined event over ``actions`` (never learned online; ``bb.source = "import"``).

    A probability the source did not record (None) is logged as null, in ``p`` and in
    ``bb.decision.probabilities``: only what is known is logged.
    """
    try:
        check_context(context)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad context: {exc}") from None
    decision = Decision(action=chosen, probabilities=complete_probabilities(probabilities))
    ev = decision_event(event_id, ts, 0, actions, context, decision, excluded=excluded)
    if any(v is None for v in probabilities):
        ev["p"] = [probabilities[a - 1] for a in ev["a"]]
        ev["bb"]["decision"]["probabilities"] = list(probabilities)
    ev["bb"]["model_version"] = None
    if timestamp is not None:
        ev["Timestamp"] = timestamp
    joined = joined_event(ev, reward=reward, label=None, source="import", learn=False, ts=ts)
    if extra_bb:
        joined["bb"].update(extra_bb)
    return joined
