"""Kernels by the name their contract gives them (SPEC 7 ``NAME@VERSION``): which bundle entries
of a log seal ``name@version``. Read from the signed entries themselves (never an index a
writer of the database could edit), so every reader (the library, ``ledger show``, the
server's ``/api/v1/lookup/NAME@VERSION``) finds the same entries.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ledger.core.entries import decode_entry
from ledger.core.errors import BadInput, LedgerError, UnknownHash

if TYPE_CHECKING:
    from ledger.store import Store

MAX_REF = 400  # characters of a NAME@VERSION a reader accepts


def split_ref(ref: str) -> tuple[str, str]:
    """(name, version) of ``NAME@VERSION`` (split at the last ``@``); ``BadInput`` otherwise."""
    name, at, version = ref.strip().rpartition("@")
    if not at or not name or not version or len(ref) > MAX_REF or "\n" in ref:
        raise BadInput(f"{ref[:80]!r}: a kernel is named NAME@VERSION")
    return name, version


def is_name_ref(ref: str) -> bool:
    """Whether ``ref`` has the form ``NAME@VERSION`` (no path separator)."""
    return "@" in ref and "/" not in ref


def kernel_of(entry: bytes) -> tuple[str, str] | None:
    """(name, version) a bundle entry records; None for any other (or an unreadable) entry."""
    try:
        obj = decode_entry(entry)
    except LedgerError:
        return None
    k = obj.kernel
    if obj.type != "bundle" or not isinstance(k, dict):
        return None
    return str(k.get("name", "")), str(k.get("version", ""))


def entries_of(store: Store, name: str, version: str, size: int | None = None) -> list[int]:
    """Indices of the bundle entries below ``size`` (default: all) sealing ``name@version``."""
    needle = json.dumps(name, ensure_ascii=False).encode("utf-8")[1:-1]
    end = store.size() if size is None else size
    out: list[int] = []
    for idx, data in store.scan(
        "SELECT idx, data FROM entries WHERE idx >= 0 AND idx < ? AND type = 'bundle' "
        "ORDER BY idx", (end,)
    ):
        data = bytes(data)
        if needle in data and kernel_of(data) == (name, version):
            out.append(int(idx))
    return out


def resolve_ref(store: Store, text: str) -> int:
    """The index ``text`` names in ``store``: ``NAME@VERSION`` (exactly one entry sealing it;
    several are ``UnknownHash`` listing them), else a digest, leaf hash prefix or index
    (``Store.resolve``)."""
    if not is_name_ref(text):
        return store.resolve(text)
    name, version = split_ref(text)
    found = entries_of(store, name, version)
    if not found:
        raise UnknownHash(f"no entry seals {name}@{version}")
    if len(found) > 1:
        listed = ", ".join(f"{i} ({_digest(store.entry(i))})" for i in found[:10])
        raise UnknownHash(f"{name}@{version} is sealed by several entries: {listed}; name one by "
                          "digest or index")
    return found[0]


def _digest(entry: bytes) -> str:
    try:
        return str(decode_entry(entry).bundle_digest)[:16]
    except LedgerError:
        return "?"
