"""A per-action ridge regression of the reward on a bounded quadratic feature map.

The reward model of the tree boosters' doubly robust estimate and expert (``reward_model="ridge"``,
the default). More: docs/boosters.md, "learners/ridge.py".

>>> model = RidgeRewards(n_actions=3)
>>> for _ in range(30):
...     model.learn_one({"x": 1.0, "colour": "red"}, action=2, correct=True)
...     model.learn_one({"x": -1.0, "colour": "blue"}, action=2, correct=False)
>>> int(model.predict_one({"x": 1.0, "colour": "red"}).argmax())
2
>>> bool(model.predict_one({"x": -1.0, "colour": "blue"})[2] < 0.1)
True
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable
from functools import cache

import numpy as np

from learners.linear import PAIR_CLIP, PAIR_FEATURES, PAIR_HASH, standardised
from learners.ridge_layout import NumericLayout
from learners.ridge_mixed import MixedLayout
from learners.ridge_offsets import (
    MAX_OFFSET_ENTRIES,
    MAX_OFFSETS,
    OffsetTables,
    offset_capacity,
)

__all__ = [
    "MAX_OFFSETS", "MAX_OFFSET_ENTRIES", "MAX_RIDGE_ENTRIES", "OTHER", "RidgeRewards",
    "offset_capacity", "ridge_dim",
]

#: nominal features whose values are counted (later ones are not capped: the count is bounded)
MAX_COUNTED = 4096
#: the value standing for a nominal feature's values past its first ``max_values``
OTHER = "<other>"

#: bound on the entries of the inverse Gram matrices, ``k x dim^2`` (8 bytes each: 8 MiB)
MAX_RIDGE_ENTRIES = 1 << 20
#: the attributes that only keep work done: never saved
_CACHES = frozenset({"_layout", "_last", "_mixed"})
#: the attributes only learning reads: a serving copy leaves them out
_LEARNING_STATE = frozenset({"inverse", "offset_inverse", "pair_variance"})


def _mix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser, element-wise on uint64 (every output bit depends on every
    input bit, so a product's coordinate and sign look independent of its two features')."""
    m = np.uint64(0xFFFFFFFF)
    h = h & m
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & m
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & m
    return h ^ (h >> np.uint64(16))


@cache
def _triu(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(n)``, kept: the products of ``n`` features in their order."""
    i, j = np.triu_indices(n)
    i.flags.writeable = j.flags.writeable = False
    return i, j


def _weight_or_none(name: str, value: float | None) -> float | None:
    """``value`` as a float, or None; anything but a positive number or None is refused."""
    if value is not None and not value > 0:
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")
    return None if value is None else float(value)


def ridge_dim(n_actions: int, max_dim: int) -> int:
    """The dimension a model of ``n_actions`` actions uses: ``max_dim``, lowered so that the
    ``n_actions`` inverse Gram matrices hold at most ``MAX_RIDGE_ENTRIES`` entries (at least 8).

    >>> ridge_dim(16, 256), ridge_dim(26, 256), ridge_dim(100, 256), ridge_dim(10_000, 256)
    (256, 200, 102, 10)
    """
    return max(8, min(int(max_dim), math.isqrt(MAX_RIDGE_ENTRIES // max(1, int(n_actions)))))


class RidgeRewards(OffsetTables, NumericLayout, MixedLayout):
    """One ridge regression of the reward per action, over a feature map of at most ``max_dim``
    coordinates, solved online (Sherman-Morrison updates of each action's inverse Gram matrix;
    exactly on the rounds without offsets, below).

    - The map: a constant, every feature of ``x`` (a number standardised with its running mean
      and variance, clipped to ``[-PAIR_CLIP, PAIR_CLIP]``; a string, or a feature named in
      ``nominal_attributes``, as an indicator of its value) and, with ``quadratic``, every
      product of two of them (squares included) among the example's first ``PAIR_FEATURES``.
    - Coordinates are given out in order of first appearance; once all ``dim`` are taken, a new
      feature or product shares one picked by a CRC-32 of its key, with a sign from the same
      hash (signed feature hashing: the map stays bounded and deterministic).
    - The estimate of action ``a`` is ``prior + w_a . phi(x)`` plus its offsets, clipped to [0,
      1]; without offsets ``w_a`` minimises the squared error on the rounds that taught ``a``
      plus ``l2 |w_a|^2``.
    - A nominal feature's first ``max_values`` values get coordinates of their own while the map
      has room; its later values share one, and each adds an offset of its own to the
      estimate: a small ridge
      regression (penalty ``offset_l2``) of the residuals the rest of the model leaves on the
      rounds that taught it, on a constant and the first ``offset_features`` numeric features
      the model saw (an id's own intercept and slopes; at most :func:`offset_capacity` rows,
      then shared by a CRC-32). With ``pair_offset_l2``, a pair of nominal values of one
      example, one of them past its cap (an id and a device, say), gets a constant offset of
      its own (the offsets' counterpart of a product; Vowpal Wabbit's ``-q`` crosses the id
      with every feature). The offsets of one round learn together, sharing its residual by
      their uncertainty; with ``joint_offsets``, together with the map's weights too.
    - With ``n`` features in the example, the products are scaled by ``sqrt(pair_weight / n)``
      (at most 1), so that many numeric features do not drown the features in noisy products;
      and the whole map but the constant by ``sqrt(feature_weight / n)`` (at most 1), so that
      the estimate's prior variance is that of ``feature_weight`` features however many the
      example has (a penalty growing like ``n``).
    - What a round teaches: the played action learns its reward (1 or 0); every action learns
      only when the caller gives the ``label`` (full information). A correct bandit round
      reveals the label too, but teaching the other actions from it alone would train them on
      rounds picked by their outcome (a wrong round never teaches its label), which biases
      them low where the policy errs; ``hits_teach_all`` keeps that older rule.

    Parameters
    ----------
    n_actions
        Number of actions ``k``.
    l2
        The ridge penalty (the inverse Gram matrices start at ``I / l2``).
    max_dim
        Bound on the map's coordinates; lowered by :func:`ridge_dim` for many actions.
    quadratic
        Whether products of pairs of features are coordinates too.
    prior
        The estimate of an action nothing has taught yet.
    nominal_attributes
        Numeric-valued features to treat as categories.
    max_values
        Values of a nominal feature with a coordinate of their own; its later values share one.
    offset_l2
        The ridge penalty of a later value's offset (with no numeric features: its residuals'
        sum over ``offset_l2 + n``); small, so an id's own reward shows after a few rounds,
        and not so small that an id of noise takes the map's share of every round (0.3; 0.1
        in earlier versions, whose saved models keep their own).
    offset_features
        Numeric features, the first the model saw, that an offset has a slope on (0: a constant
        offset).
    hits_teach_all
        Whether a correct round without a ``label`` teaches every action (the label: 1 on it,
        0 on the others), as earlier versions did.
    pair_weight
        With ``n`` features in the example, its products are scaled by ``sqrt(pair_weight /
        n)`` (at most 1): their prior weight grows like ``n`` rather than ``n^2``, so many
        numeric features do not drown the linear part in noisy products. None: unscaled.
    feature_weight
        With ``n`` features in the example, every coordinate but the constant is scaled by
        ``sqrt(feature_weight / n)`` (at most 1): the ridge penalty of a wide example grows
        like ``n / feature_weight``, so the estimate's prior variance does not grow with the
        number of features. None: unscaled.
    joint_offsets
        Whether a round with offsets teaches the map's weights and its offsets in one Kalman
        step (cross-covariances left out): the residual is shared by their uncertainty, so a
        new id's reward goes to its own offset, not to the map's coordinates every id shares.
        False: the map learns first (the exact ridge update), the offsets what it leaves. A
        round without offsets is the exact ridge update either way.
    pair_offset_l2
        The ridge penalty of the constant offset of a pair of nominal values, one of them past
        its cap (among the example's first ``PAIR_OFFSET_FEATURES`` nominal features); the
        example's pairs share it (a new one gets ``p`` times it for the example's ``p`` pairs),
        so that an id beside many features does not take a round's residual ``p`` times over.
        None: pairs get no offsets.
    """

    #: what a model saved before the offsets had slopes reads
    offset_features = 0
    max_offsets = MAX_OFFSETS
    #: what a model saved before a hit taught only the played action reads
    hits_teach_all = True
    #: what a model saved before the products were scaled reads
    pair_weight = None
    #: what a model saved before the map was scaled reads
    feature_weight = None
    #: what a model saved before the map and the offsets learned together reads
    joint_offsets = False
    # pair_offset_l2: learners/ridge_offsets.py's class attribute (None: no pairs)

    def __init__(
        self,
        n_actions: int,
        l2: float = 1.0,
        max_dim: int = 256,
        quadratic: bool = True,
        prior: float = 0.5,
        nominal_attributes: list | None = None,
        max_values: int = 32,
        offset_l2: float = 0.3,
        offset_features: int = 4,
        hits_teach_all: bool = False,
        pair_weight: float | None = 4.0,
        feature_weight: float | None = 8.0,
        joint_offsets: bool = True,
        pair_offset_l2: float | None = 0.3,
    ) -> None:
        self.n_actions = int(n_actions)
        self.l2 = float(l2)
        self.dim = ridge_dim(self.n_actions, max_dim)
        self.quadratic = bool(quadratic)
        self.prior = float(prior)
        self.nominal_attributes = frozenset(nominal_attributes or ())
        self.max_values = int(max_values)
        self.cardinality: dict[Hashable, int] = {}  # nominal feature -> values with own keys
        self.slots: dict[Hashable, int] = {}  # key -> coordinate (0 is the constant)
        self.moments = np.zeros((self.dim, 3))  # a numeric coordinate: count, mean, squared devs
        self.used = 1  # coordinates given out so far
        self.pair_keys = np.zeros(0, dtype=np.int64)  # products given a coordinate, sorted
        self.pair_coords = np.zeros(0, dtype=np.int64)  # and their coordinates
        self.weights = np.zeros((self.n_actions, 1))
        self.inverse = np.full((self.n_actions, 1, 1), 1.0 / self.l2)
        self.offset_l2 = float(offset_l2)
        self.offset_features = int(offset_features)
        self.hits_teach_all = bool(hits_teach_all)
        self.pair_weight = _weight_or_none("pair_weight", pair_weight)
        self.feature_weight = _weight_or_none("feature_weight", feature_weight)
        self.joint_offsets = bool(joint_offsets)
        self.local_index: dict[Hashable, int] = {}  # numeric feature -> its place in an offset's
        self._init_offsets(_weight_or_none("pair_offset_l2", pair_offset_l2))

    # ---- the feature map ----------------------------------------------------------------------

    def _slot(self, key: Hashable, learn: bool) -> tuple[int, float] | None:
        """``key``'s coordinate and sign; None for a new key when only predicting."""
        slot = self.slots.get(key)
        if slot is not None:
            return slot, 1.0
        if self.used >= self.dim:  # full: share a coordinate, deterministically
            h = zlib.crc32(repr(key).encode())
            return 1 + h % (self.dim - 1), 1.0 if h & 0x80000000 else -1.0
        if not learn:
            return None
        slot = self.slots[key] = self.used
        self.used += 1
        return slot, 1.0

    def _nominal_key(self, name, value, learn: bool) -> tuple[tuple, bool]:
        """The key of a nominal value, and whether it is past its feature's cap: its own key for
        the first ``max_values`` values of the feature that find a free coordinate, then one
        shared by the later ones (a high-cardinality id would otherwise take every coordinate,
        with its products; a value arriving once the map is full would share a hashed one)."""
        key = ("=", name, value)
        if key in self.slots:
            return key, False
        seen = self.cardinality.get(name, 0)
        if seen >= self.max_values or self.used >= self.dim:
            return ("=", name, OTHER), True
        if learn and (seen or len(self.cardinality) < MAX_COUNTED):
            self.cardinality[name] = seen + 1
        return key, False

    def _features(self, x: dict, learn: bool) -> tuple[list, list, list, np.ndarray, list]:
        """Coordinates and values of the features of ``x`` (the constant excluded), the offset
        rows of its values past their features' caps, what an offset reads of ``x`` (a constant
        and the standardised values of the first ``offset_features`` numeric features), and the
        rows of its pairs' offsets."""
        fast = self._numeric_features(x, learn)
        if fast is not None:
            return fast
        out = self._features_one_by_one(x, learn)
        self._remember_layout(x)
        return out

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in _CACHES:
            state.pop(name, None)
        return state

    def _features_one_by_one(self, x: dict, learn: bool):
        """:meth:`_features`, feature by feature."""
        slots, values, rows, nominals = [], [], [], []
        local = np.zeros(self.offset_features + 1)
        local[0] = 1.0
        for name, value in x.items():
            nominal = isinstance(value, str) or name in self.nominal_attributes
            key = name
            if nominal:
                key, past = self._nominal_key(name, value, learn)
                nominals.append((name, value, past))
                row = self._offset_row(("=", name, value), learn) if past else None
                if row is not None:
                    rows.append(row)
            found = self._slot(key, learn)
            if found is None:
                continue
            slot, sign = found
            v = 1.0 if nominal else standardised(self.moments[slot], value, learn, PAIR_CLIP)
            if not nominal:
                place = self._local_place(name, slot, learn)
                if place:
                    local[place] = v
            if v != 0.0:
                slots.append(slot)
                values.append(sign * v)
        pairs = self._pair_rows(nominals, learn)
        return slots, values, list(dict.fromkeys(rows)), local, pairs  # a shared row counts once

    def _local_place(self, name: Hashable, slot: int, learn: bool) -> int:
        """The place of numeric feature ``name`` in what an offset reads (0: none); the first
        ``offset_features`` with coordinates of their own take the places."""
        place = self.local_index.get(name, 0)
        if place or not learn or len(self.local_index) >= self.offset_features:
            return place
        if self.slots.get(name) != slot:  # sharing a coordinate: its moments are not its own
            return 0
        place = self.local_index[name] = len(self.local_index) + 1
        return place

    def _encode(self, x: dict, learn: bool) -> tuple[np.ndarray, list[int], np.ndarray, list]:
        """``phi(x)`` over the coordinates in use (the model grows first when learning), the
        offset rows of ``x`` and what they read of it, and the rows of its pairs' offsets."""
        compiled = self._encode_compiled(x, learn)
        if compiled is None:  # not the last numeric layout's: a mixed one's?
            compiled = self._encode_mixed(x, learn)
        if compiled is not None:
            return compiled
        names, reads, rows, local, pairs = self._features(x, learn)
        scale = self._scale(self.feature_weight, len(names))
        slots = np.asarray([0, *names], dtype=np.int64)
        values = np.asarray([1.0, *(scale * v for v in reads)])
        if self.quadratic and slots.size > 1:
            base, vals = slots[1 : PAIR_FEATURES + 1], values[1 : PAIR_FEATURES + 1]
            i, j = _triu(base.size)
            coords, signs = self._pair_slots(base[i], base[j], learn)
            keep = coords >= 0
            products = self._scale(self.pair_weight, base.size) / scale * signs * vals[i] * vals[j]
            slots = np.concatenate([slots, coords[keep]])
            values = np.concatenate([values, products[keep]])
        width = self.weights.shape[1]
        if learn and self.used > width:  # capacity doubles, up to dim
            self._grow(min(self.dim, max(self.used, 2 * width)))
        d = self.weights.shape[1]
        return np.bincount(slots, weights=values, minlength=d)[:d], rows, local, pairs

    @staticmethod
    def _scale(weight: float | None, n: int) -> float:
        """The factor of ``n`` terms of prior weight ``weight``: ``sqrt(weight / n)``, at most 1
        (1 without a weight). Products among ``n`` features (``pair_weight``): their ``n (n +
        1) / 2`` coordinates weigh about ``pair_weight / 2`` times the features; the map
        (``feature_weight``): its ``n`` features weigh as ``feature_weight`` would."""
        return 1.0 if weight is None or n == 0 else min(1.0, math.sqrt(weight / n))

    def _pair_slots(self, a: np.ndarray, b: np.ndarray, learn: bool) -> tuple:
        """Coordinates (-1: none, when only predicting) and signs of the products of the
        features at coordinates ``a`` and ``b``; new ones are given out in order, then hashed."""
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keys = lo * self.dim + hi
        coords = self._known_pairs(keys)
        signs = np.ones(coords.size)
        new = np.flatnonzero(coords < 0)
        if new.size and learn and self.used < self.dim:
            _, first = np.unique(keys[new], return_index=True)
            fresh = keys[new[np.sort(first)]][: self.dim - self.used]
            order = np.argsort(np.concatenate([self.pair_keys, fresh]), kind="stable")
            given = np.arange(self.used, self.used + fresh.size)
            self.pair_keys = np.concatenate([self.pair_keys, fresh])[order]
            self.pair_coords = np.concatenate([self.pair_coords, given])[order]
            self.used += fresh.size
            coords = self._known_pairs(keys)
            new = np.flatnonzero(coords < 0)
        if new.size and self.used >= self.dim:  # full: signed feature hashing
            pair = lo[new].astype(np.uint64) * np.uint64(PAIR_HASH) + hi[new].astype(np.uint64)
            h = _mix32(pair)
            coords[new] = 1 + (h % np.uint64(self.dim - 1)).astype(np.int64)
            signs[new] = np.where(h & np.uint64(0x80000000), 1.0, -1.0)
        return coords, signs

    def _known_pairs(self, keys: np.ndarray) -> np.ndarray:
        """The coordinates given out to the products ``keys`` (``lo * dim + hi``), -1 for none."""
        if not self.pair_keys.size:
            return np.full(keys.size, -1, dtype=np.int64)
        at = np.searchsorted(self.pair_keys, keys)
        found = at < self.pair_keys.size
        found[found] = self.pair_keys[at[found]] == keys[found]
        return np.where(found, self.pair_coords[np.minimum(at, self.pair_keys.size - 1)], -1)

    def _grow(self, d: int) -> None:
        """Widen the weights and inverse Gram matrices to ``d`` coordinates: a new coordinate
        was 0 in every earlier example, so its row and column are those of ``I / l2`` (a
        coordinate not yet given out stays so, and counts for nothing)."""
        k, old = self.n_actions, self.weights.shape[1]
        inverse = np.zeros((k, d, d))
        inverse[:, :old, :old] = self.inverse
        idx = np.arange(old, d)
        inverse[:, idx, idx] = 1.0 / self.l2
        weights = np.zeros((k, d))
        weights[:, :old] = self.weights
        self.inverse, self.weights = inverse, weights

    # ---- estimates and learning ---------------------------------------------------------------

    def predict_one(self, x: dict) -> np.ndarray:
        """The estimated reward of every action in context ``x``, shape ``(k,)``, in [0, 1]. The
        model is only read (a feature never learned counts for nothing). The estimates of the
        last context asked are kept until the model learns (a round asks twice), with what
        learning that context encodes (:meth:`_encode_both`)."""
        key = tuple(x.items())
        last = self.__dict__.get("_last")
        if last is not None and last[0] == key:
            return last[1].copy()
        # a learning model (not a serving copy) encodes what learning x next needs at once
        both = self._encode_both(x) if "inverse" in self.__dict__ else None
        if both is None:
            v, rows, local, pairs = self._encode(x, learn=False)
            learned = None
        else:
            (v, local, learned), rows, pairs = both, [], []
        offsets = self._offsets(rows, local, pairs)
        from learners.round_loops import clipped_estimates

        # np.clip(prior + weights @ v + offsets, 0, 1), the same floats in one compiled call
        estimates = clipped_estimates(self.prior, self.weights @ v, offsets)
        self._last = (key, estimates, learned)
        return estimates.copy()

    def learn_one(self, x: dict, action: int, correct: bool, label: int | None = None) -> None:
        """Learn the played ``action``'s reward, ``correct`` (a known ``label``: every action
        learns; with ``hits_teach_all`` a correct round is one). Without offsets, one exact
        ridge update; with them, one Kalman step of the map and the offsets together
        (``joint_offsets``), or the map's exact update and then the offsets' from the
        residuals it leaves."""
        last = self.__dict__.pop("_last", None)
        if last is None or last[2] is None or last[0] != tuple(x.items()):
            v, rows, local, pairs = self._encode(x, learn=True)
        else:  # encoded by the prediction of x just made
            (v, local), rows, pairs = self._learned(last[2]), [], []
        known = action if correct and self.hits_teach_all and label is None else label
        if known is None and not rows and not pairs:  # a bandit round without offsets
            self._update(int(action), v, float(correct) - self.prior)  # minus no offset
            return
        taught = np.asarray([action] if known is None else range(self.n_actions))
        rewards = taught == known if known is not None else np.asarray([correct])
        targets = rewards.astype(float) - self.prior
        total = self._offsets(rows, local, pairs)
        if (rows or pairs) and self.joint_offsets:
            block = self._offset_block(rows, pairs, taught, local)
            spread = block.row_spread + block.pair_spread  # no pairs: + 0.0, exact
            steps = [self._update(a, v, target - total[a], extra)
                     for a, target, extra in zip(taught.tolist(), targets.tolist(),
                                                 spread.tolist(), strict=True)]
            map_spread, residuals = np.asarray(steps).T
            self._update_offsets(block, residuals, map_spread)
            return
        for a, target in zip(taught.tolist(), targets.tolist(), strict=True):
            self._update(a, v, target - total[a])
        if rows or pairs:
            residuals = targets - self.weights[taught] @ v - total[taught]
            self._update_offsets(self._offset_block(rows, pairs, taught, local), residuals, 0.0)

    def _update(self, a: int, v: np.ndarray, target: float, extra: float = 0.0) -> tuple:
        """Sherman-Morrison: ``inverse_a -= (P v)(P v)^T / (1 + v P v + extra)``, and ``w_a``
        moves to the new ridge solution (without ``extra``; with it, the map's block of a
        Kalman step whose other blocks, the offsets, give ``extra`` variance). Returns ``v P v``
        and the map's error before the step."""
        inverse = self.inverse[a]
        pv = inverse @ v
        spread = float(v @ pv)
        error = target - float(self.weights[a] @ v)
        from learners.round_loops import rank_one_step

        # gain = pv / (1 + spread + extra); w_a += gain * error; inverse_a -= outer(gain, pv)
        rank_one_step(inverse, self.weights[a], pv, 1.0 + spread + extra, error)
        return spread, error

    def __setstate__(self, state: dict) -> None:
        """Restore a pickled model; one saved before the offsets had slopes (its offsets' sums
        and counts) gets the same constant offsets as ridge regressions on the constant alone."""
        self.__dict__.update(state)
        if "offset_sums" in state:
            shrunk = self.offset_l2 + self.__dict__.pop("offset_counts")
            self.offset_weights = (self.__dict__.pop("offset_sums") / shrunk)[..., None]
            self.offset_inverse = (1.0 / shrunk)[..., None, None]
            self.local_index = {}

    def serving_state(self) -> dict:
        """The attributes prediction reads: the state of a read-only copy (learners/frozen.py),
        which predicts exactly as this model does (the moments cut to the coordinates in use)."""
        state = {k: v for k, v in vars(self).items() if k not in _LEARNING_STATE | _CACHES}
        state["moments"] = self.moments[: self.used]
        return state
