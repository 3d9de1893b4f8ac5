"""The data-only saved form of :class:`learners.compiled.TreeEnsemble`: sparse counts, the
statistics kept per (slot, class seen), and rank tables in small integers; and the ensemble's
pool of statistics blocks (one per (slot, class seen)) to and from that form; arrays grown in
place of the ensemble's (:func:`grow`)."""

from __future__ import annotations

import numpy as np

from learners._layout import EMPTY, SMAX, SMIN
from learners.features import NUMERIC, FeatureIndex

__all__ = ["blocks_from_state", "counts_state", "dense_counts", "dense_stat", "empty_blocks",
           "grow", "index_from_state", "index_state", "ranks", "small", "sparse_counts",
           "stat_state"]


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


def index_state(index: FeatureIndex) -> dict:
    """The feature index as plain data."""
    return {
        "nominal_attributes": sorted(index.nominal_attributes, key=repr),
        "max_nominal_values": index.max_nominal_values,
        "max_multiway_values": index.max_multiway_values,
        "names": list(index.columns), "kinds": list(index.kinds),
        "values": [list(v.items()) for v in index.values], "other": list(index.other),
        "distinct": list(index.distinct), "row_feature": list(index.row_feature),
        "row_other": list(index.row_other),
    }


def index_from_state(f: dict) -> FeatureIndex:
    """The feature index :func:`index_state` describes."""
    index = FeatureIndex(f["nominal_attributes"], f["max_nominal_values"],
                         f["max_multiway_values"])
    index.columns = {name: i for i, name in enumerate(f["names"])}
    index.kinds, index.other = list(f["kinds"]), list(f["other"])
    index.values = [dict(pairs) for pairs in f["values"]]
    index.distinct, index.row_feature = list(f["distinct"]), list(f["row_feature"])
    index.row_other = list(f["row_other"])
    return index


# ---- the pool of blocks ------------------------------------------------------------------------


def empty_blocks(n: int, width: int) -> np.ndarray:
    """``n`` blocks of statistics (blocks, fields, features) holding nothing: no weight, mean
    and sum of squares 0, min +inf, max -inf."""
    out = np.zeros((n, 5, width))
    out[:, SMIN], out[:, SMAX] = np.inf, -np.inf
    return out


def stat_state(stat: np.ndarray, block: np.ndarray, seen: np.ndarray, kinds: np.ndarray,
               slots: np.ndarray, fields: int) -> dict:
    """The statistics of ``slots`` in the saved form: per (slot, class it has seen), in that
    order, the first ``fields`` (3: what naive Bayes reads) of its numeric features (a nominal
    feature's are never used)."""
    numeric = np.flatnonzero(kinds[: stat.shape[2]] == NUMERIC)
    pairs = np.flatnonzero(seen[slots] > 0)
    rows = stat[block[slots].ravel()[pairs]][:, :fields][:, :, numeric]
    return {"stat": np.ascontiguousarray(rows),
            "stat_features": numeric.tolist(), "stat_slots": [int(slots.size), fields],
            "stat_seen": pairs}


def counts_state(counts: np.ndarray, block: np.ndarray, slots: np.ndarray) -> dict:
    """:func:`sparse_counts` of the slots' nominal counts as one (slots, value rows, classes)
    array, without making it."""
    n_rows, n_classes = counts.shape[1], block.shape[1]
    table = block[slots]
    s, c = np.nonzero(table != EMPTY)
    rows = counts[table[s, c]]
    p, r = np.nonzero(rows)
    at = (s[p] * n_rows + r) * n_classes + c[p]
    order = np.argsort(at, kind="stable")
    return {"shape": [int(slots.size), n_rows, n_classes], "at": at[order].astype(np.int64),
            "values": rows[p, r][order]}


def blocks_from_state(state: dict, n_features: int) -> tuple:
    """The pool of a saved state: (statistics blocks, count blocks, the slots' block table,
    the slots' rank table). Block 0 is :data:`EMPTY`; then a block for every (slot, class)
    the slot has seen or holds statistics of (a state saved whole, every class, may hold them
    for an unseen one)."""
    seen = ranks(state["seen"])
    n_slots, n_classes = seen.shape
    counts = dense_counts(state["counts"])  # (slots, value rows, classes)
    by_pair_counts = np.swapaxes(counts, 1, 2).reshape(n_slots * n_classes, counts.shape[1])
    has = (seen.ravel() > 0) | (by_pair_counts != 0).any(axis=1)
    whole = "stat_features" not in state
    if whole:  # (slots, fields, features, classes)
        dense = np.asarray(state["stat"], dtype=float)
        width = dense.shape[2]
        by_pair = np.moveaxis(dense, 3, 1).reshape(n_slots * n_classes, 5, width)
        has |= (by_pair != empty_blocks(1, width)).any(axis=(1, 2))
    else:
        width = n_features
    pairs = np.flatnonzero(has)
    block = np.full(n_slots * n_classes, EMPTY, dtype=np.int64)
    block[pairs] = np.arange(1, pairs.size + 1)
    stat = empty_blocks(pairs.size + 1, width)
    if whole:
        stat[1:] = by_pair[pairs]
    else:
        fields = int(state["stat_slots"][1])
        at = block[np.asarray(state["stat_seen"], dtype=np.int64)]
        features = np.asarray(state["stat_features"], dtype=np.int64)
        stat[at[:, None, None], np.arange(fields)[None, :, None], features[None, None, :]] = (
            state["stat"])
    counts = np.zeros((pairs.size + 1, by_pair_counts.shape[1]))
    counts[1:] = by_pair_counts[pairs]
    return stat, counts, block.reshape(seen.shape), seen


def dense_stat(stat: np.ndarray, block: np.ndarray) -> np.ndarray:
    """The pool's statistics as one (slots, fields, features, classes) array (inspection)."""
    return np.ascontiguousarray(np.transpose(stat[block], (0, 2, 3, 1)))


def grow(a: np.ndarray, n: int, fill: float = 0.0, axis: int = 0) -> np.ndarray:
    """``a`` with at least ``n`` entries along ``axis`` (doubling), new entries ``fill``."""
    have = a.shape[axis]
    if n <= have:
        return a
    shape = list(a.shape)
    shape[axis] = max(n, 2 * have, 4)
    out = np.zeros(shape, dtype=a.dtype) if fill == 0 else np.full(shape, fill, dtype=a.dtype)
    index = [slice(None)] * a.ndim
    index[axis] = slice(0, have)
    out[tuple(index)] = a
    return out
