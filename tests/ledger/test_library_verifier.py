"""The public library (SPEC 10 "Library", issue 31): ``ledger.Verifier(policy, log).verify(ref)``
and its refusals, through the public names of ``ledger`` only, over real ledgers on disk.

The kernel sealed here records its seal-time checks (signed by the node): lean.kernel skipped,
falsify against a trusted oracle passed, PO1 ok and PO2 partial; the library's default
verification checks the files, signatures, inclusion and checkpoint afresh and takes those
recorded checks (``rerun=True`` re-runs them, as ``ledger verify`` does)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import ledger
from ledger.core.errors import TamperDetected, UnknownHash
from ledger.core.note import format_vkey, parse_vkey
from ledger.trust import Unproven
from ledger.witness import cosigner_vkey
from tests.helpers.ledgers import add_node, write_bundle
from tests.helpers.library import World, make_world, seal


@pytest.fixture()
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def test_the_public_names_are_exactly_all() -> None:
    assert sorted(dir(ledger)) == sorted(ledger.__all__)
    for name in ledger.__all__:
        assert getattr(ledger, name) is not None
    with pytest.raises(AttributeError):
        ledger.nothing_here  # noqa: B018


def test_a_kernel_by_digest_prefix_and_name_gives_one_certificate(world: World) -> None:
    v = world.verifier()
    cert = v.verify(world.digest)
    assert cert.kernel == "vector_add@1.0.0" and cert.bundle_digest == world.digest
    assert cert.verdict == "partial"
    assert cert.partial == ("partial: lean.kernel skipped (no Lean toolchain on PATH), "
                            "certificate skipped (PO2 partial)")
    assert [(o.id, o.status) for o in cert.obligations] == [("PO1", "ok"), ("PO2", "partial")]
    assert cert.obligations[0].evidence == "VectorAdd.index_partition; falsify.VADD-1"
    assert cert.signer.name == "alice" and cert.signer.status == "registered"
    assert cert.signer.registered_at == 0 and cert.signer.revoked_at is None
    assert cert.index == world.index and cert.tree_size == 2
    f = cert.check("falsify.VADD-1")
    assert f is not None and (f.tool, f.version, f.status) == ("ptxsim", "0.1", "passed")
    assert cert.check("integrity.signature") is not None
    assert v.verify(world.digest[:10]).index == cert.index
    assert v.verify("vector_add@1.0.0").index == cert.index
    assert v.verify(world.bundle).bundle_digest == world.digest
    assert cert.to_json()["kernel"] == {"name": "vector_add", "version": "1.0.0"}


def test_a_receipt_file_verifies_offline(world: World, tmp_path: Path) -> None:
    from ledger_cli.wiring import write_receipt

    path = write_receipt(world.log, world.index, world.bundle)
    cert = ledger.Verifier(world.policy(), None, memory=world.mem).verify(path)
    assert cert.signer.status == "unproven" and cert.kernel == "vector_add@1.0.0"
    # the bundle directory with its receipt is the same evidence
    again = ledger.Verifier(world.policy(), None, memory=world.mem).verify(world.bundle)
    assert (again.index, again.bundle_digest) == (cert.index, cert.bundle_digest)


def test_a_revoked_signer_is_refused_unless_the_policy_allows_it(world: World) -> None:
    world.log.revoke(world.log.store.key_rows()[0].key_id, "key leaked")
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier().verify("vector_add@1.0.0")
    assert e.value.rule == "signers" and "key leaked" in e.value.reason
    cert = world.verifier(world.policy(allow_revoked=True)).verify("vector_add@1.0.0")
    assert cert.signer.status == "revoked" and cert.signer.revoked_at == 2


def test_a_signer_not_allowed_is_refused(world: World) -> None:
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(signers=("bob",))).verify(world.digest)
    assert e.value.rule == "signers" and "alice" in e.value.reason
    kid = world.verifier().verify(world.digest).signer.key_id
    assert world.verifier(world.policy(signers=(kid,))).verify(world.digest).signer.name == "alice"


def test_required_checks_obligations_verdict_and_oracles(world: World) -> None:
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(checks=("lean.kernel",))).verify(world.digest)
    assert e.value.rule == "checks" and "lean.kernel skipped" in e.value.reason
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(checks=("futhark.*",))).verify(world.digest)
    assert e.value.rule == "checks"
    world.verifier(world.policy(checks=("falsify.*", "lean.scan"))).verify(world.digest)
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(obligations=(("PO2", "ok"),))).verify(world.digest)
    assert e.value.rule == "obligations" and "PO2 is partial" in e.value.reason
    world.verifier(world.policy(obligations=(("PO1", "ok"), ("PO2", "partial")))).verify(
        world.digest)
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(verdict="verified")).verify(world.digest)
    assert e.value.rule == "verdict" and "lean.kernel skipped" in e.value.reason
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(oracles=("futhark",))).verify(world.digest)
    assert e.value.rule == "oracles" and "trusted" in e.value.reason
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(oldest_checkpoint=5)).verify(world.digest)
    assert e.value.rule == "oldest_checkpoint"


def test_a_quorum_not_met_is_refused(world: World) -> None:
    w = parse_vkey(cosigner_vkey("witness.example/w1", bytes(range(32))))
    with pytest.raises(ledger.PolicyError) as e:
        world.verifier(world.policy(witnesses=(w,), quorum=1)).verify(world.digest)
    assert e.value.rule == "quorum" and "witness.example/w1" in e.value.reason


def test_a_rolled_back_log_is_refused(world: World, tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(world.home, old)
    seal(world.log, world.alice, write_bundle(tmp_path / "bundles", "other", "o"),
         name="other")
    world.verifier().verify(world.digest)  # remembers the tree of size 3
    stale = ledger.Verifier(world.policy(), ledger.LocalLog(old), memory=world.mem)
    with pytest.raises(Unproven):
        stale.verify(world.digest)


def test_several_entries_of_one_name_the_policy_signers_decide(world: World,
                                                                 tmp_path: Path) -> None:
    bob = add_node(world.log, "bob")
    seal(world.log, bob, write_bundle(tmp_path / "bundles", "bobs", "b2"))
    with pytest.raises(UnknownHash, match="ambiguous") as e:
        world.verifier().verify("vector_add@1.0.0")
    assert "alice" in str(e.value) and "bob" in str(e.value)
    cert = world.verifier(world.policy(signers=("bob",))).verify("vector_add@1.0.0")
    assert cert.signer.name == "bob" and cert.bundle_digest != world.digest
    with pytest.raises(UnknownHash, match="no entry"):
        world.verifier().verify("vector_add@9.9.9")


def test_the_cache_answers_offline_and_refuses_a_tampered_file(world: World,
                                                                 tmp_path: Path) -> None:
    cache = ledger.Cache(tmp_path / "cache")
    first = world.verifier(cache=cache).verify("vector_add@1.0.0")
    offline = ledger.Verifier(world.policy(), None, cache=cache, memory=world.mem)
    cert = offline.verify("vector_add@1.0.0")
    assert cert.log.startswith("cache ") and first.log == str(world.home)
    assert replace(cert, checks=(), log="", signer=first.signer) == replace(first, checks=(),
                                                                           log="")
    assert [c.id for c in cert.checks] == [c.id for c in first.checks]
    from ledger.core.bundle import read_dir
    from ledger.library.cache import pack, unpack

    cached = tmp_path / "cache" / "kernels" / world.digest / "entry"
    receipt, files = unpack(cached.read_bytes())
    assert files == read_dir(world.bundle)
    cached.write_bytes(pack(receipt, {**files, "k.ptx": b"// not the sealed PTX\n"}))
    with pytest.raises(TamperDetected, match=r"k\.ptx"):
        offline.verify("vector_add@1.0.0")
    again = world.verifier(cache=cache).verify("vector_add@1.0.0")  # refused, fetched again
    assert again.bundle_digest == world.digest
    assert unpack(cached.read_bytes())[1]["k.ptx"] == (world.bundle / "k.ptx").read_bytes()


def test_policy_files_take_the_new_fields_and_refuse_unknown_ones(world: World,
                                                                   tmp_path: Path) -> None:
    import json

    p = tmp_path / "policy.json"
    p.write_text(json.dumps({
        "log": world.vkey, "checks": ["falsify.*"], "obligations": {"PO1": "ok"},
        "signers": ["alice"], "allow_revoked": False, "verdict": "partial",
        "oracles": ["trusted"], "oldest_checkpoint": 1,
    }))
    pol = ledger.load_policy(p)
    assert pol.checks == ("falsify.*",) and pol.obligations == (("PO1", "ok"),)
    assert pol.signers == ("alice",) and pol.oracles == ("trusted",)
    assert world.verifier(pol).verify(world.digest).kernel == "vector_add@1.0.0"
    p.write_text(json.dumps({"log": world.vkey, "signer": ["alice"]}))
    with pytest.raises(ledger.LedgerError, match="unknown field 'signer'"):
        ledger.load_policy(p)
    for bad in ({"verdict": "maybe"}, {"oracles": ["magic"]}, {"obligations": {"PO1": "proven"}},
                {"allow_revoked": "yes"}, {"oldest_checkpoint": -1}, {"checks": "lean.*"}):
        p.write_text(json.dumps({"log": world.vkey, **bad}))
        with pytest.raises(ledger.LedgerError):
            ledger.load_policy(p)


def test_a_bundle_directory_named_without_a_slash(world: World,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(world.bundle.parent)
    assert world.verifier().verify("vector_add").bundle_digest == world.digest
    with pytest.raises(UnknownHash):
        world.verifier().verify("nothing_here")  # neither a path nor an entry


def test_a_policy_of_several_log_keys_uses_the_one_the_checkpoint_names(world: World) -> None:
    other = parse_vkey(format_vkey("other.example/log", bytes(range(32))))
    pol = ledger.Policy(log_keys=(other, parse_vkey(world.vkey)))
    assert pol.log == other
    cert = world.verifier(pol).verify(world.digest)
    assert cert.kernel == "vector_add@1.0.0"


def test_a_cached_name_refused_by_a_new_policy_is_looked_up_again(world: World,
                                                                   tmp_path: Path) -> None:
    cache = ledger.Cache(tmp_path / "cache")
    bob = add_node(world.log, "bob")
    seal(world.log, bob, write_bundle(tmp_path / "bundles", "bobs", "b3"))
    alice_only = world.verifier(world.policy(signers=("alice",)), cache=cache)
    assert alice_only.verify("vector_add@1.0.0").signer.name == "alice"  # cached by name
    bob_only = world.verifier(world.policy(signers=("bob",)), cache=cache)
    assert bob_only.verify("vector_add@1.0.0").signer.name == "bob"
    offline = ledger.Verifier(world.policy(signers=("carol",)), None, cache=cache,
                              memory=world.mem)
    with pytest.raises(ledger.PolicyError, match="signers"):
        offline.verify("vector_add@1.0.0")
