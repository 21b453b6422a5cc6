"""PTX instructions behind common CUDA intrinsics, each checked two ways: hand-written PTX
against values computed in Python from the PTX ISA's definition (edge cases included), and
kernels built by the real nvcc (tests/fixtures/ptxsim_more/intrinsics.cu, -arch=sm_86) run
through the interpreter and compared with numpy: ``shf`` (funnel shifts), ``bfind`` (``__ffs``,
``__clz``), carry chains (``add.cc``/``addc``/``sub.cc``/``subc``/``mad.cc``/``madc``: the f64
``sin``/``cos`` argument reduction), ``sad``, ``match.sync``, SIMD video (``vabsdiff4``),
``nanosleep`` and the timers, block-scoped and multi-name ``.reg`` declarations (``hexp``),
``printf`` (no effect) and ``assert`` (an ``assert_failed`` finding)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from verify.ptxsim import Buffer, Module, Scalar, UnsupportedPtx, launch, load_module
from verify.tools import find_tool

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim_more"
NVCC = find_tool("nvcc", cuda=True)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc: cannot build the kernels' PTX")
M32, M64 = (1 << 32) - 1, (1 << 64) - 1
N = 32  # threads of a hand-written snippet, one value set per thread

# ---------------------------------------------------------------- hand-written PTX

HEAD = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 po32,
                  .param .u64 po64)
{
    .reg .pred %p<4>;
    .reg .b32 %r<4>;
    .reg .b32 %a, %b, %c, %d, %e, %f;
    .reg .b64 %A, %B, %C, %D, %E, %F, %x, %y, %z;
    ld.param.u64 %x, [pa];
    ld.param.u64 %y, [pb];
    ld.param.u64 %z, [pc];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %F, %r0, 8;
    add.s64 %x, %x, %F;
    add.s64 %y, %y, %F;
    add.s64 %z, %z, %F;
    ld.global.u64 %A, [%x];
    ld.global.u64 %B, [%y];
    ld.global.u64 %C, [%z];
    cvt.u32.u64 %a, %A;
    cvt.u32.u64 %b, %B;
    cvt.u32.u64 %c, %C;
    mov.u32 %d, 0;
    mov.u32 %e, 0;
    mov.u32 %f, 0;
    mov.u64 %D, 0;
    mov.u64 %E, 0;
    mov.u64 %F, 0;
"""

TAIL = """
    ld.param.u64 %x, [po32];
    ld.param.u64 %y, [po64];
    mul.wide.u32 %z, %r0, 12;
    add.s64 %x, %x, %z;
    st.global.u32 [%x], %d;
    st.global.u32 [%x+4], %e;
    st.global.u32 [%x+8], %f;
    mul.wide.u32 %z, %r0, 24;
    add.s64 %y, %y, %z;
    st.global.u64 [%y], %D;
    st.global.u64 [%y+8], %E;
    st.global.u64 [%y+16], %F;
    ret;
}
"""


def snippet(body: str, a: list[int], b: list[int] | None = None, c: list[int] | None = None,
            threads: int = N) -> tuple[np.ndarray, np.ndarray, tuple[object, ...]]:
    """Run ``body`` with 64-bit inputs ``%A %B %C`` (their low halves in ``%a %b %c``), one
    per thread; returns the 32-bit results ``%d %e %f`` and 64-bit ``%D %E %F`` per thread
    (shape (threads, 3) each) and the findings."""
    def col(v: list[int] | None) -> np.ndarray:
        v = v if v is not None else [0] * len(a)
        return np.array([x & M64 for x in v], np.uint64)
    n = len(a)
    assert n <= threads
    ins = [np.resize(col(v), threads) for v in (a, b, c)]
    o32, o64 = np.zeros(3 * threads, np.uint32), np.zeros(3 * threads, np.uint64)
    mod = load_module(HEAD + body + TAIL)
    r = launch(mod, "k", (1, 1, 1), (threads, 1, 1),
               [Buffer(ins[0], "in", "a"), Buffer(ins[1], "in", "b"), Buffer(ins[2], "in", "c"),
                Buffer(o32, "out", "o32"), Buffer(o64, "out", "o64")])
    return o32.reshape(-1, 3)[:n], o64.reshape(-1, 3)[:n], r.findings


def ints(col: np.ndarray) -> list[int]:
    return [int(x) for x in col]


def each(f: Callable[..., int], *cols: list[int]) -> list[int]:
    """``f`` applied to the inputs of each thread."""
    return [f(*t) for t in zip(*cols, strict=True)]


EDGE32 = [0, 1, 2, 3, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, M32, 0x12345678,
          0xDEADBEEF, 0x00010000, 0x0000FFFF, 0x40000000, 0xF0F0F0F0, 0x0F0F0F0F]
SHIFTS = [0, 1, 5, 16, 31, 32, 33, 40, 63, 64, 100, M32, 0x80000000, 31 + 64, 7, 8]


def ref_shf(a: int, b: int, c: int, left: bool, clamp: bool) -> int:
    """PTX ISA shf: shift the 64-bit [b:a] by n = clamp ? min(c, 32) : c & 0x1f; .l keeps
    the 32 most significant bits, .r the 32 least significant."""
    n = min(c, 32) if clamp else c & 0x1F
    x = (b << 32) | a
    return ((x << n) >> 32) & M32 if left else (x >> n) & M32


def test_shf_wrap_and_clamp_follow_the_isa() -> None:
    a = EDGE32
    b = [EDGE32[(i * 7 + 3) % 16] for i in range(16)]
    c = SHIFTS
    o32, _, f = snippet("    shf.l.wrap.b32 %d, %a, %b, %c;\n    shf.l.clamp.b32 %e, %a, %b, %c;\n"
                        "    shf.r.wrap.b32 %f, %a, %b, %c;\n", a, b, c)
    assert f == ()
    assert ints(o32[:, 0]) == each(lambda x, y, z: ref_shf(x, y, z, True, False), a, b, c)
    assert ints(o32[:, 1]) == each(lambda x, y, z: ref_shf(x, y, z, True, True), a, b, c)
    assert ints(o32[:, 2]) == each(lambda x, y, z: ref_shf(x, y, z, False, False), a, b, c)
    o32, _, f = snippet("    shf.r.clamp.b32 %d, %a, %b, %c;\n    shf.l.wrap.b32 %e, %a, %b, 40;\n"
                        "    shf.r.clamp.b32 %f, %a, %b, 40;\n", a, b, c)
    assert f == ()
    assert ints(o32[:, 0]) == each(lambda x, y, z: ref_shf(x, y, z, False, True), a, b, c)
    assert ints(o32[:, 1]) == [ref_shf(x, y, 40, True, False) for x, y in zip(a, b, strict=True)]
    assert ints(o32[:, 2]) == [y for y in b]  # clamp: a shift of 40 moves all of b down
    # a rotate: shf.l.wrap with a == b
    o32, _, _ = snippet("    shf.l.wrap.b32 %d, %a, %a, %c;\n", a, a, c)
    assert ints(o32[:, 0]) == [((x << (z & 31)) | (x >> (32 - (z & 31)))) & M32
                               for x, z in zip(a, c, strict=True)]


def ref_bfind(v: int, bits: int, signed: bool, shiftamt: bool) -> int:
    """PTX ISA bfind: the most significant non-sign bit (negative signed inputs inverted),
    0xFFFFFFFF when none; .shiftamt gives msb - position."""
    msb = bits - 1
    v &= (1 << bits) - 1
    if signed and (v >> msb) & 1:
        v = ~v & ((1 << bits) - 1)
    d = v.bit_length() - 1 if v else M32
    return msb - d if shiftamt and d != M32 else d


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_bfind_follows_the_isa(t: str) -> None:
    bits, signed = int(t[1:]), t[0] == "s"
    vals = [*EDGE32, -1, -2, -(1 << 31), 1 << 40, -(1 << 40), (1 << 63), M64, (1 << 63) - 1,
            -3, 5 << 33, 0x00000001_00000000, 12345]
    reg = "%a" if bits == 32 else "%A"
    o32, _, f = snippet(f"    bfind.{t} %d, {reg};\n    bfind.shiftamt.{t} %e, {reg};\n", vals,
                        threads=32)
    assert f == ()
    assert ints(o32[:, 0]) == [ref_bfind(v, bits, signed, False) for v in vals]
    assert ints(o32[:, 1]) == [ref_bfind(v, bits, signed, True) for v in vals]
    assert int(o32[0, 0]) == 0xFFFFFFFF and int(o32[0, 1]) == 0xFFFFFFFF  # bfind of 0
    if t == "s32":
        assert ints(o32[16:18, 0]) == [0xFFFFFFFF, 0]  # -1: no 0 bit; -2: bit 0 is the 0


def test_carry_chain_32_bit_add_sub() -> None:
    a = [M32, M32, 0, 1, 0x80000000, 5, 0, M32, *EDGE32[:8]]
    b = [1, M32, 0, M32, 0x80000000, 7, 1, 0, *EDGE32[8:]]
    # add.cc then addc materialising the carry; sub.cc then the borrow; a chain of .cc
    o32, o64, f = snippet("    add.cc.u32 %d, %a, %b;\n    addc.u32 %e, 0, 0;\n"
                        "    sub.cc.s32 %f, %a, %b;\n    addc.u32 %r1, 0, 0;\n"
                        "    mov.b64 %D, {%f, %r1};\n", a, b)
    assert f == ()
    assert ints(o32[:, 0]) == [(x + y) & M32 for x, y in zip(a, b, strict=True)]
    assert ints(o32[:, 1]) == each(lambda x, y: (x + y) >> 32, a, b)  # 0xFFFFFFFF + 1 carries
    assert ints(o32[:, 2]) == [(x - y) & M32 for x, y in zip(a, b, strict=True)]
    assert ints(o64[:, 0] >> np.uint64(32)) == each(lambda x, y: int(x < y), a, b)  # borrow
    # 64-bit add and subtract from 32-bit halves: [b:a] + [c:a] and [b:a] - [c:a] (hi, lo)
    c = [M32, 0, 1, M32, 3, 0, M32, 1] * 2
    o32, o64, f = snippet("    add.cc.u32 %d, %a, %a;\n    addc.cc.u32 %e, %b, %c;\n"
                          "    addc.u32 %f, 0, 0;\n"
                          "    sub.cc.u32 %r1, %a, %c;\n    subc.cc.u32 %r2, %b, %a;\n"
                          "    subc.u32 %r3, 0, 0;\n    mov.b64 %D, {%r1, %r2};\n"
                          "    cvt.u64.u32 %E, %r3;\n", a, b, c)
    assert f == ()
    for i in range(len(a)):
        s = ((b[i] << 32) | a[i]) + ((c[i] << 32) | a[i])
        assert (int(o32[i, 0]), int(o32[i, 1]), int(o32[i, 2])) == (s & M32, (s >> 32) & M32,
                                                                      s >> 64)
        x = ((b[i] << 32) | a[i]) - ((a[i] << 32) | c[i])
        assert int(o64[i, 0]) == x & M64
        assert int(o64[i, 1]) == (M32 if x < 0 else 0)  # 0 - (0 + borrow)


def test_carry_chain_64_bit_and_signed() -> None:
    a = [M64, M64, 0, 1 << 63, 12345, -1, -5, 1 << 40] * 2
    b = [1, M64, 0, 1 << 63, 54321, 1, 7, -(1 << 40)] * 2
    o32, o64, f = snippet("    add.cc.s64 %D, %A, %B;\n    addc.cc.u64 %E, %A, %B;\n"
                          "    addc.u32 %d, 0, 0;\n"
                          "    sub.cc.u64 %F, %A, %B;\n    subc.s32 %e, 0, 0;\n", a, b)
    assert f == ()
    for i in range(len(a)):
        x, y = a[i] & M64, b[i] & M64
        assert int(o64[i, 0]) == (x + y) & M64
        c1 = (x + y) >> 64
        assert int(o64[i, 1]) == (x + y + c1) & M64
        assert int(o32[i, 0]) == (x + y + c1) >> 64
        assert int(o64[i, 2]) == (x - y) & M64
        assert int(o32[i, 1]) == (M32 if x < y else 0)


def test_mad_cc_and_madc_give_wide_products() -> None:
    a = EDGE32
    b = [EDGE32[(i * 5 + 1) % 16] for i in range(16)]
    c = [EDGE32[(i * 3 + 2) % 16] for i in range(16)]
    # [e:d] = a*b + c (fits 64 bits); then d2 = hi(a*b) + c (cc), e2 = lo(a*b) + c + CF (cc)
    o32, o64, f = snippet("    mad.lo.cc.u32 %d, %a, %b, %c;\n    madc.hi.u32 %e, %a, %b, 0;\n"
                          "    mad.hi.cc.u32 %r1, %a, %b, %c;\n"
                          "    madc.lo.cc.u32 %r2, %a, %b, %c;\n    addc.u32 %f, 0, 0;\n"
                          "    mov.b64 %D, {%r1, %r2};\n"
                          "    mad.hi.cc.s32 %r1, %a, %b, %c;\n"
                          "    madc.hi.cc.s32 %r2, %a, %b, %c;\n"
                          "    addc.u32 %r3, 0, 0;\n    mov.b64 %E, {%r1, %r2};\n"
                          "    cvt.u64.u32 %F, %r3;\n", a, b, c)
    assert f == ()
    for i in range(16):
        x, y, z = a[i], b[i], c[i]
        p = x * y
        assert (int(o32[i, 1]) << 32) | int(o32[i, 0]) == p + z
        d2 = (p >> 32) + z
        e2 = (p & M32) + z + (d2 >> 32)
        assert int(o64[i, 0]) == ((e2 & M32) << 32) | (d2 & M32)
        assert int(o32[i, 2]) == e2 >> 32
        sx, sy = x - (x >> 31 << 32), y - (y >> 31 << 32)
        hs = ((sx * sy) >> 32) & M32  # the signed high half, as bits
        d3 = hs + z
        e3 = hs + z + (d3 >> 32)
        assert int(o64[i, 1]) == ((e3 & M32) << 32) | (d3 & M32)
        assert int(o64[i, 2]) == e3 >> 32


def test_madc_64_bit_gives_the_128_bit_product() -> None:
    a = [M64, 1 << 63, 0x1234_5678_9ABC_DEF0, 3, 0, M64, 1 << 32, 0xFFFF_0000_FFFF_0000]
    b = [M64, 2, 0x0FED_CBA9_8765_4321, 5, M64, 1, 1 << 32, 0x0000_FFFF_0000_FFFF]
    c = [M64, 1, 7, 0, M64, M64, 0, 1 << 63]
    _, o64, f = snippet("    mad.lo.cc.u64 %D, %A, %B, %C;\n    madc.hi.u64 %E, %A, %B, 0;\n",
                        a, b, c)
    assert f == ()
    for i in range(len(a)):
        s = a[i] * b[i] + c[i]
        assert (int(o64[i, 1]) << 64) | int(o64[i, 0]) == s


def test_carry_read_before_any_cc_is_an_undefined_register() -> None:
    _, _, f = snippet("    addc.u32 %d, %a, %b;\n", [1, 2], [3, 4])
    assert [x.kind for x in f] == ["undefined_register"]
    assert "CC.CF" in f[0].message


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64", "u16", "s16"])
def test_sad_follows_the_isa(t: str) -> None:
    bits, signed = int(t[1:]), t[0] == "s"
    mask = (1 << bits) - 1

    def sv(v: int) -> int:
        v &= mask
        return v - (1 << bits) if signed and v >> (bits - 1) else v
    a = [0, 1, 0x7FFFFFFF, 0x80000000, M32, 5, 1 << 63, M64, 0x7FFF, 0x8000, 3, 100]
    b = [1, 0, 0x80000000, 0x7FFFFFFF, 0, 9, (1 << 63) - 1, 0, 0x8000, 0x7FFF, 3, 7]
    c = [0, 10, 0, 1, M32, 2, 5, 1, 0, 9, 4, M64]
    r = {32: ("%a", "%b", "%c", "%d"), 64: ("%A", "%B", "%C", "%D")}
    if bits == 16:
        body = (f"    cvt.u16.u32 %rs1, %a;\n    cvt.u16.u32 %rs2, %b;\n    cvt.u16.u32 %rs3, %c;\n"
                f"    sad.{t} %rs4, %rs1, %rs2, %rs3;\n    cvt.u32.u16 %d, %rs4;\n")
        body = "    .reg .b16 %rs<5>;\n" + body
    else:
        x, y, z, d = r[bits]
        body = f"    sad.{t} {d}, {x}, {y}, {z};\n"
    o32, o64, f = snippet(body, a, b, c)
    assert f == ()
    got = ints(o64[:, 0]) if bits == 64 else ints(o32[:, 0])
    want = [(c[i] + abs(sv(a[i]) - sv(b[i]))) & mask for i in range(len(a))]
    assert got == want


def test_match_any_and_all_per_member_mask_and_exited_lanes() -> None:
    keys = [i % 3 for i in range(16)] + [7] * 16  # half-warps: mixed keys, then all equal
    masks = [0x0000FFFF] * 16 + [0xFFFF0000] * 16
    body = ("    match.any.sync.b32 %d, %a, %c;\n    match.all.sync.b32 %e|%p1, %a, %c;\n"
            "    selp.u32 %f, 1, 0, %p1;\n"
            "    match.any.sync.b64 %r1, %A, %c;\n    cvt.u64.u32 %D, %r1;\n"
            "    match.all.sync.b64 %r2, %A, %c;\n    cvt.u64.u32 %E, %r2;\n")
    o32, o64, f = snippet(body, keys, None, masks)
    assert f == ()
    for i in range(32):
        mem = [j for j in range(32) if masks[i] >> j & 1]
        same = sum(1 << j for j in mem if keys[j] == keys[i])
        agree = all(keys[j] == keys[i] for j in mem)
        assert int(o32[i, 0]) == same == int(o64[i, 0])
        assert int(o32[i, 1]) == (masks[i] if agree else 0) == int(o64[i, 1])
        assert int(o32[i, 2]) == int(agree)
    # .b64 compares all 64 bits: keys equal in the low half only differ
    k64 = [(i % 2) << 40 for i in range(32)]
    o32, o64, f = snippet(body, k64, None, [M32] * 32)
    assert f == ()
    assert ints(o64[:, 0]) == [0x55555555 << (i % 2) for i in range(32)]
    assert ints(o32[:, 0]) == [M32] * 32  # .b32 sees only the low halves (all 0)
    # lanes 24..31 do not exist (a block of 24 threads): the full mask matches the 24 lanes
    o32, _, f = snippet(body, [5] * 24, None, [M32] * 24, threads=24)
    assert f == ()
    assert ints(o32[:, 0]) == [0x00FFFFFF] * 24 and ints(o32[:, 1]) == [0x00FFFFFF] * 24


def ref_vop4(op: str, a: int, b: int, c: int, signed: bool, sat: bool = False,
             add: bool = False) -> int:
    """PTX ISA vop4 with the default selectors (bytes of a against bytes of b) and mask."""
    def ext(v: int, i: int) -> int:
        x = (v >> (8 * i)) & 0xFF
        return x - 256 if signed and x >= 128 else x
    out = c if add else 0
    for i in range(4):
        x, y = ext(a, i), ext(b, i)
        t = {"vabsdiff4": abs(x - y), "vadd4": x + y, "vsub4": x - y, "vmin4": min(x, y),
             "vmax4": max(x, y),
             "vavrg4": (x + y + 1) >> 1 if x + y >= 0 else (x + y) >> 1}[op]
        if sat:
            t = max(-128, min(127, t)) if signed else max(0, min(255, t))
        out = out + t if add else out | ((t & 0xFF) << (8 * i))
    return out & M32


@pytest.mark.parametrize("op", ["vabsdiff4", "vadd4", "vsub4", "vavrg4", "vmin4", "vmax4"])
def test_simd_video_vop4(op: str) -> None:
    a = EDGE32
    b = [EDGE32[(i * 7 + 5) % 16] for i in range(16)]
    c = [EDGE32[(i * 3 + 1) % 16] for i in range(16)]
    o32, _, f = snippet(f"    {op}.u32.u32.u32 %d, %a, %b, %c;\n"
                        f"    {op}.s32.s32.s32.sat %e, %a, %b, %c;\n"
                        f"    {op}.u32.u32.u32.add %f, %a, %b, %c;\n", a, b, c)
    assert f == ()
    assert ints(o32[:, 0]) == each(lambda x, y, z: ref_vop4(op, x, y, z, False), a, b, c)
    assert ints(o32[:, 1]) == each(lambda x, y, z: ref_vop4(op, x, y, z, True, sat=True), a, b, c)
    assert ints(o32[:, 2]) == each(lambda x, y, z: ref_vop4(op, x, y, z, False, add=True), a, b, c)


def test_nanosleep_and_timers_count_forward() -> None:
    body = ("    mov.u64 %D, %clock64;\n    mov.u32 %d, %clock;\n    nanosleep.u32 %a;\n"
            "    nanosleep.u32 100;\n    mov.u64 %E, %clock64;\n    mov.u32 %e, %clock;\n"
            "    mov.u64 %F, %globaltimer;\n    mov.u64 %x, %globaltimer;\n"
            "    sub.s64 %F, %x, %F;\n")
    o32, o64, f = snippet(body, list(range(N)))
    assert f == ()
    assert (o64[:, 1] > o64[:, 0]).all() and (o32[:, 1] > o32[:, 0]).all()
    assert (o64[:, 2] > 0).all()
    again = snippet(body, list(range(N)))
    assert np.array_equal(again[1], o64)  # deterministic


def test_reg_declarations_list_names_and_blocks_shadow() -> None:
    # cuda_fp16.h writes ".reg.b16 h, r;" (no space, no '%'); an inner block redeclaring %r1
    # gets its own register, and the outer %r1 keeps its value after the block
    body = ("    mov.u32 %r1, 11;\n"
            "    {\n    .reg.b16 h, r;\n    .reg .b32 %r1, q;\n    mov.b16 h, 0x3C00;\n"
            "    mov.u32 %r1, 99;\n    mov.u32 q, 5;\n    cvt.u32.u16 %d, h;\n"
            "    add.u32 %d, %d, %r1;\n    add.u32 %d, %d, q;\n    }\n"
            "    {\n    .reg .b16 h;\n    mov.b16 h, 2;\n    cvt.u32.u16 %f, h;\n    }\n"
            "    mov.u32 %e, %r1;\n")
    o32, _, f = snippet(body, [0])
    assert f == ()
    assert ints(o32[0]) == [0x3C00 + 99 + 5, 11, 2]


def test_extern_calls_other_than_printf_and_assert_are_refused() -> None:
    ptx = (HEAD.split(".visible")[0] + ".extern .func (.param .b64 r) malloc (.param .b64 n);\n"
           ".visible .entry k(.param .u64 o)\n{\n    .reg .b64 %rd<3>;\n    {\n"
           "    .param .b64 param0;\n    st.param.b64 [param0+0], 8;\n"
           "    .param .b64 retval0;\n    call.uni (retval0), malloc, (param0);\n"
           "    ld.param.b64 %rd1, [retval0+0];\n    }\n    ret;\n}\n")
    with pytest.raises(UnsupportedPtx, match="malloc"):
        launch(load_module(ptx), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(np.zeros(1, np.uint64), "inout", "o")])


# ---------------------------------------------------------------- kernels built by nvcc


@pytest.fixture(scope="module")
def intr(tmp_path_factory: pytest.TempPathFactory) -> Module:
    if NVCC is None:
        pytest.skip("no nvcc: cannot build the kernels' PTX")
    out = tmp_path_factory.mktemp("ptxsim_more") / "intrinsics.ptx"
    subprocess.run([NVCC, "-arch=sm_86", "-ptx", "-o", str(out), str(FIX / "intrinsics.cu")],
                   check=True, capture_output=True, timeout=300)
    return load_module(out.read_bytes())


def grid(n: int, block: int = 128) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    return ((n + block - 1) // block, 1, 1), (block, 1, 1)


@needs_nvcc
def test_nvcc_bit_intrinsics(intr: Module) -> None:
    rng = np.random.default_rng(5)
    n = 200
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n).astype(
        np.uint64)
    s = rng.integers(0, 80, n).astype(np.uint32)
    a[:6] = [0, 1, 0x80000000, M32, 0x7FFFFFFF, 0x00010000]
    b[:6] = [0, 1 << 63, M64, 1, 1 << 32, 0]
    s[:6] = [0, 32, 33, 31, 64, 1]
    out = np.zeros(12 * n, np.uint32)
    r = launch(intr, "bits", *grid(n), [Buffer(a, "in", "a"), Buffer(b, "in", "b"),
                                        Buffer(s, "in", "s"), Buffer(out, "out", "out"),
                                        Scalar(n, ".s32")])
    assert r.findings == ()
    o = out.reshape(n, 12)
    for i in range(n):
        x, z, k = int(a[i]), int(b[i]), int(s[i])
        y = z & M32
        sx, sy = x - (x >> 31 << 32), y - (y >> 31 << 32)
        want = [(x & -x).bit_length(), (z & -z).bit_length(), 32 - x.bit_length(),
                64 - z.bit_length(), bin(x).count("1"), int(f"{x:032b}"[::-1], 2),
                ref_shf(x, y, k, True, False), ref_shf(x, y, k, False, False),
                ref_shf(x, y, k, True, True), ref_shf(x, y, k, False, True),
                (abs(sx - sy) + k) & M32, (abs(x - y) + k) & M32]
        assert ints(o[i]) == want, i


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    g, w = got.view(np.int64), want.view(np.int64)
    return np.abs(np.where(g < 0, -(g & 0x7FFF_FFFF_FFFF_FFFF), g)
                  - np.where(w < 0, -(w & 0x7FFF_FFFF_FFFF_FFFF), w))


@needs_nvcc
def test_nvcc_double_sin_cos_tan_within_two_ulp(intr: Module) -> None:
    """nvcc's f64 sin/cos/tan: the fast path, and the Payne-Hanek slow path (|x| >= 2^31ish)
    whose 64 x 64-bit products are carry chains in inline asm with block-scoped registers."""
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.uniform(-10, 10, 120), rng.uniform(-1e6, 1e6, 40),
                        10.0 ** rng.uniform(8, 300, 60) * rng.choice([-1, 1], 60),
                        [0.0, -0.0, np.pi / 2, np.pi, 1e22, 2.0 ** 1000, 5e-324, 1e-300,
                         np.finfo(np.float64).max, 6381956970095103.0 * 2.0 ** 797]])
    n = x.size
    s, c, t = np.zeros(n), np.zeros(n), np.zeros(n)
    r = launch(intr, "trig", *grid(n), [Buffer(x, "in", "x"), Buffer(s, "out", "s"),
                                        Buffer(c, "out", "c"), Buffer(t, "out", "t"),
                                        Scalar(n, ".s32")])
    assert r.findings == ()
    want_c = np.cos(x)
    # the hardest argument reduction of all doubles (x is within 2^-61 of a multiple of pi/2):
    # the correctly rounded cos (mpmath at 3000 bits); numpy's own cos is 8 ulp off there
    assert x[-1] == 5.319372648326541e255
    want_c[-1] = -4.687165924254628e-19
    assert c[-1] == want_c[-1] and c[-6] == 0.523214785395139  # cos(1e22), a classic check
    assert ulps(s, np.sin(x)).max() <= 2
    assert ulps(c, want_c).max() <= 2
    # tan within 2 ulp everywhere but the hardest argument reduction (the last x), where the
    # interpreter is 14 ulp from glibc's and numpy's tan on this machine: an open defect,
    # pinned by the strict xfail below so that it cannot pass or worsen unseen
    assert ulps(t[:-1], np.tan(x[:-1])).max() <= 2
    assert ulps(t[-1:], np.tan(x[-1:])).max() <= 16


@needs_nvcc
@pytest.mark.xfail(strict=True, reason="open defect: tan.f64 (nvcc's libdevice in the "
                   "interpreter) is 14 ulp off at the hardest argument reduction of all doubles "
                   "(x = 6381956970095103 * 2^797); sin and cos there are within 2 ulp")
def test_nvcc_double_tan_at_the_hardest_argument_within_two_ulp(intr: Module) -> None:
    x = np.array([6381956970095103.0 * 2.0 ** 797])
    s, c, t = np.zeros(1), np.zeros(1), np.zeros(1)
    r = launch(intr, "trig", *grid(1), [Buffer(x, "in", "x"), Buffer(s, "out", "s"),
                                        Buffer(c, "out", "c"), Buffer(t, "out", "t"),
                                        Scalar(1, ".s32")])
    assert r.findings == ()
    assert ulps(t, np.tan(x)).max() <= 2


@needs_nvcc
def test_nvcc_64_bit_multiply_high(intr: Module) -> None:
    rng = np.random.default_rng(9)
    n = 100
    a = rng.integers(0, 2**64, n, dtype=np.uint64)
    b = rng.integers(0, 2**64, n, dtype=np.uint64)
    a[:4], b[:4] = [M64, 1 << 63, 0, M64], [M64, 1 << 63, 5, 1]
    hi, shi = np.zeros(n, np.uint64), np.zeros(n, np.int64)
    r = launch(intr, "mulhi", *grid(n), [Buffer(a, "in", "a"), Buffer(b, "in", "b"),
                                         Buffer(hi, "out", "hi"), Buffer(shi, "out", "shi"),
                                         Scalar(n, ".s32")])
    assert r.findings == ()
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        assert int(hi[i]) == (x * y) >> 64
        sx, sy = x - (x >> 63 << 64), y - (y >> 63 << 64)
        assert int(shi[i]) == (sx * sy) >> 64


@needs_nvcc
def test_nvcc_match_sync(intr: Module) -> None:
    n = 56  # the second warp has 24 lanes
    key = (np.arange(n) % 5).astype(np.int32)
    key[32:] = 3
    key64 = (np.arange(n, dtype=np.int64) % 2) << 33
    outs = [np.zeros(n, np.uint32), np.zeros(n, np.uint32), np.zeros(n, np.int32),
            np.zeros(n, np.uint32)]
    r = launch(intr, "matching", (1, 1, 1), (n, 1, 1),
               [Buffer(key, "in", "key"), Buffer(key64, "in", "key64"),
                *(Buffer(o, "out", nm)
                  for o, nm in zip(outs, ("any", "all", "agree", "any64"), strict=True))])
    assert r.findings == ()
    for i in range(n):
        w = range(i // 32 * 32, min(n, i // 32 * 32 + 32))
        full = sum(1 << (j & 31) for j in w)
        same = sum(1 << (j & 31) for j in w if key[j] == key[i])
        agree = all(key[j] == key[i] for j in w)
        assert int(outs[0][i]) == same
        assert (int(outs[1][i]), int(outs[2][i])) == ((full, 1) if agree else (0, 0))
        assert int(outs[3][i]) == sum(1 << (j & 31) for j in w if key64[j] == key64[i])


@needs_nvcc
def test_nvcc_timers_and_nanosleep(intr: Module) -> None:
    n = 40
    dt, gt = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    r = launch(intr, "timers", (1, 1, 1), (64, 1, 1),
               [Buffer(dt, "out", "dt"), Buffer(gt, "out", "gt"), Scalar(n, ".s32")])
    assert r.findings == ()
    assert (dt > 0).all() and (gt > 0).all()


@needs_nvcc
def test_nvcc_simd_video(intr: Module) -> None:
    rng = np.random.default_rng(10)
    n = 150
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(3 * n, np.uint32)
    r = launch(intr, "simd", *grid(n), [Buffer(a, "in", "a"), Buffer(b, "in", "b"),
                                        Buffer(out, "out", "out"), Scalar(n, ".s32")])
    assert r.findings == ()
    ua, ub = a.view(np.uint8).reshape(n, 4).astype(np.int64), b.view(np.uint8).reshape(
        n, 4).astype(np.int64)
    sa, sb = a.view(np.int8).reshape(n, 4).astype(np.int64), b.view(np.int8).reshape(
        n, 4).astype(np.int64)
    pack = np.array([1, 1 << 8, 1 << 16, 1 << 24], np.int64)
    o = out.reshape(n, 3)
    assert np.array_equal(o[:, 0], (np.abs(ua - ub) * pack).sum(axis=1).astype(np.uint32))
    assert np.array_equal(o[:, 1], ((np.abs(sa - sb) & 0xFF) * pack).sum(axis=1).astype(
        np.uint32))
    assert np.array_equal(o[:, 2], np.abs(ua - ub).sum(axis=1).astype(np.uint32))


@needs_nvcc
def test_nvcc_hexp_inline_asm(intr: Module) -> None:
    x = np.linspace(-8, 8, 97).astype(np.float32)
    y = np.zeros_like(x)
    r = launch(intr, "half_exp", *grid(x.size), [Buffer(x, "in", "x"), Buffer(y, "out", "y"),
                                                 Scalar(x.size, ".s32")])
    assert r.findings == ()
    want = np.exp(x.astype(np.float16).astype(np.float64)).astype(np.float16)
    gap = np.abs(y.astype(np.float16).view(np.int16).astype(np.int64)
                 - want.view(np.int16).astype(np.int64))
    assert gap.max() <= 1  # hexp is within 1 f16 ulp of exp


@needs_nvcc
def test_nvcc_printf_has_no_effect(intr: Module) -> None:
    x = np.linspace(-3, 3, 77).astype(np.float32)
    y = np.zeros_like(x)
    r = launch(intr, "twice_printf", *grid(x.size), [Buffer(x, "in", "x"),
                                                     Buffer(y, "out", "y"),
                                                     Scalar(x.size, ".s32")])
    assert r.findings == ()
    assert np.array_equal(y, 2 * x)


@needs_nvcc
def test_nvcc_failed_assert_is_a_finding(intr: Module) -> None:
    x = np.linspace(0, 9, 70).astype(np.float32)
    y = np.zeros_like(x)
    args = [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(x.size, ".s32")]
    r = launch(intr, "checked_sqrt", *grid(x.size), args)
    assert r.findings == () and np.array_equal(y, np.sqrt(x))
    x[[40, 41, 66]] = -1.0
    r = launch(intr, "checked_sqrt", *grid(x.size), args)
    assert [f.kind for f in r.findings] == ["assert_failed"]
    f = r.findings[0]
    assert f.thread == (40, 0, 0) and f.line is not None
    src = (FIX / "intrinsics.cu").read_text().splitlines()
    line = next(i + 1 for i, s in enumerate(src) if "assert(x[i] >= 0.0f)" in s)
    assert f"intrinsics.cu:{line}" in f.message and "x[i] >= 0.0f" in f.message
    assert "2 other thread(s)" in f.message
