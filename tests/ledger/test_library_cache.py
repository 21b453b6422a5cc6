"""The verified cache's entry file (``ledger/library/cache.py``: ``pack``/``unpack``): one file
holds a cached kernel's receipt and files; anything ``pack`` does not write, or a bundle the
limits refuse, is refused by ``unpack`` and is a miss for ``Cache.lookup`` (fetched again), never
an error and never a half-read entry."""

from __future__ import annotations

import types
from pathlib import Path

import nacl.signing
import pytest

from ledger.core.bundle import MAX_FILE_BYTES, MAX_FILES
from ledger.core.errors import BadInput
from ledger.core.fsutil import private_dir
from ledger.core.note import format_vkey, parse_vkey
from ledger.library.cache import ENTRY, Cache, pack, unpack

FILES = {"contract.yaml": b"metadata: {}\n", "k.ptx": b"// ptx\n" + bytes(300),
         "sub/p.lean": b"theorem t : 1 = 1 := rfl\n", "\u00e9.fut": b""}


def test_an_entry_reads_back_exactly_what_was_packed() -> None:
    receipt = b'{"receipt": 1}\n'
    data = pack(receipt, FILES)
    assert data.startswith(b"kernel-ledger cache entry v1\n15\n" + receipt)
    assert unpack(data) == (receipt, FILES)
    assert unpack(pack(b"", {})) == (b"", {})


def _entry(files_part: bytes) -> bytes:
    return b"kernel-ledger cache entry v1\n2\n{}" + files_part


@pytest.mark.parametrize("data", [
    b"",
    b"kernel-ledger cache entry v2\n2\n{}",
    b"kernel-ledger cache entry v1\n",
    b"kernel-ledger cache entry v1\n-2\n{}",
    b"kernel-ledger cache entry v1\n99\n{}",                 # the receipt cut short
    b"kernel-ledger cache entry v1\n" + b"9" * 20 + b"\n",   # a length past any limit
    _entry(b"3 a\nabc3 a\nabc"),                              # a path twice
    _entry(b"3 b\nabc3 a\nabc"),                              # out of order
    _entry(b"3 ../a\nabc"),                                   # a path out of the bundle
    _entry(b"3 /a\nabc"),
    _entry(b"3 a\nab"),                                       # a file cut short
    _entry(b"x a\nabc"),
    _entry(b"3a\nabc"),
    _entry(b"3 a"),                                           # no end of header
    _entry(b"%d a\n" % (MAX_FILE_BYTES + 1) + bytes(MAX_FILE_BYTES + 1)),
    _entry(b"".join(b"0 f%03d\n" % i for i in range(MAX_FILES + 1))),
    _entry(b"1 \xff\nx"),                                     # a name that is not UTF-8
])
def test_anything_pack_does_not_write_is_refused(data: bytes) -> None:
    with pytest.raises(BadInput):
        unpack(data)


def test_a_damaged_or_old_layout_entry_is_a_miss(tmp_path: Path) -> None:
    sk = nacl.signing.SigningKey.generate()
    vk = parse_vkey(format_vkey("log.example", bytes(sk.verify_key)))
    policy = types.SimpleNamespace(log_keys=[vk])
    cache = Cache(tmp_path / "cache")
    digest = "ab" * 32
    d = cache.root / "kernels" / digest
    for p in (cache.root, cache.root / "kernels", d):
        private_dir(p)
    assert cache.lookup(digest, policy) is None              # nothing there
    (d / "receipt.json").write_bytes(b"{}")                   # the layout before the entry file
    (d / "files").mkdir()
    assert cache.lookup(digest, policy) is None
    (d / ENTRY).write_bytes(pack(b"not a receipt", FILES))    # a receipt that does not parse
    assert cache.lookup(digest, policy) is None
    (d / ENTRY).unlink()
    (d / ENTRY).symlink_to(d / "receipt.json")                # never read through a link
    assert cache.lookup(digest, policy) is None
