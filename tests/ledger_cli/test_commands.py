"""End to end through the real ``ledger`` command (a subprocess, as a user runs it): init, keys,
seal of a real example bundle, verify online and offline from the receipt, show, log, proofs,
checkpoint, revocation (SPEC 5-8)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from ledger.core import merkle
from ledger.core.note import open_note, parse_checkpoint, parse_vkey
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
    # SPEC 8's item, plus the receipt written for it (issue 11) and whether the key had sealed
    # the bundle before (issue 33 item 8)
    assert set(item) == {"index", "bundle_digest", "leaf_hash", "report", "receipt",
                         "already_sealed"}
    assert item["already_sealed"] is False
    assert item["receipt"] and Path(item["receipt"]).name == "ledger-receipt.json"
    assert item["index"] == 1
    assert len(item["bundle_digest"]) == 64 and len(item["leaf_hash"]) == 64
    rep = item["report"]
    # SPEC 8's report, plus the one line naming a partial verdict's skipped checks (issue 31)
    assert set(rep) == {"verdict", "bundle_digest", "checks", "partial", "obligations"}
    assert rep["verdict"] in ("verified", "partial")
    assert rep["partial"].startswith("partial: ") == (rep["verdict"] == "partial")
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
        # SPEC 8's check, plus the tool and its version (issue 31)
        assert set(c) == {"id", "status", "detail", "tool", "version"} and c["detail"]
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
    """Every command of the app (read from the app itself, so a new one cannot be left out) is
    in the README's command list."""
    from typer.main import get_command

    from ledger_cli import app

    def leaves(cmd: object, path: list[str]) -> list[str]:
        subs = getattr(cmd, "commands", {})
        if not subs:
            return [" ".join(["ledger", *path])]
        return [c for name in sorted(subs) for c in leaves(subs[name], [*path, name])]

    readme = (REPO / "README.md").read_text()
    commands = leaves(get_command(app), [])
    assert len(commands) > 25 and "ledger proof inclusion" in commands
    assert [c for c in commands if c not in readme] == []
    for flag in ("--version", "--install-completion"):
        assert f"ledger {flag}" in readme


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
    assert set(cp) == {"origin", "size", "root", "note", "cosignatures"}
    assert cp["cosignatures"] == []  # no witness asked yet (issue 34: tests/ledger/test_cosign.py)
    assert cp["origin"] == "test.example/cli" and cp["size"] == 2
    parsed = parse_checkpoint(cp["note"][: cp["note"].index("\n\n") + 1].encode())
    assert base64.b64decode(cp["root"]) == parsed.root


def _fields(obj: object, path: str = "") -> list[tuple[str, str, object]]:
    """Every (path, key, value) of a JSON document."""
    out: list[tuple[str, str, object]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((path, k, v))
            out += _fields(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for v in obj:
            out += _fields(v, f"{path}[]")
    return out


def test_json_fields_keep_one_encoding_across_commands(
    sealed: dict[str, object], tmp_path: Path
) -> None:
    """The same field has the same encoding in every command's --json (issue 11; the rules and
    their two exceptions are in docs/design.md): digests, leaf hashes and key ids hex; tree
    roots, proof hashes, public keys and signatures base64; "vkey" the whole verifier key;
    "checkpoint"/"note" the signed note. Exceptions: an entry's own ``prev_root`` (hex, the
    entry format) and ``proof inclusion``'s ``leaf_hash`` (base64, SPEC 6)."""
    import re

    home = sealed["home"]
    vkey = str(sealed["vkey"])
    runs = {
        "vkey": ["vkey"], "checkpoint": ["checkpoint"], "show": ["show", "1"],
        "show-key": ["show", "0"], "log": ["log"], "audit": ["audit"],
        "keys list": ["keys", "list"], "proof inclusion": ["proof", "inclusion", "1"],
        "proof consistency": ["proof", "consistency", "1", "2"], "verify": ["verify", "1"],
        "receipt write": ["receipt", "write", "1", "--out", str(tmp_path)],
    }
    docs = {name: cli_json(*argv, home=home) for name, argv in runs.items()}  # type: ignore[arg-type]
    docs["seal"] = sealed["seal"]
    hex_len = {"bundle_digest": 64, "leaf_hash": 64, "key_id": 16, "signer": 16}
    b64_len = {"root": 32, "public_key": 32, "signature": 64, "pop": 64}
    seen: set[str] = set()
    for name, doc in docs.items():
        for path, key, value in _fields(doc):
            where = f"{name}{path}.{key}"
            if key == "prev_root" or (name == "proof inclusion" and key == "leaf_hash"):
                seen.add(f"exception {key}")
                n = 64 if key == "prev_root" else 44
                assert isinstance(value, str) and len(value) == n, where
            elif key in hex_len and value is not None:
                seen.add(key)
                assert isinstance(value, str) and re.fullmatch(
                    f"[0-9a-f]{{{hex_len[key]}}}", value), (where, value)
            elif (key in b64_len or key.endswith("_root")) and value is not None:
                seen.add(key)
                assert isinstance(value, str), where
                raw = base64.b64decode(value, validate=True)
                assert len(raw) == b64_len.get(key, 32), (where, value)
            elif key == "hashes" and isinstance(value, list):
                seen.add(key)
                assert all(len(base64.b64decode(h, validate=True)) == 32 for h in value), where
            elif key == "vkey":
                seen.add(key)
                assert value == vkey, (where, value)
            elif key in ("checkpoint", "note"):
                seen.add(key)
                assert isinstance(value, str) and value.startswith("test.example/cli\n"), where
    # the scan met every kind of field it judges
    assert seen >= {"bundle_digest", "leaf_hash", "key_id", "signer", "root", "public_key",
                    "signature", "pop", "hashes", "vkey", "note", "exception prev_root",
                    "exception leaf_hash"}, seen
    # beside SPEC 8's shapes (issue 11): verify names the entry and its signer, seal the receipt
    assert docs["verify"]["index"] == 1 and docs["verify"]["signer"] == docs["show"]["entry"][
        "signer"]
    assert docs["seal"]["entries"][0]["receipt"].endswith("ledger-receipt.json")  # type: ignore[index]


def test_the_main_job_seal_then_verify_online_then_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's main job (scripts/demo.sh) on two bundles, with a verifier that remembers
    nothing yet: one `seal` of both, `verify` of each online, then of each offline with its
    receipt. The first receipt names an older tree than the one the online verify remembered;
    beside this log's own ledger that is proven a prefix, so every step exits 0."""
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(tmp_path / "cache"))
    home = tmp_path / "home"
    bundles = []
    for name in ("vector_add", "f16_convert"):
        shutil.copytree(REPO / "bundles" / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("ledger-receipt*.json"))
        bundles.append(tmp_path / name)
    cli_json("init", "--origin", "demo.example/log", home=home)
    cli_json("keys", "new", "demo-node", home=home)
    cli_json("keys", "register", "demo-node", home=home)
    sealed = cli_json("seal", *map(str, bundles), "--no-gpu", home=home)["entries"]
    sizes = [json.loads((b / "ledger-receipt.json").read_text())["checkpoint"] for b in bundles]
    assert len(sealed) == 2 and sizes[0] != sizes[1]  # the first receipt: an older tree
    for item in sealed:
        assert cli_json("verify", item["bundle_digest"], "--no-gpu", home=home)["verdict"] in (
            "verified", "partial")
    for item, b in zip(sealed, bundles, strict=True):
        rep = cli_json("verify", item["bundle_digest"], "--receipt",
                       str(b / "ledger-receipt.json"), "--no-gpu", home=home)
        assert rep["verdict"] in ("verified", "partial"), rep
