"""Onboarding a node (issue 34, ``ledger.onboard``): ``ledger keys export`` writes the versioned
export file, ``ledger keys register`` accepts it (and a ``.pub`` file, and a NAME as before),
anything else is bad input (exit 2, one line, nothing appended), and ``ledger submit`` with a
revoked key exits 2 naming what the node and the operator run. The real CLI."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from ledger.core.entries import node_key_id
from ledger.http.server import make_app
from ledger.keys import KIND_PUBLIC
from ledger.onboard import EXPORT_FIELDS, KIND_EXPORT, read_registration
from tests.helpers.ledgers import REPO, assert_one_error_line, run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.test_mirror import make_origin, vkey_of


@pytest.fixture()
def exported(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    node = tmp_path / "node"
    assert run_cli("keys", "new", "alice", home=node).returncode == 0
    out = tmp_path / "alice.node.json"
    res = run_cli("keys", "export", "alice", "--out", str(out), home=node)
    assert res.returncode == 0, res.stderr
    assert f"ledger keys register {out.name}" in res.stdout
    return node, out, json.loads(out.read_text())


def test_export_file_is_the_documented_format(
    exported: tuple[Path, Path, dict[str, str]]
) -> None:
    node, out, obj = exported
    assert set(obj) == EXPORT_FIELDS and obj["kind"] == KIND_EXPORT and obj["name"] == "alice"
    public = base64.b64decode(obj["public_key"])
    assert obj["key_id"] == node_key_id(public).hex()
    assert "seed" not in out.read_text() and "encrypted" not in out.read_text()
    pub = json.loads((node / "keys" / "alice.pub").read_text())
    assert (pub["public_key"], pub["pop"]) == (obj["public_key"], obj["pop"])
    # without --out the same bytes on stdout; --json says where and what
    res = run_cli("keys", "export", "alice", home=node)
    assert res.returncode == 0 and res.stdout == out.read_text()
    res = run_cli("keys", "export", "alice", "--json", home=node)
    got = json.loads(res.stdout)
    assert got["export"] == obj and got["key_id"] == obj["key_id"] and got["file"] is None
    # an unknown key, or a bad name: one line, exit 2
    assert_one_error_line(run_cli("keys", "export", "bob", home=node), 2)
    assert_one_error_line(run_cli("keys", "export", "../x", home=node), 2)
    # never over an existing file
    assert_one_error_line(run_cli("keys", "export", "alice", "--out", str(out), home=node), 2)


def test_register_takes_the_export_file(
    exported: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    _node, out, obj = exported
    log = make_origin(tmp_path / "log", 0)
    res = run_cli("keys", "register", str(out), "--json", home=log.home)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert (got["name"], got["key_id"]) == ("alice", obj["key_id"])
    listed = json.loads(run_cli("keys", "list", "--json", home=log.home).stdout)
    assert obj["key_id"] in json.dumps(listed)
    # read back, the file is the node's key (a bare file name in the working directory is
    # what tests/docs/test_onboarding_guide.py registers)
    assert read_registration(out.read_bytes(), "x").key_id.hex() == obj["key_id"]
    log.close()


@pytest.mark.parametrize("change", [
    {"key_id": "00" * 8},  # not the key's id
    {"extra": "x"},  # unknown field
    {"kind": "kernel-ledger/node-key-export/v9"},  # another version
    {"name": "mallory"},  # the proof of possession covers the name
    {"pop": base64.b64encode(b"\x00" * 64).decode()},
    {"public_key": base64.b64encode(b"\x01" * 31).decode()},
])
def test_register_refuses_a_bad_export(
    exported: tuple[Path, Path, dict[str, str]], tmp_path: Path, change: dict[str, str]
) -> None:
    obj = exported[2]
    log = make_origin(tmp_path / "log", 0)
    bad = tmp_path / "bad.node.json"
    bad.write_text(json.dumps({**obj, **change}))
    size = log.store.size()
    assert_one_error_line(run_cli("keys", "register", str(bad), home=log.home), 2)
    assert log.store.size() == size
    missing = {k: v for k, v in obj.items() if k != "pop"}
    bad.write_text(json.dumps(missing))
    assert_one_error_line(run_cli("keys", "register", str(bad), home=log.home), 2)
    bad.write_bytes(b"\xff not json")
    assert_one_error_line(run_cli("keys", "register", str(bad), home=log.home), 2)
    assert log.store.size() == size
    log.close()


def test_register_still_takes_a_pub_file_and_a_name(
    exported: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    node, _out, _obj = exported
    log = make_origin(tmp_path / "log", 0)
    pub = node / "keys" / "alice.pub"
    assert json.loads(pub.read_text())["kind"] == KIND_PUBLIC
    res = run_cli("keys", "register", str(pub), home=log.home)
    assert res.returncode == 0, res.stderr
    assert run_cli("keys", "new", "carol", home=log.home).returncode == 0
    res = run_cli("keys", "register", "carol", home=log.home)
    assert res.returncode == 0, res.stderr
    log.close()


def test_submit_with_a_revoked_key_exits_2_with_the_commands(tmp_path: Path) -> None:
    log = make_origin(tmp_path / "log", 1)
    kid = json.loads(run_cli("keys", "list", "--json", home=log.home).stdout)
    key_id = next(k["key_id"] for k in kid["keys"] if k["name"] == "node")
    res = run_cli("keys", "revoke", key_id, "--reason", "laptop lost", home=log.home)
    assert res.returncode == 0, res.stderr
    bundle = tmp_path / "vector_add"
    shutil.copytree(REPO / "bundles" / "vector_add", bundle,
                    ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    size = log.store.size()
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
        res = run_cli("submit", str(bundle), "--server", srv.url, "--key", "node", "--vkey",
                      vkey_of(log), home=log.home)
    line = assert_one_error_line(res, 2)
    assert f"does not accept node key node ({key_id})" in line
    assert "`ledger keys export node --out node.node.json`" in line
    assert "`ledger keys register node.node.json`" in line and "ledger keys new" in line
    assert log.store.size() == size and not (bundle / "ledger-receipt.json").exists()
    log.close()
