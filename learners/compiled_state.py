"""The data-only saved form of :class:`learners.compiled.TreeEnsemble`: sparse counts, the
statistics kept per (slot, class seen), and rank tables in small integers."""

from __future__ import annotations

import numpy as np

from learners._layout import SMAX, SMIN

__all__ = ["dense_counts", "full_stat", "ranks", "small", "sparse_counts"]


def ranks(table: np.ndarray) -> np.ndarray:
    """A rank table (the order classes came to a node or slot, 1-based; 0: absent) as int32;
    one of 0/1 flags (saved before the order was kept) ranks its classes in class order."""
    table = np.asarray(table)
    if table.dtype == np.int32:
        return table
    flags = table > 0
    if table.size and table.max() > 1:
        return table.astype(np.int32)
    return np.where(flags, np.cumsum(flags, axis=1), 0).astype(np.int32)


def small(ranks: np.ndarray) -> np.ndarray:
    """A rank table in the smallest integers that hold it (a saved model's bytes)."""
    return ranks.astype(np.uint8 if ranks.shape[1] < 255 else np.int32)


def full_stat(state: dict, n_features: int) -> np.ndarray:
    """The statistics array of a saved state: what the ensemble kept (its ``_stat_state``), the
    rest empty (no weight, min +inf, max -inf); a state saved whole is taken as it is."""
    stat = np.asarray(state["stat"])
    if "stat_features" not in state:
        return stat
    (n_slots, fields), classes = state["stat_slots"], state["cls"].shape[1]
    by_class = np.zeros((n_slots * classes, 5, n_features))
    by_class[:, SMIN], by_class[:, SMAX] = np.inf, -np.inf
    seen = np.asarray(state["stat_seen"], dtype=np.int64)
    features = np.asarray(state["stat_features"], dtype=np.int64)
    by_class[seen[:, None, None], np.arange(fields)[None, :, None], features[None, None]] = stat
    return np.ascontiguousarray(np.moveaxis(by_class.reshape(n_slots, classes, 5, n_features),
                                            1, 3))


def sparse_counts(a: np.ndarray) -> dict:
    """A mostly-zero array as its shape, the flat positions of its nonzeros and their values
    (a leaf's counts of an id's values are nearly all zero)."""
    flat = a.ravel()
    at = np.flatnonzero(flat)
    return {"shape": list(a.shape), "at": at.astype(np.int64), "values": flat[at]}


def dense_counts(sparse: dict) -> np.ndarray:
    """The array :func:`sparse_counts` describes."""
    out = np.zeros(int(np.prod(sparse["shape"])))
    out[sparse["at"]] = sparse["values"]
    return out.reshape(sparse["shape"])
