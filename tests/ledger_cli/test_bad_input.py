"""Bad input, tried as a hostile user would (issue 2): each gets one line on stderr, the
documented exit code, no traceback, and changes nothing (tree size unchanged, audit passes)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.ledgers import REPO, assert_one_error_line, cli_json, run_cli

GOOD = REPO / "bundles" / "vector_add"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("bad") / "home"
    cli_json("init", "--origin", "test.example/bad", home=h)
    cli_json("keys", "new", "alice", home=h)
    cli_json("keys", "register", "alice", home=h)
    pw = h.parent / "pw"
    pw.write_text("correct horse\n")
    cli_json("keys", "new", "bob", "--passphrase-file", str(pw), home=h)
    cli_json("keys", "register", "bob", home=h)
    cli_json("keys", "new", "carol", home=h)  # never registered
    cli_json("keys", "new", "dave", home=h)
    dave = cli_json("keys", "register", "dave", home=h)["key_id"]
    cli_json("keys", "revoke", dave, "--reason", "test", home=h)
    return h


def _good_copy(tmp: Path) -> Path:
    d = tmp / "bundle"
    shutil.copytree(GOOD, d, ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    return d


def _unchanged(home: Path, size: int) -> None:
    assert cli_json("log", home=home)["size"] == size
    assert cli_json("audit", home=home)["ok"] is True


def _mk_symlink_out(d: Path) -> None:
    (d / "evil.lean").symlink_to("/etc/passwd")


def _mk_symlink_in(d: Path) -> None:
    (d / "again.ptx").symlink_to(d / "vector_add.ptx")


def _mk_fifo(d: Path) -> None:
    os.mkfifo(d / "pipe.fut")


def _mk_sparse(d: Path) -> None:
    with open(d / "huge.ptx", "wb") as f:
        f.truncate(8 << 30)  # 8 GB sparse: refused from lstat, never read


def _mk_many(d: Path) -> None:
    for i in range(70):
        (d / f"f{i}.txt").write_bytes(b"x")


def _mk_non_utf8(d: Path) -> None:
    os.close(os.open(os.fsencode(d) + b"/bad\xff.lean", os.O_CREAT | os.O_WRONLY, 0o644))


def _mk_named(c: str) -> Callable[[Path], None]:
    """A file whose name holds ``c``, which ``ledger.core.text`` refuses (issue 33 item 7)."""
    def make(d: Path) -> None:
        (d / f"notes{c}txt.lean").write_text("-- a note\n")
    return make


def _rm_lean(d: Path) -> None:
    (d / "vector_add.lean").unlink()


def _two_contracts(d: Path) -> None:
    (d / "contract.yaml").unlink()


STRUCTURE: dict[str, tuple[Callable[[Path], None], str]] = {
    "symlink outside": (_mk_symlink_out, "symlinks are not allowed"),
    "symlink inside": (_mk_symlink_in, "symlinks are not allowed"),
    "fifo": (_mk_fifo, "not a regular file"),
    "8 GB sparse file": (_mk_sparse, "over the"),
    "too many files": (_mk_many, "more than 64 files"),
    "non-UTF-8 name": (_mk_non_utf8, "not UTF-8"),
    "bidi override in a name": (_mk_named("\u202e"), "bidi character U+202E"),
    "C1 control (CSI) in a name": (_mk_named("\u009b"), "bidi character U+009B"),
    "line separator in a name": (_mk_named("\u2028"), "bidi character U+2028"),
    "missing .lean": (_rm_lean, "no .lean file"),
    "missing contract": (_two_contracts, "no top-level contract.yaml"),
}


@pytest.mark.parametrize("case", sorted(STRUCTURE))
def test_bad_bundle_structure(home: Path, tmp_path: Path, case: str) -> None:
    size = cli_json("log", home=home)["size"]
    d = _good_copy(tmp_path)
    make, message = STRUCTURE[case]
    make(d)
    for cmd in (["seal", str(d), "--key", "alice"], ["check", str(d)]):
        line = assert_one_error_line(run_cli(*cmd, home=home), 2)
        assert message in line, line
    _unchanged(home, size)


def test_missing_and_file_as_directory(home: Path, tmp_path: Path) -> None:
    size = cli_json("log", home=home)["size"]
    line = assert_one_error_line(
        run_cli("seal", str(tmp_path / "absent"), "--key", "alice", home=home), 2
    )
    assert "cannot read bundle directory" in line
    f = tmp_path / "file"
    f.write_text("x")
    line = assert_one_error_line(run_cli("seal", str(f), "--key", "alice", home=home), 2)
    assert "not a directory" in line
    _unchanged(home, size)


HOSTILE_YAML = {
    "syntax error": b"metadata: [unclosed\n",
    "alias bomb": b"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
    "huge document": b"x: '" + b"A" * (3 << 20) + b"'\n",
    "python tag": b"!!python/object/apply:os.system ['true']\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_YAML))
def test_hostile_contract_is_a_failed_check(home: Path, tmp_path: Path, case: str) -> None:
    """A hostile contract is read safely and fails contract.schema: seal refuses (exit 1, one
    line naming the check) and appends nothing."""
    size = cli_json("log", home=home)["size"]
    d = _good_copy(tmp_path)
    (d / "contract.yaml").write_bytes(HOSTILE_YAML[case])
    line = assert_one_error_line(run_cli("seal", str(d), "--key", "alice", home=home), 1)
    assert "refused" in line and "contract.schema" in line
    rep = cli_json("check", str(d), ok=(1,))
    assert {c["id"]: c["status"] for c in rep["checks"]}["contract.schema"] == "failed"
    _unchanged(home, size)


def test_garbage_ptx_is_a_failed_check(home: Path, tmp_path: Path) -> None:
    size = cli_json("log", home=home)["size"]
    d = _good_copy(tmp_path)
    (d / "vector_add.ptx").write_bytes(os.urandom(2000))
    line = assert_one_error_line(run_cli("seal", str(d), "--key", "alice", home=home), 1)
    assert "refused" in line
    rep = cli_json("check", str(d), ok=(1,))
    assert {c["id"]: c["status"] for c in rep["checks"]}["ptx.parse"] == "failed"
    _unchanged(home, size)


@pytest.mark.parametrize(
    ("key", "extra", "message"),
    [
        ("nobody", [], "no node key named"),
        ("carol", [], "not registered"),
        ("dave", [], "revoked"),
        ("bob", [], "encrypted"),
        ("bob", ["--passphrase-file", "WRONG"], "wrong passphrase"),
        ("../etc", [], "bad key name"),
    ],
)
def test_bad_keys(home: Path, tmp_path: Path, key: str, extra: list[str], message: str) -> None:
    size = cli_json("log", home=home)["size"]
    if extra:
        wrong = tmp_path / "wrong"
        wrong.write_text("incorrect\n")
        extra = [extra[0], str(wrong)]
    line = assert_one_error_line(run_cli("seal", str(GOOD), "--key", key, *extra, home=home), 2)
    assert message in line, line
    _unchanged(home, size)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("deadbeef", "starts with"),
        ("abc", "8 to 64"),
        ("123456", "no entry"),
        ("zzzzzzzzzz", "8 to 64"),
        ("0" * 65, "8 to 64"),
    ],
)
def test_unknown_hash(home: Path, text: str, message: str) -> None:
    for cmd in ("verify", "show"):
        line = assert_one_error_line(run_cli(cmd, text, home=home), 2)
        assert message in line, line
    line = assert_one_error_line(run_cli("proof", "inclusion", text, home=home), 2)
    assert message in line, line


def test_no_ledger(tmp_path: Path) -> None:
    for cmd in (["log"], ["audit"], ["checkpoint"], ["verify", "deadbeef"]):
        line = assert_one_error_line(run_cli(*cmd, home=tmp_path / "none"), 2)
        assert "no ledger" in line


def test_bad_usage(home: Path) -> None:
    assert_one_error_line(run_cli("proof", "consistency", "5", "2", home=home), 2)
    assert_one_error_line(run_cli("seal", home=home), 2)
    assert_one_error_line(run_cli("keys", "revoke", "xyz", "--reason", "r", home=home), 2)
    assert_one_error_line(run_cli("init", "--origin", "has space", home=home.parent / "n"), 2)


def test_corrupt_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli_json("init", "--origin", "test.example/corrupt", home=home)
    (home / "ledger.db").write_bytes(b"this is not an SQLite database" * 100)
    for f in home.glob("ledger.db-*"):
        f.unlink()
    line = assert_one_error_line(run_cli("log", home=home), 2)
    assert "not a usable ledger database" in line
