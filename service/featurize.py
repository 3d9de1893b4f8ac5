"""Contexts (dicts of numeric or string features) -> the matrix the offline policies need.

:class:`Featurizer` is fitted on a training window and pickled together with the policy trained
on it, so serving builds exactly the columns the policy was trained on:

* a feature seen with numeric values gets one column holding the value;
* a feature seen with string values gets one column per value of its vocabulary (the
  ``max_categories`` most frequent values of the window, ties broken by the value), 1.0 for the
  value present;
* a missing feature, an unseen string value, or a value of the other type (a string where the
  window had numbers) gives 0 in every column of that feature.

Columns are sorted (feature name, then value), so the same window always gives the same matrix.
No I/O, no randomness.

>>> f = Featurizer().fit([{"x": 1.5, "device": "mobile"}, {"x": -2, "device": "desktop"}])
>>> f.columns
['device=desktop', 'device=mobile', 'x']
>>> f.transform([{"x": 3, "device": "mobile"}, {"device": "tablet"}, {}]).tolist()
[[0.0, 1.0, 3.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["Featurizer"]


class Featurizer:
    """Numeric features as columns, string features one-hot over a vocabulary fitted on a window.

    Parameters
    ----------
    max_categories
        Largest vocabulary kept per string feature (the most frequent values); the rest map to 0.
    """

    def __init__(self, max_categories: int = 100) -> None:
        if (
            isinstance(max_categories, bool)
            or not isinstance(max_categories, numbers.Integral)
            or max_categories < 1
        ):
            raise ValueError(f"max_categories must be an integer >= 1, got {max_categories!r}")
        self.max_categories = int(max_categories)

    def fit(self, contexts: Iterable[Mapping[str, Any]]) -> Featurizer:
        """Learn the numeric features and the string vocabularies of ``contexts``."""
        numeric: set[str] = set()
        counts: dict[str, Counter[str]] = {}
        for context in contexts:
            for name, value in context.items():
                if isinstance(value, str):
                    counts.setdefault(name, Counter())[value] += 1
                elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                    numeric.add(name)
        columns: list[tuple[str, str | None]] = [(name, None) for name in numeric]
        for name, counter in counts.items():
            ranked = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
            columns.extend((name, value) for value, _ in ranked[: self.max_categories])
        columns.sort(key=lambda c: (c[0], c[1] is None, c[1] or ""))
        self.numeric_ = {name: i for i, (name, v) in enumerate(columns) if v is None}
        self.onehot_ = {(name, v): i for i, (name, v) in enumerate(columns) if v is not None}
        self.columns_ = columns
        return self

    @property
    def columns(self) -> list[str]:
        """Column names: ``feature`` for numeric columns, ``feature=value`` for one-hot ones."""
        self._check_fitted()
        return [name if v is None else f"{name}={v}" for name, v in self.columns_]

    @property
    def n_features(self) -> int:
        """Number of columns."""
        self._check_fitted()
        return len(self.columns_)

    def _check_fitted(self) -> None:
        if not hasattr(self, "columns_"):
            raise RuntimeError("Featurizer is not fitted; call fit() first")

    def transform(self, contexts: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The matrix (len(contexts), n_features), float64; unknowns are 0."""
        self._check_fitted()
        X = np.zeros((len(contexts), len(self.columns_)))
        numeric, onehot = self.numeric_, self.onehot_
        for row, context in enumerate(contexts):
            for name, value in context.items():
                if isinstance(value, str):
                    col = onehot.get((name, value))
                    if col is not None:
                        X[row, col] = 1.0
                elif name in numeric and not isinstance(value, bool):
                    value = float(value)
                    if math.isfinite(value):
                        X[row, numeric[name]] = value
        return X

    def fit_transform(self, contexts: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """:meth:`fit` then :meth:`transform`."""
        return self.fit(contexts).transform(contexts)

    def __repr__(self) -> str:
        fitted = f", n_features={len(self.columns_)}" if hasattr(self, "columns_") else ""
        return f"Featurizer(max_categories={self.max_categories}{fitted})"
