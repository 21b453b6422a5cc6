"""futhark.spec and futhark.run (verify/futhark.py).

There is no Futhark compiler on this machine. The futhark.run tests put a stand-in ``futhark``
shell script on PATH: it is NOT the real compiler; it records its argv and exits 0 or 1 by
reading the spec file it is given, so the run path (argv, scratch copy, exit code, version,
timeout handling) is exercised for real, but the Futhark semantics are not.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verify.futhark as fut
from ledger.core.bundle import Bundle
from ledger.core.errors import BadInput
from verify.context import Context, Options
from verify.futhark import FutEntry, FutTestBlock, parse_futhark
from verify.model import Contract, Kernel
from verify.report import Check

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "futhark"
SPEC = (FIX / "vector_add.fut").read_bytes()
KERNEL = Kernel(
    name="vector_add", version="1.0.0", entry="vector_add", ptx="k.ptx", futhark="vector_add.fut"
)


def make_ctx(
    futs: dict[str, bytes],
    kernel: Kernel | None = KERNEL,
    loaded: bool = True,
    timeout: float = 60.0,
) -> Context:
    files = {
        "contract.yaml": b"metadata: {version: '1'}\n",
        "Proof.lean": b"x\n",
        "k.ptx": b".version 9.0\n",
        **futs,
    }
    ctx = Context(Bundle.from_files(files), Options(timeout=timeout))
    if loaded:
        ctx.contract = Contract("vector_add", "1.0.0", "d", kernel)
    return ctx


def checks(ctx: Context) -> dict[str, Check]:
    try:
        return {c.id: c for c in fut.run(ctx)}
    finally:
        ctx.close()


# --- parse_futhark ---------------------------------------------------------------------------


def test_parse_fixture() -> None:
    entries, blocks = parse_futhark(SPEC)
    assert entries == [FutEntry("vector_add", 12), FutEntry("add_commutes", 20)]
    assert blocks == [FutTestBlock("vector_add", 3, 4), FutTestBlock("add_commutes", 17, 1)]


def test_parse_case_forms() -> None:
    src = b"""let main (xs: []i32) = xs
-- Several forms.
-- ==
-- tags { slow no_opencl }
-- "named set" input { [1, 2] } output { [1, 2] }
-- input @ data/big.in
-- output @ data/big.out
-- random input { [100]i32 } auto output
-- nobench script input { mk 10i64 }
-- input {
--   [3,
--    4]
-- }
-- error: Index \\[.*\\] out of bounds
"""
    # "output @ file" is not the grammar (output takes values): it must be refused.
    with pytest.raises(BadInput, match=r"Futhark line 7: expected '\{' after output"):
        parse_futhark(src)
    entries, blocks = parse_futhark(src.replace(b"-- output @ data/big.out\n", b""))
    assert entries == [FutEntry("main", 1)]
    assert blocks == [FutTestBlock("main", 3, 5)]


def test_parse_multiple_entries_and_blocks() -> None:
    src = b"""entry a (x: i32) = x
entry b (x: i32) = x
#[inline] entry c (x: i32) = x
-- ==
-- entry: a b
-- input { 1 } output { 1 }
-- entry: c
-- compiled input { 2 } output { 2 }
-- input { 3 } output { 3 }
"""
    entries, blocks = parse_futhark(src)
    assert [e.name for e in entries] == ["a", "b", "c"]
    assert blocks == [FutTestBlock("a", 5, 1), FutTestBlock("b", 5, 1), FutTestBlock("c", 7, 2)]
    spec = fut._parse(src)
    assert [g.interpreted for g in spec.groups if g.explicit] == [1, 1]  # compiled: not run by -i


def test_parse_ignores_plain_comments_and_code_comments() -> None:
    src = b"-- entry: not_a_block\n-- input { 1 }\nlet f x = x -- entry fake\n  -- ==\n"
    assert parse_futhark(src) == ([], [])


@pytest.mark.parametrize(
    ("src", "message"),
    [
        (b"-- ==\n-- input { [1, 2] \n", r"Futhark line 2: unclosed '\{' after input"),
        (b"-- ==\n-- input\n", r"Futhark line 2: 'input' without values"),
        (b"-- ==\n-- output { 1 }\n", r"Futhark line 2: 'output' without a preceding input"),
        (b"-- ==\n-- compiled\n", r"expected 'input' after 'compiled'"),
        (b"-- ==\n-- compiled output { 1 }\n", r"line 2: expected 'input' after 'compiled'"),
        (b"-- ==\n-- entry:\n", r"Futhark line 2: 'entry:' needs entry point names"),
        (b"-- ==\n-- entry: a-b\n", r"'entry:' needs entry point names"),
        (b"-- ==\n-- input { 1 } auto\n", r"expected 'output' after 'auto'"),
        (b'-- ==\n-- "name input { 1 }\n', r"Futhark line 2: unterminated dataset name"),
        (b"-- ==\n-- { 1 }\n", r"Futhark line 2: unexpected '\{ 1 \}'"),
        (b"\n\n-- \xff\n", r"Futhark line 3: not UTF-8"),
        (b"entry f x = x\x00", r"NUL byte"),
    ],
)
def test_parse_malformed(src: bytes, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        parse_futhark(src)


def test_parse_size_limit() -> None:
    with pytest.raises(BadInput, match="over the 1048576-byte limit"):
        parse_futhark(b"--" * (fut.MAX_FUT_BYTES // 2 + 1))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_random_bytes_only_bad_input(data: bytes) -> None:
    try:
        parse_futhark(data)
    except BadInput:
        pass


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(SPEC) - 1), st.integers(0, len(SPEC)), st.binary(max_size=6))
def test_fuzz_mutations_only_bad_input(at: int, cut: int, insert: bytes) -> None:
    try:
        entries, blocks = parse_futhark(SPEC[:at] + insert + SPEC[max(at, cut) :])
    except BadInput:
        return
    assert all(b.cases >= 0 and b.line >= 1 for b in blocks)
    assert all(e.line >= 1 for e in entries)


# --- futhark.spec ----------------------------------------------------------------------------


def test_spec_check_passes() -> None:
    c = checks(make_ctx({"vector_add.fut": SPEC}))["futhark.spec"]
    assert c.status == "passed", c.detail
    assert c.detail == (
        "vector_add.fut: entries vector_add [line 12], add_commutes [line 20]; "
        "test blocks vector_add: 4 case(s) [line 3], add_commutes: 1 case(s) "
        "[line 17]"
    )


def test_spec_check_no_entry_point() -> None:
    src = b"let f (x: i32) = x\n-- ==\n-- input { 1 } output { 1 }\n"
    c = checks(make_ctx({"vector_add.fut": src}))["futhark.spec"]
    assert c.status == "failed"
    assert "vector_add.fut: no entry point" in c.detail


def test_spec_check_unknown_entry() -> None:
    src = SPEC.replace(b"-- entry: vector_add", b"-- entry: vector_sub")
    c = checks(make_ctx({"vector_add.fut": src}))["futhark.spec"]
    assert c.status == "failed"
    assert "vector_add.fut:3: test block names unknown entry 'vector_sub'" in c.detail
    # Without ``entry:`` the block tests ``main``, which this file does not define.
    src = b"entry f (x: i32) = x\n-- ==\n-- input { 1 } output { 1 }\n"
    c = checks(make_ctx({"vector_add.fut": src}))["futhark.spec"]
    assert "test block names unknown entry 'main'" in c.detail


def test_spec_check_block_without_cases() -> None:
    src = b"entry f (x: i32) = x\n-- ==\n-- entry: f\n-- tags { a }\n"
    c = checks(make_ctx({"vector_add.fut": src}))["futhark.spec"]
    assert c.status == "failed"
    assert "vector_add.fut:3: test block for f has no cases" in c.detail
    src = b"entry main (x: i32) = x\n-- Nothing after the separator.\n-- ==\n"
    c = checks(make_ctx({"vector_add.fut": src}))["futhark.spec"]
    assert "vector_add.fut:3: test block for main has no cases" in c.detail


def test_spec_check_malformed_and_missing() -> None:
    c = checks(make_ctx({"vector_add.fut": b"-- ==\n-- input {\n"}))["futhark.spec"]
    assert c.status == "failed" and "vector_add.fut: Futhark line 2: unclosed" in c.detail
    k = dataclasses.replace(KERNEL, futhark="spec/missing.fut")
    c = checks(make_ctx({"vector_add.fut": SPEC}, k))["futhark.spec"]
    assert c.status == "failed" and "'spec/missing.fut' is not in the bundle" in c.detail


def test_spec_check_without_contract_reads_every_fut() -> None:
    ctx = make_ctx({"a.fut": SPEC, "b.fut": b"entry g (x: i32) = x\n"}, loaded=False)
    c = checks(ctx)["futhark.spec"]
    assert c.status == "passed", c.detail
    assert c.detail.startswith("contract not loaded: every .fut read; a.fut: entries vector_add")
    assert "b.fut: entries g [line 1]; test blocks none" in c.detail


# --- futhark.run -----------------------------------------------------------------------------

FAKE = """#!/bin/sh
# Stand-in for the Futhark compiler (tests/verify/test_futhark.py): NOT the real futhark.
if [ "$1" = "--version" ]; then echo "Futhark 0.25.99 (stand-in)"; exit 0; fi
echo "$@" >> {log}
[ -f "$PWD/$4" ] || {{ echo "no such file $4"; exit 2; }}
{sleep}
if grep -q FAIL-ME "$4"; then echo "$4: vector_add: 1 of 4 failed"; exit 1; fi
echo "$4: 3 passed"; exit 0
"""


def fake_futhark(tmp: Path, monkeypatch: pytest.MonkeyPatch, sleep: str = "") -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    log = tmp / "argv.log"
    script = bin_dir / "futhark"
    script.write_text(FAKE.format(log=log, sleep=sleep))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_run_skipped_without_futhark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no futhark anywhere
    c = checks(make_ctx({"vector_add.fut": SPEC}))["futhark.run"]
    assert c.status == "skipped"
    assert c.detail == "no futhark compiler on PATH"


def test_run_passes_with_stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_futhark(tmp_path, monkeypatch)
    c = checks(make_ctx({"vector_add.fut": SPEC}))["futhark.run"]
    assert c.status == "passed", c.detail
    assert c.detail == "vector_add.fut: futhark test -i passed (4 interpreted case(s))"
    assert (c.tool, c.version) == ("futhark", "Futhark 0.25.99 (stand-in)")
    assert log.read_text() == "test --interpreted --no-terminal ./vector_add.fut\n"


def test_run_fails_on_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_futhark(tmp_path, monkeypatch)
    src = SPEC + b"-- FAIL-ME\n"
    c = checks(make_ctx({"vector_add.fut": src}))["futhark.run"]
    assert c.status == "failed"
    assert (
        "vector_add.fut: futhark test -i exit 1: ./vector_add.fut: vector_add: 1 of 4 failed"
        in c.detail
    )


def test_run_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_futhark(tmp_path, monkeypatch, sleep="exec sleep 5")
    c = checks(make_ctx({"vector_add.fut": SPEC}, timeout=0.5))["futhark.run"]
    assert c.status == "failed"
    assert "futhark test timed out after 0.5 s" in c.detail


def test_run_nothing_to_interpret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_futhark(tmp_path, monkeypatch)
    src = b"entry main (x: i32) = x\n-- ==\n-- compiled input { 1 } output { 1 }\n"
    c = checks(make_ctx({"vector_add.fut": src}))["futhark.run"]
    assert c.status == "skipped"
    assert c.detail == "nothing to run: no test case the interpreter runs"
    assert not log.exists()


BUNDLES = sorted((Path(__file__).resolve().parents[2] / "bundles").glob("*/contract.yaml"))


@pytest.mark.parametrize("contract", BUNDLES, ids=lambda p: p.parent.name)
def test_shipped_bundles_spec(contract: Path) -> None:
    from verify.contract import load_contract

    ctx = Context(Bundle.from_dir(contract.parent))
    ctx.contract = load_contract(contract.read_bytes())
    c = checks(ctx)["futhark.spec"]
    assert c.status == "passed", c.detail
    assert ctx.contract.kernel is not None
    assert f"entries {ctx.contract.kernel.entry} [line" in c.detail
