"""End to end through the real ``ledger`` command (a subprocess, as a user runs it): init, keys,
seal of a real example bundle, verify online and offline from the receipt, show, log, proofs,
checkpoint, revocation (SPEC 5-8)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from ledger import merkle
from ledger.note import open_note, parse_checkpoint, parse_vkey
from tests.helpers.ledgers import REPO, assert_one_error_line, cli_json, run_cli

BUNDLE = REPO / "bundles" / "vector_add"


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("cli")
    home = root / "home"
    bundle = root / "vector_add"
    shutil.copytree(BUNDLE, bundle, ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    init = cli_json("init", "--origin", "test.example/cli", home=home)
    assert init["vkey"].startswith("test.example/cli+")
    cli_json("keys", "new", "alice", home=home)
    reg = cli_json("keys", "register", "alice", home=home)
    assert reg["index"] == 0
    out = cli_json("seal", str(bundle), home=home)
    return {"home": home, "bundle": bundle, "seal": out, "vkey": init["vkey"], "root": root}


def test_seal_json_shape(sealed: dict[str, object]) -> None:
    out = sealed["seal"]
    assert isinstance(out, dict)
    (item,) = out["entries"]
    # SPEC 8's item, plus the receipt written for it (issue 11)
    assert set(item) == {"index", "bundle_digest", "leaf_hash", "report", "receipt"}
    assert item["receipt"] and Path(item["receipt"]).name == "ledger-receipt.json"
    assert item["index"] == 1
    assert len(item["bundle_digest"]) == 64 and len(item["leaf_hash"]) == 64
    rep = item["report"]
    assert set(rep) == {"verdict", "bundle_digest", "checks"}
    assert rep["verdict"] in ("verified", "partial")
    ids = [c["id"] for c in rep["checks"]]
    for want in (
        "integrity.manifest",
        "contract.schema",
        "contract.lint",
        "lean.scan",
        "lean.kernel",
        "ptx.parse",
        "ptx.assemble",
        "futhark.spec",
        "futhark.run",
        "rebuild.ptx",
        "certificate",
    ):
        assert want in ids
    assert any(i.startswith("falsify.") for i in ids)
    for c in rep["checks"]:
        assert set(c) == {"id", "status", "detail"} and c["detail"]
        if c["status"] == "skipped":
            assert rep["verdict"] == "partial"


def test_verify_online(sealed: dict[str, object]) -> None:
    home = sealed["home"]
    digest = sealed["seal"]["entries"][0]["bundle_digest"]  # type: ignore[index]
    rep = cli_json("verify", digest, home=home)  # type: ignore[arg-type]
    status = {c["id"]: c["status"] for c in rep["checks"]}
    for cid in (
        "integrity.manifest",
        "integrity.signature",
        "integrity.signer",
        "integrity.inclusion",
        "integrity.checkpoint",
    ):
        assert status[cid] == "passed", rep
    assert rep["verdict"] in ("verified", "partial")
    # beside SPEC 8's report: the entry verified and its signer (issue 11)
    assert rep["index"] == 1 and len(rep["signer"]) == 16
    # leaf-hash prefix works too; people output is a table with the verdict
    leaf = sealed["seal"]["entries"][0]["leaf_hash"]  # type: ignore[index]
    res = run_cli("verify", leaf[:10], home=home)  # type: ignore[arg-type]
    assert res.returncode == 0 and "verdict:" in res.stdout


def test_verify_require_skipped_exits_3(sealed: dict[str, object]) -> None:
    res = run_cli("verify", "1", "--require", "lean.kernel", home=sealed["home"])  # type: ignore[arg-type]
    assert res.returncode == 3
    assert "lean.kernel" in res.stderr


def test_verify_offline_receipt(sealed: dict[str, object], tmp_path: Path) -> None:
    bundle = sealed["bundle"]
    receipt = bundle / "ledger-receipt.json"  # type: ignore[operator]
    assert receipt.is_file()
    digest = sealed["seal"]["entries"][0]["bundle_digest"]  # type: ignore[index]
    # no ledger at all: only the receipt, the bundle and the verifier key
    rep = cli_json(
        "verify",
        digest,
        "--receipt",
        str(receipt),
        "--vkey",
        str(sealed["vkey"]),
        home=tmp_path / "nothing-here",
    )
    status = {c["id"]: c["status"] for c in rep["checks"]}
    assert status["integrity.inclusion"] == "passed"
    assert status["integrity.signer"] == "passed"
    # a different log key is refused
    other = cli_json("init", "--origin", "test.example/cli", home=tmp_path / "other")["vkey"]
    rep = cli_json(
        "verify",
        digest,
        "--receipt",
        str(receipt),
        "--vkey",
        other,
        home=tmp_path / "nothing-here",
        ok=(1,),
    )
    assert {c["id"]: c["status"] for c in rep["checks"]}["integrity.checkpoint"] == "failed"
    # the C2SP tlog-proof form is present
    obj = json.loads(receipt.read_text())
    assert obj["tlog_proof"].startswith("c2sp.org/tlog-proof@v1\nindex 1\n")


def test_offline_receipt_detects_changed_file(sealed: dict[str, object], tmp_path: Path) -> None:
    copy = tmp_path / "b"
    shutil.copytree(sealed["bundle"], copy)  # type: ignore[arg-type]
    (copy / "vector_add.cu").write_text("// changed\n")
    digest = sealed["seal"]["entries"][0]["bundle_digest"]  # type: ignore[index]
    rep = cli_json(
        "verify",
        digest,
        "--receipt",
        str(copy / "ledger-receipt.json"),
        "--vkey",
        str(sealed["vkey"]),
        home=tmp_path / "x",
        ok=(1,),
    )
    assert {c["id"]: c["status"] for c in rep["checks"]}["integrity.manifest"] == "failed"


def test_show_log_checkpoint_proofs(sealed: dict[str, object]) -> None:
    home = sealed["home"]
    show = cli_json("show", "1", home=home)  # type: ignore[arg-type]
    e = show["entry"]
    assert e["type"] == "bundle" and e["kernel"]["name"] == "vector_add"
    assert e["prev_size"] == 1 and e["obligations"]
    assert all({"id", "status", "detail", "tool", "version"} <= set(c) for c in e["checks"])
    log = cli_json("log", home=home)  # type: ignore[arg-type]
    assert [x["type"] for x in log["entries"]] == ["key-registration", "bundle"]
    note = run_cli("checkpoint", home=home).stdout.encode()  # type: ignore[arg-type]
    vk = parse_vkey(str(sealed["vkey"]))
    cp = parse_checkpoint(open_note(note, [vk]).text)
    assert cp.size == 2
    inc = cli_json("proof", "inclusion", "1", home=home)  # type: ignore[arg-type]
    assert set(inc) == {"index", "tree_size", "leaf_hash", "hashes"}
    merkle.verify_inclusion(
        base64.b64decode(inc["leaf_hash"]),
        1,
        2,
        [base64.b64decode(h) for h in inc["hashes"]],
        cp.root,
    )
    con = cli_json("proof", "consistency", "1", "2", home=home)  # type: ignore[arg-type]
    assert set(con) == {"old_size", "new_size", "hashes"}
    vkey_out = run_cli("vkey", home=home).stdout.strip()  # type: ignore[arg-type]
    assert vkey_out == sealed["vkey"]


def test_keys_list_and_revoke(sealed: dict[str, object], tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(sealed["home"], home)  # type: ignore[arg-type]
    keys = cli_json("keys", "list", home=home)["keys"]
    assert [k["status"] for k in keys] == ["active"]
    kid = keys[0]["key_id"]
    cli_json("keys", "revoke", kid, "--reason", "laptop lost", home=home)
    assert cli_json("keys", "list", home=home)["keys"][0]["status"] == "revoked"
    # the revoked signer's earlier entry no longer verifies as trusted
    rep = cli_json("verify", "1", home=home, ok=(1,))
    signer = next(c for c in rep["checks"] if c["id"] == "integrity.signer")
    assert signer["status"] == "failed" and "laptop lost" in signer["detail"]
    # and the key can no longer seal
    res = run_cli("seal", str(sealed["bundle"]), home=home)
    assert_one_error_line(res, 2)
    assert cli_json("audit", home=home)["ok"] is True


def test_every_command_has_help() -> None:
    for cmd in (
        ["init"],
        ["keys", "new"],
        ["keys", "register"],
        ["keys", "revoke"],
        ["keys", "list"],
        ["check"],
        ["seal"],
        ["verify"],
        ["show"],
        ["log"],
        ["audit"],
        ["checkpoint"],
        ["vkey"],
        ["proof", "inclusion"],
        ["proof", "consistency"],
    ):
        res = run_cli(*cmd, "--help")
        assert res.returncode == 0 and "Usage" in res.stdout, cmd


def test_readme_documents_every_command() -> None:
    readme = (REPO / "README.md").read_text()
    for cmd in (
        "ledger init",
        "ledger keys new",
        "ledger keys register",
        "ledger keys revoke",
        "ledger keys list",
        "ledger check",
        "ledger seal",
        "ledger verify",
        "ledger show",
        "ledger log",
        "ledger audit",
        "ledger checkpoint",
        "ledger vkey",
        "ledger proof inclusion",
        "ledger proof consistency",
        "ledger serve",
        "ledger mirror",
    ):
        assert cmd in readme, cmd


def test_verify_key_registration_entry(sealed: dict[str, object]) -> None:
    """A key entry verifies by inclusion, checkpoint and the log key's signature."""
    rep = cli_json("verify", "0", home=sealed["home"])  # type: ignore[arg-type]
    status = {c["id"]: c["status"] for c in rep["checks"]}
    assert status == {
        "integrity.checkpoint": "passed",
        "integrity.inclusion": "passed",
        "integrity.signature": "passed",
    }
    assert rep["verdict"] == "verified" and rep["bundle_digest"] == ""


def test_vkey_and_checkpoint_json(sealed: dict[str, object]) -> None:
    home = sealed["home"]
    vk = cli_json("vkey", home=home)  # type: ignore[arg-type]
    assert vk == {"origin": "test.example/cli", "vkey": sealed["vkey"]}
    cp = cli_json("checkpoint", home=home)  # type: ignore[arg-type]
    assert set(cp) == {"origin", "size", "root", "note"}
    assert cp["origin"] == "test.example/cli" and cp["size"] == 2
    parsed = parse_checkpoint(cp["note"][: cp["note"].index("\n\n") + 1].encode())
    assert base64.b64decode(cp["root"]) == parsed.root
