"""The event log's JSON: :func:`service.events.loads` (orjson) reads back what
:func:`service.events.dumps` writes exactly as the standard library's parser does."""

from __future__ import annotations

import json
import math

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
