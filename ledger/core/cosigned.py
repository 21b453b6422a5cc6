"""The cosigned checkpoint note: the log's latest signed note with the witness cosignature lines
collected for it (C2SP tlog-cosignature/v1), kept in the store's meta under ``COSIGNED_META``.

One helper for every reader and writer of it: ``GET /checkpoint`` and the web pages serve
``published_note``, receipts and ``ledger seal`` attach ``with_cosignatures``, and the log side of
the witness protocol (``ledger.witness``) adds new lines with ``merge_cosignatures``. A kept note
counts only for the very checkpoint it cosigns (the same signed text); for any other it is
ignored, never served."""

from __future__ import annotations

from typing import Protocol

from ledger.core.note import note_text

COSIGNED_META = "witness.cosigned_note"  # the checkpoint note with witness cosignature lines


class MetaReader(Protocol):
    """What ``published_note`` reads: a store's ``meta`` (``ledger.store``)."""

    def meta(self, key: str) -> str | None: ...


def with_cosignatures(note: bytes, cosigned: str | None) -> bytes:
    """``note`` with the cosignature lines a log collected for that very checkpoint (the store's
    ``COSIGNED_META``), else ``note`` itself."""
    if cosigned:
        data = cosigned.encode("utf-8")
        if data.startswith(note.rstrip(b"\n") + b"\n") or note_text(data) == note_text(note):
            return data
    return note


def published_note(store: MetaReader, note: bytes) -> bytes:
    """``note`` with the witness cosignatures ``store`` holds for it, when it holds some."""
    return with_cosignatures(note, store.meta(COSIGNED_META))


def merge_cosignatures(note: bytes, kept: str | None, lines: bytes) -> bytes:
    """``note`` (with the lines already ``kept`` for it) and the new cosignature ``lines``, each
    line once."""
    base = with_cosignatures(note, kept)
    have = set(base.splitlines(keepends=True))
    return base + b"".join(ln for ln in lines.splitlines(keepends=True) if ln not in have)
