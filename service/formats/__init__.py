"""Log files, pure parsing (no Redis; docs/formats.md describes each format):

- :mod:`~service.formats.fields`: the checks every format shares, reward maps.
- :mod:`~service.formats.jsonl`: our own joined events, one JSON object per line.
- :mod:`~service.formats.dsjson`: Vowpal Wabbit's DSJSON, both ways.
- :mod:`~service.formats.namespaces`: flat feature names and VW namespaces, both ways.
- :mod:`~service.formats.obp`: Open Bandit Pipeline style CSV rows.
- :mod:`~service.formats.reader`: the one validation pass over a file, format detection.
- :mod:`~service.formats.progress`: the progress bar of the commands that read or write logs
  (import, export, replay, simulate).
"""

from service.formats.dsjson import flatten_context, parse_dsjson, to_dsjson
from service.formats.fields import (
    PROB_TOL,
    REWARD_MAPS,
    RewardMap,
    RewardRule,
    check_reward_map,
    reward_rule,
)
from service.formats.jsonl import parse_jsonl
from service.formats.obp import parse_obp_row
from service.formats.reader import (
    FORMATS,
    Format,
    LineError,
    LogError,
    detect_format,
    first_object,
    iter_events,
)

__all__ = [
    "FORMATS",
    "PROB_TOL",
    "REWARD_MAPS",
    "Format",
    "LineError",
    "LogError",
    "RewardMap",
    "RewardRule",
    "check_reward_map",
    "detect_format",
    "first_object",
    "flatten_context",
    "iter_events",
    "parse_dsjson",
    "parse_jsonl",
    "parse_obp_row",
    "reward_rule",
    "to_dsjson",
]
