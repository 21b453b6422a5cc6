"""ledger.core.native: the compiled inner loops (ledger/core/_native.c) against their Python twins.

The canonical parser is also held to the full parse on damaged bytes by
tests/ledger/core/test_canonical.py (``test_plain_fast_path_judges_as_the_full_parse``), which goes
through
``loads_canonical`` and so through the compiled parser first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import native
from ledger.core.canonical import canonical_json, loads_canonical_py
from ledger.core.errors import BadInput
from tests.helpers.examples import examples

needs_c = pytest.mark.skipif(
    not native.AVAILABLE,
    reason="ledger.core._native is not built here (no C compiler at install, or LEDGER_NATIVE=0)",
)

# the keys the compiled parser takes on itself: printable ASCII but '"' and '\\' (escaped in JSON)
_keys = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'), max_size=8
)
_plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_keys, children, max_size=5),
    max_leaves=30,
)


@needs_c
@settings(max_examples=examples(500))
@given(_plain)
def test_the_compiled_parser_takes_every_plain_value_on_itself(value: object) -> None:
    """Canonical bytes of a plain value (printable-ASCII keys; any text, escapes included) are
    parsed by the C side itself (not deferred), to the same value as the full parse."""
    data = canonical_json(value)
    got = native.parse_plain(data, 32)
    assert got is not native.NOT_PLAIN
    assert got == value == loads_canonical_py(data)
    assert canonical_json(got) == data


def _python(data: bytes) -> object:
    try:
        return loads_canonical_py(data)
    except BadInput:
        return "refused"


@needs_c
@pytest.mark.parametrize(
    "data",
    [
        b"-0", b"[-0]", b"1.0", b"1e5", b"1E5", b"01", b"[01]", b" {}", b"{} ", b"{ }",
        b'{"b":1,"a":2}', b'{"a":1,"a":2}', b'{"a":1,"a":1}', b'{"":1,"":2}', b'["\\/"]',
        b'["\\u0041"]', b'["\\u001F"]', b'["\\u0008"]', b'["\\u000a"]', b'["\\u007f"]',
        b'["\\u00e9"]', b'["\\ud800"]', b'["\\ud83d\\ude00"]', b"\xef\xbb\xbf{}", b'["\xff"]',
        b'["\xc0\xaf"]', b'["\xed\xa0\x80"]', b'["\x01"]', b'["a\x7f"]', b"[9007199254740992]",
        b"[9007199254740993]", b"[-9007199254740993]", b"[10000000000000000]",
        b"[12345678901234567890]", b'{"\\u00e9":1}', b'{"a\\"b":1}', b'{"\xc3\xa9":1}',
        b"[tru]", b"[truee]", b"[nul]", b"[true,]", b"[,]", b'{"a":}', b'{"a"}', b"[", b"]",
        b"", b'"abc', b'"a\\', b'"a\\u00', b"[" * 32 + b"]" * 32, b"[" * 33 + b"]" * 33,
        b'{"a":[{"b":{"c":[1,2,{"d":null}]}}]}', b'{"A":1,"a":2}', b'{"a":2,"A":1}',
        b'{"a":1,"ab":2}', b'{"ab":1,"a":2}', b'["\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f"]',
    ],
)
def test_the_compiled_parser_never_accepts_what_the_full_parse_refuses(data: bytes) -> None:
    got = native.parse_plain(data, 32)
    if got is native.NOT_PLAIN:
        return  # deferred: loads_canonical runs the full parse, which decides
    assert _python(data) == got
    assert canonical_json(got) == data


@needs_c
def test_the_compiled_parser_takes_the_plain_edges_itself() -> None:
    """It does not merely defer everything: these are in the subset."""
    for data in (b"[9007199254740992]", b"[-9007199254740992]", b'{"":1}', b"[0,-1]",
                 b'{"A":1,"a":2}', b'["\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f"]',
                 b'["\xc3\xa9a\x7f"]', b"[" * 32 + b"]" * 32, b'{"a":1,"ab":2}'):
        assert native.parse_plain(data, 32) is not native.NOT_PLAIN, data
    assert native.parse_plain(b"[" * 33 + b"]" * 33, 32) is native.NOT_PLAIN


@settings(max_examples=examples(300))
@given(_plain, st.integers(0, 10_000), st.binary(max_size=3), st.integers(0, 2))
def test_damaged_bytes_are_judged_as_the_full_parse_does(
    value: object, at: int, junk: bytes, how: int
) -> None:
    data = canonical_json(value)
    i = at % (len(data) + 1)
    bad = [data[:i] + junk + data[i + 1:], data[:i] + junk + data[i:], data[:i] + data[i + 2:]][how]
    got = native.parse_plain(bad, 32)
    if got is not native.NOT_PLAIN:
        assert _python(bad) == got


# -- the encoder ---------------------------------------------------------------------------

class _Str(str):
    pass


# beyond the plain subset too: floats, integers past 2**53, non-ASCII and non-str keys,
# lone surrogates, tuples and subclasses, nesting past 32
_any = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**54), 2**54) | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from(["\ud800", "a\udfff", "\udbff\udc00"])
    | st.builds(_Str, st.text(max_size=4)),
    lambda children: st.lists(children, max_size=4) | st.tuples(children)
    | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), children, max_size=4),
    max_leaves=20,
)


def _in_subset(v: object, depth: int = 0) -> bool:
    """What ``join_plain`` must take on itself: ``encode_plain``'s subset, exact types."""
    if v is None or type(v) is bool:
        return True
    if type(v) is str:
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in v)
    if type(v) is int:
        return abs(v) <= 2**53
    if depth >= 32:
        return False
    if type(v) is list:
        return all(_in_subset(x, depth + 1) for x in v)
    if type(v) is dict:
        return all(type(k) is str and k.isascii() and _in_subset(x, depth + 1)
                   for k, x in v.items())
    return False


@needs_c
@settings(max_examples=examples(500))
@given(st.lists(_any | st.binary(max_size=6), max_size=5))
def test_join_plain_writes_canonical_json_or_defers(parts: list[object]) -> None:
    """Bytes parts as they are, every value as ``canonical_json`` writes it; a part outside the
    plain subset gives None (the Python path then decides), never other bytes."""
    got = native.join_plain(parts)
    if all(type(p) is bytes or _in_subset(p) for p in parts):
        assert got == b"".join(p if type(p) is bytes else canonical_json(p) for p in parts)
    else:
        assert got is None


@needs_c
def test_join_plain_takes_the_edges_on_itself() -> None:
    for value in (2**53, -(2**53), "\"\\\b\f\n\r\t\x00\x1f\x7f\u2028\U0001F600", {"": 1},
                  {"A": 1, "a": [True, False, None]}, [[[]]] * 3, {"\x01": "\x02"}):
        assert native.join_plain([value]) == canonical_json(value), value
    deep: list[object] = []
    for _ in range(31):
        deep = [deep]
    assert native.join_plain([deep]) == canonical_json(deep)
    assert native.join_plain([[deep]]) is None  # nesting past 32: deferred
    for value in (2**53 + 1, 1.0, "\ud800", {"\u00e9": 1}, {1: 1}, (1,), _Str("s"), True + 0j):
        assert native.join_plain([value]) is None, value


_kernels = st.dictionaries(
    st.sampled_from(["name", "version", "tool", "b@d", "x" * 65, "\u00e9", "ok.key-1"]),
    st.text(max_size=3) | st.sampled_from(["v" * 1000, "v" * 1001]) | st.integers(0, 2),
    max_size=5,
) | st.lists(st.text(max_size=2), max_size=2)
_items = st.dictionaries(
    st.sampled_from(["obligation", "theorem", "property", "id", "status", "detail", "n_1"]),
    st.sampled_from(["passed", "failed", "skipped", "Passed", "", "d" * 10_000, "d" * 10_001])
    | st.none(),
    max_size=7,
)


@needs_c
@settings(max_examples=examples(500))
@given(_kernels, st.lists(_items, max_size=3), st.lists(_items, max_size=3))
def test_join_plain_keeps_the_shape_rules(
    kernel: object, obligations: list[object], checks: list[object]
) -> None:
    """With its shape kinds, ``join_plain`` gives bytes exactly when ``check_bundle_shape``
    takes the members (here every value is plain): it never takes what the rules refuse."""
    from ledger.core.entries import check_bundle_shape

    own = {"kernel": kernel, "obligations": obligations, "checks": checks}
    try:
        check_bundle_shape(own)
        shaped = True
    except BadInput:
        shaped = False
    shapes = ((0, native.SHAPE_KERNEL), (2, native.SHAPE_OBLIGATIONS), (4, native.SHAPE_CHECKS))
    got = native.join_plain([kernel, b",", obligations, b",", checks], shapes)
    assert (got is not None) is shaped
    if got is not None:
        assert got == b",".join(canonical_json(v) for v in (kernel, obligations, checks))
    # the limits of the lists themselves
    assert native.join_plain([[{"obligation": "o", "theorem": "t", "property": "p"}] * 65],
                             ((0, native.SHAPE_OBLIGATIONS),)) is None


def test_join_plain_without_the_module_defers_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_C", None)
    assert native.join_plain([b"{", {"a": 1}, b"}"]) is None


def _key() -> tuple[bytes, bytes]:
    k = nacl.signing.SigningKey(bytes(range(32)))
    return bytes(k) + bytes(k.verify_key), bytes(k.verify_key)


@pytest.mark.parametrize("impl", ["native", "python"])
def test_sign_many_is_libsodium_ed25519(impl: str) -> None:
    sk64, _ = _key()
    msgs = [b"", b"a", b"x" * 70000, bytes(range(256))]
    sign = native.sign_many if impl == "native" else native.sign_many_py
    sigs = sign(sk64, msgs)
    key = nacl.signing.SigningKey(sk64[:32])
    assert sigs == [key.sign(m).signature for m in msgs]
    assert sign(sk64, []) == []


@pytest.mark.parametrize("impl", ["native", "python"])
def test_verify_many_names_exactly_the_bad_ones(impl: str) -> None:
    sk64, pk = _key()
    msgs = [b"m%d" % i for i in range(10)]
    sigs = native.sign_many_py(sk64, msgs)
    jobs = [(pk, m, s) for m, s in zip(msgs, sigs, strict=True)]
    flipped = bytes([sigs[3][0] ^ 1]) + sigs[3][1:]
    jobs[3] = (pk, msgs[3], flipped)  # a damaged signature
    jobs[5] = (pk, b"other", sigs[5])  # another message
    jobs[7] = (pk[:31], msgs[7], sigs[7])  # a key of the wrong length
    jobs[8] = (pk, msgs[8], sigs[8][:63])  # a signature of the wrong length
    verify = native.verify_many if impl == "native" else native.verify_many_py
    assert verify(jobs) == [3, 5, 7, 8]
    assert verify([]) == []


@pytest.mark.parametrize("impl", ["native", "python"])
@pytest.mark.parametrize("threads", [1, 2, 3, 16])
def test_verifying_in_the_background_gives_verify_many_s_answer(
    impl: str, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Verifying`` (the mirror's signatures checked while it stores) splits the jobs over its
    threads and puts the positions back in order; the twin runs at once."""
    if impl == "python":
        monkeypatch.setattr(native, "_C", None)
    sk64, pk = _key()
    msgs = [b"m%d" % i for i in range(150)]
    jobs = [(pk, m, s) for m, s in zip(msgs, native.sign_many_py(sk64, msgs), strict=True)]
    for i in (0, 49, 50, 100, 149):
        jobs[i] = (pk, b"other", jobs[i][2])
    v = native.Verifying(jobs, threads=threads)
    assert v.result() == [0, 49, 50, 100, 149] == v.result()
    assert native.Verifying([], threads=threads).result() == []


@needs_c
def test_a_verifying_thread_that_fails_is_not_taken_for_good_signatures() -> None:
    """Fail closed: a job the C loop refuses (not bytes) raises from ``result()``, in whichever
    thread it ran, rather than leaving that thread's part reported as all good."""
    sk64, pk = _key()
    msgs = [b"m%d" % i for i in range(100)]
    jobs: list[Any] = [(pk, m, s) for m, s in zip(msgs, native.sign_many_py(sk64, msgs),
                                                   strict=True)]
    jobs[90] = (pk, "not bytes", jobs[90][2])
    with pytest.raises(TypeError):
        native.Verifying(jobs, threads=2).result()


@needs_c
def test_libsodium_is_the_systems_loaded_by_name() -> None:
    """Issue 30: ``bind_sodium`` loads a shared libsodium by name through its public C API (not
    PyNaCl's private extension); a name it cannot load, or a library without libsodium's
    functions, is an ``OSError`` that leaves what was bound working."""
    from ledger.core import _native  # type: ignore[attr-defined]

    with pytest.raises(OSError, match="cannot load libsodium"):
        _native.bind_sodium("libno-such-sodium.so.0")
    with pytest.raises(OSError, match="does not export libsodium's functions"):
        _native.bind_sodium("libc.so.6")
    if not native.SIGNING:
        pytest.skip("no shared libsodium here (Debian: libsodium23): the twins sign")
    sk64, pk = _key()
    msgs = [b"a", b"b" * 1000]
    sigs = native.sign_many(sk64, msgs)
    assert sigs == native.sign_many_py(sk64, msgs)  # Ed25519 is deterministic
    assert native.verify_many([(pk, msgs[0], sigs[0]), (pk, msgs[1], sigs[0])]) == [1]


@needs_c
def test_the_module_is_built_and_the_switch_turns_it_off() -> None:
    env = dict(os.environ, LEDGER_NATIVE="0")
    out = subprocess.run(
        [sys.executable, "-c", "from ledger.core import native; print(native.AVAILABLE)"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "False"


# -- the bundle-entry scanner ----------------------------------------------------------------

def _entries(n: int) -> list[bytes]:
    """Real bundle entries of varied fields, as a log writes them (BatchEncoder, signed)."""
    from ledger.core.bundle import Bundle
    from ledger.core.entries import BatchEncoder, chain_link, sign_encoded

    sk64, _ = _key()
    enc = BatchEncoder({"origin": "t.example/l\u00e9", **chain_link(7, bytes(range(32)))},
                       b"\x02" * 8)
    out = []
    for i in range(n):
        b = Bundle.from_files({"contract.yaml": b"c%d" % i, "k.ptx": b"p",
                               "d\u00e9j\u00e0.lean": b"l", "s.fut": b"f" * i})
        checks = [{"id": f"c{k}", "status": ["passed", "failed", "skipped"][k % 3],
                   "detail": "d\n\"\u2028" * (i % 5), "tool": "t"} for k in range(i % 4)]
        extra = {"kernel": {"name": f"k{i}", "version": "1"},
                 "obligations": [{"obligation": "PO1", "theorem": "t", "property": "p"}] * (i % 2),
                 "checks": checks}
        out.extend(sign_encoded([enc.encode("2026-12-01T00:00:00.5Z", b, extra)], sk64))
    return out


_REAL = _entries(24)


@needs_c
def test_the_scanner_reads_real_entries_as_entry_object_does() -> None:
    from ledger.core.entries import bundle_view_py

    for data in _REAL:
        got = native.bundle_view(data)
        assert got is not None and got == bundle_view_py(data)
        assert got[-1] is True  # the shape rules hold


@needs_c
@settings(max_examples=examples(1500), deadline=None)
@given(st.sampled_from(_REAL), st.integers(0, 10_000), st.binary(max_size=3), st.integers(0, 2))
def test_the_scanner_judges_damaged_entries_as_entry_object_does(
    data: bytes, at: int, junk: bytes, how: int
) -> None:
    """Any byte replaced, inserted or removed: where the scanner takes the bytes, it gives what
    ``entry_object`` (and the shape rules) make of them; it never takes bytes entry_object
    refuses (then ``bundle_view_py`` is None and so must the scanner's answer be)."""
    from ledger.core.entries import bundle_view_py

    i = at % (len(data) + 1)
    bad = [data[:i] + junk + data[i + 1:], data[:i] + junk + data[i:], data[:i] + data[i + 2:]][how]
    got = native.bundle_view(bad)
    if got is not None:  # None: the caller takes entry_object's path, which judges them
        assert got == bundle_view_py(bad)


@pytest.mark.parametrize("field, value", [
    ("kernel", {"name": "k"}),  # a required key missing
    ("kernel", {"name": "k", "version": "v", "b@d": "x"}),  # a key name the rule refuses
    ("kernel", {"name": "k", "version": "v" * 1001}),  # text over the limit
    ("checks", [{"id": "x", "status": "maybe", "detail": ""}]),  # an unknown status
    ("checks", [{"id": "x", "status": "passed", "detail": "d" * 10_001}]),
    ("checks", [{"id": "x", "status": "passed", "detail": "d" * 10_000}]),  # at the limit: fine
    ("obligations", [{"obligation": "PO1", "theorem": "t", "property": 3}]),  # not text
    ("obligations", ["PO1"]),  # not an object
    ("kernel", {f"k{i}": "v" for i in range(15)} | {"name": "k", "version": "v"}),  # 17 keys
])
def test_the_shape_flag_is_the_shape_rules(field: str, value: object) -> None:
    """The scanner's last member says whether ``check_bundle_shape`` takes the entry (C and
    twin alike)."""
    from ledger.core.canonical import canonical_json
    from ledger.core.entries import BadInput, bundle_view_fn, check_bundle_shape, entry_object

    obj, _ = entry_object(_REAL[3])
    obj = {**obj, field: value}
    data = canonical_json(obj)
    try:
        check_bundle_shape(obj)
        shaped = True
    except BadInput:
        shaped = False
    view = bundle_view_fn()(data)
    assert view is not None and view[-1] is shaped


def test_audit_mirror_and_seal_run_on_the_twins(tmp_path: Path) -> None:
    """Where the module is not built (``LEDGER_NATIVE=0`` here) the twins seal a batch and audit
    it clean, as the module does (the encoder's and the signatures' bytes are held equal by the
    tests above and tests/ledger/test_sealers.py)."""
    code = """
import sys
from pathlib import Path
from ledger.core import native
from ledger.audit import audit
from ledger.log import Log
from tests.helpers.ledgers import add_node, fake_fields
from ledger.core.bundle import Bundle
from ledger import log as log_mod
log_mod.utc_now = lambda: "2026-12-01T00:00:00Z"
home = Path(sys.argv[1])
log = Log.init(home, "twins.example/log")
sk = add_node(log)
items = [(Bundle.from_files({"contract.yaml": b"%d" % i, "k.ptx": b"p", "p.lean": b"l",
          "s.fut": b"f"}), fake_fields(str(i))) for i in range(300)]
sealed = log.seal_many(items, sk, workers=0)
res = audit(log.store, log.verifier)
print(native.AVAILABLE, res.ok, len(res.problems), sealed[-1].leaf_hash.hex())
"""
    outs = []
    for flag in ("0", "1"):
        env = dict(os.environ, LEDGER_NATIVE=flag)
        home = tmp_path / f"h{flag}"
        r = subprocess.run([sys.executable, "-c", code, str(home)], env=env, capture_output=True,
                           text=True, check=False, cwd=Path(__file__).resolve().parents[3])
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.split())
    twins, built = outs
    assert twins[:3] == ["False", "True", "0"]
    if native.AVAILABLE:
        assert built[:3] == ["True", "True", "0"]


def test_a_build_of_another_native_c_is_never_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale ``_native`` .so left in a checkout (built from an older ``_native.c``, whose
    functions take other arguments) is refused by its ABI number, not called: calling one
    crashed the interpreter (a segfault in ``bind_sodium``)."""
    import types

    import ledger.core

    stale = types.ModuleType("ledger.core._native")
    monkeypatch.setitem(sys.modules, "ledger.core._native", stale)
    monkeypatch.setattr(ledger.core, "_native", stale, raising=False)
    assert native._load() is None
    stale.ABI = native.ABI  # type: ignore[attr-defined]
    assert native._load() is stale
