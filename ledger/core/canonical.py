"""Canonical JSON of log entries: RFC 8785 (JCS), the byte form of every leaf (SPEC 4).

``canonical_json`` serialises:

1. objects with members sorted by their keys' UTF-16 code units (RFC 8785 3.2.3), keys must be
   ``str``;
2. strings with the minimal escaping of RFC 8785 3.2.2.2 (``\\"``, ``\\\\``, ``\\b \\f \\n \\r
   \\t``, other controls below U+0020 as lowercase ``\\u00xx``; everything else literal UTF-8);
   lone surrogates are refused;
3. numbers as ECMAScript's Number.prototype.toString (RFC 8785 3.2.2.3): a ``float`` is formatted
   from its shortest round-trip digits (Python's ``repr`` gives the same digits as ES6), an
   ``int`` must be an exactly representable "safe" integer (|i| <= 2**53), since a larger one
   would silently change value when read as an IEEE double; NaN and infinities are refused;
4. ``true``, ``false``, ``null``, arrays (``list`` or ``tuple``) with no whitespace anywhere.

``loads_canonical`` reads untrusted bytes: size and depth limits first, strict UTF-8 (no BOM), no
duplicate keys, no NaN/Infinity, and the bytes must equal ``canonical_json`` of what they parse to,
so one value has exactly one accepted byte form. Every refusal is ``BadInput``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ledger.core.errors import BadInput
from ledger.core.native import NOT_PLAIN, parse_plain

MAX_SAFE_INTEGER = 2**53
_encode_string = json.encoder.encode_basestring


def _key_order(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly as the sequence of UTF-16 code units.
    return key.encode("utf-16-be", "surrogatepass")


def _number(value: float) -> str:
    """ECMAScript Number::toString for a finite double (ECMA-262 7.1.12.1)."""
    if math.isnan(value) or math.isinf(value):
        raise BadInput(f"{value!r} has no JSON form")
    if value == 0:
        return "0"
    if value < 0:
        return "-" + _number(-value)
    _, digit_tuple, exp = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exp, int)
    exp += len(digit_tuple) - len(digits)
    k = len(digits)
    n = exp + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _write(obj: object, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(_encode_string(obj))
    elif isinstance(obj, int):
        if abs(obj) > MAX_SAFE_INTEGER:
            raise BadInput(f"integer {obj} is beyond 2**53 and has no exact JSON number form")
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        out.append(_number(obj))
    elif isinstance(obj, dict):
        for key in obj:
            if not isinstance(key, str):
                raise BadInput(f"object key {key!r} is not a string")
        out.append("{")
        for i, key in enumerate(sorted(obj, key=_key_order)):
            if i:
                out.append(",")
            out.append(_encode_string(key))
            out.append(":")
            _write(obj[key], out)
        out.append("}")
    elif isinstance(obj, list | tuple):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise BadInput(f"a {type(obj).__name__} has no canonical JSON form")


_FAST = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    check_circular=False,
)


def _no_default(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``_FAST``'s C encoder made once: ``JSONEncoder.encode`` makes a new one on every call, which
# cost more than encoding a small value (2.8 us against 1.3 us for a two-member object)
_C_ENCODE = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _no_default, _encode_string, None, ":", ",", True, False, False
    )
    if getattr(json.encoder, "c_make_encoder", None) is not None
    else None
)


def encode_plain(value: Any) -> str:
    """The C encoder's text for a value the caller knows is plain (what ``_simple`` checks:
    strings, safe integers, booleans, null, lists, ASCII-keyed objects), which is then exactly
    RFC 8785. For ``canonical_json`` and for encoders that assemble an object from its members
    (``ledger.core.entries.BatchEncoder``)."""
    if _C_ENCODE is None:
        return _FAST.encode(value)
    return "".join(_C_ENCODE(value, 0))


encode_string: Callable[[str], str] = _encode_string  # the RFC 8785 text of one string


def _simple(obj: object) -> bool:
    """True when the C encoder's output is already RFC 8785: no floats, safe integers only, and
    object keys in ASCII (so code-point order equals UTF-16 order). Iterative: one call; the
    scalars of a container are judged in its own loop, only containers go on the stack."""
    stack = [obj]
    nodes = 0
    while stack:
        o = stack.pop()
        t = type(o)
        if t is dict:
            for k in o:  # type: ignore[attr-defined]
                if type(k) is not str or not k.isascii():
                    return False
            items: Any = o.values()  # type: ignore[attr-defined]
        elif t is list or t is tuple:
            items = o
        else:
            items = (o,)
        for v in items:
            nodes += 1
            tv = type(v)
            if tv is str or v is None or tv is bool:
                continue
            if tv is int:
                if not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                    return False
            elif tv is dict or tv is list or tv is tuple:
                if o is v:
                    return False  # a container holding itself has no JSON form
                stack.append(v)
            else:
                return False
        if nodes > 1_000_000:
            return False
    return True


def canonical_json(obj: object) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of ``obj``; BadInput when it has none.

    Objects made only of strings, safe integers, booleans, null, lists and ASCII-keyed objects
    (every log entry) take the C encoder, whose output is then exactly RFC 8785; anything else
    (floats, non-ASCII keys) takes the reference writer below. A test checks the two agree."""
    if _simple(obj):
        try:
            return encode_plain(obj).encode("utf-8")
        except UnicodeEncodeError as e:
            raise BadInput("a string holds a lone surrogate, which is not valid Unicode") from e
    return canonical_json_reference(obj)


def canonical_json_extend(
    obj: dict[str, Any], key: str, known_plain: bool = False
) -> tuple[bytes, Callable[[str], bytes]]:
    """``canonical_json(obj)``, and a function giving ``canonical_json({**obj, key: value})``
    for a string ``value``, validating ``obj`` only once: an ASCII key with a string value keeps a
    plain object plain, so the second encoding goes straight to the C encoder. Signing uses it:
    the body is signed, then the entry is encoded again with its signature. ``known_plain``:
    the caller has established what ``_simple`` would (``entries.plain_entry``: a shape-checked
    entry), so the walk is skipped."""
    if key in obj:
        raise BadInput(f"object has {key!r} already")
    if not (key.isascii() and (known_plain or _simple(obj))):
        return canonical_json(obj), lambda value: canonical_json({**obj, key: value})

    text = encode_plain(obj)
    # The members that sort after ``key`` end ``text``; the new member goes just before them, so
    # the second encoding re-encodes only that (usually short) tail.
    after = {k: obj[k] for k in obj if k > key}
    tail = encode_plain(after)[1:] if after else "}"
    head = text[: len(text) - len(tail)]  # "{", or ends with "," (after) or a value (no after)
    if after:
        tail = "," + tail
    elif head != "{":
        head += ","

    def extend(value: str) -> bytes:
        if type(value) is not str:
            return canonical_json({**obj, key: value})
        member = _encode_string(key) + ":" + _encode_string(value)
        out = head + member + tail
        try:
            return out.encode("utf-8")
        except UnicodeEncodeError as e:
            raise BadInput("a string holds a lone surrogate, which is not valid Unicode") from e

    try:
        first = text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadInput("a string holds a lone surrogate, which is not valid Unicode") from e
    return first, extend


def canonical_json_reference(obj: object) -> bytes:
    """The reference RFC 8785 writer (all JSON values, ES6 number form, UTF-16 key order)."""
    out: list[str] = []
    _write(obj, out)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadInput("a string holds a lone surrogate, which is not valid Unicode") from e


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _check_depth(text: str, max_depth: int) -> None:
    """Refuse nesting deeper than ``max_depth`` before the recursive parser sees it. Strings are
    cut out first (regex, in C), so only the brackets are walked in Python."""
    if text.count("[") + text.count("{") <= max_depth:
        return  # not enough brackets to nest that deep, wherever they are
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = 0
    for ch in brackets:
        if ch in "[{":
            depth += 1
            if depth > max_depth:
                raise BadInput(f"JSON nests deeper than {max_depth} levels")
        else:
            depth -= 1


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadInput(f"duplicate object key {key!r}")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise BadInput(f"{name} is not valid JSON")


def _integer(text: str) -> int | float:
    value = int(text)
    # ES6 prints integral doubles up to 1e21 without exponent; read those as doubles so the round
    # trip decides whether the digits were the double's canonical form.
    return value if abs(value) <= MAX_SAFE_INTEGER else float(text)


class _Slow(Exception):
    """The plain parse met something only the full parse may judge (a float, a big integer)."""


def _plain_int(text: str) -> int:
    value = int(text)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise _Slow
    return value


def _plain_other(text: str) -> Any:
    raise _Slow


_NOT_PLAIN = object()
_PLAIN_DECODER = json.JSONDecoder(
    parse_int=_plain_int, parse_float=_plain_other, parse_constant=_plain_other
)


def _loads_plain(text: str) -> Any:
    """The value of ASCII ``text`` when it is canonical JSON made only of strings, safe integers,
    booleans, null, arrays and objects (every log entry), else ``_NOT_PLAIN``: C's parser without
    Python hooks, then the C encoder's bytes compared with the input. For such values the C
    encoder's output is exactly RFC 8785 (ASCII keys: code-point order is UTF-16 order), so
    equality proves the input canonical; a duplicate key, an escape, a float, a big integer or
    any other difference falls back to the full parse, which names what is wrong."""
    try:
        value = _PLAIN_DECODER.decode(text)
        out = encode_plain(value)
    except (_Slow, ValueError, RecursionError):
        return _NOT_PLAIN
    return value if out == text else _NOT_PLAIN


def loads_canonical(data: bytes, max_bytes: int = 65535, max_depth: int = 32) -> Any:
    """Parse untrusted canonical JSON bytes; BadInput unless they are exactly canonical.

    Bytes in the plain subset of every log entry are parsed by ``ledger.core.native.parse_plain``
    (C,
    where built) in one pass; otherwise ASCII input takes ``_loads_plain`` (no Python call per
    object); anything neither can prove canonical takes the full parse below, with its
    duplicate-key, number and literal rules, and gets its precise error there."""
    if not isinstance(data, bytes):
        raise BadInput(f"canonical JSON must be bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise BadInput(f"JSON is {len(data)} bytes, over the limit of {max_bytes}")
    value = parse_plain(data, max_depth)  # the compiled plain-subset parser (ledger.core.native)
    if value is not NOT_PLAIN:
        return value
    return loads_canonical_py(data, max_depth)


def loads_canonical_py(data: bytes, max_depth: int = 32) -> Any:
    """``loads_canonical`` without the compiled parser (its reference; ``data`` within the size
    limit already)."""
    try:
        text = data.decode("utf-8", "strict")
    except UnicodeDecodeError as e:
        raise BadInput(f"JSON is not valid UTF-8 (byte {e.start})") from e
    if text.startswith("\ufeff"):
        raise BadInput("JSON starts with a byte order mark")
    _check_depth(text, max_depth)
    if text.isascii():
        plain = _loads_plain(text)
        if plain is not _NOT_PLAIN:
            return plain
    try:
        value = json.loads(
            text, object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_integer
        )
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        raise BadInput(f"not valid JSON: {e}") from e
    if canonical_json(value) != data:
        raise BadInput("JSON is not in RFC 8785 canonical form")
    return value
