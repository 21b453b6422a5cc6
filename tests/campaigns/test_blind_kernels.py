"""Planted bugs of the interpreter's former blind spots (issue 10), from real nvcc output
(tests/fixtures/ptxsim/blind.cu): each is caught by the right finding with thread, register or
address and PTX line, and its correct twin runs clean."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verify.ptxsim import Buffer, Module, Scalar, SimResult, launch, load_module

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ptxsim"


@pytest.fixture(scope="module")
def blind() -> Module:
    return load_module((FIX / "blind.ptx").read_bytes())


def kinds(r: SimResult) -> list[str]:
    return [f.kind for f in r.findings]


def rowsum(m: Module, entry: str) -> tuple[SimResult, np.ndarray]:
    n, w = 100, 5
    x = np.arange(n * w, dtype=np.float32)
    out = np.zeros(n, np.float32)
    r = launch(m, entry, (4, 1, 1), (32, 1, 1), [Buffer(x, "in", "x"), Buffer(out, "out", "out"),
                                                 Scalar(n, ".s32"), Scalar(w, ".s32")])
    return r, out


def test_uninitialised_accumulator_register(blind: Module) -> None:
    r, _ = rowsum(blind, "rowsum_uninit")
    assert kinds(r) == ["undefined_register"]
    f = r.findings[0]
    assert f.thread == (0, 0, 0) and f.block == (0, 0, 0) and f.line is not None
    assert "register %f23 read by thread (block (0, 0, 0), thread (0, 0, 0))" in f.message
    assert f"PTX line {f.line} ('add.f32')" in f.message
    r, out = rowsum(blind, "rowsum")
    assert r.findings == ()
    assert np.array_equal(out, np.arange(500, dtype=np.float32).reshape(100, 5).sum(axis=1))


def test_register_written_on_one_path_only() -> None:
    """A predicated write defines the register only in the lanes whose guard held."""
    ptx = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 7;
    @%p1 mov.u32 %r2, 5;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
    out = np.zeros(32, np.uint32)
    r = launch(load_module(ptx), "k", (1, 1, 1), (32, 1, 1), [Buffer(out, "out", "out")])
    assert kinds(r) == ["undefined_register"]
    assert "register %r2" in r.findings[0].message
    assert r.findings[0].thread == (7, 0, 0) and r.findings[0].line == 15


def test_never_zeroed_shared_histogram_read_by_atomics(blind: Module) -> None:
    x = np.arange(300, dtype=np.int32)
    out = np.zeros(64, np.int32)
    args = [Buffer(x, "in", "x"), Buffer(out, "inout", "out"), Scalar(300, ".s32")]
    r = launch(blind, "histo_nozero", (3, 1, 1), (128, 1, 1), args)
    assert kinds(r)[0] == "uninitialised_read"
    assert "read atomically by thread (block (0, 0, 0), thread (0, 0, 0))" in r.findings[0].message
    out[:] = 0
    r = launch(blind, "histo", (3, 1, 1), (128, 1, 1), args)
    assert r.findings == ()
    assert np.array_equal(out, np.bincount(x & 63, minlength=64))


def test_shuffle_from_exited_lane(blind: Module) -> None:
    x = np.ones(100, np.float32)
    out = np.zeros(1, np.float32)
    args = [Buffer(x, "in", "x"), Buffer(out, "inout", "out"), Scalar(100, ".s32")]
    r = launch(blind, "warpsum_exited", (2, 1, 1), (64, 1, 1), args)
    assert set(kinds(r)) == {"shuffle_undefined_lane"}
    f = r.findings[0]
    assert f.block == (1, 0, 0) and f.thread == (32, 0, 0)
    assert "shfl.sync.down" in f.message and "of lane 16 of its warp, which has exited" in f.message
    out[:] = 0
    r = launch(blind, "warpsum", (2, 1, 1), (64, 1, 1), args)
    assert r.findings == () and out[0] == 100


def test_shuffle_from_lane_outside_membermask(blind: Module) -> None:
    x = np.arange(32, dtype=np.int32)
    r = launch(blind, "shfl_outside_mask", (1, 1, 1), (32, 1, 1),
               [Buffer(x, "in", "x"), Buffer(np.zeros(32, np.int32), "out", "y")])
    assert kinds(r) == ["shuffle_undefined_lane"]
    assert "lane 16 of its warp, which is not executing this shfl" in r.findings[0].message


def stage(m: Module, entry: str, intent: str = "in") -> tuple[SimResult, np.ndarray, np.ndarray]:
    x = np.arange(256 * 4, dtype=np.int32)
    y = np.zeros(256 * 4, np.int32)
    r = launch(m, entry, (2, 1, 1), (128, 1, 1), [Buffer(x, intent, "x"), Buffer(y, "out", "y")])
    return r, x, y


def test_cp_async_staging(blind: Module) -> None:
    r, x, y = stage(blind, "stage")
    assert r.findings == ()
    assert np.array_equal(y.reshape(2, 128, 4), np.roll(x.reshape(2, 128, 4), -1, axis=1))
    r, _, _ = stage(blind, "stage_wait_late")  # the barrier before the wait orders nothing
    assert kinds(r) == ["race"]
    assert "read by thread (block (0, 0, 0), thread (0, 0, 0))" in r.findings[0].message
    assert "written by thread (block (0, 0, 0), thread (1, 0, 0))" in r.findings[0].message
    r, _, _ = stage(blind, "stage_src_clobber", "inout")
    assert kinds(r) == ["cp_async_in_flight"]
    assert "overwrites the source of the cp.async" in r.findings[0].message
    assert "byte offset 0 of buffer 'x'" in r.findings[0].message


def test_global_races(blind: Module) -> None:
    x = np.arange(128, dtype=np.int32)
    r = launch(blind, "shift_inplace", (2, 1, 1), (64, 1, 1),
               [Buffer(x.copy(), "inout", "x"), Scalar(128, ".s32")])
    assert kinds(r) == ["global_race"]
    msg = r.findings[0].message
    assert "element 1 of buffer 'x' written by thread (block (0, 0, 0), thread (1, 0, 0))" in msg
    assert "read by thread (block (0, 0, 0), thread (0, 0, 0))" in msg
    assert "in the same barrier interval of their block" in msg
    r = launch(blind, "sum_plain", (2, 1, 1), (64, 1, 1),
               [Buffer(x, "in", "x"), Buffer(np.zeros(1, np.int32), "inout", "total"),
                Scalar(128, ".s32")])
    assert "global_race" in kinds(r)  # and double_write: every thread stores the total
    r = launch(blind, "blocks_chain", (2, 1, 1), (64, 1, 1),
               [Buffer(x.copy(), "inout", "x"), Scalar(128, ".s32")])
    assert kinds(r) == ["global_race"]
    assert "element 63 of buffer 'x'" in r.findings[0].message
    assert "from another block of the same launch" in r.findings[0].message
    y = x.copy()
    r = launch(blind, "swap_halves", (2, 1, 1), (64, 1, 1), [Buffer(y, "inout", "x")])
    assert r.findings == ()
    assert np.array_equal(y.reshape(2, 64), np.roll(x.reshape(2, 64), -32, axis=1))


def test_one_element_past_an_exactly_sized_buffer_is_out_of_bounds() -> None:
    """Buffers are allocated exactly (here 5 floats = 20 bytes, inside one 256-byte slot): the
    bytes after the end up to the next buffer are a red zone."""
    from verify.ptxsim.memory import GlobalSpace

    gs = GlobalSpace([("a", "in", np.zeros(5, np.float32)), ("b", "in", np.zeros(3, np.float32))])
    a, b = gs.bufs
    k, _ = gs.split(np.array([a.base + 16, a.base + 20, a.base - 4, b.base + 12], np.uint64), 4)
    assert list(k) == [0, -1, -1, -1]
    assert b.base - (a.base + a.size) >= 1 << 16
    assert "past its end" in gs.describe(a.base + 20)


def test_order_dependent_float_atomics_under_a_second_schedule(blind: Module) -> None:
    """A float atomicAdd total whose rounding depends on the order the warps add in: the
    interpreter's own schedule gives 1.0, a second seeded schedule another value."""
    x = np.zeros(1024, np.float32)
    x[[0, 32, 64, 96]] = [1e8, 1.0, -1e8, 1.0]  # one value per warp; 1e8 + 1 rounds to 1e8
    seen = set()
    for seed in (1, 3, 4):
        out = np.zeros(1, np.float32)
        r = launch(blind, "warpsum", (4, 1, 1), (256, 1, 1),
                   [Buffer(x, "in", "x"), Buffer(out, "inout", "out"), Scalar(1024, ".s32")],
                   schedule_seed=seed)
        assert out[0] == 1.0  # the first schedule's result is kept
        seen.update(f.kind for f in r.findings)
        if r.findings:
            msg = r.findings[0].message
            assert "element 0 of output buffer 'out' is 1.0 under the interpreter's schedule" in msg
            assert f"second schedule (seed {seed}" in msg
    assert seen == {"schedule_dependent"}
    # integer atomics commute: no report
    xi = np.arange(300, dtype=np.int32)
    r = launch(blind, "histo", (3, 1, 1), (128, 1, 1),
               [Buffer(xi, "in", "x"), Buffer(np.zeros(64, np.int32), "inout", "out"),
                Scalar(300, ".s32")], schedule_seed=1)
    assert r.findings == ()


def test_local_memory_starts_poisoned() -> None:
    ptx = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 out)
{
    .local .align 4 .b8 frame[16];
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    st.local.u32 [frame], %r1;
    ld.local.u32 %r2, [frame+LOAD];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
    out = np.zeros(32, np.uint32)
    r = launch(load_module(ptx.replace("LOAD", "0")), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(out, "out", "out")])
    assert r.findings == () and list(out) == list(range(32))
    r = launch(load_module(ptx.replace("LOAD", "4")), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(out, "out", "out")])
    assert kinds(r) == ["uninitialised_read"]
    assert "local load of 4 bytes at local address 0x4" in r.findings[0].message
    assert "never stored" in r.findings[0].message


def test_plain_zeroing_races_with_atomics() -> None:
    """Atomics never race with each other, but a plain store of the counter they update does."""
    ptx = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 tot)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [tot];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SKIP;
    st.global.u32 [%rd1], 0;
SKIP:
    BARRIER
    atom.global.add.u32 %r2, [%rd1], 1;
    ret;
}
"""
    tot = np.zeros(1, np.uint32)
    r = launch(load_module(ptx.replace("BARRIER", "bar.sync 0;")), "k", (1, 1, 1), (64, 1, 1),
               [Buffer(tot, "inout", "tot")])
    assert r.findings == () and tot[0] == 64  # one block, ordered by the barrier
    r = launch(load_module(ptx.replace("BARRIER", "")), "k", (1, 1, 1), (64, 1, 1),
               [Buffer(tot, "inout", "tot")])
    assert kinds(r) == ["global_race"]
    msg = r.findings[0].message
    assert "written atomically by thread (block (0, 0, 0), thread (1, 0, 0))" in msg
    assert "written by thread (block (0, 0, 0), thread (0, 0, 0)) at PTX line 13" in msg
    r = launch(load_module(ptx.replace("BARRIER", "bar.sync 0;")), "k", (2, 1, 1), (64, 1, 1),
               [Buffer(tot, "inout", "tot")])
    # both blocks zero the total (a double write) while the other block counts into it
    assert sorted(kinds(r)) == ["double_write", "global_race"]
    race = next(f for f in r.findings if f.kind == "global_race")
    assert "from another block of the same launch" in race.message
