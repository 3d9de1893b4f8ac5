"""The event log: the only code that talks to Redis.

- :mod:`~service.eventlog.keys`: key names (one hash tag per model), name checks.
- :mod:`~service.eventlog.scripts`: the Lua scripts, each with its contract.
- :mod:`~service.eventlog.log`: :class:`EventLog`, the gateway the routes, learner, worker and
  CLI call (:mod:`~service.eventlog.state`: its methods of a model's stored state).
- :mod:`~service.eventlog.replies`: what Redis answers, the log's errors and Redis's error types.
- :mod:`~service.eventlog.consumer`: :class:`StreamConsumer`, the loop of the learner and the
  worker (consumer groups, fenced leases, signals, error policy).
- :mod:`~service.eventlog.connect`: clients that never retry a write blindly.
- :mod:`~service.eventlog.replicas`: writes that replicas acknowledged (``WAIT``) before they
  count; :mod:`~service.eventlog.imports`: ``boostbandit import``'s records.
- :mod:`~service.eventlog.embedded`: the embedded redis-server of ``boostbandit serve``.

See docs/consistency.md for the guarantees and how the fault-injection tests check them.
"""

from service.eventlog.connect import connect, connect_async
from service.eventlog.keys import MODELS_KEY, check_name, event_key, keys
from service.eventlog.log import EventLog, Limits
from service.eventlog.replies import (
    MAX_SEQUENCE,
    DecisionOutcome,
    LeaseLost,
    OutcomeUnknown,
    Redis,
    RedisError,
    ResponseError,
)

__all__ = [
    "MAX_SEQUENCE",
    "MODELS_KEY",
    "DecisionOutcome",
    "EventLog",
    "LeaseLost",
    "Limits",
    "OutcomeUnknown",
    "Redis",
    "RedisError",
    "ResponseError",
    "check_name",
    "connect",
    "connect_async",
    "event_key",
    "keys",
]
