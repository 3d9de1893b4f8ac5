"""The one protocol every online booster follows (ARCHITECTURE.md, "One protocol").

More: docs/boosters.md, "boosters/base.py".
"""

from __future__ import annotations

import abc
import math
import numbers
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from boosters._migrations import Migrating

__all__ = [
    "Decision",
    "OnlineBooster",
    "check_context",
    "played_propensity",
    "resolve_feedback",
    "validate_feedback",
]


@dataclass(frozen=True, slots=True)
class Decision:
    """What a booster decided for one context.

    ``internals`` holds NumPy arrays and scalars; :meth:`to_dict` / :meth:`from_dict` turn it into
    plain JSON-compatible values and back, losslessly (floats survive a JSON round trip exactly).

    >>> import numpy as np
    >>> d = Decision(action=1, probabilities=np.array([0.25, 0.75]),
    ...              internals={"weak": np.array([1, 0])})
    >>> d.propensity
    0.75
    >>> Decision.from_dict(d.to_dict()).internals["weak"].tolist()
    [1, 0]
    """

    action: int
    probabilities: np.ndarray
    internals: dict[str, Any] = field(default_factory=dict)

    @property
    def propensity(self) -> float:
        """Probability with which :attr:`action` was drawn."""
        return float(self.probabilities[self.action])

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable form (lists for arrays)."""
        internals = {
            key: (
                {"__array__": value.tolist(), "dtype": value.dtype.str}
                if isinstance(value, np.ndarray)
                else value.item()
                if isinstance(value, np.generic)
                else value
            )
            for key, value in self.internals.items()
        }
        return {
            "action": int(self.action),
            "probabilities": self.probabilities.tolist(),
            "internals": internals,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        """Inverse of :meth:`to_dict`."""
        internals = {
            key: (
                np.asarray(value["__array__"], dtype=np.dtype(value["dtype"]))
                if isinstance(value, dict) and "__array__" in value
                else value
            )
            for key, value in data.get("internals", {}).items()
        }
        return cls(
            action=int(data["action"]),
            probabilities=np.asarray(data["probabilities"], dtype=float),
            internals=internals,
        )


#: the largest integer a float holds (every feature is a float to the learners)
_LARGEST_INT = int(sys.float_info.max)


#: the types of a context of floats only, checked at once (:func:`check_context`)
_ALL_FLOATS = frozenset({float})


def check_context(x: Any) -> dict:
    """Validate a context: a dict of feature name -> finite number or string.

    >>> check_context({"a": 1.0, "b": "red"})
    {'a': 1.0, 'b': 'red'}
    >>> check_context({"a": float("nan")})
    Traceback (most recent call last):
    ...
    ValueError: feature 'a' is not finite: nan
    >>> check_context({"n": 10**400})
    Traceback (most recent call last):
    ...
    ValueError: feature 'n' is an integer of 1329 bits, beyond the range of a float
    """
    if not isinstance(x, dict):
        raise TypeError(f"a context must be a dict of features, got {type(x).__name__}")
    values = x.values()
    # all floats whose sum is finite: none is a NaN or an infinity (an overflow of the sum
    # only sends the check to the loop)
    if _ALL_FLOATS.issuperset(map(type, values)) and math.isfinite(sum(values)):
        return x
    for key, value in x.items():
        kind = type(value)
        if kind is str or (kind is float and math.isfinite(value)):
            continue  # the common cases, cheaply
        if kind is int and -_LARGEST_INT <= value <= _LARGEST_INT:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
            raise TypeError(
                f"feature {key!r} must be a number or a string, got {type(value).__name__}"
            )
        if isinstance(value, numbers.Integral) and abs(int(value)) > _LARGEST_INT:
            bits = int(value).bit_length()
            raise ValueError(
                f"feature {key!r} is an integer of {bits} bits, beyond the range of a float"
            )
        if not isinstance(value, str) and not np.isfinite(value):  # type: ignore[call-overload]
            raise ValueError(f"feature {key!r} is not finite: {value}")
    return x


def validate_feedback(
    decision: Decision, reward: float | None, label: int | None, n_actions: int
) -> tuple[float, int | None]:
    """Check feedback; return ``(reward, label)`` with the reward of the played action.

    A label (full information) gives reward 1 when it is the played action, else 0.

    >>> d = Decision(action=2, probabilities=np.array([0.1, 0.1, 0.8]))
    >>> validate_feedback(d, 0.25, None, 3), validate_feedback(d, None, 2, 3)
    ((0.25, None), (1.0, 2))
    >>> validate_feedback(d, 1.5, None, 3)
    Traceback (most recent call last):
    ...
    ValueError: reward must be in [0, 1], got 1.5
    """
    if (reward is None) == (label is None):
        raise ValueError("give exactly one of reward or label")
    if label is not None:
        if isinstance(label, bool) or not isinstance(label, numbers.Integral):
            raise TypeError(f"label must be an action index, got {label!r}")
        if not 0 <= label < n_actions:
            raise ValueError(f"label {label} is outside 0..{n_actions - 1}")
        label = int(label)
        return float(label == decision.action), label
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        raise TypeError(f"reward must be a number in [0, 1], got {reward!r}")
    if not 0.0 <= reward <= 1.0:
        raise ValueError(f"reward must be in [0, 1], got {reward}")
    return float(reward), None


def played_propensity(decision: Decision, n_actions: int) -> float:
    """The decision's propensity, after checking the decision fits ``n_actions`` actions."""
    probabilities = np.asarray(decision.probabilities, dtype=float)
    if probabilities.shape != (n_actions,):
        raise ValueError(
            f"decision has {probabilities.size} probabilities, expected {n_actions} actions"
        )
    action = decision.action
    if isinstance(action, bool) or not isinstance(action, numbers.Integral):
        raise TypeError(f"decision.action must be an action index, got {action!r}")
    if not 0 <= action < n_actions:
        raise ValueError(f"decision.action {action} is outside 0..{n_actions - 1}")
    propensity = float(probabilities[action])
    if not 0.0 < propensity <= 1.0:
        raise ValueError(f"the played action's propensity must be in (0, 1], got {propensity}")
    return propensity


def resolve_feedback(
    decision: Decision,
    reward: float | None,
    label: int | None,
    n_actions: int,
    rng: np.random.Generator,
) -> tuple[bool, int | None]:
    """Turn feedback into ``(correct, known_label)``.

    A fractional reward ``r`` is rounded to 1 with probability ``r`` by the seeded generator,
    which keeps the loss estimates unbiased. A label makes the feedback full information.

    >>> rng = np.random.default_rng(0)
    >>> d = Decision(action=2, probabilities=np.array([0.1, 0.1, 0.8]))
    >>> resolve_feedback(d, 1.0, None, 3, rng)
    (True, 2)
    >>> resolve_feedback(d, 0.0, None, 3, rng)
    (False, None)
    >>> resolve_feedback(d, None, 0, 3, rng)
    (False, 0)
    """
    reward, label = validate_feedback(decision, reward, label, n_actions)
    if label is not None:
        return label == decision.action, label
    if reward == 1.0:
        correct = True
    elif reward == 0.0:
        correct = False
    else:
        correct = bool(rng.random() < reward)
    return correct, (decision.action if correct else None)


class OnlineBooster(Migrating, abc.ABC):
    """Base class of the online boosters and baselines.

    Subclasses implement :meth:`decide_one` and :meth:`learn_one`. They keep all state in
    attributes so that pickling the booster snapshots it exactly; what a booster pickled before
    an attribute existed reads for it is one table (:mod:`boosters._migrations`).
    """

    #: True for boosters that need the true label (the full-information twins).
    full_information: bool = False

    n_actions: int
    #: the generator of the feedback's draws (set by each subclass's constructor)
    _rng: np.random.Generator
    #: the declared parameters (:func:`boosters._params.validate_params`) and parameter groups
    #: (:mod:`boosters.groups`), set by each registered subclass
    _parameter_constraints: ClassVar[dict[str, list]]
    default_groups: ClassVar[dict[str, Any]]

    @abc.abstractmethod
    def decide_one(
        self,
        x: dict,
        *,
        allowed: np.ndarray | Sequence[int] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Decision:
        """Decide an action for context ``x`` among ``allowed`` (``None``: all actions), drawing
        from ``rng`` if given (then without changing the booster); see docs/boosters.md,
        "boosters/base.py"."""

    @abc.abstractmethod
    def learn_one(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> None:
        """Learn from the feedback to ``decision`` (exactly one of ``reward`` and ``label``)."""

    def learn_steps(
        self, x: dict, decision: Decision, reward: float | None = None, label: int | None = None
    ) -> Iterator[None]:
        """:meth:`learn_one` cut into steps (a generator; exhausting it is ``learn_one``).

        Between two steps the booster may be read (:meth:`decide_one`) by another thread: a
        service lets waiting decisions through there instead of making them wait for the whole
        update. Boosters of several weak learners yield after each learner's update; this
        default is one step.
        """
        self.learn_one(x, decision, reward=reward, label=label)
        yield

    def predict_one(self, x: dict) -> int:
        """The action :meth:`decide_one` would play (consumes randomness like a decision)."""
        return self.decide_one(x).action

    def _feedback(self, decision: Decision, reward, label) -> tuple[bool, int | None]:
        if self.full_information and label is None and reward != 1.0:
            validate_feedback(decision, reward, label, self.n_actions)  # bad input named first
            # refused before the fractional reward is rounded: no draw, no change, no luck
            raise ValueError(
                f"{type(self).__name__} is a full-information booster: it needs the true label "
                "(or a reward of 1 on the played action)"
            )
        return resolve_feedback(decision, reward, label, self.n_actions, self._rng)
