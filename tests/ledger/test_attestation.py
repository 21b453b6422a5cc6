"""Attestations (issue 35, SPEC 10, docs/attestations.md): every example bundle sealed into a fresh
ledger, its in-toto Statement in a DSSE envelope verified by an independent implementation
(securesystemslib's DSSE envelope and Ed25519 key) and by ``verify-attestation``; a tampered
subject, a wrong key and an inclusion proof that does not match the log each refused with exit 1."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import nacl.signing
import pytest
import yaml
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.signer import SSlibKey

import ledger
from ledger.core import dsse, intoto
from ledger.core.errors import BadInput, TamperDetected
from ledger.core.note import parse_vkey
from ledger.library import attestation
from ledger.library.provenance import provenance_statement
from ledger.log import Log
from ledger.trust import CheckpointMemory
from tests.helpers.ledgers import REPO, add_node, new_ledger, run_cli
from tests.helpers.library import seal

BUNDLES = sorted(p for p in (REPO / "bundles").iterdir() if (p / "contract.yaml").is_file())
SCHEMA = REPO / "docs" / "schemas" / "attestation-certificate-v1.json"


@dataclass
class Sealed:
    home: Path
    log: Log
    alice: nacl.signing.SigningKey
    refs: dict[str, str]  # bundle directory name -> NAME@VERSION
    tmp: Path

    def verifier(self, **policy: Any) -> ledger.Verifier:
        pol = ledger.Policy(log=parse_vkey(self.log.verifier.vkey), **policy)
        return ledger.Verifier(pol, None, memory=CheckpointMemory(self.tmp / "mem"))


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    tmp = tmp_path_factory.mktemp("attest")
    home = tmp / "home"
    log = new_ledger(home)
    alice = add_node(log, "alice")
    add_node(log, "bob")  # registered too: a valid key that did not seal anything
    refs = {}
    for d in BUNDLES:
        k = yaml.safe_load((d / "contract.yaml").read_text())["kernel"]
        seal(log, alice, d, name=k["name"], version=str(k["version"]))
        refs[d.name] = f"{k['name']}@{k['version']}"
    return Sealed(home, log, alice, refs, tmp)


def statement_of(s: Sealed, name: str) -> dict[str, Any]:
    local = ledger.Verifier(ledger.Policy(log=parse_vkey(s.log.verifier.vkey)),
                            ledger.LocalLog(s.home), memory=CheckpointMemory(s.tmp / "mem"))
    return attestation.certificate_statement(local, s.refs[name])


def independent_verify(envelope: bytes) -> dict[str, Any]:
    """securesystemslib verifies the DSSE signature with the key the predicate names."""
    env = SslibEnvelope.from_dict(json.loads(envelope))
    st = json.loads(env.payload)
    signer = st["predicate"]["signer"]
    key = SSlibKey(signer["key_id"], "ed25519", "ed25519",
                   {"public": base64.b64decode(signer["public_key"]).hex()})
    assert set(env.verify([key], 1)) == {signer["key_id"]}
    assert env.payload_type == "application/vnd.in-toto+json"
    return dict(st)


@pytest.mark.parametrize("name", [d.name for d in BUNDLES])
def test_every_example_attests_and_verifies(sealed: Sealed, name: str) -> None:
    st = statement_of(sealed, name)
    envelope = attestation.sign(st, sealed.alice).to_bytes()
    got = independent_verify(envelope)
    assert got["_type"] == "https://in-toto.io/Statement/v1"
    assert got["predicateType"] == intoto.CERTIFICATE_V1
    # the bundle's own files: a receipt `ledger seal` or the demo left beside them is no part of it
    files = {p.name: p.read_bytes() for p in (REPO / "bundles" / name).iterdir()
             if p.name != "ledger-receipt.json"}
    assert {s["name"]: s["digest"] for s in got["subject"]} == {
        n: intoto.digests(b) for n, b in files.items()}
    jsonschema.validate(got["predicate"], json.loads(SCHEMA.read_text()))
    done = attestation.verify_attestation(envelope, sealed.verifier(), files)
    assert done.certificate.kernel == sealed.refs[name]
    assert done.subjects_checked == "files"
    # a consumer's own check of the log inclusion: the leaf hash from the entry bytes
    log = got["predicate"]["log"]
    import hashlib
    leaf = hashlib.sha256(b"\x00" + base64.b64decode(log["entry"])).hexdigest()
    assert leaf == log["leaf_hash"]


def test_cli_attest_and_verify(sealed: Sealed) -> None:
    out = sealed.tmp / "va.dsse.json"
    res = run_cli("attest", sealed.refs["vector_add"], "--out", str(out), "--key", "alice",
                  home=sealed.home)
    assert res.returncode == 0, res.stderr
    independent_verify(out.read_bytes())
    vkey = sealed.log.verifier.vkey
    res = run_cli("verify-attestation", str(out), "--vkey", vkey, "--json", home=sealed.home)
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert obj["verified"] is True and obj["subjects_checked"] == "the sealed manifest"
    bundle = REPO / "bundles" / "vector_add"
    res = run_cli("verify-attestation", str(out), "--vkey", vkey, "--bundle", str(bundle),
                  home=sealed.home)
    assert res.returncode == 0, res.stderr
    assert "checked against the given files" in res.stdout


def test_cli_build_provenance(sealed: Sealed) -> None:
    out = sealed.tmp / "va.slsa.json"
    res = run_cli("attest", sealed.refs["vector_add"], "--build", "--out", str(out),
                  home=sealed.home)  # the key that sealed it, found in LEDGER_HOME/keys
    assert res.returncode == 0, res.stderr
    env = SslibEnvelope.from_dict(json.loads(out.read_bytes()))
    st = json.loads(env.payload)
    assert st["predicateType"] == "https://slsa.dev/provenance/v1"
    ptx = (REPO / "bundles" / "vector_add" / "vector_add.ptx").read_bytes()
    cu = (REPO / "bundles" / "vector_add" / "vector_add.cu").read_bytes()
    assert st["subject"] == [{"name": "vector_add.ptx", "digest": intoto.digests(ptx)}]
    build = st["predicate"]["buildDefinition"]
    assert build["resolvedDependencies"] == [{"name": "vector_add.cu",
                                              "digest": intoto.digests(cu)}]
    assert build["externalParameters"]["argv"][0] == "nvcc"
    assert build["internalParameters"]["nvcc_version"].startswith("V")
    res = run_cli("verify-attestation", str(out), "--vkey", sealed.log.verifier.vkey,
                  "--bundle", str(REPO / "bundles" / "vector_add"), home=sealed.home)
    assert res.returncode == 0, res.stderr


def _resigned(st: dict[str, Any], key: nacl.signing.SigningKey, path: Path) -> Path:
    path.write_bytes(attestation.sign(st, key).to_bytes())
    return path


def _refused(sealed: Sealed, path: Path, *extra: str) -> str:
    res = run_cli("verify-attestation", str(path), "--vkey", sealed.log.verifier.vkey, *extra,
                  home=sealed.home)
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    return res.stderr


def test_tampered_subject_refused(sealed: Sealed) -> None:
    st = statement_of(sealed, "saxpy")
    st["subject"][0]["digest"]["sha256"] = "00" * 32
    path = _resigned(st, sealed.alice, sealed.tmp / "subject.json")  # the right key signs it
    assert "sha256" in _refused(sealed, path, "--bundle", str(REPO / "bundles" / "saxpy"))
    st = statement_of(sealed, "saxpy")
    st["subject"][0]["digest"]["blake3"] = "00" * 32
    assert "subject" in _refused(sealed, _resigned(st, sealed.alice, path))
    with pytest.raises(TamperDetected):
        attestation.verify_attestation(path.read_bytes(), sealed.verifier())


def test_wrong_key_refused(sealed: Sealed) -> None:
    st = statement_of(sealed, "saxpy")
    other = nacl.signing.SigningKey.generate()
    assert "signature" in _refused(sealed, _resigned(st, other, sealed.tmp / "other.json"))
    # bob is registered, names himself as the signer and signs: not the entry's signer
    bob_sk = _key(sealed, "bob")
    st["predicate"]["signer"]["public_key"] = base64.b64encode(
        bytes(bob_sk.verify_key)).decode()
    _refused(sealed, _resigned(st, bob_sk, sealed.tmp / "bob.json"))
    # the CLI refuses to attest with a key that did not seal the entry: exit 2
    res = run_cli("attest", sealed.refs["saxpy"], "--key", "bob", home=sealed.home)
    assert res.returncode == 2 and "did not seal" in res.stderr


def _key(sealed: Sealed, name: str) -> nacl.signing.SigningKey:
    from ledger.keys import load_node_secret

    return load_node_secret(sealed.log.keydir, name)[0]


def test_inclusion_proof_not_matching_refused(sealed: Sealed) -> None:
    st = statement_of(sealed, "saxpy")
    proof = st["predicate"]["log"]["inclusion"]
    proof[0] = base64.b64encode(bytes(32)).decode()
    assert "inclusion" in _refused(sealed, _resigned(st, sealed.alice,
                                                     sealed.tmp / "proof.json"))
    st = statement_of(sealed, "saxpy")  # another entry's index: its proof does not match
    st["predicate"]["log"]["index"] -= 1
    _refused(sealed, _resigned(st, sealed.alice, sealed.tmp / "index.json"))


def test_predicate_field_changed_refused(sealed: Sealed) -> None:
    st = statement_of(sealed, "saxpy")
    st["predicate"]["certificate"]["verdict"] = "verified"
    assert "predicate field" in _refused(sealed, _resigned(st, sealed.alice,
                                                           sealed.tmp / "verdict.json"))


def test_policy_applies(sealed: Sealed) -> None:
    st = statement_of(sealed, "saxpy")
    env = attestation.sign(st, sealed.alice).to_bytes()
    with pytest.raises(ledger.PolicyError) as e:
        attestation.verify_attestation(env, sealed.verifier(verdict="verified"))
    assert e.value.rule == "verdict"
    other = ledger.Policy(log=parse_vkey(new_ledger(sealed.tmp / "other").verifier.vkey))
    with pytest.raises(TamperDetected):  # another log's key: its checkpoint does not verify
        attestation.verify_attestation(env, ledger.Verifier(other, None))


def test_bad_input_exit_2(sealed: Sealed, tmp_path: Path) -> None:
    for body in (b"not json", b"{}", json.dumps({"payload": "!!", "payloadType": "x",
                                                  "signatures": [{"sig": ""}]}).encode()):
        bad = tmp_path / "bad.json"
        bad.write_bytes(body)
        res = run_cli("verify-attestation", str(bad), "--vkey", sealed.log.verifier.vkey)
        assert res.returncode == 2, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    with pytest.raises(BadInput):  # a DSSE envelope of something that is no in-toto statement
        attestation.open_envelope(dsse.sign("text/plain", b"hi", sealed.alice, "k").to_bytes())


def test_pae_matches_the_dsse_spec() -> None:
    # the DSSE protocol's own example (protocol.md): PAE("http://example.com/HelloWorld", ...)
    got = dsse.pae("http://example.com/HelloWorld", b"hello world")
    assert got == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_provenance_needs_a_build(sealed: Sealed) -> None:
    st = statement_of(sealed, "vector_add")
    with pytest.raises(BadInput):
        provenance_statement(st, {"contract.yaml": b"kernel: {name: x}\n"}, "0")


def test_server_offers_the_unsigned_statement(sealed: Sealed) -> None:
    import httpx

    from tests.helpers.server import BackgroundServer, make_app

    st = statement_of(sealed, "vector_add")
    index = st["predicate"]["log"]["index"]
    with BackgroundServer(make_app(sealed.home)) as srv:
        got = httpx.get(f"{srv.url}/api/v1/entries/{index}/attestation")
        page = httpx.get(f"{srv.url}/entry/{index}").text
        key_entry = httpx.get(f"{srv.url}/api/v1/entries/0/attestation")
    assert got.status_code == 200
    assert f"attestation-{index}.intoto.json" in got.headers["content-disposition"]
    assert got.json() == st  # the statement the node signs: the same subjects and predicate
    assert f'href="/api/v1/entries/{index}/attestation"' in page
    assert key_entry.status_code == 404  # a key entry vouches for no kernel
    # the node signs what the server offers, and it verifies
    env = attestation.sign(got.json(), sealed.alice).to_bytes()
    assert attestation.verify_attestation(env, sealed.verifier()).key_id == st[
        "predicate"]["signer"]["key_id"]


def test_an_older_attestation_verifies_after_the_log_grew(tmp_path: Path) -> None:
    """The checkpoint memory remembers a newer tree; the local ledger's consistency proof
    carries the older attestation's checkpoint to it (as ``verify --receipt`` does)."""
    from tests.helpers.ledgers import write_bundle
    from tests.helpers.library import make_world

    world = make_world(tmp_path)
    old = _resigned(ledger.attest(world.digest, world.policy(), log=ledger.LocalLog(world.home)),
                    world.alice,
                    tmp_path / "old.json")
    d = write_bundle(tmp_path / "bundles", "other", "o")
    seal(world.log, world.alice, d, name="other")
    new = _resigned(attestation.certificate_statement(world.verifier(), "other@1.0.0"),
                    world.alice,
                    tmp_path / "new.json")
    for path in (new, old):  # the newer checkpoint remembered first
        res = run_cli("verify-attestation", str(path), "--vkey", world.vkey, home=world.home)
        assert res.returncode == 0, res.stderr
    res = run_cli("verify-attestation", str(old), str(d / "k.ptx"), "--vkey", world.vkey,
                  home=world.home)
    assert res.returncode == 1 and "is not the given file" in res.stderr  # another bundle's k.ptx
    res = run_cli("verify-attestation", str(old), str(world.bundle / "k.ptx"), "--vkey",
                  world.vkey, home=world.home)
    assert res.returncode == 0 and "checked against the given files" in res.stdout


def test_tampered_provenance_refused(sealed: Sealed) -> None:
    files = {p.name: p.read_bytes() for p in (REPO / "bundles" / "vector_add").iterdir()}
    st = provenance_statement(statement_of(sealed, "vector_add"), files, ledger.__version__)
    ok = attestation.sign(st, sealed.alice).to_bytes()
    assert attestation.verify_attestation(ok, sealed.verifier(), files).key_id
    bad_ptx = json.loads(json.dumps(st))
    bad_ptx["subject"][0]["digest"]["blake3"] = "00" * 32
    _refused(sealed, _resigned(bad_ptx, sealed.alice, sealed.tmp / "slsa-ptx.json"))
    bad_cu = json.loads(json.dumps(st))
    bad_cu["predicate"]["buildDefinition"]["resolvedDependencies"][0]["digest"]["blake3"] = "0" * 64
    _refused(sealed, _resigned(bad_cu, sealed.alice, sealed.tmp / "slsa-cu.json"))
    argv = json.loads(json.dumps(st))
    argv["predicate"]["buildDefinition"]["externalParameters"]["argv"].append("-G")
    with pytest.raises(TamperDetected):  # with the bundle's files: the contract's build
        attestation.verify_attestation(attestation.sign(argv, sealed.alice).to_bytes(),
                                       sealed.verifier(), files)
    other = nacl.signing.SigningKey.generate()
    _refused(sealed, _resigned(st, other, sealed.tmp / "slsa-other.json"))
