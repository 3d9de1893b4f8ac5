"""Open Bandit Pipeline style tables: one CSV row (a header names the action, reward and
propensity columns; every other column is a context feature) as our joined event
(docs/formats.md)."""

from __future__ import annotations

import math
import time
from typing import Any

from service.formats import fields
from service.formats.fields import RewardRule

__all__ = [
    "ACTION_COLUMNS",
    "META_COLUMNS",
    "PSCORE_COLUMNS",
    "REWARD_COLUMNS",
    "cell",
    "parse_obp_row",
    "pick_column",
    "table_columns",
]

#: The accepted names of each column, first match wins.
ACTION_COLUMNS = ("action", "item_id")
REWARD_COLUMNS = ("reward", "click")
PSCORE_COLUMNS = ("pscore", "propensity_score", "action_prob")
#: Columns that are neither a context feature nor one of the three above.
META_COLUMNS = ("event_id", "timestamp", "position")


def pick_column(header: list[str], names: tuple[str, ...], what: str) -> str:
    """The first of ``names`` in ``header``; ValueError naming them when none is.

    >>> pick_column(["x", "item_id"], ACTION_COLUMNS, "action")
    'item_id'
    """
    for name in names:
        if name in header:
            return name
    raise ValueError(f"the table has no {what} column (one of: {', '.join(names)})")


def table_columns(header: list[str]) -> tuple[str, str, str]:
    """``(action, reward, propensity)`` column names of a table's ``header``."""
    return (
        pick_column(header, ACTION_COLUMNS, "action"),
        pick_column(header, REWARD_COLUMNS, "reward"),
        pick_column(header, PSCORE_COLUMNS, "propensity (pscore)"),
    )


def cell(text: str) -> int | float | str:
    """A feature cell: an int, else a finite float, else the text.

    >>> cell("3"), cell("0.5"), cell("inf"), cell("red")
    (3, 0.5, 'inf', 'red')
    """
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def _chosen(raw_action: str, actions: list[str], action_index: bool) -> int:
    """The index of the row's action: an action id, or with ``action_index`` a 0-based index."""
    if action_index:
        try:
            chosen = int(raw_action)
        except ValueError:
            raise ValueError(f"action {raw_action!r} is not an integer index") from None
        if not 0 <= chosen < len(actions):
            raise ValueError(f"unknown action index {chosen} (model has {len(actions)})")
        return chosen
    if raw_action not in actions:
        raise ValueError(f"unknown action {raw_action!r} (model actions: {', '.join(actions)})")
    return actions.index(raw_action)


def _float(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{what} is not a number: {text!r}") from None


def parse_obp_row(
    row: dict[str, str],
    columns: tuple[str, str, str],
    actions: list[str],
    rule: RewardRule,
    action_index: bool,
    default_id: str,
) -> dict[str, Any]:
    """One CSV row of an OBP-style table -> our joined event over ``actions``.

    Only the chosen action's propensity is known: the other actions' probabilities are logged
    as null (in ``p`` and ``bb.decision.probabilities``), not made up.
    """
    action_col, reward_col, pscore_col = columns
    chosen = _chosen((row.get(action_col) or "").strip(), actions, action_index)
    raw_p = (row.get(pscore_col) or "").strip()
    if not raw_p:
        raise ValueError("missing propensity")
    pscore = fields.propensity(_float(raw_p, "propensity"))
    reward = fields.reward(_float((row.get(reward_col) or "").strip(), "reward"), rule)
    probs: list[float | None] = [None] * len(actions)
    probs[chosen] = pscore
    context = {
        key: cell(value.strip())
        for key, value in row.items()
        if key not in columns and key not in META_COLUMNS and key is not None
        and value is not None and value.strip() != ""
    }
    event_id = (row.get("event_id") or "").strip() or default_id
    ts_text = (row.get("timestamp") or "").strip()
    ts, timestamp = fields.parse_timestamp(ts_text) if ts_text else (time.time(), None)
    return fields.build_event(
        actions, event_id=fields.event_id(event_id), ts=ts, timestamp=timestamp,
        context=context, probabilities=probs, chosen=chosen, reward=reward, excluded=[],
    )
