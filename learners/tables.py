"""Bounded tables of rows keyed by nominal values: the rules the ridge reward model's offsets
(learners/ridge_offsets.py) and ``egreedy_tree``'s values' offsets (learners/value_offsets.py)
share.

A table gives a new key its own row until it holds ``capacity`` keys; later keys share rows by a
CRC-32 of the key, deterministically. More: docs/boosters.md, "learners/ridge.py".

>>> rows = {}
>>> [row_of(rows, 2, key, learn=True) for key in ("a", "b", "a")], row_of(rows, 2, "c", True)
([0, 1, 0], 0)
>>> row_of({}, 2, "a", learn=False) is None   # predicting adds no row
True
"""

from __future__ import annotations

import hashlib
import numbers
import zlib
from collections.abc import Hashable

import numpy as np

__all__ = ["canonical", "constant_step", "digest", "grown", "room", "row_of"]


def row_of(rows: dict, capacity: int, key: Hashable, learn: bool) -> int | None:
    """``key``'s row in a table of at most ``capacity`` rows: its own (a new one when learning),
    or once the table is full one shared by a CRC-32 of the key; None for a new key when only
    predicting."""
    row = rows.get(key)
    if row is not None:
        return row
    if len(rows) >= capacity:  # full: share a row, deterministically
        return zlib.crc32(repr(key).encode()) % capacity
    if not learn:
        return None
    row = rows[key] = len(rows)
    return row


def room(row: int, capacity: int) -> int:
    """The rows a table grows to so that ``row`` fits: doubling, at least 16, at most
    ``capacity``."""
    return min(max(16, 2 * row), capacity)


def grown(array: np.ndarray, rows: int, fill) -> np.ndarray:
    """``array`` with ``rows`` rows along its first axis, the new ones ``fill``."""
    out = np.empty((rows, *array.shape[1:]))
    out[: array.shape[0]] = array
    out[array.shape[0] :] = fill
    return out


def constant_step(weights: np.ndarray, variance: np.ndarray, at, prior: np.ndarray,
                  denominator, residual) -> None:
    """The Kalman step of constant offsets ``weights[at]`` of variances ``prior``
    (``variance[at]``), their cross-covariances left out: each takes ``prior / denominator`` of
    the ``residual``, and its variance shrinks by the same share.

    >>> w, v = np.zeros(2), np.ones(2)
    >>> constant_step(w, v, [0, 1], v[[0, 1]], 1.0 + 2.0, 1.5)
    >>> w.tolist(), v.round(4).tolist()
    ([0.5, 0.5], [0.6667, 0.6667])
    """
    step = prior / denominator
    weights[at] += step * residual
    variance[at] = prior - step * prior


def canonical(value):
    """A nominal value as a dict tells it apart (by equality), in a form whose ``repr`` is the
    same for equal values: any string as ``str`` (numpy's too), an integral number as ``int``
    (``True``, ``1``, ``1.0``, numpy's ``1``), another real number as ``float``.

    >>> [canonical(v) for v in (np.str_("a"), True, np.int64(1), 2.0, np.float32(0.5))]
    ['a', 1, 1, 2, 0.5]
    """
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool | np.bool_ | numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return int(number) if number.is_integer() else number
    return value


def digest(key: tuple) -> int:
    """64 bits of a BLAKE2b digest of ``key``'s ``repr``: the same in every process (unlike
    ``hash``), so a table of many keys keeps integers rather than their strings."""
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")
