"""``dp4a`` / ``dp2a`` (every signedness form) and the predefined constant ``WARP_SZ`` (issue 32):
hand-written PTX checked against the PTX ISA's definition computed in Python, and int8 dot
kernels built by the real nvcc (tests/fixtures/ptxsim_int8/int8_dot.cu, -arch=sm_86: the
intrinsics and a plain C loop, which nvcc turns into ``dp4a.s32.s32``) compared with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.nvcc import build_ptx
from verify.ptxsim import Buffer, Module, Scalar, launch, load_module

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim_int8"
M32 = (1 << 32) - 1
EDGE = [0, 1, 0x7F7F7F7F, 0x80808080, 0xFFFFFFFF, 0x01FF80FE, 0x12345678, 0xDEADBEEF,
        0x00010000, 0x0000FFFF, 0x80000000, 0x7FFFFFFF, 0xF0F0F0F0, 0x0F0F0F0F, 0x807F01FF, 3]


def field(x: int, width: int, k: int, signed: bool) -> int:
    f = (x >> (width * k)) & ((1 << width) - 1)
    return f - (1 << width) if signed and f >> (width - 1) else f


def ref(op: str, x: int, y: int, c: int, sa: bool, sb: bool) -> int:
    """PTX ISA: dp4a d = c + sum_k a.byte[k] * b.byte[k]; dp2a d = c + a.half[0] * b.byte[j]
    + a.half[1] * b.byte[j + 1], j = 0 (.lo) or 2 (.hi); fields sign-extended for .s32."""
    if op == "dp4a":
        s = sum(field(x, 8, k, sa) * field(y, 8, k, sb) for k in range(4))
    else:
        j = 2 if op == "hi" else 0
        s = sum(field(x, 16, k, sa) * field(y, 8, j + k, sb) for k in range(2))
    return (c + s) & M32


PTX = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 po)
{
    .reg .b32 %r<20>;
    .reg .b64 %x<8>;
    ld.param.u64 %x1, [pa];
    ld.param.u64 %x2, [pb];
    ld.param.u64 %x3, [pc];
    ld.param.u64 %x4, [po];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %x5, %r0, 4;
    add.s64 %x1, %x1, %x5;
    add.s64 %x2, %x2, %x5;
    add.s64 %x3, %x3, %x5;
    ld.global.u32 %r1, [%x1];
    ld.global.u32 %r2, [%x2];
    ld.global.u32 %r3, [%x3];
    mul.wide.u32 %x5, %r0, 44;
    add.s64 %x4, %x4, %x5;
    dp4a.u32.u32 %r4, %r1, %r2, %r3;
    dp4a.s32.s32 %r5, %r1, %r2, %r3;
    dp4a.u32.s32 %r6, %r1, %r2, %r3;
    dp4a.s32.u32 %r7, %r1, %r2, %r3;
    dp2a.lo.u32.u32 %r8, %r1, %r2, %r3;
    dp2a.hi.u32.u32 %r9, %r1, %r2, %r3;
    dp2a.lo.s32.s32 %r10, %r1, %r2, %r3;
    dp2a.hi.s32.s32 %r11, %r1, %r2, %r3;
    dp2a.lo.s32.u32 %r12, %r1, %r2, %r3;
    dp2a.hi.u32.s32 %r13, %r1, %r2, %r3;
    mov.u32 %r14, WARP_SZ;
    st.global.u32 [%x4], %r4;
    st.global.u32 [%x4+4], %r5;
    st.global.u32 [%x4+8], %r6;
    st.global.u32 [%x4+12], %r7;
    st.global.u32 [%x4+16], %r8;
    st.global.u32 [%x4+20], %r9;
    st.global.u32 [%x4+24], %r10;
    st.global.u32 [%x4+28], %r11;
    st.global.u32 [%x4+32], %r12;
    st.global.u32 [%x4+36], %r13;
    st.global.u32 [%x4+40], %r14;
    ret;
}
"""

FORMS = [("dp4a", False, False), ("dp4a", True, True), ("dp4a", False, True), ("dp4a", True, False),
         ("lo", False, False), ("hi", False, False), ("lo", True, True), ("hi", True, True),
         ("lo", True, False), ("hi", False, True)]


def test_every_signedness_form_follows_the_isa() -> None:
    rng = np.random.default_rng(3)
    n = 64
    a = np.concatenate([np.array(EDGE, np.uint32),
                        rng.integers(0, 2**32, n - 16).astype(np.uint32)])
    b = np.concatenate([np.array(EDGE[::-1], np.uint32),
                        rng.integers(0, 2**32, n - 16).astype(np.uint32)])
    c = np.concatenate([np.array([0, M32, 0x80000000, 5] * 4, np.uint32),
                        rng.integers(0, 2**32, n - 16).astype(np.uint32)])
    out = np.zeros(11 * n, np.uint32)
    r = launch(load_module(PTX), "k", (1, 1, 1), (n, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "in", "c"),
                Buffer(out, "out", "o")])
    assert r.findings == ()
    o = out.reshape(n, 11)
    for i in range(n):
        x, y, z = int(a[i]), int(b[i]), int(c[i])
        want = [ref(op, x, y, z, sa, sb) for op, sa, sb in FORMS] + [32]
        assert [int(v) for v in o[i]] == want, (i, hex(x), hex(y), hex(z))


def test_known_values() -> None:
    """Worked by hand: bytes (-1, -128, 127, 1) . (1, 1, 1, 1) = -1 signed, 511 unsigned."""
    from verify.ptxsim.ops_intx import dot_value
    x = np.array([0x017F80FF], np.uint32)
    y = np.array([0x01010101], np.uint32)
    assert int(dot_value("dp4a", "", True, True, x, y, 0)[0]) == (-1) & M32
    assert int(dot_value("dp4a", "", False, False, x, y, 0)[0]) == 0xFF + 0x80 + 0x7F + 1
    # dp2a.hi: halves 0x80FF (-32513 signed) and 0x017F (383) times bytes 2, 3 of y (1, 1)
    assert int(dot_value("dp2a", "hi", True, True, x, y, 10)[0]) == (10 - 32513 + 383) & M32


@pytest.fixture(scope="module")
def int8_module(tmp_path_factory: pytest.TempPathFactory) -> Module:
    text = build_ptx(FIX / "int8_dot.cu", tmp_path_factory.mktemp("int8")).decode()
    assert "dp4a.s32.s32" in text and "dp2a.hi.s32.s32" in text and "WARP_SZ" in text
    return load_module(text)


def test_nvcc_int8_dot_loop(int8_module: Module) -> None:
    rng = np.random.default_rng(11)
    n = 300
    a = rng.integers(-128, 128, 4 * n).astype(np.int8)
    b = rng.integers(-128, 128, 4 * n).astype(np.int8)
    a[:4], b[:4] = [-128, -128, 127, -1], [-128, 127, -128, -1]
    out = np.zeros(n, np.int32)
    r = launch(int8_module, "dot_loop", (3, 1, 1), (128, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(out, "out", "out"),
                Scalar(n, ".s32")])
    assert r.findings == ()
    want = (a.astype(np.int64).reshape(n, 4) * b.astype(np.int64).reshape(n, 4)).sum(axis=1)
    assert (out == want).all()


def test_nvcc_int8_intrinsics_and_warp_size(int8_module: Module) -> None:
    rng = np.random.default_rng(12)
    n = 100
    a = np.concatenate([np.array(EDGE, np.uint32),
                        rng.integers(0, 2**32, n - 16).astype(np.uint32)])
    b = rng.integers(0, 2**32, n).astype(np.uint32)
    out = np.zeros(6 * n, np.uint32)
    r = launch(int8_module, "dot_intrinsics", (1, 1, 1), (128, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(out, "out", "out"),
                Scalar(n, ".s32")])
    assert r.findings == ()
    o = out.reshape(n, 6)
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        want = [ref("dp4a", x, y, 5, False, False), ref("dp4a", x, y, (-7) & M32, True, True),
                ref("lo", x, y, 1, False, False), ref("hi", x, y, 1, True, True),
                ref("lo", x, y, 0, True, True), 32 + i % 32]
        assert [int(v) for v in o[i]] == want, i


LANEMASKS = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 po)
{
    .reg .b32 %r<8>;
    .reg .b64 %x<4>;
    ld.param.u64 %x1, [po];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %lanemask_lt;
    mov.u32 %r2, %lanemask_le;
    mov.u32 %r3, %lanemask_gt;
    mov.u32 %r4, %lanemask_ge;
    mov.u32 %r5, WARP_SZ;
    mul.wide.u32 %x2, %r0, 32;
    add.s64 %x1, %x1, %x2;
    st.global.v4.u32 [%x1], {%r1, %r2, %r3, %r4};
    st.global.u32 [%x1+16], %r5;
    ret;
}
"""


def test_lane_masks_and_warp_size() -> None:
    """%lanemask_lt/le/gt/ge (cub's and cooperative groups' lane masks) as the PTX ISA defines
    them, and WARP_SZ, for every lane of two warps."""
    out = np.zeros(8 * 64, np.uint32)
    r = launch(load_module(LANEMASKS), "k", (1, 1, 1), (64, 1, 1), [Buffer(out, "inout", "o")])
    assert r.findings == ()
    o = out.reshape(64, 8)[:, :5]
    for t in range(64):
        lane = t % 32
        lt, le = (1 << lane) - 1, (1 << (lane + 1)) - 1
        assert [int(v) for v in o[t]] == [lt, le, M32 ^ le, M32 ^ lt, 32], t
