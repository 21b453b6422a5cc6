"""verify.futhark_oracle's binary data codec against the ``futhark-data`` package (Futhark's own
Python reader/writer; docs/dependencies.md says why the oracle keeps its own).

Agreement: for every type the oracle passes (the twelve Futhark primitive types, scalars and
arrays of any rank, empty ones included), ``encode_value`` writes the very bytes
``futhark_data.dumpb`` writes, and each side reads the other's bytes back to the same values.

The differences that keep the codec here, each shown: the package reads Futhark's *text* format
too (the oracle runs the spec with ``-b`` and refuses anything else), so a text value is parsed
char by char in Python, in time quadratic in a token's length; its text paths call
``numpy.product``, gone in NumPy 2; and it has no bound on what it decodes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ledger.core.errors import BadInput
from tests.helpers.examples import examples
from verify.futhark_oracle import _TYPES, decode_values, encode_value

futhark_data = pytest.importorskip(
    "futhark_data", reason="futhark-data is not installed (pip install '.[dev]')"
)

DTYPES = [np.dtype(name) for name in _TYPES]


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_the_oracle_covers_every_futhark_primitive_type() -> None:
    assert {futhark_data.PRIMTYPES[k]["binname"] for k in futhark_data.PRIMTYPES} == set(
        _TYPES.values()
    )


@settings(max_examples=examples(300))
@given(
    st.sampled_from(DTYPES).flatmap(
        lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    )
)
def test_same_bytes_and_values_both_ways(value: np.ndarray[Any, Any]) -> None:
    ours = encode_value(value)
    assert ours == futhark_data.dumpb(value)
    (theirs,) = futhark_data.loadb(ours)
    assert _same(theirs, value)
    (back,) = decode_values(futhark_data.dumpb(value))
    assert _same(back, value)


def test_the_oracles_argument_shapes() -> None:
    """What ``FutharkOracle.compute`` passes: flat arrays, scalars, ``i64`` sizes; several values
    back to back."""
    values = [
        np.arange(7, dtype=np.float32),
        np.array(2.5, dtype=np.float16),
        np.array(1 << 40, dtype=np.int64),
        np.zeros(0, dtype=np.uint8),
        np.array([True, False]),
    ]
    ours = b"".join(encode_value(v) for v in values)
    assert ours == b"".join(futhark_data.dumpb(v) for v in values)
    assert all(_same(a, b) for a, b in zip(futhark_data.loadb(ours), values, strict=True))
    assert all(_same(a, b) for a, b in zip(decode_values(ours), values, strict=True))


def test_difference_text_values() -> None:
    """The package accepts Futhark's text format; the oracle's reader refuses it (the compiled
    spec is run with ``-b``: text output means something else answered)."""
    assert [int(v) for v in futhark_data.loadb(b"1i32 2i32")] == [1, 2]
    with pytest.raises(BadInput, match="not a Futhark binary value"):
        decode_values(b"1i32 2i32")


def test_difference_numpy_2() -> None:
    """The package's text writer and reader of empty arrays call ``numpy.product``, which NumPy
    2.0 removed (the binary paths work)."""
    if hasattr(np, "product"):
        pytest.skip(f"numpy {np.__version__} still has numpy.product")
    with pytest.raises(AttributeError, match="product"):
        futhark_data.dumps(np.zeros(0, np.float32))


def test_difference_bounds() -> None:
    """The oracle's reader takes a bound on the element bytes and refuses a value over it before
    reading; the package's reader has none (here it fails only because the bytes run out)."""
    head = b"b\x02\x01 f32" + (1 << 20).to_bytes(8, "little")
    data = head + bytes(4 << 20)
    with pytest.raises(BadInput, match="oversized"):
        decode_values(data, limit=1 << 16)
    (arr,) = futhark_data.loadb(data)
    assert arr.size == 1 << 20
