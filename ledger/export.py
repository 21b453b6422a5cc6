"""``ledger export-tiles``: the checkpoint and every tile of the tree as static files in the C2SP
tlog-tiles layout, for any static web host (not HTTP: it writes files).

It is ``ledger publish`` to a directory without the bundle files and with the entry bundles
uncompressed (served as they are by a host that cannot set ``Content-Encoding``); the order and
the increments are publish's (``ledger.publish``): full tiles already there are not rewritten,
the checkpoint is written last, a directory holding another log or a fork is refused, only what
the log signed is written, never through a symlink planted in ``dest``, and a ``dest`` that is,
holds or lies in the ledger directory is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledger.publish import DirTarget, publish


def export_tiles(
    home: Path, dest: Path, progress: Callable[[int, int], None] | None = None
) -> tuple[int, int]:
    """Write the latest checkpoint and the tiles of its tree under ``dest``. Returns (tree size,
    files written, the checkpoint included)."""
    r = publish(home, DirTarget(dest), progress, blobs=False, compress=False)
    return r.size, r.tiles + 1
