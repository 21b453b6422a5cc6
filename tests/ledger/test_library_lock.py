"""``ledger lock add`` / ``ledger lock verify`` as a CI job runs them (real subprocesses): the gate
passes, then fails with one line per kernel after the locked kernel's signer is revoked, after a
locked digest is edited, and for a kernel missing from the log; the library's loaders refuse a
kernel the lock file does not hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ledger
from ledger.log import Log
from tests.helpers.ledgers import run_cli
from tests.helpers.library import World, make_world


@pytest.fixture()
def world(tmp_path: Path) -> World:
    w = make_world(tmp_path)
    w.log.close()
    return w


def _lock(world: World, *args: str) -> tuple[int, str, str]:
    res = run_cli("lock", *args, "--file", str(world.home.parent / "kernels.lock"),
                  home=world.home)
    return res.returncode, res.stdout, res.stderr


def test_lock_verify_gates_a_build(world: World, tmp_path: Path) -> None:
    code, out, err = _lock(world, "add", "vector_add@1.0.0")
    assert code == 0, err
    lock = tmp_path / "kernels.lock"
    assert f"vector_add@1.0.0 {world.digest} test.example/log\n" in lock.read_text()
    code, out, err = _lock(world, "verify", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["ok"] is True and obj["kernels"][0]["status"] == "ok"

    edited = lock.read_text().replace(world.digest, "0" * 64)
    lock.write_text(edited)
    code, out, err = _lock(world, "verify")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"vector_add@1.0.0: digest changed: locked {'0' * 64}, the log has {world.digest}" in err

    lock.write_text(edited.replace("0" * 64, world.digest))
    log = Log.open(world.home)
    log.revoke(log.store.key_rows()[0].key_id, "stolen laptop")
    log.close()
    code, out, err = _lock(world, "verify")
    assert code == 1 and "vector_add@1.0.0" in err and "stolen laptop" in err
    assert len(err.strip().splitlines()) == 1


def test_a_locked_kernel_missing_from_the_log_fails_its_line(world: World, tmp_path: Path) -> None:
    lock = tmp_path / "kernels.lock"
    lock.write_text(f"ghost@1.0 {'a' * 64} test.example/log\n")
    code, _out, err = _lock(world, "verify")
    assert code == 1 and "ghost@1.0: missing from the log" in err
    code, _out, err = _lock(world, "add", "ghost@1.0")
    assert code == 2 and "no entry" in err
    lock.write_text("not a lock line\n")
    code, _out, err = _lock(world, "verify")
    assert code == 2 and "NAME@VERSION DIGEST ORIGIN" in err


def test_the_loaders_refuse_a_kernel_not_in_the_lock_file(world: World, tmp_path: Path) -> None:
    lock = tmp_path / "kernels.lock"
    lock.write_text("# empty\n")
    pol = world.policy()
    cache = ledger.Cache(tmp_path / "cache")
    with pytest.raises(ledger.PolicyError) as e:
        ledger.load_ptx("vector_add@1.0.0", pol, log=world.home, lock=lock, cache=cache)
    assert e.value.rule == "lock" and "not in the lock file" in e.value.reason
    lock.write_text(f"vector_add@1.0.0 {'b' * 64} test.example/log\n")
    with pytest.raises(ledger.PolicyError, match="locked at"):
        ledger.load_ptx("vector_add@1.0.0", pol, log=world.home, lock=lock, cache=cache)
    lock.write_text(f"vector_add@1.0.0 {world.digest} test.example/log\n")
    ptx, cert = ledger.load_ptx("vector_add@1.0.0", pol, log=world.home, lock=lock, cache=cache)
    assert ptx == (world.bundle / "k.ptx").read_bytes() and cert.bundle_digest == world.digest
    got = ledger.LockFile.read(lock)
    assert [k.ref for k in got.kernels] == ["vector_add@1.0.0"]
