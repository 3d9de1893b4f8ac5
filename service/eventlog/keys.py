"""Redis key names of the event log.

Every key of a model carries the Redis Cluster hash tag ``{name}`` so the Lua scripts that touch
several keys of one model stay on one shard. Model names are validated (:data:`NAME_PATTERN`)
before any key is built, and patterns handed to ``SCAN MATCH`` escape the glob characters anyway.

>>> keys("shop")["joined"]
'bb:{shop}:joined'
>>> glob_escape("a*b?[c]")
'a\\\\*b\\\\?\\\\[c\\\\]'
"""

from __future__ import annotations

import re

__all__ = [
    "MODELS_KEY", "NAME_PATTERN", "check_name", "consumers_key", "event_key", "glob_escape", "keys",
]

MODELS_KEY = "bb:models"
#: the key ``/readyz`` writes to see that Redis takes writes (expires in 10 s)
READY_PROBE_KEY = "bb:ready-probe"

#: what a model name may be: it goes into key names and URL paths
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)
_RULE = "1-64 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit"


def check_name(name: str) -> str:
    """``name`` if it is a valid model name, else ValueError naming the rule.

    >>> check_name("shop-1")
    'shop-1'
    >>> check_name("glob*")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: invalid model name 'glob*': 1-64 characters of A-Z a-z 0-9 _ . -, ...
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"invalid model name {name!r}: {_RULE}")
    return name


def keys(name: str) -> dict[str, str]:
    """Every Redis key of model ``name``."""
    base = f"bb:{{{name}}}"
    return {
        "decisions": f"{base}:decisions",
        "feedback": f"{base}:feedback",
        "joined": f"{base}:joined",
        "waiting": f"{base}:waiting",  # zset event id -> reward deadline (Redis clock)
        "stats": f"{base}:stats",
        "schema": f"{base}:schema",  # hash feature name -> "n" (number) | "s" (string)
        "snapshot": f"{base}:snapshot",
        # the state an imported model starts from (Personalizer's PUT /model), by model uid
        "seed": f"{base}:seed",
        # the latest serving copy the learner published (between snapshots), for API replicas
        "serving_copy": f"{base}:serving_copy",
        "lease": f"{base}:lease",  # "<owner>|<fencing token>"
        "fence": f"{base}:fence",  # counter: one fencing token per lease taken
        # offline policies (service/worker.py): metadata by version, pickles of the published
        # ones, the version counter, the latest published version, the worker's lease and status
        "policies": f"{base}:policies",
        "policy_blobs": f"{base}:policy_blobs",
        "policy_seq": f"{base}:policy_seq",
        "published": f"{base}:published",
        "serving": f"{base}:serving",  # JSON: {"mode": "online"|"policy", ...}
        "worker_lease": f"{base}:worker_lease",
        "worker_fence": f"{base}:worker_fence",
        "worker_status": f"{base}:worker_status",
        "imports": f"{base}:imports",  # import records (boostbandit import), by import id
        "deferred_prefix": f"{base}:deferred:",  # Personalizer events waiting for /activate
        "event_prefix": f"{base}:ev:",  # hash per event: decision JSON, deadline, flags
    }


def consumers_key(kind: str) -> str:
    """The live consumers of a lease kind (a sorted set; one key, so one slot on a cluster)."""
    return f"bb:consumers:{kind}"


def event_key(name: str, event_id: str) -> str:
    """The per-event hash of ``event_id``."""
    return keys(name)["event_prefix"] + event_id


#: Personalizer event id -> the model that ranked it (event ids are global there)
PERSONALIZER_INDEX_PREFIX = "bb:personalizer:event:"


def personalizer_index_key(event_id: str) -> str:
    """The key naming the model of Personalizer event ``event_id``."""
    return PERSONALIZER_INDEX_PREFIX + event_id


def glob_escape(text: str) -> str:
    """``text`` with Redis glob characters escaped, for ``SCAN MATCH``."""
    return re.sub(r"([*?\[\]\\^])", r"\\\1", text)
