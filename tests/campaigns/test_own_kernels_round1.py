"""Red-team of the verifier on kernels users bring (docs/seal-your-own-kernel.md): each class of
problem that slipped through, as a user meets it, with a real nvcc build and the real CLI.

1. Input edges: a float histogram whose top value 1.0 lands one bin past the end, and a sign
   ``x / |x|`` that is NaN at 0, passed every check: uniform draws never give ``high`` and
   almost never 0. The verifier now plants the range's edges in its chosen bindings
   (``verify.falsify.plant_edges``).
2. Sub-warp tiles: ``redux.sync`` reduced over the whole warp whatever its membermask, and
   ``vote.sync`` mixed the tiles of one warp, so a correct ``cg::tiled_partition<16>`` reduce
   was refused (``verify.ptxsim.ops_warp._mask_groups``).
3. nvcc's module id: a source that includes ``<cooperative_groups.h>`` gets internal-linkage
   names hashed from the source's path, so ``rebuild.ptx`` in a scratch directory never matched
   and failed, refusing the bundle; now it is ``skipped``, saying that the PTX equals the sealed
   one up to those ids (``verify.rebuild.same_up_to_module_id``), and fails on any other
   difference. Since issue 32 `ledger new` and ``rebuild.ptx`` both build at one fixed path in
   the sandbox (``verify.confine.BUILD_DIR``), so such a bundle rebuilds byte for byte: passed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import byo
from verify.confine import sandbox_status
from verify.falsify import edge_values, plant_edges
from verify.ptxsim import Buffer, Scalar, launch, load_module
from verify.rebuild import same_up_to_module_id
from verify.tools import find_tool

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "redteam"
NVCC = find_tool("nvcc", cuda=True)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc: cannot build the kernels' PTX")


# ---------------------------------------------------------------- helpers


def _ptx(tmp: Path, name: str, defines: tuple[str, ...] = ()) -> bytes:
    """nvcc -arch=sm_86 -ptx of a fixture, as `ledger new` builds it."""
    assert NVCC is not None
    out = tmp / f"{name}.ptx"
    flags = [f"-D{d}" for d in defines]
    subprocess.run(
        [NVCC, "-arch=sm_86", "-ptx", *flags, "-o", str(out), str(FIX / f"{name}.cu")],
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


def _fut(p: Path, fn: str) -> None:
    """The Futhark stub with its marker lines dropped."""
    p.write_text("\n".join(p.read_text().splitlines()[2:]).replace("???", "x") + "\n")


def _bundle(tmp: Path, name: str, source: str, kernel: dict[str, Any], test: dict[str, Any],
            ref: str, entry: str | None = None) -> Path:
    return byo.bundle(tmp, name, source, kernel, test, ref, entry, _fut)


_checks = byo.checks
_falsify = byo.falsify


ONE_D = {
    "params": [
        {"name": "x", "ptr": "f32", "intent": "in", "shape": ["n"]},
        {"name": "y", "ptr": "f32", "intent": "out", "shape": ["n"]},
        {"name": "n", "scalar": "s32", "value": "n"},
    ],
    "launch": {"grid": ["ceil_div(n, 128)", 1, 1], "block": [128, 1, 1], "shared_bytes": 0},
    "size_domain": {"n": {"min": 1, "max": 65536}},
}
FHIST = {
    "params": [
        {"name": "x", "ptr": "f32", "intent": "in", "shape": ["n"]},
        {"name": "hist", "ptr": "s32", "intent": "inout", "shape": ["nbins"]},
        {"name": "n", "scalar": "s32", "value": "n"},
        {"name": "nbins", "scalar": "s32", "value": "nbins"},
    ],
    "launch": {"grid": ["ceil_div(n, 128)", 1, 1], "block": [128, 1, 1], "shared_bytes": 0},
    "size_domain": {"n": {"min": 1, "max": 4096}, "nbins": {"min": 1, "max": 64}},
}
FHIST_TEST = {
    "sizes": [{"n": 1000, "nbins": 10}],
    "inputs": {"low": 0.0, "high": 1.0},
    "tolerance": {"ulp": 0},
    "properties": ["reference", "bounds", "race_free"],
}
FHIST_REF = """def FN(inputs, sizes):
    nb = sizes['nbins']
    b = np.minimum((inputs['x'] * np.float32(nb)).astype(np.int64), nb - 1)
    return {'hist': inputs['hist'].astype(np.int64) + np.bincount(b, minlength=nb)}
"""
SGN_TEST = {"sizes": [{"n": 256}], "tolerance": {"ulp": 0}}
SGN_REF = "def FN(inputs, sizes):\n    return {'y': np.sign(inputs['x'])}\n"


# ---------------------------------------------------------------- 1. input edges


def test_edge_values_cover_the_closed_range() -> None:
    def bits(dtype: str, low: float, high: float) -> list[bytes]:
        return [v.tobytes() for v in edge_values(dtype, low, high)]  # +0 and -0 differ

    f32 = [np.float32(v).tobytes() for v in (1.0, 0.0, -0.0, -1.0)]
    assert bits("f32", 0.0, 1.0) == f32[:3]  # low is +0: already there
    assert bits("f32", -1.0, 1.0) == f32
    assert edge_values("s32", -100, 100).tolist() == [100, 0, -100]
    assert edge_values("u8", -5, 300).tolist() == [255, 0]
    assert edge_values("f16", -1e6, 1e6).tolist() == [0.0, -0.0]  # infinities are left out
    data = np.full(10, 0.5, np.float32)
    plant_edges(data, "f32", 0.0, 1.0)
    assert np.flatnonzero(data != 0.5).tolist() == [0, 4, 9]  # spread from first to last
    assert data[0] == 1.0 and data[4] == 0.0 and np.signbit(data[9])
    one = np.full(1, 0.5, np.float32)
    plant_edges(one, "f32", 0.0, 1.0)
    assert one.tolist() == [1.0]  # the top edge first: a draw never gives it


@needs_nvcc
def test_top_edge_histogram_bug_is_caught_and_clamped_twin_passes(tmp_path: Path) -> None:
    src = (FIX / "fhist.cu").read_text()
    bad = _bundle(tmp_path, "fhist_bug", "#define TOP_EDGE_BUG\n" + src, FHIST, FHIST_TEST,
                  FHIST_REF)
    f = _falsify(_checks(bad))
    assert f["status"] == "failed", f["detail"]
    assert "out_of_bounds [bounds/PO2]" in f["detail"] and "buffer 'hist'" in f["detail"]
    assert "(chosen: " in f["detail"]  # the author's random inputs alone never show it
    good = _bundle(tmp_path, "fhist_ok", src, FHIST, FHIST_TEST, FHIST_REF)
    f = _falsify(_checks(good))
    assert f["status"] == "passed", f["detail"]
    assert "inputs at chosen sizes hold the range's edges (high, 0, low)" in f["detail"]


@needs_nvcc
def test_sign_nan_at_zero_is_caught(tmp_path: Path) -> None:
    src = (FIX / "sgn.cu").read_text()
    bad = _bundle(tmp_path, "sgn_bug", "#define ZERO_BUG\n" + src, ONE_D, SGN_TEST, SGN_REF)
    f = _falsify(_checks(bad))
    assert f["status"] == "failed", f["detail"]
    assert re.search(r"got np\.float32\(nan\), want np\.float32\(-?0\.0\)", f["detail"]), f
    good = _bundle(tmp_path, "sgn_ok", src, ONE_D, SGN_TEST, SGN_REF)
    assert _falsify(_checks(good))["status"] == "passed"


# ---------------------------------------------------------------- 2. sub-warp tiles


@needs_nvcc
def test_redux_and_vote_run_per_tile_membermask(tmp_path: Path) -> None:
    m = load_module(_ptx(tmp_path, "tiles"))
    n = 112  # the last warp has one whole tile in range; the other tile skips the reduce
    rng = np.random.default_rng(5)
    xi = rng.integers(-50, 50, n).astype(np.int32)
    yi = np.zeros(n, np.int32)
    r = launch(m, "_Z8tile_sumPKiPii", (1, 1, 1), (128, 1, 1),
               [Buffer(xi, "in", "x"), Buffer(yi, "out", "y"), Scalar(n, ".s32")])
    assert r.findings == ()
    want = np.array([xi[(i // 16) * 16:(i // 16) * 16 + 16].sum() for i in range(n)])
    assert (yi == want).all()

    n = 100  # every lane votes, the lanes past n with a fixed predicate
    xf = rng.uniform(-1, 1, n).astype(np.float32)
    yc = np.zeros(n, np.int32)
    r = launch(m, "_Z10tile_countPKfPii", (1, 1, 1), (128, 1, 1),
               [Buffer(xf, "in", "x"), Buffer(yc, "out", "y"), Scalar(n, ".s32")])
    assert r.findings == ()
    tiles = [xf[(i // 16) * 16:(i // 16) * 16 + 16] for i in range(n)]
    want = np.array([(t > 0).sum() + (100 if (t > -0.5).all() else 0) for t in tiles])
    assert (yc == want).all()


# ---------------------------------------------------------------- 3. nvcc's module id


def test_module_id_renaming_is_forgiven_only_one_to_one() -> None:
    sealed = b"x _ZN44_INTERNAL_1d22a3ff_1_k_cu_5_GLOBAL__N__1d22a3ff_1_k; y _INTERNAL_1d22a3ff_\n"
    renamed = sealed.replace(b"1d22a3ff", b"2e42274d")
    assert same_up_to_module_id(sealed, renamed)
    assert not same_up_to_module_id(sealed, sealed.replace(b"x ", b"z "))  # nothing else differs
    assert not same_up_to_module_id(sealed, renamed.replace(b"x ", b"z "))
    half = sealed.replace(b"_GLOBAL__N__1d22a3ff", b"_GLOBAL__N__0badc0de")
    two = sealed.replace(b"y _INTERNAL_1d22a3ff", b"y _INTERNAL_0badc0de")
    assert not same_up_to_module_id(half, renamed)  # two sealed ids onto one: not a renaming
    assert not same_up_to_module_id(sealed, two)  # one sealed id onto two
    assert not same_up_to_module_id(b"plain ptx", b"plain ptx!")


@needs_nvcc
def test_cooperative_groups_bundle_is_not_refused_by_its_module_id(tmp_path: Path) -> None:
    kernel = {
        "params": [
            {"name": "x", "ptr": "s32", "intent": "in", "shape": ["n"]},
            {"name": "y", "ptr": "s32", "intent": "out", "shape": ["n"]},
            {"name": "n", "scalar": "s32", "value": "n"},
        ],
        "launch": {"grid": ["ceil_div(n, 128)", 1, 1], "block": [128, 1, 1], "shared_bytes": 0},
        "size_domain": {"n": {"min": 16, "max": 4096, "multiple_of": 16}},
    }
    test = {"sizes": [{"n": 256}], "inputs": {"low": -100, "high": 100}, "tolerance": {"ulp": 0}}
    ref = ("def FN(inputs, sizes):\n    x = inputs['x'].astype(np.int64)\n"
           "    return {'y': np.repeat(x.reshape(-1, 16).sum(axis=1), 16)}\n")
    src = (FIX / "tiles.cu").read_text()
    filled = _bundle(tmp_path, "tiles", src, kernel, test, ref, entry="_Z8tile_sumPKiPii")
    checks = _checks(filled)
    rb = checks["rebuild.ptx"]  # byte for byte is what a pass means (SPEC 8)
    if sandbox_status()[0] is not None:  # `ledger new` and rebuild.ptx both build at one path
        assert rb["status"] == "passed", rb["detail"]
        assert "(built at /build/bundle)" in rb["detail"]
    else:
        assert rb["status"] == "skipped", rb["detail"]
    f = _falsify(checks)
    assert f["status"] == "passed", f["detail"]
