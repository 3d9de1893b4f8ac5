"""Replay a logged bandit stream through a learner, a trained offline policy or a running
service (``boostbandit replay``; the methods and their estimates: docs/replay.md).

- :mod:`~service.replay.reading`: the log read for a replay (events, repeated ids, checks).
- :mod:`~service.replay.result`: :class:`ReplayResult`, its curves and plot.
- :mod:`~service.replay.offline`: :func:`replay_learner`, :func:`replay_policy`,
  :func:`load_policy`.
- :mod:`~service.replay.live`: :func:`replay_target`, against a service over HTTP.
"""

from service.formats.reader import detect_format
from service.replay.live import replay_target
from service.replay.offline import load_policy, replay_learner, replay_policy
from service.replay.reading import (
    LoggedEvent,
    LogScan,
    Repeats,
    ReplayError,
    infer_actions,
    iter_log,
    open_log,
    scan_log,
)
from service.replay.result import ReplayResult, plot_replay

__all__ = [
    "LogScan",
    "LoggedEvent",
    "Repeats",
    "ReplayError",
    "ReplayResult",
    "detect_format",
    "infer_actions",
    "iter_log",
    "load_policy",
    "open_log",
    "plot_replay",
    "replay_learner",
    "replay_policy",
    "replay_target",
    "scan_log",
]
