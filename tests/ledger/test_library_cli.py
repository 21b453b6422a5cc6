"""The library from the outside (issue 31 "Must show"), on a fresh ledger holding the real
``bundles/vector_add`` sealed by the CLI: ``ledger verify NAME@VERSION`` / ``ledger verify DIR``
with the one-line ``partial`` explanation and the policy's rules, ``ledger show`` and ``ledger
receipt write`` by name, the web page's partial line, and docs/using-verified-kernels.md's
``examples/verified_kernel.py`` followed end to end (it verifies and loads the kernel by
NAME@VERSION under a policy file, then refuses it under stricter policies)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers.ledgers import REPO, one_line, run_cli
from tests.helpers.server import BackgroundServer, make_app


@dataclass(frozen=True)
class Sealed:
    home: Path
    bundle: Path
    vkey: str
    root: Path


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    root = tmp_path_factory.mktemp("library-cli")
    home = root / "home"
    for args in (("init", "--origin", "example.org/kernels"), ("keys", "new", "team-ci"),
                 ("keys", "register", "team-ci")):
        res = run_cli(*args, home=home)
        assert res.returncode == 0, res.stderr
    bundle = root / "vector_add"
    shutil.copytree(REPO / "bundles" / "vector_add", bundle)
    (bundle / "ledger-receipt.json").unlink(missing_ok=True)
    res = run_cli("seal", str(bundle), "--key", "team-ci", "--json", home=home)
    assert res.returncode == 0, res.stderr
    (root / "seal.out").write_text(res.stdout)
    vkey = run_cli("vkey", home=home).stdout.strip()
    return Sealed(home, bundle, vkey, root)


def _policy(s: Sealed, name: str, **rules: object) -> Path:
    p = s.root / f"{name}.json"
    p.write_text(json.dumps({"log": s.vkey, **rules}))
    return p


def test_verify_by_name_and_directory_says_why_partial(sealed: Sealed) -> None:
    res = run_cli("verify", "vector_add@1.0.0", "--json", home=sealed.home)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["verdict"] == "partial" and rep["index"] == 1
    assert rep["partial"].startswith("partial: ") and "lean.kernel skipped (" in rep["partial"]
    res = run_cli("verify", str(sealed.bundle), home=sealed.home)
    assert res.returncode == 0, res.stderr
    assert "verdict: partial" in res.stdout
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("partial: ")] == [
        rep["partial"]]


def test_verify_applies_the_policy_files_rules(sealed: Sealed) -> None:
    strict = _policy(sealed, "strict", verdict="verified")
    res = run_cli("verify", "vector_add@1.0.0", "--policy", str(strict), home=sealed.home)
    one_line(res, 1, "policy verdict:", "lean.kernel skipped")
    res = run_cli("verify", "vector_add@1.0.0", "--policy", str(strict), "--json",
                  home=sealed.home)
    assert res.returncode == 1 and json.loads(res.stdout)["policy"].startswith("policy verdict")
    bad = sealed.root / "bad.json"
    bad.write_text(json.dumps({"log": sealed.vkey, "signer": ["team-ci"]}))
    res = run_cli("verify", "vector_add@1.0.0", "--policy", str(bad), home=sealed.home)
    one_line(res, 2, "unknown field 'signer'")
    res = run_cli("verify", "vector_add@9", home=sealed.home)
    one_line(res, 2, "no entry", "vector_add@9")


def test_show_and_receipt_write_take_a_name(sealed: Sealed, tmp_path: Path) -> None:
    res = run_cli("show", "vector_add@1.0.0", "--json", home=sealed.home)
    assert res.returncode == 0 and json.loads(res.stdout)["index"] == 1
    res = run_cli("receipt", "write", "vector_add@1.0.0", "--out", str(tmp_path),
                  home=sealed.home)
    assert res.returncode == 0 and (tmp_path / "ledger-receipt.json").is_file()


def test_the_entry_page_says_why_partial(sealed: Sealed) -> None:
    with BackgroundServer(make_app(sealed.home)) as srv:
        page = httpx.get(f"{srv.url}/entry/1").text
    assert 'id="partial-why">partial: lean.kernel skipped (' in page


def _example(policy: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LEDGER_CACHE_DIR=str(cache))
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "verified_kernel.py"), "--policy", str(policy),
         *args], cwd=REPO, env=env, capture_output=True, text=True, check=False)


def test_the_example_program_end_to_end(sealed: Sealed, tmp_path: Path) -> None:
    team = _policy(sealed, "team", checks=["falsify.*", "ptx.parse"], signers=["team-ci"],
                   obligations={"PO1": "partial"}, oracles=["trusted"])
    res = _example(team, tmp_path / "c", "--log", str(sealed.home), "vector_add@1.0.0")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("vector_add@1.0.0 ") and "sealed by team-ci" in lines[0]
    assert lines[1].startswith("partial: ") and lines[2].startswith("PTX: ")
    assert lines[2] == f"PTX: {(sealed.bundle / 'vector_add.ptx').stat().st_size} bytes"
    # offline: the verified cache answers without the log
    res = _example(team, tmp_path / "c", "--log", str(tmp_path / "nowhere"),
                   "vector_add@1.0.0")
    assert res.returncode == 0, res.stderr
    # a tampered cached file: refused (offline), then fetched again from the log
    from ledger.library.cache import pack, unpack

    cached = tmp_path / "c" / "kernels" / lines[0].split()[1].rstrip(":") / "entry"
    receipt, files = unpack(cached.read_bytes())
    cached.write_bytes(pack(receipt, {**files, "vector_add.ptx": b"// swapped\n"}))
    res = _example(team, tmp_path / "c", "--log", str(tmp_path / "nowhere"), "vector_add@1.0.0")
    assert res.returncode == 1 and "vector_add.ptx" in res.stderr, res.stderr
    res = _example(team, tmp_path / "c", "--log", str(sealed.home), "vector_add@1.0.0")
    assert res.returncode == 0, res.stderr
    assert unpack(cached.read_bytes())[1]["vector_add.ptx"] == (
        sealed.bundle / "vector_add.ptx").read_bytes()
    from ledger.witness import cosigner_vkey

    refusals: dict[str, dict[str, object]] = {
        "quorum": {"witnesses": [cosigner_vkey("w.example/1", bytes(range(32)))], "quorum": 1},
        "signers": {"signers": ["someone-else"]},
        "checks": {"checks": ["lean.kernel"]},
        "obligations": {"obligations": {"PO1": "ok"}},
        "verdict": {"verdict": "verified"},
    }
    for rule, extra in refusals.items():
        res = _example(_policy(sealed, rule, **extra), tmp_path / rule, "--log",
                       str(sealed.home), "vector_add@1.0.0")
        assert res.returncode == 1, (rule, res.stderr)
        assert res.stderr.startswith(f"refused by the policy ({rule}): "), res.stderr


def _schema(name: str) -> dict[str, object]:
    return json.loads((REPO / "docs" / "schemas" / name).read_text())


def _valid(name: str, value: object) -> None:
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(_schema(name))
    jsonschema.validate(value, _schema(name), cls=jsonschema.Draft202012Validator)


def test_json_outputs_follow_their_schemas(sealed: Sealed, tmp_path: Path) -> None:
    import ledger
    from ledger.core.note import parse_vkey

    _valid("seal.json", json.loads((sealed.root / "seal.out").read_text()))
    for command, schema in ((("vkey",), "vkey.json"), (("checkpoint",), "checkpoint.json"),
                            (("keys", "list"), "keys-list.json"), (("log",), "log.json"),
                            (("audit",), "audit.json")):
        res = run_cli(*command, "--json", home=sealed.home)
        assert res.returncode == 0, (command, res.stderr)
        _valid(schema, json.loads(res.stdout))
    res = run_cli("verify", "vector_add@1.0.0", "--json", home=sealed.home)
    _valid("verify.json", json.loads(res.stdout))
    strict = _policy(sealed, "strict-json", verdict="verified")
    res = run_cli("verify", "vector_add@1.0.0", "--json", "--policy", str(strict),
                  home=sealed.home)
    assert res.returncode == 1
    _valid("verify.json", json.loads(res.stdout))
    res = run_cli("show", "1", "--json", home=sealed.home)
    _valid("show.json", json.loads(res.stdout))
    lock = tmp_path / "k.lock"
    res = run_cli("lock", "add", "vector_add@1.0.0", "--file", str(lock), "--json",
                  home=sealed.home)
    assert res.returncode == 0, res.stderr
    _valid("lock-add.json", json.loads(res.stdout))
    res = run_cli("lock", "verify", "--file", str(lock), "--json", home=sealed.home)
    assert res.returncode == 0, res.stderr
    _valid("lock-verify.json", json.loads(res.stdout))
    lock.write_text(lock.read_text().replace("vector_add@1.0.0", "vector_add@0.9"))
    res = run_cli("lock", "verify", "--file", str(lock), "--json", home=sealed.home)
    assert res.returncode == 1
    out = json.loads(res.stdout)
    _valid("lock-verify.json", out)
    assert out["ok"] is False and "missing from the log" in out["kernels"][0]["reason"]
    # an error under --json: the line on stderr, and the error object on stdout
    res = run_cli("show", "nope@1", "--json", home=sealed.home)
    one_line(res, 2, "no entry seals nope@1")
    err = json.loads(res.stdout)
    _valid("error.json", err)
    assert err["error"] == {"message": "no entry seals nope@1", "exit_code": 2,
                            "type": "UnknownHash"}
    pol = ledger.Policy(log=parse_vkey(sealed.vkey))
    cert = ledger.Verifier(pol, ledger.LocalLog(sealed.home)).verify("vector_add@1.0.0")
    _valid("certificate.json", cert.to_json())
