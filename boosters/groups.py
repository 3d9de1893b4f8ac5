"""The online boosters' parameter groups: :class:`Exploration`, :class:`WeakLearner`,
:class:`RewardExpert` (docs/boosters.md, "Parameters").

A tree booster takes its exploration schedule, its weak learners' settings and its reward model's
as three small frozen dataclasses instead of some twenty keywords. Stored configs stay flat
(``{"rho": 0.05, "leaf_prediction": "mc"}``): :func:`regroup` maps flat keys into the groups
(the registry's :func:`boosters.registry.make_booster` and every constructor's ``**flat`` go
through it), :func:`flat_defaults` lists the flat keys a booster accepts with their defaults.
A booster keeps the values as flat attributes (``booster.rho``), as every earlier version did,
so old pickles load unchanged; :func:`groups_of` reads the groups back.

>>> from boosters.online.adabandit import AdaBandit
>>> booster = AdaBandit(3, seed=0, exploration=Exploration(rho=0.05), leaf_prediction="mc")
>>> booster.rho, booster.rho_decay, booster.leaf_prediction
(0.05, 'auto', 'mc')
>>> groups_of(booster)["exploration"] == Exploration(rho=0.05)
True
>>> AdaBandit(3, exploration=Exploration(rho=0.0))
Traceback (most recent call last):
...
ValueError: rho must be in (0.0, 1.0), got 0.0
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from boosters.base import OnlineBooster

__all__ = [
    "GROUPS", "Exploration", "RewardExpert", "WeakLearner", "flat_defaults", "groups_of",
    "regroup",
]


@dataclass(frozen=True)
class Exploration:
    """Eq. 2's rate and its schedule (docs/boosters.md, "Exploration schedule"): ``rho``, decayed
    over ``rho_decay`` learning rounds (``"auto"``: ``min(5 k, 100)``; None: constant) to
    ``rho_floor``, scaled by the prediction's miss rate with ``rho_by_misses``, the floor
    following it down to ``rho_min``; ``drift_restart``: what a jump of the misses restarts
    (``"model"``, ``"schedule"``, None). The defaults are the tree boosters'."""

    rho: float = 0.1
    rho_decay: float | str | None = "auto"
    rho_floor: float = 0.01
    rho_min: float | None = 0.002
    rho_by_misses: bool = True
    drift_restart: str | None = "model"


#: the paper's exploration: a constant rate, no schedule, no drift test (the twins' too)
PAPER_EXPLORATION = Exploration(rho_decay=None, rho_min=None, rho_by_misses=False,
                                drift_restart=None)


@dataclass(frozen=True)
class WeakLearner:
    """The Hoeffding trees (docs/boosters.md, "Parameters"): ``tree_profile`` (None: the
    booster's), ``fixed_trees``, ``fast_trees``, ``tree_core``, ``grace_by``,
    ``leaf_prediction``, ``weak_prediction`` (None: the booster's), and the reduction of a cost
    vector to a label and weight (``clip``, ``weight_scale``, ``reduction_order``)."""

    tree_profile: str | None = None
    fixed_trees: bool = False
    fast_trees: bool = True
    tree_core: str = "compiled"
    grace_by: str = "weight"
    leaf_prediction: str = "nba"
    weak_prediction: str | None = None
    clip: float = 100.0
    weight_scale: float = 1.0
    reduction_order: str = "reference"


@dataclass(frozen=True)
class RewardExpert:
    """The reward model (``estimator="dr"``; docs/boosters.md, "The reward models as experts"):
    ``guess_model`` (``"ridge"``, ``"linear"``; OCOBandit: None for none), ``guess_expert``
    (None: whenever there is a model), ``quadratic_expert``, and the clip of the importance
    weights the experts are judged with: ``hedge_weight`` (AdaBandit's Hedge) and
    ``switch_weight`` (BanditBBM's and OCOBandit's switch); None: the trees' own estimate."""

    guess_model: str | None = "ridge"
    guess_expert: bool | None = None
    quadratic_expert: bool = False
    hedge_weight: float | None = 5.0
    switch_weight: float | None = 5.0


#: constructor keyword -> its group's class
GROUPS = {"exploration": Exploration, "weak_learner": WeakLearner, "reward_expert": RewardExpert}


def _fields(group: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(group)]


def regroup(
    cls: type[OnlineBooster], given: dict[str, Any], flat: dict[str, Any]
) -> dict[str, Any]:
    """Booster class ``cls``'s groups: those ``given`` (None: its ``default_groups``) with the
    ``flat`` keys of their fields put in. ``flat`` must hold only fields ``cls`` declares in its
    ``_parameter_constraints`` (else a TypeError, as for any unknown keyword); a field it does
    not declare is fixed at its ``default_groups`` value (a group that sets it to anything but
    that or the field's own default is a ValueError naming it).

    >>> from boosters.online.adabandit import AdaBoostOLM
    >>> regroup(AdaBoostOLM, {}, {"rho": 0.2})["exploration"].rho
    0.2
    >>> regroup(AdaBoostOLM, {}, {"rho_floor": 0.2})
    Traceback (most recent call last):
    ...
    TypeError: AdaBoostOLM got unexpected keyword argument(s): rho_floor
    """
    declared = cls._parameter_constraints
    flat = dict(flat)
    out = {}
    for name, default in cls.default_groups.items():
        group = given.get(name)
        if group is None:
            group = default
        elif not isinstance(group, type(default)):
            raise TypeError(f"{name} must be a {type(default).__name__}, got {group!r}")
        mine = {f: flat.pop(f) for f in _fields(group) if f in flat and f in declared}
        for field in dataclasses.fields(group):
            if field.name in declared:
                continue
            value, fixed = getattr(group, field.name), getattr(default, field.name)
            if value != fixed and value != field.default:
                raise ValueError(f"{cls.__name__} fixes {field.name} = {fixed!r}, got {value!r}")
            mine[field.name] = fixed
        out[name] = dataclasses.replace(group, **mine)
    if flat:
        raise TypeError(f"{cls.__name__} got unexpected keyword argument(s): "
                        f"{', '.join(sorted(flat))}")
    return out


def flat_values(groups: dict[str, Any], declared) -> dict[str, Any]:
    """The declared fields of ``groups`` as one flat dict (what :func:`validate_params` checks)."""
    return {f: getattr(g, f) for g in groups.values() for f in _fields(g) if f in declared}


def flat_defaults(cls: type[OnlineBooster]) -> dict[str, Any]:
    """Every flat key booster class ``cls`` accepts (other than ``n_actions``) with its default:
    its constructor's own keywords, its groups' declared fields in their place.

    >>> from boosters.online.adabandit import AdaBoostOLM
    >>> list(flat_defaults(AdaBoostOLM))[:4]
    ['n_learners', 'seed', 'rho', 'tree_profile']
    """
    groups = getattr(cls, "default_groups", {})
    declared = getattr(cls, "_parameter_constraints", {})
    out: dict[str, Any] = {}
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.name in ("self", "n_actions") or p.kind is p.VAR_KEYWORD:
            continue
        if p.name in groups:
            out.update(flat_values({p.name: groups[p.name]}, declared))
        else:
            out[p.name] = None if p.default is p.empty else p.default
    return out


def groups_of(booster: Any) -> dict[str, Any]:
    """``booster``'s groups, read back from its flat attributes (fields it does not use: the
    defaults of its class)."""
    cls = type(booster)
    return {
        name: dataclasses.replace(default, **{
            f: getattr(booster, f) for f in _fields(default)
            if f in cls._parameter_constraints and hasattr(booster, f)
        })
        for name, default in cls.default_groups.items()
    }
