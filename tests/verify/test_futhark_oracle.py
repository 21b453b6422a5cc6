"""The Futhark spec as an oracle (``kernel.futhark_oracle``; verify/futhark_oracle.py).

There is no Futhark compiler on this machine. These tests put a stand-in ``futhark`` on PATH that
implements exactly the command line verify/futhark_oracle.py uses, and nothing more:

- ``futhark --version`` prints ``Futhark 0.25.99 (stand-in)``;
- ``futhark c -o ./OUT ./SPEC.fut`` logs the call and writes ``OUT``, a Python program; it does
  NOT compile Futhark: the spec carries a line ``-- stand-in: <Python expression>`` over the
  entry's parameter names, which OUT evaluates element by element (pure Python, f32 results);
- ``OUT -e ENTRY -b`` reads the arguments from stdin in Futhark's binary data format (decoded by
  the stand-in's own code, independent of the verifier's) and writes the result the same way.

With the real compiler absent, what these tests show is the verifier's side: compile once per
bundle, arguments in order and in the binary format, results read back, compared, named in the
detail; and an honest note or ``skipped`` where no compiler exists.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from ledger.core.bundle import Bundle
from ledger.core.errors import BadInput
from verify import falsify
from verify.context import Context, Options
from verify.contract import load_contract
from verify.contract_lint import lint_contract
from verify.futhark_oracle import decode_values, encode_value

ROOT = Path(__file__).resolve().parents[2]
VADD = ROOT / "bundles" / "vector_add"
ORACLE = "futhark_oracle: {entry: vector_add, args: [a, b], results: [c]}"

STAND_IN = r'''#!PYTHON
import os, re, struct, sys
LOG = "STAND_IN_LOG"
with open(LOG, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
if sys.argv[1:] == ["--version"]:
    print("Futhark 0.25.99 (stand-in)")
    sys.exit(0)
if sys.argv[1] != "c" or sys.argv[2] != "-o":
    sys.exit("stand-in: unsupported command")
out, spec = sys.argv[3], sys.argv[4]
text = open(spec).read()
expr = re.search(r"^-- stand-in: (.*)$", text, re.M).group(1)
entries = {}
for m in re.finditer(r"^entry\s+(\w+)\s*(?:\[\w+\]\s*)*((?:\(\w+\s*:[^)]*\)\s*)+)", text, re.M):
    entries[m.group(1)] = re.findall(r"\((\w+)\s*:", m.group(2))
prog = """#!PYTHON -S
import struct, sys
ENTRIES = %r
EXPR = %r
T = {b' f32': 'f', b' f64': 'd', b' i32': 'i', b' i64': 'q', b' u32': 'I', b' u64': 'Q'}
entry = sys.argv[sys.argv.index('-e') + 1]
data = sys.stdin.buffer.read()
vals, pos, out_type = [], 0, b' f32'
while pos < len(data):
    assert data[pos:pos + 2] == b'b\\x02', 'not binary'
    nd, ty = data[pos + 2], data[pos + 3:pos + 7]
    pos += 7
    dims = struct.unpack_from('<%%dQ' %% nd, data, pos)
    pos += 8 * nd
    n = 1
    for d in dims:
        n *= d
    vals.append(list(struct.unpack_from('<%%d%%s' %% (n, T[ty]), data, pos)) if nd else
                struct.unpack_from('<' + T[ty], data, pos)[0])
    pos += n * struct.calcsize(T[ty])
names = ENTRIES[entry]
length = max(len(v) for v in vals if isinstance(v, list))
code = compile(EXPR, 'stand-in', 'eval')
res = [eval(code, {k: (v[i] if isinstance(v, list) else v) for k, v in zip(names, vals)})
       for i in range(length)]
body = struct.pack('<%%df' %% length, *res)  # the stand-in's entries return one []f32
sys.stdout.buffer.write(b'b\\x02\\x01' + out_type + struct.pack('<Q', length) + body)
""" % (entries, expr)
with open(out, "w") as f:
    f.write(prog.replace("#!PYTHON", "#!" + sys.executable))
os.chmod(out, 0o755)
'''


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "futhark"
    log = tmp_path / "futhark.log"
    text = STAND_IN.replace("#!PYTHON", "#!" + sys.executable, 1)
    exe.write_text(text.replace('"STAND_IN_LOG"', repr(str(log))))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _files(
    expr: str = "a + b", oracle: str = ORACLE, reference: str = "vector_add_f32"
) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in VADD.iterdir() if p.is_file()}
    contract = files["contract.yaml"].decode()
    contract = contract.replace(
        "reference: vector_add_f32", f"reference: {reference}" if reference else ""
    )
    contract = contract.replace(
        "  futhark: vector_add.fut\n", f"  futhark: vector_add.fut\n  {oracle}\n"
    )
    # small sizes: the stand-in's "compiled" program is a Python start per case
    contract = contract.replace(
        "sizes: [{n: 1}, {n: 256}, {n: 1000}, {n: 4099}]", "sizes: [{n: 1}]"
    )
    contract = contract.replace("sizes: [{n: 300}, {n: 513}]", "sizes: [{n: 300}]")
    files["contract.yaml"] = contract.encode()
    files["vector_add.fut"] += f"\n-- stand-in: {expr}\n".encode()
    return files


def _run(tmp: Path, files: dict[str, bytes]) -> list[falsify.Check]:
    d = tmp / "bundle"
    d.mkdir(exist_ok=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    ctx = Context(Bundle.from_dir(d), Options(use_gpu=False))
    ctx.contract = load_contract(files["contract.yaml"])
    return falsify.run(ctx)


def test_binary_format_round_trip() -> None:
    for v in (
        np.array(2.5, np.float32),
        np.arange(7, dtype=np.float64),
        np.arange(12, dtype=np.int32).reshape(3, 4),
        np.array([True, False]),
        np.arange(3, dtype=np.float16),
        np.zeros(0, np.uint64),
    ):
        enc = encode_value(v)
        assert enc[:2] == b"b\x02" and enc[2] == v.ndim
        (back,) = decode_values(enc)
        assert back.dtype == v.dtype and back.shape == v.shape and np.array_equal(back, v)
    assert encode_value(np.array(1, np.int64))[3:7] == b" i64"
    two = decode_values(encode_value(np.array(1, np.int8)) + b"\n " + encode_value(np.ones(2)))
    assert [a.dtype.name for a in two] == ["int8", "float64"]
    for bad in (
        b"[1, 2]",
        b"b\x02\x01 f32" + b"\x05" + b"\0" * 7,
        b"b\x02\x00 x32",
        b"b\x01\x00 f32abcd",
    ):
        with pytest.raises(BadInput):
            decode_values(bad)
    with pytest.raises(BadInput, match="oversized"):
        decode_values(encode_value(np.zeros(1000)), limit=100)


def test_spec_oracle_beside_the_trusted_reference_compiles_once(
    stand_in: Path, tmp_path: Path
) -> None:
    checks = _run(tmp_path, _files())
    assert [c.status for c in checks] == ["passed", "passed"], [c.detail for c in checks]
    for c in checks:
        assert "oracle trusted:vector_add_f32 and oracle futhark:vector_add" in c.detail
        assert "Futhark 0.25.99 (stand-in), futhark c" in c.detail
    calls = stand_in.read_text().splitlines()
    assert calls == ["--version", "c -o ./vector_add-oracle ./vector_add.fut"]  # once per bundle


def test_a_spec_that_disagrees_fails_naming_the_futhark_oracle(
    stand_in: Path, tmp_path: Path
) -> None:
    checks = _run(tmp_path, _files(expr="a - b"))
    assert checks[0].status == "failed"
    assert checks[0].detail.endswith("(oracle futhark:vector_add)")


def test_spec_as_the_only_oracle(
    stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = _run(tmp_path, _files(reference=""))
    assert [c.status for c in checks] == ["passed", "passed"]
    assert "; oracle futhark:vector_add (" in checks[0].detail
    assert "trusted:" not in checks[0].detail
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    checks = _run(tmp_path, _files(reference=""))
    assert [c.status for c in checks] == ["skipped", "skipped"]
    assert checks[0].detail == (
        "no oracle can run here: the Futhark oracle 'vector_add' did not run: "
        "no futhark compiler on PATH"
    )


def test_no_compiler_leaves_a_note_beside_the_trusted_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    checks = _run(tmp_path, _files())
    assert [c.status for c in checks] == ["passed", "passed"]
    assert checks[0].detail.endswith(
        "oracle trusted:vector_add_f32; the Futhark oracle 'vector_add' did not run: "
        "no futhark compiler on PATH"
    )


def test_a_spec_that_does_not_compile_skips(stand_in: Path, tmp_path: Path) -> None:
    files = _files(reference="")
    files["vector_add.fut"] = files["vector_add.fut"].replace(b"-- stand-in:", b"-- nothing:")
    checks = _run(tmp_path, files)
    assert checks[0].status == "skipped"
    assert "futhark c vector_add.fut failed (exit 1)" in checks[0].detail


@pytest.mark.parametrize(
    "oracle, problem",
    [
        (
            "futhark_oracle: {entry: nope, args: [a, b], results: [c]}",
            "kernel.futhark_oracle.entry 'nope' is not an entry point of vector_add.fut",
        ),
        (
            "futhark_oracle: {entry: vector_add, args: [a, q], results: [c]}",
            "kernel.futhark_oracle.args: 'q' is neither a parameter nor a size variable",
        ),
        (
            "futhark_oracle: {entry: vector_add, args: [a, b], results: [a]}",
            "kernel.futhark_oracle.results: 'a' is not an out/inout pointer parameter",
        ),
    ],
)
def test_lint_checks_the_oracle(oracle: str, problem: str) -> None:
    files = _files(oracle=oracle)
    gates = {g.name: g for g in lint_contract(load_contract(files["contract.yaml"]), files)}
    assert gates["reference"].status == "failed"
    assert gates["reference"].reason == problem
    ok = {g.name: g for g in lint_contract(load_contract(_files()["contract.yaml"]), _files())}
    assert ok["reference"].status == "passed"
    assert dataclasses.is_dataclass(ok["reference"])
