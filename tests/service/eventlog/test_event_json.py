"""The event log's JSON: :func:`service.events.loads` (orjson) reads back what
:func:`service.events.dumps` writes exactly as the standard library's parser does."""

from __future__ import annotations

import json
import math
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.events import dumps, loads

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def _same(a, b) -> bool:
    """Equal, with floats equal bit for bit (-0.0 is not 0.0) and of the same type."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=300, deadline=None)
@given(DOCS)
def test_loads_reads_what_dumps_writes_as_the_standard_parser_does(doc) -> None:
    text = dumps(doc)
    assert _same(loads(text), json.loads(text))
    assert _same(loads(text.encode()), json.loads(text))  # bytes from Redis
    assert _same(loads(text), doc)


@pytest.mark.parametrize("value", [1e-05, 1e16, 5e-324, 1.7976931348623157e308, -0.0, 0.1 + 0.2])
def test_edge_floats_round_trip_bit_for_bit(value: float) -> None:
    assert _same(loads(dumps({"c": {"x": value}}))["c"]["x"], value)


def test_dumps_still_refuses_nan() -> None:
    with pytest.raises(ValueError):
        dumps({"x": math.nan})


@settings(max_examples=300, deadline=None)
@given(DOCS)
def test_dumps_writes_what_the_standard_library_writes(doc) -> None:
    """orjson's text, where it writes, reads back as the standard library's (ASCII, the same
    values bit for bit); a text not ASCII is the standard library's own."""
    text = dumps(doc)
    plain = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    assert text.isascii() and _same(json.loads(text), json.loads(plain))
    if not json.dumps(doc, ensure_ascii=False).isascii():  # a string not ASCII in it
        assert text == plain


@pytest.mark.parametrize("doc", [
    {"a": [1.0, {"b": (2.0, math.inf)}]},
    [None, -math.inf],
    {"a": OrderedDict(b=math.nan)},  # a dict subclass: the standard library's way
    {"a": type("Floats", (list,), {})([math.nan])},  # a list subclass
    {"a": np.float64(math.nan)},
])
def test_dumps_refuses_non_finite_floats_wherever_they_are(doc) -> None:
    with pytest.raises(ValueError):
        dumps(doc)
