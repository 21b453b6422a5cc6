"""The read-only logs behind ``ledger.ReadLog`` (SPEC 10 "Library"): one kernel verified the
same way from a local ledger, a real ``ledger serve`` on 127.0.0.1 (and its
``/api/v1/lookup/NAME@VERSION``), and a static mirror written by ``ledger publish``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import ledger
from ledger.core.note import parse_vkey
from ledger.trust import CheckpointMemory
from tests.helpers.ledgers import add_node, run_cli, write_bundle
from tests.helpers.library import World, make_world, seal
from tests.helpers.server import BackgroundServer, make_app


@pytest.fixture()
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def _verify(world: World, log: ledger.ReadLog, tmp_path: Path, ref: str) -> ledger.Certificate:
    pol = ledger.Policy(log=parse_vkey(world.vkey))
    return ledger.Verifier(pol, log, memory=CheckpointMemory(tmp_path / "m")).verify(ref)


def test_a_server_url_answers_name_lookups_and_verifies(world: World, tmp_path: Path) -> None:
    world.log.close()
    with BackgroundServer(make_app(world.home)) as srv:
        got = httpx.get(f"{srv.url}/api/v1/lookup/vector_add@1.0.0").json()
        assert [e["bundle_digest"] for e in got["entries"]] == [world.digest]
        assert got["name"] == "vector_add" and got["entries"][0]["index"] == world.index
        assert httpx.get(f"{srv.url}/api/v1/lookup/vector_add@2").status_code == 404
        log = ledger.open_log(srv.url)
        assert isinstance(log, ledger.ServerLog)
        try:
            cert = _verify(world, log, tmp_path, "vector_add@1.0.0")
            assert cert.bundle_digest == world.digest and cert.log == srv.url
            assert cert.signer.name == "alice"
            assert _verify(world, log, tmp_path, world.digest[:12]).index == world.index
        finally:
            log.close()


def test_a_static_mirror_directory_is_followed_and_verified(world: World, tmp_path: Path) -> None:
    world.log.close()
    dest = tmp_path / "site"
    res = run_cli("publish", str(dest), home=world.home)
    assert res.returncode == 0, res.stderr
    log = ledger.open_log(dest, parse_vkey(world.vkey), cache=tmp_path / "cache")
    assert isinstance(log, ledger.MirrorLog)
    try:
        cert = _verify(world, log, tmp_path, "vector_add@1.0.0")
    finally:
        log.close()
    assert cert.bundle_digest == world.digest and cert.log == str(dest)


def test_open_log_refuses_what_is_no_log(tmp_path: Path) -> None:
    with pytest.raises(ledger.LedgerError, match="neither a ledger"):
        ledger.open_log(tmp_path)
    (tmp_path / "checkpoint").write_text("x")
    with pytest.raises(ledger.LedgerError, match="verifier key"):
        ledger.open_log(tmp_path)


def test_a_second_signer_shows_in_the_server_lookup(world: World, tmp_path: Path) -> None:
    bob = add_node(world.log, "bob")
    seal(world.log, bob, write_bundle(tmp_path / "b", "bobs", "x"))
    world.log.close()
    with BackgroundServer(make_app(world.home)) as srv:
        got = httpx.get(f"{srv.url}/api/v1/lookup/vector_add@1.0.0").json()
        assert len(got["entries"]) == 2
        log = ledger.open_log(srv.url)
        try:
            pol = ledger.Policy(log=parse_vkey(world.vkey), signers=("bob",))
            cert = ledger.Verifier(pol, log, memory=CheckpointMemory(tmp_path / "m")).verify(
                "vector_add@1.0.0")
        finally:
            log.close()
    assert cert.signer.name == "bob"


def test_a_server_followed_as_a_mirror(world: World, tmp_path: Path) -> None:
    world.log.close()
    with BackgroundServer(make_app(world.home)) as srv:
        log = ledger.open_log(srv.url, parse_vkey(world.vkey), cache=tmp_path / "cache",
                              mirror=True)
        assert isinstance(log, ledger.MirrorLog)
        try:
            cert = _verify(world, log, tmp_path, "vector_add@1.0.0")
        finally:
            log.close()
    assert cert.bundle_digest == world.digest and cert.log == srv.url
    with pytest.raises(ledger.LedgerError, match="verifier key"):
        ledger.open_log(srv.url, mirror=True)
