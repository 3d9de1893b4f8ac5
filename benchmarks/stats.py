"""The one percentile rule of the benchmarks: numpy's default, linear interpolation between the two
nearest ranks (``numpy.percentile(values, q)``, method ``"linear"``); a median is the 50th
percentile (the mean of the two middle values of an even count), a maximum the 100th."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def percentiles(values: Iterable[float], qs: Sequence[float]) -> list[float | None]:
    """The percentiles ``qs`` (each in 0..100) of ``values``; a None for each when it is empty.

    >>> percentiles([4, 1, 3, 2], [0, 50, 90, 100])
    [1.0, 2.5, 3.7, 4.0]
    >>> percentiles([], [50, 99])
    [None, None]
    """
    data = np.fromiter(values, dtype=float)
    if data.size == 0:
        return [None for _ in qs]
    return [float(x) for x in np.percentile(data, list(qs))]


def percentile(values: Iterable[float], q: float) -> float | None:
    """The percentile ``q`` (0..100) of ``values``; None when it is empty.

    >>> percentile([10.0, 20.0, 30.0, 40.0, 50.0], 99)
    49.6
    """
    return percentiles(values, [q])[0]


def median(values: Iterable[float]) -> float:
    """The median (50th percentile) of ``values``, which must not be empty.

    >>> median([3, 1, 2]), median([1, 2, 3, 10])
    (2.0, 2.5)
    """
    value = percentile(values, 50)
    if value is None:
        raise ValueError("no median of an empty sequence")
    return value
