"""The algorithms: pure numpy, no I/O (docs/boosters.md, docs/papers.md).

- ``base``: :class:`Decision` and the online protocol; ``registry``: name -> online booster.
- ``_params``: the one set of parameter checks; ``exploration``: eq. 2, loss estimates, draws.
- ``online/``: the boosters the learner hosts; ``batch/``: estimators fit on a batch.
- ``ope``: off-policy estimators.

Names load lazily, so ``import boosters`` costs nothing (the CLI's start-up).
"""

from importlib import import_module

from boosters._params import FLAG_PARAMS, OTHER_PARAMS, SIZE_PARAMS

__all__ = [
    "FLAG_PARAMS",
    "OTHER_PARAMS",
    "SIZE_PARAMS",
    "Decision",
    "OnlineBooster",
    "booster_class",
    "make_booster",
    "names",
]

_LAZY = {
    "Decision": "boosters.base",
    "OnlineBooster": "boosters.base",
    "booster_class": "boosters.registry",
    "make_booster": "boosters.registry",
    "names": "boosters.registry",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'boosters' has no attribute {name!r}")
