"""The bundle's Futhark spec as an oracle (``oracle futhark:<entry>``; SPEC 3, issue 8).

When the contract declares ``kernel.futhark_oracle: {entry, args, results}`` and ``futhark`` is on
PATH, the spec ``kernel.futhark`` is compiled once per bundle with the Futhark compiler and its
entry is run on the very inputs the kernel gets; its results are compared with the kernel's outputs
like any reference's.

The Futhark command line used (and nothing else; a stand-in for tests implements exactly this):

- ``futhark --version``: a line naming the version;
- ``futhark c -o ./<stem> ./<spec>.fut``, run in a scratch copy of the bundle: writes the
  executable ``<stem>``;
- ``./<stem> -e <entry> -b``: reads the entry's arguments from stdin and writes its results to
  stdout, both in Futhark's binary data format (below).

Binary data format (Futhark's documentation, "Binary Data Format"), implemented here
(``encode_value`` / ``decode_values``) rather than through the ``futhark-data`` package, which
writes the same bytes (tests/verify/test_futhark_data.py) but whose reader also parses the text
format,
in quadratic time, and has no bound (docs/dependencies.md): each value is ``b``, the format
version byte 2, the number of dimensions (one byte, 0 for a scalar), a 4-character type
(``"  i8"``, ``" i16"``, ``" i32"``, ``" i64"``, ``"  u8"``, ``" u16"``, ``" u32"``, ``" u64"``,
``" f16"``, ``" f32"``, ``" f64"``, ``"bool"``), each dimension as a little-endian u64, then the
elements, little-endian, row-major.

Arguments, in ``args`` order: a pointer parameter is passed as a one-dimensional array of its
dtype (the flat buffer the kernel sees), a scalar parameter as a scalar of its dtype, a size
variable as an ``i64``. Results, in ``results`` order, must each have the output's element count.

The compiled program is the spec, a pure Futhark program (no I/O beyond its arguments and results),
compiled by the trusted compiler; it runs as a bounded subprocess (timeout, rlimits, scratch
directory, its output cut at the size the outputs need).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import struct
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ledger.core.errors import BadInput, CannotCheck
from verify.compare import np_dtype
from verify.context import Options
from verify.model import Kernel
from verify.tools import _limits, find_tool, tool_version

_TYPES: dict[str, bytes] = {
    "int8": b"  i8",
    "int16": b" i16",
    "int32": b" i32",
    "int64": b" i64",
    "uint8": b"  u8",
    "uint16": b" u16",
    "uint32": b" u32",
    "uint64": b" u64",
    "float16": b" f16",
    "float32": b" f32",
    "float64": b" f64",
    "bool": b"bool",
}
_DTYPES = {v: np.dtype(k).newbyteorder("<") for k, v in _TYPES.items()}
MAX_DIMS = 8


def encode_value(value: np.ndarray[Any, Any]) -> bytes:
    """One value in Futhark's binary data format (version 2)."""
    arr = np.asarray(value)
    tag = _TYPES.get(arr.dtype.name)
    if tag is None:
        raise BadInput(f"no Futhark type for numpy dtype {arr.dtype}")
    head = b"b" + bytes([2, arr.ndim]) + tag
    dims = b"".join(struct.pack("<Q", d) for d in arr.shape)
    return head + dims + np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()


def decode_values(data: bytes, limit: int = 1 << 30) -> list[np.ndarray[Any, Any]]:
    """Every value of a byte string in Futhark's binary data format; ``BadInput`` on anything
    else (text values, a truncated value, more than ``limit`` bytes of elements)."""
    out: list[np.ndarray[Any, Any]] = []
    pos = 0
    while True:
        while pos < len(data) and data[pos : pos + 1].isspace():
            pos += 1
        if pos >= len(data):
            return out
        if data[pos : pos + 2] != b"b\x02" or pos + 7 > len(data):
            raise BadInput(f"byte {pos}: not a Futhark binary value (version 2)")
        ndim = data[pos + 2]
        tag = data[pos + 3 : pos + 7]
        if tag not in _DTYPES or ndim > MAX_DIMS:
            raise BadInput(f"byte {pos}: unknown type {tag!r} or {ndim} dimensions")
        pos += 7
        if pos + 8 * ndim > len(data):
            raise BadInput("truncated Futhark value (dimensions)")
        dims = struct.unpack_from(f"<{ndim}Q", data, pos)
        pos += 8 * ndim
        dt = _DTYPES[tag]
        count = math.prod(dims)
        size = count * dt.itemsize
        if size > limit or pos + size > len(data):
            raise BadInput("truncated or oversized Futhark value (elements)")
        arr = np.frombuffer(data, dtype=dt, count=count, offset=pos).reshape(dims)
        out.append(arr.astype(dt.newbyteorder("=")))
        pos += size


class FutharkOracle:
    kind = "futhark"

    def __init__(
        self, futhark: str, version: str, kernel: Kernel, files: Mapping[str, bytes], timeout: float
    ) -> None:
        assert kernel.futhark_oracle is not None
        self._futhark, self._kernel, self._files = futhark, kernel, files
        self._spec = kernel.futhark
        self._oracle = kernel.futhark_oracle
        self._timeout = timeout
        self.name = f"futhark:{self._oracle.entry}"
        self.how = f"{version}, futhark c" if version else "futhark c"
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._exe: Path | None = None
        self._compile_error = ""

    def _compile(self) -> Path:
        if self._exe is not None:
            return self._exe
        if self._compile_error:
            raise CannotCheck(self._compile_error)
        self._dir = tempfile.TemporaryDirectory(prefix="ledger-futhark-")
        root = Path(self._dir.name)
        for path, data in self._files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        stem = PurePosixPath(self._spec).with_suffix("").name + "-oracle"
        exe = root / stem
        argv = [self._futhark, "c", "-o", f"./{stem}", f"./{self._spec}"]
        rc, out, err = _run(argv, root, None, self._timeout, 1 << 20)
        if rc != 0 or not exe.is_file():
            tail = (err or out).decode("utf-8", "replace").strip()[-300:]
            self._compile_error = f"futhark c {self._spec} failed (exit {rc}): {tail}"
            raise CannotCheck(self._compile_error)
        self._exe = exe
        return exe

    def compute(self, cases: Sequence[Any]) -> list[Any]:
        exe = self._compile()
        params = {p.name: p for p in self._kernel.params}
        results: list[Any] = []
        for case in cases:
            args: list[bytes] = []
            for a in self._oracle.args:
                if a in case.inputs:
                    value = np.asarray(case.inputs[a])
                    args.append(encode_value(value.reshape(-1) if value.ndim else value))
                elif a in params:  # an out pointer passed in: zeros (its contents are unset)
                    counts = {o.name: math.prod(o.shape) for o in case.outputs}
                    dt = params[a].dtype  # bf16 travels as f32 values, as the inputs do
                    zeros = np.zeros(counts.get(a, 0), np.float32 if dt == "bf16" else np_dtype(dt))
                    args.append(encode_value(zeros))
                else:
                    args.append(encode_value(np.array(case.sizes[a], dtype=np.int64)))
            want = {o.name: math.prod(o.shape) for o in case.outputs}
            cap = sum(want.values()) * 8 + 4096
            assert self._dir is not None
            inp = Path(self._dir.name) / "input.bin"
            inp.write_bytes(b"".join(args))
            argv = [str(exe), "-e", self._oracle.entry, "-b"]
            rc, out, err = _run(argv, Path(self._dir.name), inp, self._timeout, cap)
            if rc != 0:
                tail = err.decode("utf-8", "replace").strip()[-300:]
                results.append(f"the compiled spec failed (exit {rc}): {tail}")
                continue
            try:
                values = decode_values(out, cap)
            except BadInput as e:
                results.append(f"the compiled spec's output is not Futhark binary data: {e}")
                continue
            if len(values) != len(self._oracle.results):
                results.append(
                    f"the entry returned {len(values)} values, the contract names "
                    f"{len(self._oracle.results)} results"
                )
                continue
            got: dict[str, np.ndarray[Any, Any]] = {}
            for name, v in zip(self._oracle.results, values, strict=True):
                if v.size != want.get(name, -1):
                    got = {}
                    results.append(
                        f"result {name} has {v.size} elements, expected {want.get(name)}"
                    )
                    break
                got[name] = v.reshape(-1)
            else:
                results.append(got)
        return results

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _run(
    argv: list[str], cwd: Path, stdin: Path | None, timeout: float, cap: int
) -> tuple[int | None, bytes, bytes]:
    """A bounded run: rlimits (its output file at most ``cap`` bytes), a new session killed as a
    group on timeout, stdout through a file in ``cwd``."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "LANG": "C.UTF-8"}
    out_path = cwd / ".oracle-stdout"
    with contextlib.ExitStack() as stack:
        fin = stack.enter_context(open(stdin, "rb")) if stdin else subprocess.DEVNULL
        fout = stack.enter_context(open(out_path, "wb"))
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=fin,
                stdout=fout,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=lambda: _limits(8 << 30, int(timeout) + 5, cap),
            )
        except OSError as e:
            return 127, b"", str(e).encode()
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None, b"", f"timed out after {timeout:g} s".encode()
    with open(out_path, "rb") as f:
        out = f.read(cap)
    out_path.unlink()
    return proc.returncode, out, err[-4096:]


def futhark_oracle(
    kernel: Kernel, files: Mapping[str, bytes], options: Options
) -> tuple[FutharkOracle | None, str]:
    """The oracle, or (None, why it cannot run here)."""
    if kernel.futhark_oracle is None:
        return None, "the contract declares no kernel.futhark_oracle"
    if not kernel.futhark or kernel.futhark not in files:
        return None, "the contract's kernel.futhark spec is not in the bundle"
    futhark = find_tool("futhark")
    if futhark is None:
        return None, "no futhark compiler on PATH"
    version = tool_version(futhark)
    return FutharkOracle(futhark, version, kernel, files, options.timeout), ""
