"""Mutation campaign over a kernel's PTX (issue 10, "Must show"): small, realistic mutations of
nvcc's output, each judged by the falsification tests of the kernel's contract on the PTX
interpreter. A mutant is *killed* when a test fails (a finding or a value out of tolerance),
*survives* when every test passes, is *not run* when the interpreter cannot run it (a test
skipped, none failed), and does not count when ``ptxas`` rejects it.

Operators (one mutant per site, the PTX line kept blank when an instruction is dropped so every
other line number stays the same):

``drop_barrier``   delete a ``bar.sync`` / ``barrier.sync``
``drop_wait``      delete a ``cp.async.wait_group`` / ``cp.async.wait_all``
``flip_bound``     ``setp.lt`` <-> ``setp.le``, ``setp.gt`` <-> ``setp.ge`` (any type)
``halve_shuffle``  a ``shfl.sync`` lane offset ``b`` -> ``b // 2`` (an immediate, or the
                   ``mov`` of a constant into the offset register)
``add_to_sub``     ``add.`` -> ``sub.`` (every add, address arithmetic included)
``drop_store``     delete an ``st.global`` / ``st.shared`` / ``st.local`` (generic ``st.`` too)

``scripts/mutate_ptx.py`` runs the whole campaign over bundles/ and writes the figures;
tests/campaigns/test_ptx_mutations.py runs a bounded slice.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

OPERATORS = ("drop_barrier", "drop_wait", "flip_bound", "halve_shuffle", "add_to_sub",
             "drop_store")

_GUARD = r"^(\s*(?:@!?%?[\w$]+\s+)?)"
_BARRIER = re.compile(_GUARD + r"(bar|barrier)(\.cta)?\.sync\b")
_WAIT = re.compile(_GUARD + r"cp\.async\.wait_(group|all)\b")
_SETP = re.compile(_GUARD + r"setp\.(lt|le|gt|ge)\b")
_SHFL = re.compile(_GUARD + r"(shfl\.sync\.\w+\.b32\s+[^,]+,\s*[^,]+,\s*)(\d+|%[\w$]+)(\s*,)")
_ADD = re.compile(_GUARD + r"add\.")
_STORE = re.compile(_GUARD + r"st(\.(global|shared|local|volatile|relaxed|weak|wb|cg|cs|wt|v2|v4"
                    r"|[usbf]\d+|shared::cta))+\s")
_FLIP = {"lt": "le", "le": "lt", "gt": "ge", "ge": "gt"}


@dataclass(frozen=True)
class Mutant:
    operator: str
    line: int  # 1-based PTX line
    before: str
    after: str  # "" when the instruction is dropped
    ptx: bytes


def _code(line: str) -> str:
    return line.split("//", 1)[0]


_MOVI = re.compile(r"^\s*mov\.[usb]32\s+(%[\w$]+)\s*,\s*(\d+)\s*;")


def _offset_def(lines: list[str], i: int, reg: str) -> int | None:
    """The line of the last ``mov`` of an immediate into ``reg`` before line ``i``."""
    for j in range(i - 1, -1, -1):
        code = _code(lines[j])
        if ".entry" in code or ".func" in code:
            return None
        d = _MOVI.search(code)
        if d and d.group(1) == reg:
            return j
        if re.search(r"^\s*(@\S+\s+)?[\w.]+\s+" + re.escape(reg) + r"\b", code):
            return None  # another instruction writes it: not a constant
    return None


def mutants(ptx: bytes) -> Iterator[Mutant]:
    """Every single-site mutant of ``ptx``, in operator then line order."""
    lines = ptx.decode("utf-8").split("\n")

    def make(op: str, i: int, new: str) -> Mutant:
        out = list(lines)
        out[i] = new
        return Mutant(op, i + 1, lines[i].strip(), new.strip(), "\n".join(out).encode())

    halved: set[int] = set()
    for op in OPERATORS:
        for i, raw in enumerate(lines):
            code = _code(raw)
            if op == "drop_barrier" and _BARRIER.search(code):
                yield make(op, i, "")
            elif op == "drop_wait" and _WAIT.search(code):
                yield make(op, i, "")
            elif op == "flip_bound":
                m = _SETP.search(code)
                if m:
                    yield make(op, i, raw[:m.start(2)] + _FLIP[m.group(2)] + raw[m.end(2):])
            elif op == "halve_shuffle":
                m = _SHFL.search(code)
                if m and m.group(3).isdigit():
                    b = int(m.group(3))
                    yield make(op, i, raw[:m.start(3)] + str(b // 2) + raw[m.end(3):])
                elif m:  # the offset register's constant: ``mov.u32 %rN, 16;`` before it
                    j = _offset_def(lines, i, m.group(3))
                    if j is not None and j not in halved:
                        halved.add(j)
                        d = _MOVI.search(_code(lines[j]))
                        assert d is not None
                        yield make(op, j, lines[j][:d.start(2)] + str(int(d.group(2)) // 2)
                                   + lines[j][d.end(2):])
            elif op == "add_to_sub":
                m = _ADD.search(code)
                if m:
                    yield make(op, i, raw[:m.end(1)] + "sub." + raw[m.end():])
            elif op == "drop_store" and _STORE.search(code) and "st.param" not in code:
                yield make(op, i, "")


def ptxas_accepts(ptx: bytes, ptxas: str, arch: str = "sm_86") -> bool:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "m.ptx"
        src.write_bytes(ptx)
        try:
            r = subprocess.run([ptxas, f"-arch={arch}", "-o", str(Path(d) / "m.cubin"), str(src)],
                               capture_output=True, timeout=120, check=False)
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0


@dataclass
class Verdict:
    bundle: str
    mutant: Mutant
    status: str  # "killed" | "survived" | "not_run" | "rejected"
    detail: str  # the first failing check's detail (killed), or why
    seconds: float


_LOADED: dict[Path, tuple[object, object]] = {}


def _bundle(bundle_dir: Path) -> tuple[object, object]:
    """(contract, oracles) of a bundle, loaded once."""
    from ledger.core.bundle import Bundle
    from verify.context import Options
    from verify.contract import load_contract
    from verify.oracle import oracles_for

    if bundle_dir not in _LOADED:
        bundle = Bundle.from_dir(bundle_dir)
        contract = load_contract(bundle.file("contract.yaml"))
        oracles = None
        if contract is not None and contract.kernel is not None:
            files = {f.path: f.data for f in bundle.files}
            oracles = oracles_for(contract.kernel, files, Options(use_gpu=False))
        _LOADED[bundle_dir] = (contract, oracles)
    return _LOADED[bundle_dir]


def calibrate(bundle_dir: Path, ptx: bytes) -> int:
    """A step limit for the bundle's mutants: a quarter of the most thread-instructions one
    launch of the unmutated PTX needs (8 times its warp-instructions when its warps are
    converged), at least 200,000, checked by running the unmutated PTX under it; a mutant that
    loops past it is killed by ``step_limit`` without running for minutes."""
    from verify import falsify

    most = [0]

    class Counting(falsify.InterpreterEngine):
        def launch(self, *a: object, **k: object) -> falsify.LaunchOutcome:
            out = super().launch(*a, **k)  # type: ignore[arg-type]
            most[0] = max(most[0], out.thread_instructions)
            return out

    status, detail = judge(bundle_dir, Mutant("none", 0, "", "", ptx), 50_000_000,
                           engine=Counting(step_limit=50_000_000))
    if status != "survived":
        raise RuntimeError(f"{bundle_dir.name}: the unmutated PTX does not pass: {detail}")
    limit = max(200_000, most[0] // 4)
    status, detail = judge(bundle_dir, Mutant("none", 0, "", "", ptx), limit)
    if status != "survived":  # a divergent kernel: give it the safe bound
        limit = max(200_000, 2 * most[0])
    return limit


def judge(bundle_dir: Path, mutant: Mutant, step_limit: int = 2_000_000,
          timeout: float = 120.0, engine: object = None) -> tuple[str, str]:
    """Run the bundle's falsification tests on the mutant's PTX (the contract's seeds, so a
    campaign is reproducible): (status, detail)."""
    from verify import falsify
    from verify.model import Contract

    contract, oracles = _bundle(bundle_dir)
    if not isinstance(contract, Contract) or contract.kernel is None:
        return "not_run", "no kernel in the contract"
    if not isinstance(engine, falsify.InterpreterEngine):
        engine = falsify.InterpreterEngine(step_limit=step_limit)
    deadline = time.monotonic() + timeout
    skipped = ""
    for t in contract.falsification:
        c = falsify.run_test(contract.kernel, t, mutant.ptx, t.seed, engine, deadline=deadline,
                             oracles=oracles, run_seed=t.seed)  # type: ignore[arg-type]
        if c.status == "failed":
            return "killed", f"{c.id}: {c.detail}"
        if c.status == "skipped":
            skipped = skipped or f"{c.id}: {c.detail}"
    if skipped:
        return "not_run", skipped
    return "survived", "every falsification test passed"


def campaign(bundle_dirs: Sequence[Path], ptxas: str | None, *, operators: Sequence[str] =
             OPERATORS, select: int | None = None, step_limit: int = 50_000_000,
             progress: bool = False) -> list[Verdict]:
    """Generate, filter (ptxas) and judge the mutants of every bundle. ``select``: keep every
    ``select``-th mutant of each operator (a deterministic slice) except barrier and wait
    drops, which are always all kept. Without ptxas every mutant counts (say so when
    reporting)."""
    out: list[Verdict] = []
    for bdir in bundle_dirs:
        ptx_files = sorted(bdir.glob("*.ptx"))
        if not ptx_files:
            continue
        seen: dict[str, int] = {}
        ptx = ptx_files[0].read_bytes()
        limit = min(step_limit, calibrate(bdir, ptx))
        for mu in mutants(ptx):
            if mu.operator not in operators:
                continue
            k = seen.get(mu.operator, 0)
            seen[mu.operator] = k + 1
            if select and mu.operator not in ("drop_barrier", "drop_wait") and k % select:
                continue
            t0 = time.perf_counter()
            if ptxas is not None and not ptxas_accepts(mu.ptx, ptxas):
                out.append(Verdict(bdir.name, mu, "rejected", "ptxas rejects it",
                                   time.perf_counter() - t0))
                continue
            status, detail = judge(bdir, mu, limit)
            out.append(Verdict(bdir.name, mu, status, detail, time.perf_counter() - t0))
            if progress:
                print(f"{bdir.name} line {mu.line} {mu.operator}: {status} "
                      f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return out


def kill_rate(verdicts: Sequence[Verdict]) -> tuple[int, int, float]:
    """(killed, counted, rate): counted = killed + survived + not run (ptxas-accepted)."""
    counted = [v for v in verdicts if v.status != "rejected"]
    killed = sum(v.status == "killed" for v in counted)
    return killed, len(counted), (killed / len(counted) if counted else 1.0)
