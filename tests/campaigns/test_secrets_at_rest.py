"""Red team: the secrets (``log.key``, ``keys/*.key``) never leave their files, and ``ledger
publish`` / ``export-tiles`` never write outside DEST, never publish what the log did not sign,
never roll DEST back, and never print a credential (docs/threat-model.md, section 7).

Every test here failed before the fix it names (a few parametrized cases held already), except
those marked "pin" (behaviour that held already and is kept)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.core.errors import BadInput, CannotCheck, KeyFileError
from ledger.core.merkle import leaf_hash
from ledger.core.tiles import parse_entry_bundle, tiles_for_size
from ledger.keys import KIND_SECRET, check_name, load_node_secret
from ledger.log import Log
from ledger.publish import DirTarget, S3Target, publish
from ledger.store import open_store
from tests.campaigns.test_stored_log_tampering import _alter
from tests.helpers.ledgers import (
    REPO,
    assert_one_error_line,
    cli_json,
    fake_home,
    run_cli,
    seal_fake,
)
from tests.helpers.server import BackgroundServer, make_app
from tests.ledger.test_publish import bucket, seaweed  # noqa: F401  (fixtures: the S3 gateway)

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return fake_home(tmp_path, 3)


def secrets_of(home: Path) -> list[str]:
    """The secret strings of a ledger: the log key's base64 seed and each node key's seed."""
    # PRIVATE+KEY+<name>+<hash>+<base64>: the base64 may hold "+" itself
    out = [(home / "log.key").read_text().strip().split("+", 4)[4]]
    for f in (home / "keys").glob("*.key"):
        out.append(json.loads(f.read_text())["seed"])
    return out


def assert_no_secret(secrets: list[str], *texts: str | bytes) -> None:
    for text in texts:
        blob = text.decode("latin-1") if isinstance(text, bytes) else text
        for s in secrets:
            assert s not in blob, "a secret leaked"
            assert s[:12] not in blob, "part of a secret leaked"


def every_file(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


# -- 1. key files: plain, private files of this user, or refused ------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.mark.parametrize(
    "case", ["symlink", "dev-zero", "fifo", "group-readable", "other-readable", "other-owner"]
)
@pytest.mark.parametrize("which", ["log.key", "keys/node.key"])
def test_a_key_file_that_is_not_a_private_regular_file_is_refused(
    home: Path, tmp_path: Path, case: str, which: str
) -> None:
    """Like ssh with an unprotected key: a key file that is a symlink (to another key, to
    /dev/zero), a FIFO, another user's, or readable by group or others is refused (exit 2, one
    line naming the fix), never read. Before: a symlinked log.key was followed (exit 0), a 0644
    key used silently."""
    if case == "other-owner" and not ROOT:
        pytest.skip("making a file of another user needs root")
    secrets = secrets_of(home)
    key = home / which
    saved = tmp_path / "saved.key"
    shutil.copy2(key, saved)
    if case == "symlink":
        key.unlink()
        key.symlink_to(saved)
    elif case == "dev-zero":
        key.unlink()
        key.symlink_to("/dev/zero")
    elif case == "fifo":
        key.unlink()
        _fifo(key)
    elif case == "group-readable":
        key.chmod(0o640)
    elif case == "other-readable":
        key.chmod(0o604)
    else:
        os.chown(key, 65534, -1)
    if which == "log.key":
        res = run_cli("log", home=home)  # any command: the ledger directory is unsafe
    else:
        res = run_cli("seal", str(tmp_path / "b" / "b0"), "--key", "node", home=home)
    line = assert_one_error_line(res, 2)
    assert str(key) in line
    if case in ("group-readable", "other-readable"):
        assert "chmod 600" in line
    assert_no_secret(secrets, res.stdout, res.stderr)


@pytest.mark.parametrize("case", ["writable", "symlink-to-writable", "other-owner"])
def test_an_unsafe_keys_directory_is_refused_when_a_key_is_read(
    home: Path, tmp_path: Path, case: str
) -> None:
    """keys/ is checked when a key is read, not only when one is made: a keys/ that group or
    others may write (or a symlink to one), or another user's, could hold a planted key. Before:
    only `keys new` checked it."""
    if case == "other-owner" and not ROOT:
        pytest.skip("making a directory of another user needs root")
    keys = home / "keys"
    if case == "writable":
        keys.chmod(0o777)
    elif case == "symlink-to-writable":
        moved = tmp_path / "shared-keys"
        keys.rename(moved)
        moved.chmod(0o777)
        keys.symlink_to(moved)
    else:
        os.chown(keys, 65534, -1)
    res = run_cli("seal", str(tmp_path / "b" / "b0"), "--key", "node", home=home)
    line = assert_one_error_line(res, 2)
    assert "key directory" in line
    with pytest.raises(BadInput, match="key directory"):
        load_node_secret(keys, "node")


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"kind": KIND_SECRET, "seed": "SECRETSEEDVALUE+xyz"}),
        json.dumps({"kind": KIND_SECRET, "name": "SECRETSEEDVALUE",
                    "encrypted": {"salt": "SECRETSEEDVALUE"}}),
        '{"kind": "SECRETSEEDVALUE"}',
        "SECRETSEEDVALUE not json",
        json.dumps({"kind": KIND_SECRET,
                    "encrypted": {"salt": "A" * 22 + "==", "box": "SECRETSEEDVALUE"}}),
    ],
)
def test_a_garbled_node_key_is_never_quoted(home: Path, tmp_path: Path, content: str) -> None:
    """pin: a node key file that does not parse is named, never quoted, even with LEDGER_DEBUG
    set (an error the program raises on purpose is one line, not a traceback)."""
    key = home / "keys" / "node.key"
    key.write_text(content)
    pw = tmp_path / "pw"
    pw.write_text("x\n")
    env = dict(os.environ, LEDGER_HOME=str(home), LEDGER_DEBUG="1")
    res = subprocess.run(
        [sys.executable, "-m", "ledger_cli", "seal", str(tmp_path / "b" / "b0"), "--key", "node",
         "--passphrase-file", str(pw)],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )
    assert_one_error_line(res, 2)
    assert "SECRETSEEDVALUE" not in res.stderr + res.stdout


@pytest.mark.parametrize(
    "content", [b"\xa7SECRETSEEDVALUE\n", b"PRIVATE+KEY+SECRET SEEDVALUE+abcd1234+AAAA\n"]
)
def test_a_garbled_log_key_is_never_quoted(home: Path, content: bytes) -> None:
    """Log._open quoted the decode error (one byte of log.key) and parse_skey's name field."""
    (home / "log.key").write_bytes(content)
    res = run_cli("keys", "revoke", "0" * 16, "--reason", "x", home=home)
    assert_one_error_line(res, 2)
    assert "SECRET" not in res.stderr and "0xa7" not in res.stderr


def test_keys_new_under_umask_0_keeps_ledger_home_private(tmp_path: Path) -> None:
    """`keys new` before `init` made LEDGER_HOME (and its parents) with the umask: 0777 under
    umask 000, so anyone could swap keys/ for their own (and `init` then refused the home).
    Now LEDGER_HOME is 0700 and no parent made is writable by group or others."""
    home = tmp_path / "a" / "b" / "home"
    res = subprocess.run(
        [sys.executable, "-c",
         "import os, sys; os.umask(0); from ledger_cli import main; main(sys.argv[1:])",
         "keys", "new", "alice", "--home", str(home)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for d in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(d.stat().st_mode) & 0o022 == 0, oct(d.stat().st_mode)
    assert stat.S_IMODE((home / "keys" / "alice.key").stat().st_mode) == 0o600
    assert cli_json("init", "--origin", "test.example/um", home=home)["origin"] == "test.example/um"


def test_a_keys_new_killed_mid_write_leaves_no_secret_behind(tmp_path: Path) -> None:
    """A `keys new` killed after writing the secret's temporary file and before renaming it left
    `.alice.key.*.tmp` (0600, a seed) for good. The next `keys new` of that name removes it."""
    home = tmp_path / "home"
    killer = (
        "import os, sys\n"
        "import ledger.core.fsutil as f\n"
        "calls = []\n"
        "def fault(fd, data):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 2:\n"  # the .pub is the first write, the secret the second
        "        os.write(fd, data); os._exit(9)\n"
        "f._maybe_fault = fault\n"
        "from ledger_cli import main; main(sys.argv[1:])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", killer, "keys", "new", "alice", "--home", str(home)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert res.returncode == 9
    strays = list((home / "keys").glob(".alice.key.*.tmp"))
    assert strays and b'"seed"' in strays[0].read_bytes()  # what a kill leaves
    assert not (home / "keys" / "alice.key").exists()
    assert run_cli("keys", "new", "alice", home=home).returncode == 0
    assert not list((home / "keys").glob(".alice.*.tmp"))
    assert load_node_secret(home / "keys", "alice")[1].name == "alice"


@pytest.mark.parametrize(
    "name", ["..", "../log", "a/b", "/etc/passwd", ".hidden", "a\\b", "a b", "x" * 3000, "é"]
)
def test_hostile_key_names_are_one_short_line_and_change_nothing(home: Path, name: str) -> None:
    """`keys new` with a path separator, '..', a leading dot, a very long name: exit 2, one line
    (a 3000-character name is not echoed whole: before, the line quoted all of it), nothing
    created anywhere."""
    before = sorted(p.name for p in (home / "keys").iterdir())
    top = sorted(p.name for p in home.parent.iterdir())
    line = assert_one_error_line(run_cli("keys", "new", name, home=home), 2)
    assert len(line) < 300
    assert sorted(p.name for p in (home / "keys").iterdir()) == before
    assert sorted(p.name for p in home.parent.iterdir()) == top
    with pytest.raises(KeyFileError):
        check_name(name)
    with pytest.raises(KeyFileError):
        check_name("a\x00b")  # a NUL cannot reach argv; in-process it is refused the same way


def test_no_output_file_or_http_answer_carries_a_secret(home: Path, tmp_path: Path) -> None:
    """pin: every command's output (plain and --json), every file export-tiles, publish and
    receipt write make, and every page and API answer of `ledger serve` (including paths that
    name the key files) is free of the log's and the node's secret seeds."""
    secrets = secrets_of(home)
    outputs = []
    for args in (["vkey"], ["checkpoint"], ["keys", "list"], ["log"], ["audit"], ["show", "0"],
                 ["proof", "inclusion", "1"], ["proof", "consistency", "1", "3"]):
        for extra in ([], ["--json"]):
            res = run_cli(*args, *extra, home=home)
            assert res.returncode == 0, (args, res.stderr)
            outputs += [res.stdout, res.stderr]
    res = run_cli("keys", "new", "bob", "--json", home=home)
    outputs += [res.stdout, res.stderr]
    secrets = secrets_of(home)  # bob's seed too
    assert_no_secret(secrets, *outputs)
    out = tmp_path / "out"
    out.mkdir()
    for args in (["export-tiles", str(out / "tiles")], ["publish", str(out / "pub")],
                 ["receipt", "write", "1", "--out", str(out)]):
        res = run_cli(*args, home=home)
        assert res.returncode == 0, (args, res.stderr)
        assert_no_secret(secrets, res.stdout, res.stderr)
    files = every_file(out)
    assert len(files) > 10
    for f in files:
        assert_no_secret(secrets, f.read_bytes())
        assert f.stat().st_mode & 0o022 == 0
    with BackgroundServer(make_app(home)) as srv, httpx.Client(base_url=srv.url) as c:
        for path in ("/", "/keys", "/checkpoint", "/feed.atom", "/api/v1/entries/0",
                     "/api/v1/entries/1/receipt", "/api/v1/blobs", "/tile/0/000.p/4",
                     "/tile/entries/000.p/4", "/api/v1/openapi.json", "/log.key",
                     "/keys/node.key", "/api/v1/bundles/1/files/..%2F..%2Flog.key",
                     "/api/v1/bundles/1/files/../../log.key", "/api/v1/blobs/..%2Flog.key",
                     "/tile/..%2F..%2Flog.key", "/search?q=..%2Flog.key"):
            r = c.get(path)
            assert r.status_code < 500, (path, r.status_code)
            assert_no_secret(secrets, r.content, str(r.headers))


# -- 2. ledger publish / export-tiles: DEST ------------------------------------------------------


def _tree_ok(dest: Path, home: Path) -> int:
    """The size DEST's checkpoint names, after checking that every tile and entry bundle of that
    tree is there and agrees with the ledger (what a mirror would read)."""
    store = open_store(home)
    try:
        note = (dest / "checkpoint").read_bytes()
        size = int(note.split(b"\n")[1])
        for level, n, width in tiles_for_size(size):
            suffix = f".p/{width}" if width < 256 else ""
            tile = (dest / "tile" / str(level) / f"{n:03d}{suffix}").read_bytes()
            assert len(tile) == 32 * width
            if level == 0:
                raw = (dest / "tile" / "entries" / f"{n:03d}{suffix}").read_bytes()
                entries = parse_entry_bundle(gzip.decompress(raw))
                assert [leaf_hash(e) for e in entries] == [
                    tile[i * 32 : i * 32 + 32] for i in range(width)]
        assert store.root(size).hex() != ""  # the store holds that tree
        return size
    finally:
        store.close()


@pytest.mark.parametrize("planted", ["tile", "tile/entries", "api/v1/blobs", "api"])
def test_publish_never_writes_through_a_planted_directory_symlink(
    home: Path, tmp_path: Path, planted: str
) -> None:
    """A directory of DEST's layout pre-created as a symlink to a directory outside DEST: publish
    refuses (exit 2, one line) before writing anything. Before: it wrote the tiles (or bundle
    files) into the outside directory and exited 0."""
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "www"
    (dest / planted).parent.mkdir(parents=True, exist_ok=True)
    (dest / planted).symlink_to(outside)
    line = assert_one_error_line(run_cli("publish", str(dest), home=home), 2)
    assert "symlink" in line
    assert list(outside.iterdir()) == []
    assert not (dest / "checkpoint").exists()
    assert [p for p in every_file(dest)] == []


def test_publish_never_reads_a_planted_checkpoint_symlink(home: Path, tmp_path: Path) -> None:
    """DEST/checkpoint a symlink to the log's own key: refused (exit 2), not read (before: it was
    read and parsed), the link left as it was."""
    dest = tmp_path / "www"
    dest.mkdir()
    (dest / "checkpoint").symlink_to(home / "log.key")
    res = run_cli("publish", str(dest), home=home)
    line = assert_one_error_line(res, 2)
    assert "symlink" in line
    assert_no_secret(secrets_of(home), res.stdout, res.stderr)
    assert os.readlink(dest / "checkpoint") == str(home / "log.key")


def test_a_planted_file_symlink_is_replaced_never_written_through(
    home: Path, tmp_path: Path
) -> None:
    """A tile path and a bundle-file path pre-created as symlinks (one to a victim file, one to
    log.key): publish replaces each link with the real file. Before, the bundle-file symlink was
    taken for the file already there and kept: a web server serving DEST served log.key."""
    secrets = secrets_of(home)
    store = open_store(home)
    digest = next(iter(store.blobs()))[0].hex()
    store.close()
    dest = tmp_path / "www"
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (dest / "tile/0/000.p").mkdir(parents=True)
    (dest / "tile/0/000.p/4").symlink_to(victim)
    (dest / "api/v1/blobs").mkdir(parents=True)
    (dest / "api/v1/blobs" / digest).symlink_to(home / "log.key")
    res = run_cli("publish", str(dest), home=home)
    assert res.returncode == 0, res.stderr
    assert victim.read_bytes() == b"keep"
    for p in (dest / "tile/0/000.p/4", dest / "api/v1/blobs" / digest):
        assert not p.is_symlink() and p.is_file()
    for f in every_file(dest):
        assert_no_secret(secrets, f.read_bytes())
    assert _tree_ok(dest, home) == 4


@pytest.mark.parametrize("where", ["home", "inside", "keys", "above", "symlink"])
@pytest.mark.parametrize("command", ["publish", "export-tiles"])
def test_dest_may_not_be_or_hold_ledger_home(
    home: Path, tmp_path: Path, where: str, command: str
) -> None:
    """DEST = LEDGER_HOME, inside it, above it (a web root holding the ledger), or a symlink to
    it: refused (exit 2, one line), nothing written. Before: publish wrote its tree into
    LEDGER_HOME beside log.key (a web server serving DEST served the key)."""
    dest = {
        "home": home,
        "inside": home / "www",
        "keys": home / "keys",
        "above": home.parent,
        "symlink": tmp_path / "link",
    }[where]
    if where == "symlink":
        dest.symlink_to(home)
    before = sorted(str(p) for p in home.parent.rglob("*"))
    line = assert_one_error_line(run_cli(command, str(dest), home=home), 2)
    assert "private key" in line
    assert sorted(str(p) for p in home.parent.rglob("*")) == before


def test_dest_that_is_a_file_is_bad_input(home: Path, tmp_path: Path) -> None:
    """pin: DEST a file (or a symlink to one): exit 2, one line, the file unchanged."""
    f = tmp_path / "file"
    f.write_bytes(b"keep")
    (tmp_path / "link").symlink_to(f)
    for dest in (f, tmp_path / "link"):
        assert_one_error_line(run_cli("publish", str(dest), home=home), 2)
    assert f.read_bytes() == b"keep"


def _grown_copy(home: Path, tmp_path: Path, more: int) -> Path:
    """The same log, ``more`` entries further on (another host's copy of LEDGER_HOME)."""
    big = tmp_path / "big"
    shutil.copytree(home, big, symlinks=True)
    log = Log.open(big)
    sk = load_node_secret(big / "keys", "node")[0]
    for i in range(more):
        seal_fake(log, sk, tmp_path / "more", f"m{i}")
    log.close()
    return big


def test_concurrent_publishes_never_roll_dest_back(home: Path, tmp_path: Path) -> None:
    """Two publishes into one DEST, the larger tree finishing while the smaller one is half-way:
    before, the smaller one then wrote its checkpoint over the larger (DEST rolled back). Now
    DEST is locked for a run: the second is refused (exit 3 on the command line) and DEST's
    checkpoint never goes backwards."""
    big = _grown_copy(home, tmp_path, 3)
    dest = tmp_path / "www"
    seen: list[Any] = []

    def midway(done: int, total: int) -> None:
        if not seen:
            try:
                seen.append(publish(big, DirTarget(dest)).size)
            except CannotCheck as e:
                seen.append(e)

    r = publish(home, DirTarget(dest), midway)
    assert isinstance(seen[0], CannotCheck) and "under way" in str(seen[0])
    assert r.size == 4 and _tree_ok(dest, home) == 4
    assert publish(big, DirTarget(dest)).size == 7  # once the first has finished
    with pytest.raises(BadInput, match="roll it back"):
        publish(home, DirTarget(dest))
    assert _tree_ok(dest, big) == 7


def test_publish_killed_midway_leaves_dest_consistent(home: Path, tmp_path: Path) -> None:
    """pin: a publish killed (SIGKILL-like, os._exit) after some files: DEST's checkpoint is the
    previous one and every tile and entry bundle it names is there and right; the next run
    completes. Only dot-named temporaries no checkpoint names may be left."""
    dest = tmp_path / "www"
    assert publish(home, DirTarget(dest)).size == 4
    big = _grown_copy(home, tmp_path, 300)  # past a full tile: many files to write
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from ledger.publish import DirTarget, publish\n"
        "def step(done, total):\n"
        "    if done == 3: os._exit(9)\n"
        "publish(Path(sys.argv[1]), DirTarget(Path(sys.argv[2])), step)\n"
    )
    res = subprocess.run([sys.executable, "-c", code, str(big), str(dest)], cwd=REPO,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 9, res.stderr
    assert _tree_ok(dest, big) == 4
    assert all(p.name.startswith(".") or "tmp" not in p.name for p in every_file(dest))
    assert publish(big, DirTarget(dest)).size == 304
    assert _tree_ok(dest, big) == 304


def _first_blob(home: Path) -> bytes:
    store = open_store(home)
    try:
        return next(iter(store.blobs()))[0]
    finally:
        store.close()


@pytest.mark.parametrize("tamper", ["checkpoint-signature", "entry", "blob", "hash", "vkey"])
def test_publish_refuses_what_the_log_did_not_sign(
    home: Path, tmp_path: Path, tamper: str
) -> None:
    """A ledger altered under its triggers: a checkpoint whose signature is not the log key's, an
    entry that no longer matches its leaf hash, a bundle file that no longer hashes to its
    digest, a stored tree hash, the recorded verifier key. Publish exits 1 with one line and
    writes nothing. Before: it published all of it (exit 0) for every mirror to choke on."""
    if tamper == "checkpoint-signature":
        store = open_store(home)
        note = store.checkpoint()
        store.close()
        cut = note.rindex(b" ") + 1
        forged = note[:cut] + (b"A" if note[cut:cut + 1] != b"A" else b"B") + note[cut + 1:]
        _alter(home, ("UPDATE checkpoints SET note=? WHERE note=?", (forged, note)))
    elif tamper == "entry":
        _alter(home, ("UPDATE entries SET data=CAST(REPLACE(CAST(data AS TEXT), 'k1', 'k9') "
                      "AS BLOB) WHERE idx=2", ()))
    elif tamper == "blob":
        _alter(home, ("UPDATE blobs SET data=? WHERE digest=?", (b"evil", _first_blob(home))))
    elif tamper == "hash":
        _alter(home, ("UPDATE hashes SET hash=? WHERE level=0 AND n=3", (b"\x00" * 32,)))
    else:
        _alter(home, ("UPDATE meta SET value=? WHERE key='vkey'",
                      ("test.example/log+00000000+AQ" + "A" * 42 + "=",)))
    dest = tmp_path / "www"
    res = run_cli("publish", str(dest), home=home)
    assert_one_error_line(res, 1)
    assert not (dest / "checkpoint").exists()


# -- 2b. publish to s3:// : what a message may say ---------------------------------------------

SECRET = "TOPSECRETVALUE42"


@pytest.mark.parametrize(
    "args",
    [
        [f"s3://AKIAEXAMPLE:{SECRET}@bucket/x"],
        [f"s3://{SECRET}@bucket/x"],
        ["s3://bucket/x", "--endpoint-url", f"http://u:{SECRET}@127.0.0.1:9"],
        ["s3://bucket/x", "--endpoint-url", "not a url"],
        ["s3://bucket/x", "--endpoint-url", f"http://127.0.0.1:9/?token={SECRET}"],
        [f"s3://bucket/x?X-Amz-Signature={SECRET}"],
        [f"s3://bucket/x#{SECRET}"],
        ["s3://Bad!Bucket/x"],
        ["s3://bucket/../x"],
        ["s3://bucket/a\x01b"],
        [f"https://u:{SECRET}@example.com/x"],
    ],
)
def test_hostile_s3_destinations_are_bad_input_without_the_secret(
    home: Path, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials in the s3:// URL or the endpoint, a query or fragment (a presigned signature),
    a bad bucket name, dot segments: exit 2, one line that quotes no secret, nothing contacted.
    Before: the URL (with the password) was printed, an invalid endpoint was an "internal error"
    (exit 3) and a bad bucket name exit 3 with boto's message."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    res = run_cli("publish", *args, home=home)
    assert_one_error_line(res, 2)
    assert SECRET not in res.stderr + res.stdout


def test_an_s3_error_message_never_carries_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A boto error whose text holds the secret key or an endpoint's password is scrubbed."""
    from botocore.exceptions import EndpointConnectionError

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)

    class Failing:
        def get_object(self, **kw: Any) -> None:
            raise EndpointConnectionError(endpoint_url=f"http://x:{SECRET}@h/{SECRET}")

        def close(self) -> None:
            pass

    target = S3Target("s3://bucket/p", client=Failing())
    with pytest.raises(CannotCheck) as got:
        target.read("checkpoint", 100)
    assert SECRET not in str(got.value) and "reading checkpoint" in str(got.value)


def test_s3_publish_errors_do_not_print_credentials(
    home: Path, seaweed: str, bucket: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """Against the real S3 gateway: a bucket that does not exist is exit 2 naming the code, a
    good publish prints the bucket URL only; neither prints the secret key."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    res = run_cli("publish", "s3://no-such-bucket-here/x", "--endpoint-url", seaweed, home=home)
    assert res.returncode in (2, 3) and "Traceback" not in res.stderr
    assert SECRET not in res.stderr + res.stdout
    ok = run_cli("publish", f"s3://{bucket}/redteam", "--endpoint-url", seaweed, home=home)
    assert ok.returncode == 0, ok.stderr
    assert SECRET not in ok.stderr + ok.stdout and f"s3://{bucket}/redteam" in ok.stdout
    assert_no_secret(secrets_of(home), ok.stdout, ok.stderr)
