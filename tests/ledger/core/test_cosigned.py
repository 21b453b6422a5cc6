"""``ledger.core.cosigned``: the one helper for the cosigned checkpoint note (issue 30)."""

from __future__ import annotations

from ledger.core.cosigned import (
    COSIGNED_META,
    merge_cosignatures,
    published_note,
    with_cosignatures,
)
from ledger.core.note import NoteSigner, cosign, note_text, sign_note

LOG = NoteSigner("log.example/l", b"", bytes(range(32)))
W1 = NoteSigner("w1.example", b"", bytes(range(1, 33)))
W2 = NoteSigner("w2.example", b"", bytes(range(2, 34)))


def _note(size: int) -> bytes:
    return sign_note(f"log.example/l\n{size}\n{'A' * 43}=\n".encode(), [LOG])


class Meta:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def meta(self, key: str) -> str | None:
        return self.values.get(key)


def test_cosignatures_count_only_for_the_note_they_cosign() -> None:
    note, other = _note(5), _note(6)
    line = cosign(note_text(note), W1, 1_700_000_000)
    kept = (note + line).decode()
    assert with_cosignatures(note, kept) == note + line
    assert with_cosignatures(other, kept) == other  # another checkpoint: ignored
    assert with_cosignatures(note, None) == note and with_cosignatures(note, "") == note
    assert published_note(Meta({COSIGNED_META: kept}), note) == note + line
    assert published_note(Meta({}), note) == note


def test_merging_keeps_each_line_once() -> None:
    note = _note(7)
    l1 = cosign(note_text(note), W1, 1_700_000_000)
    l2 = cosign(note_text(note), W2, 1_700_000_001)
    first = merge_cosignatures(note, None, l1)
    assert first == note + l1
    both = merge_cosignatures(note, first.decode(), l1 + l2)
    assert both == note + l1 + l2
    assert merge_cosignatures(_note(8), both.decode(), l2) == _note(8) + l2  # stale kept note
