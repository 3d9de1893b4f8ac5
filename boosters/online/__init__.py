"""The online boosters the learner hosts, one protocol (``boosters.base``) for all.

- ``template``: Algorithm 1 of Zhang et al. 2019, shared by ``banditbbm`` (with ``potentials``)
  and ``adabandit``, each with its full-information twin.
- ``oco``: BCHM20's binary online agnostic booster; ``oco_bandit``: its multiclass bandit form.
- ``baselines``: uniform, epsilon-greedy over one tree, River's bandit policies.
- ``adf``: per-request candidate sets described by features (VW's ADF case); not of the
  fixed-action protocol, so not in the registry.

Names load lazily (``boosters.registry`` imports a booster's module only when it is made).
"""

from importlib import import_module

__all__ = [
    "ActionFeatureBooster",
    "AdaBandit",
    "AdaBoostOLM",
    "BanditBBM",
    "BoostingTemplate",
    "EpsilonGreedyTree",
    "OCOBandit",
    "OCOBooster",
    "OCOFull",
    "OnlineMBBM",
    "RiverPolicy",
    "UniformPolicy",
]

_LAZY = {
    "ActionFeatureBooster": "adf",
    "AdaBandit": "adabandit",
    "AdaBoostOLM": "adabandit",
    "BanditBBM": "banditbbm",
    "BoostingTemplate": "template",
    "EpsilonGreedyTree": "baselines",
    "OCOBandit": "oco_bandit",
    "OCOBooster": "oco",
    "OCOFull": "oco_bandit",
    "OnlineMBBM": "banditbbm",
    "RiverPolicy": "baselines",
    "UniformPolicy": "baselines",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
