"""PTX interpreter: instruction semantics on hand-written PTX, checked against exact references
(SPEC 8, issue 4): fma rounding, cvt rounding modes and saturation, unordered compares, integer
corner cases, bit operations, vector and local memory, and the refusal of what is not modelled."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from verify.ptxsim import Buffer, PtxSyntaxError, UnsupportedPtx, launch, load_module

HEAD = """.version 9.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pout)
{
    .reg .pred %p<4>;
    .reg .b16 %h<4>;
    .reg .b32 %r<16>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<16>;
    .reg .f64 %fd<4>;
    .local .align 16 .b8 depot[32];
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pc];
    ld.param.u64 %rd4, [pout];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd5, %r4, 4;
    add.s64 %rd6, %rd1, %rd5;
    add.s64 %rd7, %rd2, %rd5;
    add.s64 %rd8, %rd3, %rd5;
    add.s64 %rd9, %rd4, %rd5;
    ld.global.b32 %r5, [%rd6];
    ld.global.b32 %r6, [%rd7];
    ld.global.b32 %r7, [%rd8];
    mov.b32 %f1, %r5;
    mov.b32 %f2, %r6;
    mov.b32 %f3, %r7;
"""
TAIL = """    st.global.b32 [%rd9], %r8;
    ret;
}
"""


def run(body: str, a: np.ndarray, b: np.ndarray | None = None,
        c: np.ndarray | None = None, allow: tuple[str, ...] = ()) -> np.ndarray:
    """``body`` on 32 threads a warp over ``a``, ``b``, ``c``; no finding but the ``allow``ed
    kinds (a division by zero, which the tests of its value do on purpose)."""
    n = a.size
    pad = (-n) % 32
    bufs = [np.ascontiguousarray(np.concatenate([x.view(np.uint32), np.zeros(pad, np.uint32)]))
            for x in (a, a if b is None else b, a if c is None else c)]
    out = np.zeros(n + pad, np.uint32)
    r = launch(load_module(HEAD + body + TAIL), "k", ((n + pad) // 32, 1, 1), (32, 1, 1),
               [Buffer(bufs[0], "in", "a"), Buffer(bufs[1], "in", "b"),
                Buffer(bufs[2], "in", "c"), Buffer(out, "out", "out")])
    assert [f for f in r.findings if f.kind not in allow] == []
    return out[:n]


def f32_round(x: Fraction) -> np.float32:
    """Exact round-to-nearest-even of a rational to float32."""
    r = np.float32(float(x))
    cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
    best = min(cands, key=lambda v: (abs(Fraction(float(v)) - x),
                                     int(np.array(v).view(np.uint32)) & 1))
    return np.float32(best)


def test_fma_rn_f32_is_correctly_rounded() -> None:
    rng = np.random.default_rng(20)
    n = 500
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    c = (rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)).astype(np.float32)
    # a case where rounding a*b+c first to float64 then to float32 is wrong
    a[0], b[0], c[0] = np.float32(8 * (1 + 2**-23)), np.float32(8 * (1 - 2**-23)), \
        np.float32(2**30 + 128)
    got = run("    fma.rn.f32 %f4, %f1, %f2, %f3;\n    mov.b32 %r8, %f4;\n", a, b, c).view(
        np.float32)
    want = np.array([f32_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
                     for x, y, z in zip(a, b, c, strict=True)], np.float32)
    assert got[0] == np.float32(2**30 + 128)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_f32_to_f16_modes(mode: str) -> None:
    rng = np.random.default_rng(21)
    x = np.concatenate([rng.standard_normal(400).astype(np.float32) * 3,
                        np.array([70000, -70000, 65504, 1e-7, -1e-7, 0.0], np.float32)])
    got = run(f"    cvt.{mode}.f16.f32 %h1, %f1;\n    cvt.u32.u16 %r8, %h1;\n", x)
    got16 = got.astype(np.uint16).view(np.float16)
    with np.errstate(over="ignore"):
        check_f16(x, got16, mode)


def check_f16(x: np.ndarray, got16: np.ndarray, mode: str) -> None:
    for xi, gi in zip(x, got16, strict=True):
        lo = np.float16(xi)
        cands = {lo, np.nextafter(lo, np.float16(-np.inf)), np.nextafter(lo, np.float16(np.inf))}
        below = max((v for v in cands if float(v) <= float(xi)), key=float)
        above = min((v for v in cands if float(v) >= float(xi)), key=float)
        want = {"rn": np.float16(xi), "rz": below if xi >= 0 else above, "rm": below,
                "rp": above}[mode]
        assert float(gi) == float(want), (mode, xi, gi, want)


def test_cvt_float_to_int_saturates_and_nan_is_zero() -> None:
    x = np.array([1.5, 2.5, -1.5, -2.7, 3e9, -3e9, np.nan, np.inf, -np.inf, 0.49999997],
                 np.float32)
    rni = run("    cvt.rni.s32.f32 %r8, %f1;\n", x).view(np.int32)
    assert list(rni) == [2, 2, -2, -3, 2**31 - 1, -(2**31), 0, 2**31 - 1, -(2**31), 0]
    rzi = run("    cvt.rzi.u32.f32 %r8, %f1;\n", x)
    assert list(rzi) == [1, 2, 0, 0, 3000000000, 0, 0, 2**32 - 1, 0, 0]
    rmi = run("    cvt.rmi.s32.f32 %r8, %f1;\n", x[:4]).view(np.int32)
    assert list(rmi) == [1, 2, -2, -3]


def test_setp_unordered_and_ordered_with_nan() -> None:
    a = np.array([1, np.nan, 2, np.nan], np.float32)
    b = np.array([1, 1, np.nan, np.nan], np.float32)
    body = ("    setp.{}.f32 %p1, %f1, %f2;\n    selp.u32 %r8, 1, 0, %p1;\n")
    assert list(run(body.format("ne"), a, b)) == [0, 0, 0, 0]
    assert list(run(body.format("neu"), a, b)) == [0, 1, 1, 1]
    assert list(run(body.format("equ"), a, b)) == [1, 1, 1, 1]
    assert list(run(body.format("nan"), a, b)) == [0, 1, 1, 1]
    assert list(run(body.format("num"), a, b)) == [1, 0, 0, 0]


def test_integer_corner_cases() -> None:
    a = np.array([-7, 7, -(2**31), 5, 0x12345678], np.int32)
    b = np.array([2, -2, -1, 0, 40], np.int32)
    zero = ("division_by_zero",)  # b[3] and the padding lanes are 0: what it gives is tested
    assert list(run("    div.s32 %r8, %r5, %r6;\n", a, b, allow=zero).view(np.int32)[:4]) == [
        -3, -3, -(2**31), -1]
    assert list(run("    rem.s32 %r8, %r5, %r6;\n", a, b, allow=zero).view(np.int32)[:2]) == [
        -1, 1]
    assert list(run("    shl.b32 %r8, %r5, %r6;\n", a, b)[[3, 4]]) == [5, 0]
    assert list(run("    shr.s32 %r8, %r5, %r6;\n", a, b).view(np.int32)[[0, 4]]) == [-2, 0]
    hi = run("    mul.hi.u32 %r8, %r5, %r6;\n", a, b)
    want = [(int(x) * int(y)) >> 32 for x, y in zip(a.view(np.uint32), b.view(np.uint32),
                                                      strict=True)]
    assert list(hi) == want
    hs = run("    mul.hi.s32 %r8, %r5, %r6;\n", a, b).view(np.int32)
    assert list(hs) == [(int(x) * int(y)) >> 32 for x, y in zip(a, b, strict=True)]


def test_bit_operations() -> None:
    rng = np.random.default_rng(22)
    a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    assert list(run("    popc.b32 %r8, %r5;\n", a)) == [bin(int(x)).count("1") for x in a]
    assert list(run("    clz.b32 %r8, %r5;\n", a >> (a & 31))) == [
        32 - int(x).bit_length() for x in a >> (a & 31)]
    assert list(run("    brev.b32 %r8, %r5;\n", a)) == [
        int(f"{int(x):032b}"[::-1], 2) for x in a]
    bfe = run("    bfe.u32 %r8, %r5, 4, 8;\n", a)
    assert list(bfe) == [(int(x) >> 4) & 0xFF for x in a]
    sbfe = run("    bfe.s32 %r8, %r5, 4, 8;\n", a).view(np.int32)
    assert list(sbfe) == [((int(x) >> 4) & 0xFF) - (256 if (int(x) >> 11) & 1 else 0) for x in a]
    bfi = run("    bfi.b32 %r8, %r5, %r6, 8, 12;\n", a, b)
    assert list(bfi) == [(int(y) & ~(0xFFF << 8)) | ((int(x) & 0xFFF) << 8) for x, y in
                         zip(a, b, strict=True)]
    prmt = run("    prmt.b32 %r8, %r5, %r6, 0x7531;\n", a, b)
    want = []
    for x, y in zip(a, b, strict=True):
        by = (int(y) << 32 | int(x)).to_bytes(8, "little")
        want.append(int.from_bytes(bytes([by[1], by[3], by[5], by[7]]), "little"))
    assert list(prmt) == want
    lop = run("    lop3.b32 %r8, %r5, %r6, %r7, 0x96;\n", a, b, a ^ b)
    assert list(lop) == [0] * 64


def test_vector_and_local_memory() -> None:
    a = np.arange(64, dtype=np.uint32)
    body = """    mov.u64 %rd10, depot;
    add.u32 %r9, %r5, 1;
    st.local.v4.u32 [%rd10], {%r5, %r9, %r5, %r9};
    ld.local.v2.u32 {%r10, %r11}, [%rd10+8];
    cvta.local.u64 %rd11, %rd10;
    ld.u32 %r12, [%rd11+4];
    add.u32 %r13, %r10, %r11;
    add.u32 %r8, %r13, %r12;
"""
    assert np.array_equal(run(body, a), 3 * a + 2)


def test_unsupported_instruction_names_itself_and_its_line() -> None:
    with pytest.raises(UnsupportedPtx) as e:
        run("    tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [tx, {%f1, %f2}];\n"
            "    mov.b32 %r8, %f4;\n", np.zeros(32, np.float32))
    line = HEAD.count("\n") + 1
    assert "'tex.2d.v4.f32.f32'" in str(e.value) and f"line {line}" in str(e.value)
    assert e.value.exit_code == 3


def test_call_is_unsupported() -> None:
    with pytest.raises(UnsupportedPtx, match="'call'"):
        run("    call foo;\n    mov.b32 %r8, %r5;\n", np.zeros(32, np.float32))


def test_syntax_errors_are_bad_input() -> None:
    with pytest.raises(PtxSyntaxError) as e:
        load_module(HEAD + "    add.s32 %r1, %r2 %r3 ] ;\n}\n")
    assert e.value.exit_code == 2
    with pytest.raises(PtxSyntaxError):
        load_module(HEAD)  # unbalanced braces
    with pytest.raises(PtxSyntaxError):
        load_module(b"\xff\xfe")


def test_unsupported_during_a_run_carries_earlier_findings() -> None:
    body = """    add.s64 %rd12, %rd9, 4096;
    st.global.b32 [%rd12], %r5;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra LA;
    shfl.sync.bfly.b32 %r8, %r5, 1, 31, -1;
    bra.uni LB;
LA:
    shfl.sync.bfly.b32 %r8, %r5, 2, 31, -1;
LB:
"""
    with pytest.raises(UnsupportedPtx) as e:
        run(body, np.zeros(32, np.uint32))
    assert "shfl.sync at PTX line" in str(e.value) and "never arrives" in str(e.value)
    assert [f.kind for f in e.value.findings] == ["out_of_bounds"]


SHARED_BODY = """    .shared .align 16 .b8 sm[1024];
    mov.u32 %r9, sm;
    shl.b32 %r10, %r1, 2;
    add.u32 %r11, %r9, %r10;
    st.shared.u32 [%r11], %r5;
    {sync}
    add.u32 %r12, %r1, {dist};
    and.b32 %r12, %r12, {wrap};
    shl.b32 %r12, %r12, 2;
    add.u32 %r13, %r9, %r12;
    ld.shared.u32 %r8, [%r13];
"""


def shared_run(n: int, sync: str, dist: int, wrap: int) -> list[str]:
    body = SHARED_BODY.replace("{sync}", sync).replace("{dist}", str(dist)).replace(
        "{wrap}", str(wrap))
    a = np.arange(n, dtype=np.uint32)
    out = np.zeros(n, np.uint32)
    r = launch(load_module(HEAD + body + TAIL), "k", (1, 1, 1), (n, 1, 1),
               [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                Buffer(out, "out", "out")])
    if not r.findings:
        assert np.array_equal(out, (a + dist) & wrap)
    return [f.kind for f in r.findings]


def test_warp_synchronous_exchange_needs_bar_warp_sync() -> None:
    assert shared_run(32, "", 1, 31) == ["race"]
    assert shared_run(32, "bar.warp.sync -1;", 1, 31) == []
    # across warps bar.warp.sync orders nothing: lane 31 reads warp 1's word
    assert shared_run(64, "bar.warp.sync -1;", 1, 63) == ["race"]
    assert shared_run(64, "bar.sync 0;", 1, 63) == []


CP_BODY = """    .shared .align 16 .b8 sm[512];
    mov.u32 %r9, sm;
    shl.b32 %r10, %r1, 4;
    add.u32 %r11, %r9, %r10;
    mul.wide.u32 %rd13, %r1, 16;
    add.s64 %rd14, %rd1, %rd13;
    cp.async.cg.shared.global [%r11], [%rd14], 16, {size};
    cp.async.commit_group;
    {wait}
    bar.sync 0;
    ld.shared.u32 %r8, [%r11+4];
"""


def test_cp_async_counts_as_written_once_waited_for() -> None:
    a = np.arange(32 * 4, dtype=np.uint32)
    out = np.zeros(32, np.uint32)

    def go(size: str, wait: str) -> list[str]:
        body = CP_BODY.replace("{size}", size).replace("{wait}", wait)
        out[:] = 0
        r = launch(load_module(HEAD + body + TAIL), "k", (1, 1, 1), (32, 1, 1),
                   [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                    Buffer(out, "out", "out")])
        return [f.kind for f in r.findings]

    assert go("16", "cp.async.wait_group 0;") == []
    assert np.array_equal(out, a.reshape(32, 4)[:, 1])
    assert go("4", "cp.async.wait_all;") == []
    assert (out == 0).all()  # bytes past src-size are zero-filled
    # never waited for: the copy is still in flight when it is read, and never landed
    assert go("16", "") == ["cp_async_in_flight", "uninitialised_read"]


HALF_BODY = """    .shared .align 16 .b8 sm[256];
    mov.u32 %r9, sm;
    shl.b32 %r10, %r1, 1;
    add.u32 %r11, %r9, %r10;
    cvt.u16.u32 %h1, %r5;
    st.shared.u16 [%r11], %h1;
    and.b32 %r12, %r10, -4;
    add.u32 %r13, %r9, %r12;
    {read}
"""


def test_race_tracking_is_per_byte() -> None:
    a = np.arange(32, dtype=np.uint32) + 0x100
    out = np.zeros(32, np.uint32)

    def go(read: str) -> list[str]:
        body = HALF_BODY.replace("{read}", read)
        r = launch(load_module(HEAD + body + TAIL), "k", (1, 1, 1), (32, 1, 1),
                   [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                    Buffer(out, "out", "out")])
        return [f.kind for f in r.findings]

    # neighbours write the two halves of one word: no race; each reads back its own half
    assert go("ld.shared.u16 %h2, [%r11];\n    cvt.u32.u16 %r8, %h2;") == []
    assert np.array_equal(out, a)
    # reading the whole word reads the neighbour's half: a race
    assert go("ld.shared.u32 %r8, [%r13];") == ["race"]


def test_pack_unpack_and_two_predicate_setp() -> None:
    a = np.array([0x11223344, 5, 0xFFFFFFFF, 7], np.uint32)
    b = np.array([0xAABBCCDD, 9, 1, 7], np.uint32)
    body = """    mov.b64 %rd10, {%r5, %r6};
    mov.b64 {%r9, %r10}, %rd10;
    mov.b32 {%h1, %h2}, %r9;
    mov.b32 %r11, {%h2, %h1};
    setp.lt.u32 %p1|%p2, %r10, %r5;
    selp.u32 %r12, 1, 0, %p1;
    selp.u32 %r13, 2, 0, %p2;
    add.u32 %r14, %r12, %r13;
    set.eq.u32.u32 %r15, %r5, %r6;
    and.b32 %r15, %r15, 4;
    add.u32 %r14, %r14, %r15;
    shl.b32 %r14, %r14, 28;
    and.b32 %r11, %r11, 0x0FFFFFFF;
    or.b32 %r8, %r11, %r14;
"""
    got = run(body, a, b)
    swapped = ((a >> 16) | (a << 16)) & 0x0FFFFFFF
    flags = np.where(b < a, 1, 2) + np.where(a == b, 4, 0)
    assert np.array_equal(got, swapped | (flags.astype(np.uint32) << 28))


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def _ref(op: str, x: int, y: int, bits: int, signed: bool) -> int:
    if op == "add":
        return _wrap(x + y, bits, signed)
    if op == "sub":
        return _wrap(x - y, bits, signed)
    if op == "mul.lo":
        return _wrap(x * y, bits, signed)
    if op == "mul.hi":
        return _wrap((x * y) >> bits, bits, signed)
    if op in ("div", "rem"):
        if y == 0:
            return _wrap(-1, bits, signed) if op == "div" else x
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        return _wrap(q if op == "div" else x - q * y, bits, signed)
    if op == "min":
        return min(x, y)
    if op == "max":
        return max(x, y)
    if op == "shl":
        return 0 if y & 0xFFFFFFFF >= bits else _wrap(x << (y & 0xFFFFFFFF), bits, signed)
    if op == "shr":
        sh = y & 0xFFFFFFFF
        return (x >> min(sh, bits)) if signed else (0 if sh >= bits else x >> sh)
    raise AssertionError(op)


OPS = ["add", "sub", "mul.lo", "mul.hi", "div", "rem", "min", "max", "shl", "shr"]


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("signed", [True, False])
def test_integer_ops_match_python_integers(bits: int, signed: bool) -> None:
    rng = np.random.default_rng(bits + signed)
    n = 96
    edge = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 7, 31, 32, 33, 63, 64]
    a = np.concatenate([rng.integers(0, 2**32, n - len(edge), dtype=np.uint64),
                        np.array(edge, np.uint64)]).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b[:12] = [0, 1, 31, 32, 33, 63, 64, 65, 2**32 - 1, 5, 0, 2]
    c = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    t = f".{'s' if signed else 'u'}{bits}"
    bt = ".b32" if bits == 32 else ".b64"
    for op in OPS:
        ptx_op = f"{op}{t}" if op not in ("shl", "shr") else (
            f"shl{bt}" if op == "shl" else f"shr{t}")
        if bits == 32:
            body = f"    {ptx_op} %r8, %r5, %r6;\n"
            xs = [_wrap(int(v), 32, signed) for v in a]
            ys = [_wrap(int(v), 32, signed) for v in b]
            halves = [body]
        else:
            prep = "    mov.b64 %rd10, {%r5, %r6};\n    mov.b64 %rd11, {%r7, %r5};\n"
            shift_src = "%r7" if op in ("shl", "shr") else "%rd11"
            body = f"{prep}    {ptx_op} %rd12, %rd10, {shift_src};\n"
            xs = [_wrap(int(lo) | int(hi) << 32, 64, signed) for lo, hi in zip(a, b, strict=True)]
            ys = ([int(v) for v in c] if op in ("shl", "shr") else
                  [_wrap(int(lo) | int(hi) << 32, 64, signed) for lo, hi in
                   zip(c, a, strict=True)])
            halves = [body + "    mov.b64 {%r8, %r9}, %rd12;\n",
                      body + "    mov.b64 {%r9, %r8}, %rd12;\n"]
        # b holds zeros on purpose: the value a division by zero gives is tested too
        got = [run(h, a, b, c, allow=("division_by_zero",)) for h in halves]
        for i in range(n):
            want = _ref(op, xs[i], ys[i], bits, signed) & ((1 << bits) - 1)
            have = sum(int(g[i]) << (32 * k) for k, g in enumerate(got))
            assert have == want, (op, t, xs[i], ys[i], hex(have), hex(want))


def test_approximate_functions_are_the_rounded_exact_value() -> None:
    rng = np.random.default_rng(23)
    x = rng.uniform(-20, 20, 256).astype(np.float32)
    pos = np.abs(x) + np.float32(0.01)
    cases: dict[str, tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]] = {
        "ex2.approx.ftz.f32": (x, np.exp2), "lg2.approx.f32": (pos, np.log2),
        "sin.approx.f32": (x, np.sin), "cos.approx.f32": (x, np.cos),
        "tanh.approx.f32": (x, np.tanh), "rsqrt.approx.f32": (pos, lambda v: 1 / np.sqrt(v)),
        "rcp.approx.f32": (pos, lambda v: 1 / v), "sqrt.approx.f32": (pos, np.sqrt),
        "rcp.rn.f32": (pos, lambda v: 1 / v), "sqrt.rn.f32": (pos, np.sqrt),
    }
    for op, (v, f) in cases.items():
        got = run(f"    {op} %f4, %f1;\n    mov.b32 %r8, %f4;\n", v).view(np.float32)
        assert np.array_equal(got, f(v.astype(np.float64)).astype(np.float32)), op
    got = run("    div.approx.f32 %f4, %f1, %f2;\n    mov.b32 %r8, %f4;\n", x, pos).view(
        np.float32)
    assert np.array_equal(got, (x.astype(np.float64) / pos).astype(np.float32))


def test_f32_min_max_ignore_nan_and_ftz_flushes() -> None:
    a = np.array([1, np.nan, -2, 1e-40], np.float32)
    b = np.array([np.nan, 3, 5, 0], np.float32)
    got = run("    min.f32 %f4, %f1, %f2;\n    mov.b32 %r8, %f4;\n", a, b).view(np.float32)
    assert list(got[:3]) == [1, 3, -2]
    got = run("    max.f32 %f4, %f1, %f2;\n    mov.b32 %r8, %f4;\n", a, b).view(np.float32)
    assert list(got[:3]) == [1, 3, 5]
    got = run("    add.ftz.f32 %f4, %f1, %f2;\n    mov.b32 %r8, %f4;\n", a, b).view(np.float32)
    assert got[3] == 0 and run("    add.f32 %f4, %f1, %f2;\n    mov.b32 %r8, %f4;\n",
                               a, b).view(np.float32)[3] != 0


def test_f16x2_arithmetic() -> None:
    rng = np.random.default_rng(24)
    h = rng.standard_normal((3, 64, 2)).astype(np.float16)
    a, b, c = (np.ascontiguousarray(x).view(np.uint32).ravel() for x in h)
    got = run("    fma.rn.f16x2 %r8, %r5, %r6, %r7;\n", a, b, c).view(np.float16).reshape(64, 2)
    want = (h[0].astype(np.float64) * h[1] + h[2]).astype(np.float16)
    assert np.array_equal(got, want)
    got = run("    add.f16x2 %r8, %r5, %r6;\n", a, b).view(np.float16).reshape(64, 2)
    assert np.array_equal(got, (h[0].astype(np.float64) + h[1]).astype(np.float16))
    got = run("    cvt.rn.f16x2.f32 %r8, %f1, %f2;\n", a.view(np.float32), b.view(np.float32))
    with np.errstate(over="ignore"):
        hi = a.view(np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
        lo = b.view(np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
    assert np.array_equal(got, (hi << 16) | lo)


ATOM_BODY = """    .shared .align 4 .b8 sm[16];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SKIP;
    st.shared.u32 [sm], 10;
    st.shared.u32 [sm+4], 0;
    st.shared.u32 [sm+8], 0;
SKIP:
    bar.sync 0;
    red.shared.add.u32 [sm], %r1;
    atom.shared.inc.u32 %r9, [sm+4], 7;
    atom.shared.cas.b32 %r10, [sm+8], %r1, 100;
    bar.sync 0;
    ld.shared.u32 %r11, [sm];
    ld.shared.u32 %r12, [sm+4];
    ld.shared.u32 %r13, [sm+8];
    vote.sync.uni.pred %p2, %p1, -1;
    selp.u32 %r14, 1000000, 0, %p2;
    {out}
"""


def test_shared_red_inc_cas_and_vote_uni() -> None:
    a = np.zeros(64, np.uint32)
    outs = {}
    for name, reg in (("sum", "%r11"), ("inc", "%r12"), ("cas", "%r13"), ("old", "%r10"),
                      ("uni", "%r14")):
        body = ATOM_BODY.replace("{out}", f"mov.u32 %r8, {reg};")
        out = np.zeros(64, np.uint32)
        r = launch(load_module(HEAD + body + TAIL), "k", (1, 1, 1), (64, 1, 1),
                   [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                    Buffer(out, "out", "out")])
        assert r.findings == ()
        outs[name] = out
    assert (outs["sum"] == 10 + sum(range(64))).all()
    assert (outs["inc"] == 64 % 8).all()  # inc wraps to 0 after 7: 64 increments
    # cas(old == tid ? 100): thread 0 sees 0 and swaps in 100; nobody else matches
    assert (outs["cas"] == 100).all() and outs["old"][0] == 0 and (outs["old"][1:] == 100).all()
    # %p1 (tid != 0) is uniform in warp 1, not in warp 0
    assert (outs["uni"][:32] == 0).all() and (outs["uni"][32:] == 1000000).all()


def test_barrier_with_thread_count() -> None:
    body = """    .shared .align 4 .b8 sm[256];
    mov.u32 %r9, sm;
    shl.b32 %r10, %r1, 2;
    add.u32 %r11, %r9, %r10;
    st.shared.u32 [%r11], %r5;
    bar.sync 1, 64;
    xor.b32 %r12, %r10, 4;
    add.u32 %r13, %r9, %r12;
    ld.shared.u32 %r8, [%r13];
"""
    a = np.arange(128, dtype=np.uint32)
    out = np.zeros(128, np.uint32)
    r = launch(load_module(HEAD + body + TAIL), "k", (2, 1, 1), (64, 1, 1),
               [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                Buffer(out, "out", "out")])
    assert r.findings == ()
    assert np.array_equal(out, a ^ 1)


def test_redux_activemask_testp_copysign() -> None:
    a = np.arange(64, dtype=np.int32) - 20
    got = run("    redux.sync.add.s32 %r8, %r5, -1;\n", a).view(np.int32)
    assert (got[:32] == a[:32].sum()).all() and (got[32:] == a[32:].sum()).all()
    got = run("    redux.sync.min.s32 %r8, %r5, -1;\n", a).view(np.int32)
    assert (got[:32] == -20).all() and (got[32:] == 12).all()
    got = run("    redux.sync.or.b32 %r8, %r5, -1;\n", a.view(np.uint32))
    assert got[40] == np.bitwise_or.reduce(a[32:].view(np.uint32))
    body = """    mov.b32 %r8, 0;
    setp.lt.u32 %p1, %r1, 5;
    @%p1 bra DONE;
    activemask.b32 %r8;
DONE:
"""
    assert list(run(body, np.zeros(32, np.uint32))[4:6]) == [0, 0xFFFFFFE0]
    f = np.array([1.0, np.inf, np.nan, 1e-40, 0.0, -3.0], np.float32)
    kinds = {}
    for k in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"):
        kinds[k] = list(run(f"    testp.{k}.f32 %p1, %f1;\n    selp.u32 %r8, 1, 0, %p1;\n", f))
    assert kinds["finite"] == [1, 0, 0, 1, 1, 1] and kinds["notanumber"] == [0, 0, 1, 0, 0, 0]
    assert kinds["normal"] == [1, 0, 0, 0, 0, 1] and kinds["subnormal"] == [0, 0, 0, 1, 0, 0]
    got = run("    copysign.f32 %f4, %f1, %f2;\n    mov.b32 %r8, %f4;\n", -f, f).view(np.float32)
    assert list(got[[0, 5]]) == [-1.0, 3.0]


def test_lanes_reaching_one_barrier_at_different_times_are_not_divergent() -> None:
    # the join block (with the barrier) is laid out before the else block, so min-PC runs the
    # barrier with half the warp first; the other half arrives later at the same barrier
    src = HEAD + """    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra ELSE;
    add.u32 %r8, %r5, 1;
JOIN:
    bar.sync 0;
    st.global.b32 [%rd9], %r8;
    ret;
ELSE:
    add.u32 %r8, %r5, 2;
    bra.uni JOIN;
}
"""
    a = np.arange(64, dtype=np.uint32)
    out = np.zeros(64, np.uint32)
    r = launch(load_module(src), "k", (1, 1, 1), (64, 1, 1),
               [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                Buffer(out, "out", "out")])
    assert r.findings == ()
    assert np.array_equal(out, a + np.where(a < 16, 2, 1))


def test_lanes_that_skip_a_barrier_and_exit_make_it_divergent() -> None:
    # if (tid < 16) __syncthreads(); out[i] = ...  (lanes 16..31 never reach the barrier)
    src = HEAD + """    setp.ge.u32 %p1, %r1, 16;
    @%p1 bra SKIP;
    bar.sync 0;
SKIP:
    st.global.b32 [%rd9], %r5;
    ret;
}
"""
    a = np.arange(32, dtype=np.uint32)
    out = np.zeros(32, np.uint32)
    r = launch(load_module(src), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                Buffer(out, "out", "out")])
    assert [f.kind for f in r.findings] == ["divergent_barrier"]
    assert "16 other thread(s)" in r.findings[0].message
    assert "exited without reaching it" in r.findings[0].message


def test_early_return_before_a_barrier_is_not_divergent() -> None:
    # if (i >= n) return; ...; __syncthreads(); ...  (the returning lanes go to ret first)
    src = HEAD + """    setp.ge.u32 %p1, %r1, 20;
    @%p1 bra DONE;
    bar.sync 0;
    st.global.b32 [%rd9], %r5;
DONE:
    ret;
}
"""
    a = np.arange(32, dtype=np.uint32)
    out = np.zeros(32, np.uint32)
    r = launch(load_module(src), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                Buffer(out, "inout", "out")])
    assert r.findings == ()
    assert np.array_equal(out[:20], a[:20]) and (out[20:] == 0).all()


@pytest.mark.parametrize("ins", ["max.NaN.f32 %f4, %f1, %f2", "add.rn.u32 %r8, %r5, %r6",
                                 "fma.rn.relu.f32 %f4, %f1, %f2, %f3"])
def test_unmodelled_modifiers_are_refused(ins: str) -> None:
    with pytest.raises(UnsupportedPtx, match="modifier"):
        run(f"    {ins};\n    mov.b32 %r8, %f4;\n", np.zeros(32, np.float32))


def test_inline_asm_registers_without_percent() -> None:
    # what cuda_fp16.h's __low2half / __high2half look like after nvcc
    body = """    {
    .reg .f16 low, high;
    mov.b32 {low, high}, %r5;
    mov.b16 %h1, high;
    mov.b16 %h2, low;
    }
    mov.b32 %r8, {%h1, %h2};
"""
    a = np.array([0x3C00BC00, 0x12345678], np.uint32)
    assert list(run(body, a)) == [0xBC003C00, 0x56781234]


def f32_directed(x: Fraction, mode: str) -> np.float32:
    r = np.float32(float(x)) if abs(x) < Fraction(2) ** 128 else np.float32(
        np.inf if x > 0 else -np.inf)
    cands = sorted({np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))},
                   key=float)
    finite = [v for v in cands if np.isfinite(v)]
    below = max((v for v in finite if Fraction(float(v)) <= x), key=float,
                default=np.float32(-np.inf))
    above = min((v for v in finite if Fraction(float(v)) >= x), key=float,
                default=np.float32(np.inf))
    if mode == "rm":
        return np.float32(below)
    if mode == "rp":
        return np.float32(above)
    return np.float32(below if x >= 0 else above)


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_directed_rounding_add_mul_fma(mode: str) -> None:
    rng = np.random.default_rng(25)
    n = 300
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    c = (rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)).astype(np.float32)
    b[:4] = [1e-30, -1e-30, 3e38, -3e38]  # tiny and overflowing cases
    fa, fb, fc = ([Fraction(float(v)) for v in arr] for arr in (a, b, c))
    refs: list[tuple[str, Callable[[int], Fraction]]] = [
        ("add", lambda i: fa[i] + fb[i]), ("mul", lambda i: fa[i] * fb[i]),
        ("fma", lambda i: fa[i] * fb[i] + fc[i]), ("sub", lambda i: fa[i] - fb[i])]
    for op, ref in refs:
        args = "%f1, %f2, %f3" if op == "fma" else "%f1, %f2"
        got = run(f"    {op}.{mode}.f32 %f4, {args};\n    mov.b32 %r8, %f4;\n", a, b, c).view(
            np.float32)
        want = np.array([f32_directed(ref(i), mode) for i in range(n)], np.float32)
        assert np.array_equal(got, want), op


def test_barrier_count_larger_than_the_block_is_partial() -> None:
    body = "    bar.sync 1, 64;\n    mov.b32 %r8, %r5;\n"
    src = HEAD + body + TAIL
    a = np.zeros(32, np.uint32)
    out = np.zeros(32, np.uint32)
    r = launch(load_module(src), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(a, "in", "a"), Buffer(a, "in", "b"), Buffer(a, "in", "c"),
                Buffer(out, "out", "out")])
    assert [f.kind for f in r.findings] == ["partial_barrier"]
    assert "expects 64 threads" in r.findings[0].message


@pytest.mark.parametrize("op", ["div.u32", "div.s32", "rem.u32", "rem.s64"])
def test_integer_division_by_zero_is_a_finding(op: str) -> None:
    """The PTX ISA leaves an integer division by zero unspecified (C++ makes it undefined): a
    kernel that divides by a runtime zero is a finding, not a value a reference may happen to
    match; the run goes on (-1 for div, the dividend for rem, what the hardware gives)."""
    wide = op.endswith("64")
    prep = "    cvt.u64.u32 %rd10, %r5;\n    cvt.u64.u32 %rd11, %r6;\n" if wide else ""
    regs = ("%rd12, %rd10, %rd11" if wide else "%r8, %r5, %r6")
    tail = "    cvt.u32.u64 %r8, %rd12;\n" if wide else ""
    body = f"{prep}    {op} {regs};\n{tail}"
    a = np.arange(1, 33, dtype=np.uint32)
    b = np.ones(32, np.uint32)
    n = 32
    out = np.zeros(n, np.uint32)
    mod = load_module(HEAD + body + TAIL)

    def go(bb: np.ndarray) -> tuple[object, ...]:
        r = launch(mod, "k", (1, 1, 1), (32, 1, 1),
                   [Buffer(a.copy(), "in", "a"), Buffer(bb.copy(), "in", "b"),
                    Buffer(a.copy(), "in", "c"), Buffer(out, "out", "out")])
        return r.findings

    assert go(b) == ()
    b[7] = 0
    (f,) = go(b)
    assert f.kind == "division_by_zero" and f.thread == (7, 0, 0)
    assert "unspecified" in f.message


FAULTING_LOOP = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 p)
{
 .reg .u64 %rd<4>; .reg .u32 %r<3>; .reg .pred %p<2>; .reg .f32 %f<2>;
 ld.param.u64 %rd1, [p];
 cvta.to.global.u64 %rd1, %rd1;
 mov.u32 %r1, 0;
L:
 mul.wide.u32 %rd2, %r1, 4;
 add.u64 %rd3, %rd1, %rd2;
 ld.global.f32 %f1, [%rd3];
 add.u32 %r1, %r1, 1;
 setp.lt.u32 %p1, %r1, 2000000000;
 @%p1 bra L;
 ret;
}
"""


def test_a_launch_with_a_finding_stops_soon_after_it_without_a_never_ends_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``i <= n - 1`` at ``n = 0`` faults on every trip of a loop of 2^32 trips: the launch
    used to run to its step limit (~35 s at the verifier's) and add a "never ends" finding. It
    now stops ``AFTER_FINDING_STEPS`` (a million; 20,000 here) after its first finding, with
    that finding alone."""
    from verify.ptxsim import machine

    budget = 20_000
    monkeypatch.setattr(machine, "AFTER_FINDING_STEPS", budget)
    a = np.zeros(4, np.float32)
    r = launch(load_module(FAULTING_LOOP), "k", (1, 1, 1), (1, 1, 1), [Buffer(a, "in", "p")],
               step_limit=50_000_000)
    assert [f.kind for f in r.findings] == ["out_of_bounds"]
    assert budget <= r.warp_instructions <= budget + 64


def test_max_and_min_order_signed_zeros_as_ptx_does() -> None:
    """PTX ``max``/``min``: +0.0 > -0.0 whatever the operands' order, so the two lanes of a
    butterfly reduction agree (numpy's ``fmax`` returns its first operand for equal values: a
    Triton softmax over a row of zeros and negative zeros stored two signs to one shared slot)."""
    import numpy as np

    from verify.ptxsim.ops_float import fmax_signed_zero, fmin_signed_zero

    a = np.array([0.0, -0.0, -0.0, 1.0, np.nan, 0.0], dtype=np.float32)
    b = np.array([-0.0, 0.0, -0.0, np.nan, -0.0, 0.0], dtype=np.float32)
    for f, want_neg in ((fmax_signed_zero, [False, False, True, False, True, False]),
                        (fmin_signed_zero, [True, True, True, False, True, False])):
        for x, y in ((a, b), (b, a)):
            got = f(x, y)
            assert got.dtype == np.float32
            assert list(np.signbit(got)) == want_neg
            assert not np.isnan(got).any()
    assert fmax_signed_zero(np.float32(2.0), np.float32(3.0)) == 3.0
