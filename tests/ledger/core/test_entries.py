"""``ledger.core.entries.BundleView`` (issue 30): a bundle entry's members, read by name, the same
from the compiled scanner and from the Python twin."""

from __future__ import annotations

from pathlib import Path

from ledger.core import native
from ledger.core.bundle import manifest_digests
from ledger.core.encoding import hex_decode
from ledger.core.entries import (
    BundleView,
    bundle_view,
    bundle_view_fn,
    bundle_view_py,
    decode_entry,
    entry_object,
)
from tests.helpers.ledgers import fake_home, stored_entry


def test_a_bundle_entry_is_read_by_name(tmp_path: Path) -> None:
    home = fake_home(tmp_path, 2)
    data = stored_entry(home, 2)
    entry = decode_entry(data)
    obj, signature = entry_object(data)
    for read in (bundle_view, bundle_view_fn(), bundle_view_py):
        view = read(data)
        assert isinstance(view, BundleView)
        assert view.origin == entry.origin == "test.example/log"
        assert view.prev_size == obj["prev_size"] and view.prev_root == obj["prev_root"]
        assert view.bundle_digest == hex_decode(obj["bundle_digest"])
        assert view.signer == obj["signer"] and view.signature == signature
        assert view.manifest == obj["manifest"].encode()
        assert view.file_digests == manifest_digests(view.manifest)
        assert view.shaped is True
        assert view == bundle_view_py(data)  # the same members in the same order
    if native.AVAILABLE:  # the compiled scanner's tuple, named without another parse
        assert bundle_view_fn()(data) == native.bundle_view(data)


def test_a_key_entry_or_bad_bytes_have_no_view(tmp_path: Path) -> None:
    home = fake_home(tmp_path, 1)
    key_entry = stored_entry(home, 0)
    for read in (bundle_view, bundle_view_fn(), bundle_view_py):
        assert read(key_entry) is None
        assert read(b"{}") is None
        assert read(b"not json") is None
