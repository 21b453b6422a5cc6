"""Fuzzing the bundle reader, the manifest parser, the entry decoder and the receipt reader with
hypothesis (issue 2). Untrusted bytes may only ever raise the project's BadInput (exit 2); any
other exception is a bug. The example counts are recorded in docs/reliability.md."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.bundle import Bundle, parse_manifest, read_dir
from ledger.core.canonical import canonical_json
from ledger.core.entries import decode_entry
from ledger.core.errors import BadInput
from ledger.core.receipt import Receipt
from tests.helpers.examples import examples

EXAMPLES = examples(400)

_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40
)
_paths = st.lists(_names, min_size=1, max_size=4).map("/".join)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.dictionaries(_paths, st.binary(max_size=64), max_size=12))
def test_bundle_from_files_only_bad_input(files: dict[str, bytes]) -> None:
    try:
        b = Bundle.from_files(files)
    except BadInput:
        return
    # a bundle that loads has a manifest that parses back to its own files
    assert [p for p, _ in parse_manifest(b.manifest)] == [f.path for f in b.files]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_paths, st.binary(max_size=16), st.booleans()), max_size=10))
def test_read_dir_on_random_trees(items: list[tuple[str, bytes, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, data, as_dir in items:
            target = root / rel
            try:
                if as_dir:
                    target.mkdir(parents=True, exist_ok=True)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
            except (OSError, ValueError):
                continue  # the file system refused the name (NUL) or layout: nothing to read
        try:
            files = read_dir(root)
        except BadInput:
            return
        for rel, data in files.items():
            assert (root / rel).read_bytes() == data
            assert not os.path.islink(root / rel)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=600))
def test_parse_manifest_random_bytes(data: bytes) -> None:
    try:
        parse_manifest(data)
    except BadInput:
        pass


_VALID = canonical_json(
    {
        "type": "bundle",
        "origin": "o",
        "time": "2026-01-01T00:00:00Z",
        "prev_size": 1,
        "prev_root": "00" * 32,
        "signature": "A" * 86 + "==",
        "bundle_digest": "ab" * 32,
        "manifest": "x",
        "kernel": {"name": "k", "version": "1"},
        "obligations": [],
        "checks": [],
        "signer": "cd" * 8,
    }
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=400))
def test_decode_entry_random_bytes(data: bytes) -> None:
    try:
        decode_entry(data)
    except BadInput:
        pass


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.integers(0, len(_VALID) - 1), st.integers(0, 255), st.integers(0, 3))
def test_decode_entry_mutations(pos: int, byte: int, op: int) -> None:
    data = bytearray(_VALID)
    if op == 0:
        data[pos] = byte
    elif op == 1:
        del data[pos]
    elif op == 2:
        data.insert(pos, byte)
    else:
        data = data[:pos]
    try:
        obj = decode_entry(bytes(data))
    except BadInput:
        return
    assert canonical_json(obj.fields) == bytes(data) == obj.data  # anything accepted is canonical


def test_valid_entry_decodes() -> None:
    e = decode_entry(_VALID)
    assert (e.type, e.data, e.key_id) == ("bundle", _VALID, None)
    assert e.signer == e.fields["signer"] and e.checks == tuple(e.fields["checks"])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=200).map(str.encode))
def test_receipt_random_bytes(data: bytes) -> None:
    try:
        Receipt.from_bytes(data)
    except BadInput:
        pass


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=10).filter(lambda k: k != "signature"),
        st.text(max_size=10) | st.integers(-5, 5),
        max_size=6,
    ),
    st.binary(min_size=64, max_size=64),
)
def test_signed_part_equals_reserialising(body: dict[str, object], sig: bytes) -> None:
    """Cutting the signature member out of the canonical bytes gives exactly the canonical bytes
    of the entry without it, whatever the other keys are."""
    from ledger.core.encoding import b64_encode
    from ledger.core.entries import signed_part, signing_bytes

    entry = {**body, "signature": b64_encode(sig)}
    assert signed_part(canonical_json(entry), entry) == signing_bytes(entry)
