"""``ledger export-tiles``: the checkpoint and every tile of the tree as static files in the C2SP
tlog-tiles layout, for any static web host (not HTTP: it writes files)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ledger.fsutil import write_atomic
from ledger.httpstate import Served, View, published_note, tile_bytes
from ledger.note import note_text, parse_checkpoint
from ledger.tiles import entries_tile_path, tile_path, tiles_for_size


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data, 0o644, exclusive=False)


def export_tiles(
    home: Path, dest: Path, progress: Callable[[int, int], None] | None = None
) -> tuple[int, int]:
    """Write the latest checkpoint and every tile of its tree under ``dest`` as static files.

    Each file is written atomically (temporary file, fsync, rename); full tiles already present
    are left alone (they never change); the checkpoint is written last, so a reader never sees a
    checkpoint whose tiles are missing. ``progress(done, total)`` follows the tiles. Returns
    (tree size, files written).
    """
    s = Served(home)
    store = s.store
    try:
        note = published_note(store, store.checkpoint())
        view = View(note, parse_checkpoint(note_text(note)))
        written = 0
        paths = list(_tile_paths(view.size))
        for done, path in enumerate(paths, 1):
            if progress is not None:
                progress(done, len(paths))
            target = dest / path
            if ".p/" not in path and target.exists():
                continue
            data, _ = tile_bytes(s, view, path)
            _write_atomic(target, data)
            written += 1
        _write_atomic(dest / "checkpoint", note)
        return view.size, written + 1
    finally:
        s.close()


def _tile_paths(size: int) -> Iterator[str]:
    for level, n, width in tiles_for_size(size):
        yield tile_path(level, n, width)
        if level == 0:
            yield entries_tile_path(n, width)
