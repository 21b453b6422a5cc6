"""ledger.core.canonical against an independent RFC 8785 (JCS) encoder, the ``rfc8785`` package
(Trail of Bits; docs/formats-crypto.md, "Canonical JSON and RFC 8785").

On every JSON value both accept, the bytes are the same: the C-encoder path (``canonical_json``),
the reference writer (``canonical_json_reference``) and ``rfc8785.dumps``; the parser reads those
bytes back to the same value. Where the two differ, the difference is pinned here: the integers
+-2**53 (exactly representable doubles, which this project accepts and the package refuses as
outside I-JSON's safe range)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.canonical import (
    MAX_SAFE_INTEGER,
    canonical_json,
    canonical_json_reference,
    loads_canonical,
)
from ledger.core.errors import BadInput
from tests.helpers.examples import examples

rfc8785 = pytest.importorskip("rfc8785", reason="rfc8785 is not installed (pip install '.[dev]')")

# the range both accept: I-JSON's safe integers, |i| <= 2**53 - 1
SAFE = st.integers(min_value=-(MAX_SAFE_INTEGER - 1), max_value=MAX_SAFE_INTEGER - 1)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)  # no lone surrogates
SCALARS = st.none() | st.booleans() | SAFE | st.floats(allow_nan=False, allow_infinity=False) | TEXT
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=30,
)
# what a log entry is made of: no floats, ASCII keys (the C encoder's path in canonical_json)
PLAIN = st.recursive(
    st.none() | st.booleans() | SAFE | TEXT,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(st.characters(max_codepoint=127), max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


def _same_value(a: Any, b: Any) -> bool:
    """Equality of parsed values; floats by numeric value (``-0.0`` is written ``0``, read 0)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return bool(a == b) and type(a) is type(b)


@settings(max_examples=examples(300))
@given(VALUES)
def test_every_json_value_encodes_as_rfc8785_does(value: Any) -> None:
    want = rfc8785.dumps(value)
    assert canonical_json(value) == want
    assert canonical_json_reference(value) == want


@settings(max_examples=examples(300))
@given(PLAIN)
def test_log_entry_shapes_take_the_c_encoder_and_match(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=examples(200))
@given(VALUES)
def test_the_parser_reads_rfc8785_bytes_back(value: Any) -> None:
    data = rfc8785.dumps(value)
    back = loads_canonical(data, max_depth=64)
    assert canonical_json(back) == data
    assert _same_value(back, value) or _same_value(back, _ints_as_floats(value))


def _ints_as_floats(value: Any) -> Any:
    """An integral float is written as an integer (``1.0`` -> ``1``) and read back as ``int``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_ints_as_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _ints_as_floats(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize(
    ("value", "text"),
    [  # RFC 8785 appendix B's number samples (IEEE 754 bit patterns given as floats)
        (5e-324, b"5e-324"),
        (1.7976931348623157e308, b"1.7976931348623157e+308"),
        (9007199254740992.0, b"9007199254740992"),
        (1e21, b"1e+21"),
        (999999999999999700000.0, b"999999999999999700000"),
        (1e-7, b"1e-7"),
        (-0.0, b"0"),
        (333333333.3333333, b"333333333.3333333"),
        ({"\u20ac": 1, "\r": 2, "\U0001f600": 3, "\ufb33": 4, "1": 5, "\u00f6": 6}, None),
    ],
)
def test_rfc8785_samples(value: Any, text: bytes | None) -> None:
    ours = canonical_json(value)
    assert ours == rfc8785.dumps(value)
    if text is not None:
        assert ours == text


@pytest.mark.parametrize("n", [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER])
def test_the_one_difference_plus_minus_2_53(n: int) -> None:
    """2**53 is an exactly representable double and ES6 prints it as these digits, so this
    project writes it; the package keeps to I-JSON's |i| <= 2**53 - 1 and refuses it."""
    assert canonical_json(n) == str(n).encode()
    assert loads_canonical(str(n).encode()) == n
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps(n)


@pytest.mark.parametrize(
    "value", [MAX_SAFE_INTEGER + 1, float("nan"), float("inf"), "\ud800", {1: "x"}, b"bytes"]
)
def test_both_refuse(value: Any) -> None:
    with pytest.raises(BadInput):
        canonical_json(value)
    with pytest.raises((rfc8785.CanonicalizationError, UnicodeEncodeError)):
        rfc8785.dumps(value)
