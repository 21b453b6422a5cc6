"""``ledger.load_ptx`` and ``ledger.load_cupy`` (SPEC 10 "Library"): the PTX only after
verification, offline from the verified cache after the first load, and a CuPy module built from
exactly the verified bytes (a stand-in module here records what it was handed; a real GPU run is
``scripts/device_check.py``'s)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import ledger
from tests.helpers.library import World, make_world


@pytest.fixture()
def world(tmp_path: Path) -> World:
    w = make_world(tmp_path)
    w.log.close()
    return w


class StandInCupy:
    """What ``load_cupy`` uses of CuPy: ``cuda.runtime.getDeviceCount`` and ``RawModule``."""

    def __init__(self, devices: int) -> None:
        self.handed: list[dict[str, Any]] = []
        self.cuda = SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=lambda: devices))

    def RawModule(self, **kw: Any) -> Any:
        self.handed.append(kw)
        got = self.handed

        class Module:
            def get_function(self, name: str) -> tuple[str, str]:
                got.append({"get_function": name})
                return ("kernel", name)

        return Module()


def test_load_ptx_verifies_then_loads_offline_from_the_cache(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ledger.Cache(tmp_path / "cache")
    ptx, cert = ledger.load_ptx("vector_add@1.0.0", world.policy(), log=world.home, cache=cache)
    assert ptx == (world.bundle / "k.ptx").read_bytes()
    assert cert.kernel == "vector_add@1.0.0"
    shutil.rmtree(world.home)  # no log any more: the cache answers
    monkeypatch.setenv("LEDGER_LOG", str(world.home))
    again, cert2 = ledger.load_ptx("vector_add@1.0.0", world.policy(), cache=cache)
    assert again == ptx and cert2.bundle_digest == cert.bundle_digest


def test_load_ptx_refuses_before_handing_anything_out(world: World, tmp_path: Path) -> None:
    cache = ledger.Cache(tmp_path / "cache")
    with pytest.raises(ledger.PolicyError) as e:
        ledger.load_ptx("vector_add@1.0.0", world.policy(signers=("mallory",)), log=world.home,
                        cache=cache)
    assert e.value.rule == "signers"
    assert not (tmp_path / "cache" / "kernels" / world.digest).exists()
    with pytest.raises(ledger.LedgerError, match="no PTX file"):
        ledger.load_ptx(world.digest, world.policy(), log=world.home, cache=cache,
                        file="other.ptx")


def test_load_cupy_builds_from_the_verified_ptx(world: World, tmp_path: Path) -> None:
    cache = ledger.Cache(tmp_path / "cache")
    fake = StandInCupy(devices=1)
    _mod, cert = ledger.load_cupy("vector_add@1.0.0", world.policy(), log=world.home,
                                 cache=cache, cupy=fake)
    assert fake.handed == [{"code": (world.bundle / "k.ptx").read_text()}]
    assert cert.kernel == "vector_add@1.0.0"
    fn, _ = ledger.load_cupy("vector_add@1.0.0", world.policy(), kernel="vector_add",
                             cache=cache, cupy=fake)
    assert fn == ("kernel", "vector_add") and fake.handed[-1] == {"get_function": "vector_add"}


def test_load_cupy_without_a_device_or_cupy_is_a_clear_error(world: World,
                                                             tmp_path: Path) -> None:
    cache = ledger.Cache(tmp_path / "cache")
    with pytest.raises(ledger.LedgerError, match="no CUDA device") as e:
        ledger.load_cupy("vector_add@1.0.0", world.policy(), log=world.home, cache=cache,
                         cupy=StandInCupy(devices=0))
    assert e.value.exit_code == 3
    try:
        import cupy  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with pytest.raises(ledger.LedgerError, match="CuPy is not installed"):
            ledger.load_cupy("vector_add@1.0.0", world.policy(), log=world.home, cache=cache)
