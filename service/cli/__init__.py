"""The ``boostbandit`` command line: one module per command group, on one Typer app.

- :mod:`~service.cli.base`: the app, one-line usage errors, which Redis a command uses.
- :mod:`~service.cli.simulate`: ``simulate`` (the supervised-to-bandit simulation).
- :mod:`~service.cli.processes`: ``serve``, ``learner``, ``worker``.
- :mod:`~service.cli.logs`: ``export``, ``import``.
- :mod:`~service.cli.replay`: ``replay learner|policy|target``.

Importing it loads no heavy package (each command imports what it needs), so ``--help`` is fast.
"""

# isort: off
# the commands register on `app` in this order, the order `boostbandit --help` lists them
from service.cli import simulate, processes, logs, replay
# isort: on
from service.cli.base import app
from service.cli.simulate import TREE_PROFILES, select_params

__all__ = ["TREE_PROFILES", "app", "logs", "processes", "replay", "select_params", "simulate"]
