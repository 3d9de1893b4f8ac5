"""The parameter settings of Ghai & Singh 2024's Theorem 4 and Theorem 9 (the variant with the
better oracle complexity) for :class:`boosters.batch.sample_efficient.SampleEfficientBooster`.

Both theorems give their settings up to constants and polylog factors (``O(.)``); here every
hidden constant is 1 and the polylogs are dropped (docs/internals.md, the section on
boosters/batch/sample_efficient.py). With ``log_b = log |B|`` for the base class ``B``:

- Theorem 4: ``T = log_b / (gamma^2 eps^2)`` rounds, ``eta = gamma^2 eps / log_b``,
  ``S = 1 / (gamma eps)`` fresh rows a round;
- Theorem 9: ``T = 1 / (gamma^2 eps^2)``, ``eta = gamma^2 eps``, ``S = log_b / (gamma eps) +
  log_b^3`` (fewer weak-learner calls, more rows each);
- both: ``sigma = eta / gamma``, ``tau = gamma eps``, the hold-out ``S_0 = 1 / eps^2``.

>>> t4, t9 = settings(4, 0.5, 0.5, 100), settings(9, 0.5, 0.5, 100)
>>> t4.n_rounds, t9.n_rounds, t9.n_rounds < t4.n_rounds
(74, 16, True)
>>> t4.rows_needed, t9.rows_needed
(300, 1876)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["TheoremSettings", "settings", "stump_class_size"]


@dataclass(frozen=True)
class TheoremSettings:
    """One theorem's settings: the booster's keyword arguments (:meth:`params`), the fresh rows
    a round (``chunk_rows``), the hold-out rows and the labelled rows they need in all."""

    theorem: int
    n_rounds: int
    eta: float
    sigma: float
    tau: float
    gamma: float
    chunk_rows: int
    holdout_rows: int

    @property
    def rows_needed(self) -> int:
        """``T S + S_0``: the labelled rows the theorem's guarantee asks for."""
        return self.n_rounds * self.chunk_rows + self.holdout_rows

    def params(self) -> dict[str, Any]:
        """Keyword arguments of ``SampleEfficientBooster`` (Algorithm 1 as stated: the fixed step,
        the threshold branch); give it ``holdout=holdout_rows / rows`` for the theorem's
        ``S_0``."""
        return {"n_rounds": self.n_rounds, "eta": self.eta, "sigma": self.sigma,
                "tau": self.tau, "gamma": self.gamma, "step": "fixed",
                "branching": "threshold"}


def settings(theorem: int, gamma: float, epsilon: float, n_hypotheses: int) -> TheoremSettings:
    """Theorem ``theorem``'s (4 or 9) settings for a weak learner of advantage ``gamma`` over a
    base class of ``n_hypotheses`` hypotheses, aiming at excess error ``epsilon``."""
    if theorem not in (4, 9):
        raise ValueError(f"theorem must be 4 or 9, got {theorem!r}")
    if not (0.0 < gamma <= 1.0 and 0.0 < epsilon <= 1.0):
        raise ValueError(f"gamma and epsilon must be in (0, 1], got {gamma}, {epsilon}")
    if n_hypotheses < 2:
        raise ValueError(f"the base class needs at least 2 hypotheses, got {n_hypotheses}")
    log_b = math.log(n_hypotheses)
    ge = gamma * epsilon
    if theorem == 4:
        rounds, eta, chunk = log_b / ge**2, gamma * ge / log_b, 1.0 / ge
    else:
        rounds, eta, chunk = 1.0 / ge**2, gamma * ge, log_b / ge + log_b**3
    return TheoremSettings(theorem, math.ceil(rounds), eta, min(1.0, eta / gamma), ge, gamma,
                           math.ceil(chunk), math.ceil(1.0 / epsilon**2))


def stump_class_size(n_rows: int, n_features: int) -> int:
    """``|B|`` of decision stumps on ``n_rows`` rows: a feature, a threshold between two of its
    values (at most ``n_rows`` of them) and a sign.

    >>> stump_class_size(100, 3)
    600
    """
    return 2 * n_features * n_rows
