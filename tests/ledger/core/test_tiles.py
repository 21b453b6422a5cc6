"""ledger.core.tiles: C2SP paths (Go sumdb/tlog TestTilePath), tile contents, entry bundles, and an
independent Go client (tests/go/ledgercheck.go) that reads the tiles through tlog.TileHashReader.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.core import merkle, note, tiles
from ledger.core.errors import BadInput

GO_SOURCE = Path(__file__).resolve().parents[2] / "go" / "ledgercheck.go"
GOCODE = Path("/usr/share/gocode")


class Tree:
    """Entries appended through merkle.Frontier into an in-memory store."""

    def __init__(self, entries: list[bytes]) -> None:
        self.entries = entries
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.roots: list[bytes] = [merkle.EMPTY_ROOT]
        f = merkle.Frontier()
        for e in entries:
            for level, n, h in f.append(merkle.leaf_hash(e)):
                self.nodes[(level, n)] = h
            self.roots.append(f.root())

    def get(self, level: int, n: int) -> bytes:
        return self.nodes[(level, n)]

    def write_tiles(self, root: Path) -> None:
        size = len(self.entries)
        for level, n, width in tiles.tiles_for_size(size):
            p = root / tiles.tile_path(level, n, width)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(tiles.hash_tile(level, n, width, self.get))
            if level == 0:
                e = root / tiles.entries_tile_path(n, width)
                e.parent.mkdir(parents=True, exist_ok=True)
                chunk = self.entries[n * 256 : n * 256 + width]
                e.write_bytes(tiles.entry_bundle(chunk))


# Go sumdb/tlog tlog_test.go tilePaths, with the height element removed (C2SP form).
GO_PATHS = [
    ("tile/0/001", (0, 1, 256)),
    ("tile/0/001.p/5", (0, 1, 5)),
    ("tile/5/x123/x456/078", (5, 123456078, 256)),
    ("tile/5/x123/x456/078.p/2", (5, 123456078, 2)),
    ("tile/0/x003/x057/500", (0, 3057500, 256)),
]


@pytest.mark.parametrize(("path", "tile"), GO_PATHS)
def test_go_tile_paths(path: str, tile: tuple[int, int, int]) -> None:
    assert tiles.tile_path(*tile) == path
    assert tiles.parse_tile_path(path) == ("hash", *tile)
    entries = path.replace(f"tile/{tile[0]}/", "tile/entries/", 1)
    if tile[0] == 0:
        assert tiles.entries_tile_path(tile[1], tile[2]) == entries
        assert tiles.parse_tile_path(entries) == ("entries", 0, tile[1], tile[2])


@pytest.mark.parametrize(
    "path",
    [
        "tile/5/123/456/078",  # groups without x
        "tile/-1/000",
        "tile/0/1",
        "tile/0/x000/001",  # non-canonical leading group
        "tile/0/001.p/256",  # a full tile has no .p
        "tile/0/001.p/0",
        "tile/0/001.p/05",
        "tile/0/001.p/",
        "tile/0/x001",
        "tile/data/001",
        "tile/entries/001.p/300",
        "tile/64/000",
        "tile/0",
        "tiles/0/000",
        "tile/0/000/",
        "tile/０/000",  # non-ASCII digit
        "tile/+1/000",
    ],
)
def test_bad_tile_paths(path: str) -> None:
    with pytest.raises(BadInput):
        tiles.parse_tile_path(path)


def test_tiles_for_size_matches_go_newtiles() -> None:
    # Go NewTiles(8, 0, size): full tiles then one partial per level.
    assert tiles.tiles_for_size(0) == []
    assert tiles.tiles_for_size(1) == [(0, 0, 1)]
    assert tiles.tiles_for_size(256) == [(0, 0, 256), (1, 0, 1)]
    assert tiles.tiles_for_size(700) == [(0, 0, 256), (0, 1, 256), (0, 2, 188), (1, 0, 2)]
    big = tiles.tiles_for_size(65_600)
    assert big[-3:] == [(0, 256, 64), (1, 0, 256), (2, 0, 1)]
    assert len(big) == 256 + 1 + 1 + 1


def test_hash_tile_contents() -> None:
    t = Tree([b"entry %d" % i for i in range(600)])
    data = tiles.hash_tile(0, 1, 256, t.get)
    assert len(data) == 256 * 32
    assert data[:32] == merkle.leaf_hash(b"entry 256")
    up = tiles.hash_tile(1, 0, 2, t.get)
    # Level-1 tile: the roots of the first two full level-0 tiles (Merkle level 8).
    assert up[:32] == merkle.root_from_leaf_hashes(
        [merkle.leaf_hash(b"entry %d" % i) for i in range(256)]
    )
    assert up[32:] == merkle.subtree_hash(256, 512, t.get)


def test_entry_bundles() -> None:
    entries = [b"", b"a", b"\x00" * 65535, b"{}"]
    data = tiles.entry_bundle(entries)
    assert data[:4] == b"\x00\x00\x00\x01"
    assert tiles.parse_entry_bundle(data) == entries
    for bad in [b"", b"\x00", b"\x00\x05abc", data[:-1], tiles.entry_bundle([b"x"]) * 257]:
        with pytest.raises(BadInput):
            tiles.parse_entry_bundle(bad)
    with pytest.raises(BadInput):
        tiles.entry_bundle([b"x" * 65536])
    with pytest.raises(BadInput):
        tiles.entry_bundle([])


# --- the independent Go client -------------------------------------------------------------


@pytest.fixture(scope="module")
def ledgercheck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain ('go') on PATH")
    tmp = tmp_path_factory.mktemp("go")
    exe = tmp / "ledgercheck"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "GO111MODULE": "off",
        "GOPATH": f"{GOCODE}:{tmp / 'gopath'}",
        "GOCACHE": str(tmp / "cache"),
        "GOFLAGS": "",
        "GOTOOLCHAIN": "local",
    }
    built = subprocess.run(
        [go, "build", "-o", str(exe), str(GO_SOURCE)],
        env=env,
        timeout=300,
        capture_output=True,
        text=True,
    )
    # With go present, a failed build is a failure (golang-golang-x-mod-dev provides the imports).
    assert built.returncode == 0, built.stderr
    yield exe


def _check(exe: Path, request: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(exe)], input=json.dumps(request), text=True, capture_output=True, timeout=120
    )


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Tree, dict[str, object]]:
    """A 65,600-entry log (full and partial tiles on three levels), its tiles, a signed checkpoint
    and proofs, as ledger's modules make them."""
    size, old = 65_600, 300
    t = Tree([b'{"entry":%d}' % i for i in range(size)])
    root = tmp_path_factory.mktemp("tiles")
    t.write_tiles(root)
    signer = note.NoteSigner("example.com/kernel-ledger", b"", bytes(range(7, 39)))
    cp = note.format_checkpoint(note.Checkpoint(signer.name, size, t.roots[size]))
    request: dict[str, object] = {
        "vkey": note.format_vkey(signer.name, signer.public),
        "checkpoint": note.sign_note(cp, [signer]).decode(),
        "tiles_dir": str(root),
        "inclusion": [
            {
                "index": i,
                "tree_size": size,
                "leaf_hash": _b64(merkle.leaf_hash(t.entries[i])),
                "hashes": [_b64(h) for h in merkle.inclusion_proof(i, size, t.get)],
            }
            for i in [0, 1, 255, 256, 299, 65_535, 65_536, size - 1]
        ],
        "consistency": [
            {
                "old_size": o,
                "new_size": size,
                "old_root": _b64(t.roots[o]),
                "hashes": [_b64(h) for h in merkle.consistency_proof(o, size, t.get)],
            }
            for o in [1, 2, 7, old, 65_536, size - 1]
        ],
    }
    return root, t, request


def test_go_client_accepts_everything(
    ledgercheck: Path, published: tuple[Path, Tree, dict[str, object]]
) -> None:
    _, _, request = published
    result = _check(ledgercheck, request)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == "ok note example.com/kernel-ledger size 65600 signed by example.com/kernel-ledger"
    )
    assert "ok tiles authenticate root of size 65600" in lines
    assert sum(line.startswith("ok inclusion") for line in lines) == 8
    assert sum(line.startswith("ok consistency") for line in lines) == 6
    assert lines[-1] == "ok entries 65600"


def test_go_client_rejects_tampering(
    ledgercheck: Path, published: tuple[Path, Tree, dict[str, object]], tmp_path: Path
) -> None:
    root, _, request = published
    cp = str(request["checkpoint"])
    bad_note = _check(ledgercheck, {**request, "checkpoint": cp.replace("\n65600\n", "\n65601\n")})
    assert bad_note.returncode == 1 and "checkpoint note" in bad_note.stderr

    inc = list(request["inclusion"])  # type: ignore[call-overload]
    first = dict(inc[3])
    first["index"] = 257
    bad_inc = _check(ledgercheck, {**request, "inclusion": [first], "tiles_dir": ""})
    assert bad_inc.returncode == 1 and "inclusion 257" in bad_inc.stderr

    con = dict(list(request["consistency"])[3])  # type: ignore[call-overload]
    con["old_root"] = _b64(bytes(32))
    bad_con = _check(ledgercheck, {**request, "consistency": [con], "tiles_dir": ""})
    assert bad_con.returncode == 1 and "consistency 300" in bad_con.stderr

    # One flipped byte in a level-1 hash tile or in an entry: the Go reader refuses.
    for rel in [tiles.tile_path(1, 0), tiles.entries_tile_path(3)]:
        copy = tmp_path / rel.replace("/", "_")
        shutil.copytree(root, copy)
        target = copy / rel
        data = bytearray(target.read_bytes())
        data[40] ^= 0x01
        target.write_bytes(bytes(data))
        result = _check(ledgercheck, {**request, "tiles_dir": str(copy)})
        assert result.returncode == 1, rel
        assert "tiles" in result.stderr or "entries" in result.stderr
