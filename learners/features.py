"""A model's feature index: context dicts -> float vectors for the compiled trees.

Numbers (bools included) are read as floats; a nominal feature (declared, or first seen with a
value that is not a number) as the row id of its value, one row per (feature, value) up to
``max_nominal_values`` values a feature, the rest sharing one "other" row. A missing feature
or a ``None`` is NaN; a value the index does not know is -1 (it equals no row). Learning adds
features and values; deciding only reads, so a decision never changes a model.

>>> index = FeatureIndex(nominal_attributes=["user"])
>>> index.transform({"age": 31, "device": "mobile", "user": 7}, learn=True).tolist()
[31.0, 0.0, 1.0]
>>> index.transform({"device": "tablet", "age": None}).tolist()
[nan, -1.0, nan]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np

__all__ = ["NOMINAL", "NUMERIC", "FeatureIndex"]

NUMERIC, NOMINAL = 0, 1


class FeatureIndex:
    """Feature names -> columns, nominal values -> rows (see the module)."""

    def __init__(
        self,
        nominal_attributes: Iterable | None = None,
        max_nominal_values: int | None = 64,
        max_multiway_values: int | None = 32,
    ):
        self.nominal_attributes = frozenset(nominal_attributes or ())
        self.max_nominal_values = max_nominal_values
        self.max_multiway_values = max_multiway_values
        self.columns: dict = {}  # name -> column
        self.kinds: list[int] = []
        self.values: list[dict] = []  # per column: value -> row (nominal)
        self.other: list[int] = []  # per column: its "other" row, or -1
        self.distinct: list[int] = []  # per column: distinct values seen (up to the limit + 1)
        self.row_feature: list[int] = []
        self.row_other: list[bool] = []
        self.crossed: list[int] = []  # columns that just passed max_multiway_values
        self._layout: tuple | None = None  # (keys, columns) of the last all-numeric context

    @property
    def n_features(self) -> int:
        return len(self.kinds)

    @property
    def n_rows(self) -> int:
        return len(self.row_feature)

    def multiway_allowed(self, column: int) -> bool:
        """Whether nominal ``column`` has shown at most ``max_multiway_values`` values."""
        limit = self.max_multiway_values
        return self.other[column] < 0 and (limit is None or self.distinct[column] <= limit)

    def transform(self, x: dict, learn: bool = False) -> np.ndarray:
        """``x`` as a vector of ``n_features`` floats (``learn``: new features and values are
        added first)."""
        layout = self._layout
        if layout is not None and layout[0] == tuple(x):
            values = np.array(list(x.values()))
            if values.dtype.kind in "fiub":  # numbers only (else: a string, a None...)
                out = np.full(len(self.kinds), np.nan)
                out[layout[1]] = values
                return out
        if learn:
            for name, value in x.items():
                self._learn(name, value)
        return self._read(x)

    def _read(self, x: dict) -> np.ndarray:
        out = np.full(len(self.kinds), np.nan)
        numeric_only = True
        for name, value in x.items():
            column = self.columns.get(name)
            if column is None:
                numeric_only = False
                continue
            if self.kinds[column] == NUMERIC:
                number = _number(value)
                numeric_only &= not math.isnan(number)
                out[column] = number
            else:
                numeric_only = False
                if value is not None:
                    out[column] = self._row(column, value)
        if numeric_only and x:
            self._layout = (tuple(x), np.array([self.columns[n] for n in x], dtype=np.intp))
        return out

    def _row(self, column: int, value) -> float:
        row = self.values[column].get(value)
        if row is None:
            row = self.other[column]
        return float(row)

    def _learn(self, name, value) -> None:
        column = self.columns.get(name)
        if column is None:
            if value is None:
                return  # its kind is decided by its first value
            nominal = name in self.nominal_attributes or not isinstance(value, numbers.Number)
            column = self._add_column(name, NOMINAL if nominal else NUMERIC)
        if self.kinds[column] == NOMINAL and value is not None:
            self._add_value(column, value)

    def _add_column(self, name, kind: int) -> int:
        column = self.columns[name] = len(self.kinds)
        self.kinds.append(kind)
        self.values.append({})
        self.other.append(-1)
        self.distinct.append(0)
        return column

    def _add_value(self, column: int, value) -> None:
        values = self.values[column]
        if value in values:
            return
        cap = self.max_nominal_values
        if cap is not None and len(values) >= cap:
            if self.other[column] < 0:
                self.other[column] = self._new_row(column, other=True)
                self.crossed.append(column)
            return
        values[value] = self._new_row(column, other=False)
        self.distinct[column] += 1
        limit = self.max_multiway_values
        if limit is not None and self.distinct[column] == limit + 1:
            self.crossed.append(column)

    def _new_row(self, column: int, other: bool) -> int:
        self.row_feature.append(column)
        self.row_other.append(other)
        return len(self.row_feature) - 1


def _number(value) -> float:
    """``value`` as a float, NaN when it is missing or not a real number."""
    if isinstance(value, numbers.Real):
        return float(value)
    return math.nan
