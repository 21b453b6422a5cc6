"""ledger.core.canonical against RFC 8785's own examples.

Sources: RFC 8785 section 3.2.2 (sample input), 3.2.3 (sorting example), 3.2.4 (UTF-8 bytes) and
Appendix B (IEEE 754 number serialisation); the same samples as files in the RFC's reference
repository cyberphone/json-canonicalization testdata/{input,output}/{values,weird,structures}.json.
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.canonical import canonical_json, loads_canonical
from ledger.core.errors import BadInput
from tests.helpers.examples import examples

# RFC 8785 Appendix B: IEEE 754 bit pattern -> ES6 / JCS serialisation.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


@pytest.mark.parametrize(("bits", "want"), APPENDIX_B)
def test_appendix_b_numbers(bits: str, want: str) -> None:
    assert canonical_json(_double(bits)) == want.encode()
    if bits not in ("8000000000000000",):
        # Each canonical number reads back as itself (minus zero becomes "0", by design).
        assert canonical_json(loads_canonical(want.encode())) == want.encode()


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_appendix_b_nan_and_infinity_are_errors(bits: str) -> None:
    with pytest.raises(BadInput):
        canonical_json(_double(bits))


def test_section_3_2_2_sample_and_3_2_4_bytes() -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    want = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    got = canonical_json(json.loads(source))
    assert got == want.encode("utf-8")
    # RFC 8785 3.2.4: the UTF-8 bytes of the result, as the RFC prints them.
    rfc_bytes = (
        "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72"
        " 75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a"
        " 5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31"
        " 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37"
        " 5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30"
        " 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d"
    )
    assert got == bytes.fromhex(rfc_bytes.replace(" ", ""))
    assert loads_canonical(got) == json.loads(source)


def test_section_3_2_3_sorting() -> None:
    source = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    order = [
        json.loads('"' + k + '"')
        for k in ["\\r", "1", "\\u0080", "\\u00f6", "\\u20ac", "\\ud83d\\ude00", "\\ufb33"]
    ]
    parsed = loads_canonical(canonical_json(source))
    assert list(parsed) == order
    # cyberphone testdata weird.json: a surrogate pair sorts by its code units (below U+FB33).
    weird = {
        "\u20ac": 1,
        "1": 2,
        "\u0080": 3,
        "\U0001f602": 4,
        "\u00f6": 5,
        "\ufb33": 6,
        "</script>": 7,
    }
    assert canonical_json(weird) == (
        '{"1":2,"</script>":7,"\u0080":3,"\u00f6":5,"\u20ac":1,"\U0001f602":4,"\ufb33":6}'
    ).encode("utf-8")


def test_cyberphone_structures() -> None:
    source = '{"1": {"f": {"f": "hi","F": 5} ,"\\n": 56.0}, "10": { }, "": "empty", "a": { },'
    source += ' "111": [ { } ], "A": { }}'
    want = b'{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}'
    assert canonical_json(json.loads(source)) == want


def test_escaping_is_minimal() -> None:
    s = "".join(chr(c) for c in range(0x20)) + '"\\/\x7f\u2028\U0001f600'
    out = canonical_json(s)
    assert out == (
        b'"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r'
        b"\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
        b'\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\"\\\\/'
        + "\x7f\u2028\U0001f600".encode()
        + b'"'
    )


@pytest.mark.parametrize(
    "bad",
    [
        float("nan"),
        {1: "int key"},
        {"k": b"bytes"},
        2**53 + 1,
        -(2**53) - 1,
        "\ud800",
        {"\udc00": 1},
        {"set": {1}},
    ],
)
def test_refuses_values_without_canonical_form(bad: object) -> None:
    with pytest.raises(BadInput):
        canonical_json(bad)


def test_integers_and_literals() -> None:
    assert canonical_json([0, -1, 2**53, -(2**53), True, False, None, 1.0, -0.0]) == (
        b"[0,-1,9007199254740992,-9007199254740992,true,false,null,1,0]"
    )
    assert canonical_json((1, "a")) == b'[1,"a"]'


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"b":1,"a":2}', "canonical"),  # unsorted
        (b'{"a": 1}', "canonical"),  # whitespace
        (b'{"a":1}\n', "canonical"),  # trailing newline
        (b'{"a":1,"a":1}', "duplicate"),
        (b'{"a":1,"\\u0061":2}', "duplicate"),  # differently escaped duplicate
        (b"\xef\xbb\xbf{}", "byte order mark"),
        (b'"\xff"', "UTF-8"),
        (b'"\xed\xa0\x80"', "UTF-8"),  # encoded surrogate
        (b'"\\ud800"', "surrogate"),
        (b"[NaN]", "NaN"),
        (b"[Infinity]", "Infinity"),
        (b"[1.0]", "canonical"),
        (b"[-0]", "canonical"),
        (b"[1E30]", "canonical"),
        (b'"\\u00e9"', "canonical"),  # needless escape
        (b"[9007199254740993]", "canonical"),
        (b"[12345678901234567890123]", "canonical"),
        (b"{", "valid JSON"),
        (b"", "valid JSON"),
        (b"[" * 33 + b"]" * 33, "deeper"),
    ],
)
def test_loads_rejects(data: bytes, why: str) -> None:
    with pytest.raises(BadInput, match=why):
        loads_canonical(data)


def test_loads_limits() -> None:
    assert loads_canonical(b"[" * 32 + b"]" * 32) is not None
    assert loads_canonical(b'["[[[["]') == ["[[[["]  # brackets inside strings do not nest
    big = canonical_json("x" * 70000)
    with pytest.raises(BadInput, match="over the limit"):
        loads_canonical(big)
    assert loads_canonical(big, max_bytes=len(big)) == "x" * 70000
    with pytest.raises(BadInput):
        loads_canonical("{}")  # type: ignore[arg-type]
    assert loads_canonical(b"[295147905179352830000]") == [295147905179352830000.0]


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(100))
@given(_json_values)
def test_round_trip(value: object) -> None:
    data = canonical_json(value)
    parsed = loads_canonical(data, max_bytes=1 << 20)
    assert canonical_json(parsed) == data
    # The parsed value equals the original (ints and integral floats compare numerically).
    assert parsed == value


_plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=examples(100))
@given(_plain_values)
def test_fast_path_equals_reference_writer(obj: object) -> None:
    """canonical_json's C-encoder fast path produces exactly the reference writer's bytes
    (non-ASCII keys and any float fall back to the reference writer itself)."""
    from ledger.core.canonical import canonical_json_reference

    assert canonical_json(obj) == canonical_json_reference(obj)


@settings(max_examples=examples(100))
@given(_plain_values, st.text(max_size=10), st.text(max_size=30))
def test_extend_equals_encoding_the_extended_object(obj: object, key: str, value: str) -> None:
    from ledger.core.canonical import canonical_json_extend

    if not isinstance(obj, dict) or key in obj:
        return
    first, extend = canonical_json_extend(obj, key)
    assert first == canonical_json(obj)
    assert extend(value) == canonical_json({**obj, key: value})


def _full_parse(data: bytes) -> object:
    """loads_canonical without its fast paths (neither the compiled plain parser of
    ledger.core.native nor the Python plain path): the full parse alone."""
    import ledger.core.canonical as c

    saved = c._loads_plain
    c._loads_plain = lambda text: c._NOT_PLAIN  # type: ignore[assignment]
    try:
        return c.loads_canonical_py(data)
    except BadInput as e:
        return ("refused", str(e))
    finally:
        c._loads_plain = saved  # type: ignore[assignment]


def _judged(data: bytes) -> object:
    try:
        return loads_canonical(data, max_bytes=1 << 20)
    except BadInput as e:
        return ("refused", str(e))


@settings(max_examples=examples(600))
@given(_json_values, st.integers(0, 10_000), st.binary(max_size=3), st.integers(0, 2))
def test_plain_fast_path_judges_as_the_full_parse(
    value: object, at: int, junk: bytes, how: int
) -> None:
    """On canonical bytes and on every kind of damage to them (a byte replaced, bytes inserted
    or removed), the fast path accepts exactly what the full parse accepts, with the same value,
    and refuses with the same message."""
    data = canonical_json(value)
    assert _judged(data) == _full_parse(data)
    i = at % (len(data) + 1)
    bad = [data[:i] + junk + data[i + 1:], data[:i] + junk + data[i:], data[:i] + data[i + 2:]][how]
    assert _judged(bad) == _full_parse(bad)
    assert type(_judged(bad)) is type(_full_parse(bad))


@pytest.mark.parametrize("data", [
    b'{"a":1,"a":1}', b'{"a":1,"\\u0061":2}', b"[9007199254740993]", b"[-9007199254740993]",
    b"[9007199254740992]", b"[1.0]", b"[-0]", b"[1E30]", b"[NaN]", b'"\\u00e9"', b'"\\ud800"',
    b'{"b":1,"a":2}', b'{"a": 1}', b'["\\u001f"]', b'["\\n"]', b'["\\/"]', b'{"\\u00e9":1}',
    b"[295147905179352830000]", b'[true,false,null,{"":[]}]',
])
def test_plain_fast_path_on_the_edges(data: bytes) -> None:
    assert _judged(data) == _full_parse(data)
