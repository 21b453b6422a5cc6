"""The auditor's index of the whole log (issue 34): every entry's kernel name and version, signer,
bundle digest, time and verdict, held in memory and brought up to date incrementally.

``Index.refresh(store, size)`` reads only the entries appended since the last call (the log is
append-only, so what was indexed never changes), so the server keeps one index and refreshes it
before each search, and ``ledger log --kernel`` builds one in a single pass. Nothing is written to
the store: the server may open it read-only.

``Index.search(query, key_names)`` answers the web's search box and ``ledger log --kernel``:

* a decimal number: that index;
* hex (4+ digits): bundle digests that start with it;
* a kernel name: names that start with the query first, then names that contain it, both
  case-insensitive; ``*`` matches any run of characters (``gemm*f16``), like crt.sh's ``%``;
* a signer: node keys whose name (case-insensitive) or id (hex prefix) matches.

Matches come newest first, at most ``limit`` of them.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.core.canonical import loads_canonical
from ledger.core.errors import BadInput

MIN_DIGEST_PREFIX = 4  # hex digits a digest prefix needs before it is searched as one
_HEX = re.compile(r"[0-9a-f]+")


def verdict_of(entry: Mapping[str, Any]) -> str:
    """The verdict a bundle entry's recorded checks give (SPEC 8): failed, partial or
    verified; "" for an entry that is not a bundle."""
    if entry.get("type") != "bundle":
        return ""
    checks = entry.get("checks")
    statuses = [c.get("status") for c in checks if isinstance(c, dict)] if isinstance(
        checks, list) else []
    if not statuses or "failed" in statuses:
        return "failed"
    return "partial" if "skipped" in statuses else "verified"


def _str(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Row:
    """One entry as the index keeps it. ``name``/``version`` are a bundle's kernel (a key entry's
    registered name, no version); ``signer`` is the bundle's signer or the key entry's key id."""

    index: int
    type: str
    name: str
    version: str
    signer: str
    digest: str
    time: str
    verdict: str

    @property
    def ref(self) -> str:
        """``name@version`` of a bundle's kernel, "" for other entries."""
        return f"{self.name}@{self.version}" if self.type == "bundle" and self.name else ""


def row_of(index: int, data: bytes) -> Row:
    """The index row of the stored entry ``data`` (an unreadable entry gives an empty row)."""
    try:
        entry = loads_canonical(data)
    except BadInput:
        entry = None
    if not isinstance(entry, dict):
        return Row(index, "", "", "", "", "", "", "")
    etype = _str(entry, "type")
    kernel = entry.get("kernel")
    if etype == "bundle":
        k = kernel if isinstance(kernel, dict) else {}
        name, version, signer = _str(k, "name"), _str(k, "version"), _str(entry, "signer")
    else:
        name, version, signer = _str(entry, "name"), "", _str(entry, "key_id")
    return Row(index, etype, name, version, signer, _str(entry, "bundle_digest"),
               _str(entry, "time"), verdict_of(entry))


class Index:
    """Every entry of a log's first ``size`` entries, searchable (module docstring)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self._by_name: dict[str, list[int]] = {}  # lower-case name -> indices, oldest first
        self._by_signer: dict[str, list[int]] = {}
        self._digests: list[tuple[str, int]] = []  # sorted (digest, index)

    @property
    def size(self) -> int:
        return len(self.rows)

    def add(self, row: Row) -> None:
        if row.index != len(self.rows):
            raise ValueError(f"index rows come in order: got {row.index}, want {len(self.rows)}")
        self.rows.append(row)
        if row.name:
            self._by_name.setdefault(row.name.lower(), []).append(row.index)
        if row.signer:
            self._by_signer.setdefault(row.signer.lower(), []).append(row.index)
        if row.digest:
            bisect.insort(self._digests, (row.digest.lower(), row.index))

    def refresh(self, store: Any, size: int) -> None:
        """Index the entries ``self.size .. size-1`` of ``store`` (``Store.rows``)."""
        if size <= self.size:
            return
        for i, _, data in store.rows(self.size):
            if i >= size:
                break
            self.add(row_of(i, data))

    # --- queries ----------------------------------------------------------------------------

    def names(self, query: str) -> list[str]:
        """Lower-case kernel (and key) names matching ``query``: prefix matches first, then
        substring matches; a ``*`` in the query is a wildcard over the whole name."""
        q = query.lower()
        if "*" in q:
            return sorted(n for n in self._by_name if wildcard_match(q, n))
        prefix = sorted(n for n in self._by_name if n.startswith(q))
        inside = sorted(n for n in self._by_name if q in n and not n.startswith(q))
        return prefix + inside

    def by_names(self, names: Iterable[str]) -> list[int]:
        return sorted({i for n in names for i in self._by_name.get(n, [])}, reverse=True)

    def by_signers(self, key_ids: Iterable[str]) -> list[int]:
        return sorted({i for k in key_ids for i in self._by_signer.get(k.lower(), [])},
                      reverse=True)

    def by_digest_prefix(self, prefix: str) -> list[int]:
        p = prefix.lower()
        if len(p) < MIN_DIGEST_PREFIX or not _HEX.fullmatch(p):
            return []
        start = bisect.bisect_left(self._digests, (p, -1))
        out = []
        for digest, i in self._digests[start:]:
            if not digest.startswith(p):
                break
            out.append(i)
        return sorted(out, reverse=True)

    def by_ref(self, name: str, version: str | None) -> list[Row]:
        """Bundle entries of kernel ``name`` (case-insensitive), of ``version`` when given;
        newest first."""
        return [r for i in reversed(self._by_name.get(name.lower(), []))
                if (r := self.rows[i]).type == "bundle"
                and (version is None or r.version == version)]

    def search(self, query: str, key_names: Mapping[str, str], limit: int = 100) -> list[Row]:
        """Entries matching ``query`` (module docstring), newest first, at most ``limit``.
        ``key_names`` maps node key ids (hex) to their registered names."""
        q = query.strip().lower()
        if not q:
            return []
        found: set[int] = set()
        if q.isascii() and q.isdigit() and len(q) <= 20 and int(q) < self.size:
            found.add(int(q))
        found.update(self.by_digest_prefix(q))
        found.update(self.by_names(self.names(q)))
        signers = [kid for kid, name in key_names.items()
                   if name.lower() == q or (len(q) >= MIN_DIGEST_PREFIX and kid.startswith(q))]
        found.update(self.by_signers(signers))
        return [self.rows[i] for i in sorted(found, reverse=True)[:limit]]


def wildcard_match(pattern: str, name: str) -> bool:
    """Whether ``name`` matches ``pattern``, where ``*`` (only) matches any run of characters
    and every other character is itself: the parts between the stars are found in order, left
    to right (linear; no regular expression, no cache of untrusted patterns)."""
    parts = pattern.split("*")
    first, last = parts[0], parts[-1]
    if len(name) < len(first) + len(last) or not name.startswith(first) \
            or not name.endswith(last):
        return False
    at, end = len(first), len(name) - len(last)
    for part in parts[1:-1]:
        found = name.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return True


def parse_ref(text: str) -> tuple[str, str | None]:
    """``name@version`` -> (name, version), split as ``ledger.kernels.split_ref`` does (at the
    last ``@``); ``name`` -> (name, None)."""
    from ledger.kernels import split_ref

    if "@" in text:
        return split_ref(text)
    if not text.strip():
        raise BadInput(f"a kernel ref is NAME or NAME@VERSION, not {text!r}")
    return text, None
