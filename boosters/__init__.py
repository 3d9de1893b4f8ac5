"""The algorithms: pure numpy, no I/O (docs/boosters.md, docs/papers.md).

- ``base``: :class:`Decision` and the online protocol; ``registry``: name -> online booster.
- ``_params``: the one set of parameter checks; ``exploration``: eq. 2, loss estimates, draws.
- ``groups``: the online boosters' parameter groups; ``_migrations``: what old pickles lack.
- ``online/``: the boosters the learner hosts; ``batch/``: estimators fit on a batch.
- ``ope``: off-policy estimators.

Names load lazily, so ``import boosters`` costs nothing (the CLI's start-up).
"""

from importlib import import_module

__all__ = [
    "Decision",
    "Exploration",
    "OnlineBooster",
    "RewardExpert",
    "WeakLearner",
    "booster_class",
    "booster_params",
    "flag_params",
    "make_booster",
    "names",
]

_LAZY = {
    "Decision": "boosters.base",
    "OnlineBooster": "boosters.base",
    "Exploration": "boosters.groups",
    "RewardExpert": "boosters.groups",
    "WeakLearner": "boosters.groups",
    "booster_class": "boosters.registry",
    "booster_params": "boosters.registry",
    "flag_params": "boosters.registry",
    "make_booster": "boosters.registry",
    "names": "boosters.registry",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'boosters' has no attribute {name!r}")
