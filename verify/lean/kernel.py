"""The check group ``lean.scan`` + ``lean.kernel`` (SPEC 8).

``run(ctx)``:

1. scans every ``.lean`` file of the bundle (``verify.lean.scan``) and collects the theorems the
   contract names (``lean_refs`` and ``claims[].theorem``; none when there is no contract);
2. ``lean.scan`` fails on any problem (the detail names the first few as ``path:line:col``), on a
   named theorem that no file declares (or that is a definition, or private), or whose
   statement proves nothing (``verify.lean.claims``); else it passes and says how many files and
   theorems it checked, and what the statement check found (``unchecked`` ones named);
3. ``lean.kernel`` is skipped without a toolchain (``lean`` or ``lake`` on PATH), and when
   ``lean.scan`` failed (a file with an escape is never compiled: compiling runs its code). Else,
   in a scratch copy of the bundle:

   a. with a ``lakefile.toml`` and ``lake``: ``lake build``; otherwise each file with
      ``lean -o build/<Module>.olean`` in import order, with ``LEAN_PATH`` = the build directory
      and the toolchain's library (``lean --print-prefix``/lib/lean). A ``lakefile.lean`` is Lean
      code that runs at configuration time, so it is scanned like any file (and refused);
   b. a generated file imports the modules declaring the named theorems (with Lake, relative to
      the ``srcDir`` of ``lakefile.toml``) and runs ``#print axioms`` for each named theorem,
      each preceded by a ``#print "LEDGER-AXIOMS <i>"`` marker so the output splits per theorem;
   c. passes only if everything compiled, no message says a declaration uses ``sorry``, and
      every named theorem depends on no axiom beyond ``propext``, ``Classical.choice``,
      ``Quot.sound``.

Every tool run is bounded (``verify.tools.run_tool``: timeout, memory, output size).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from verify.context import Context
from verify.lean.bundle import bundle_problems
from verify.lean.claims import summary, verdicts_for
from verify.lean.lexer import IDENT_RE, name_parts
from verify.lean.scan import (
    COMMANDS,
    REJECT_WORDS,
    FileScan,
    LeanScan,
    Problem,
    module_name,
    plain_name,
    scan_details,
    theorem_key,
)
from verify.model import Contract
from verify.report import Check, failed, passed, skipped
from verify.tools import ToolResult, find_tool, run_tool, tool_version

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
MARKER = "LEDGER-AXIOMS"
AXIOMS_FILE = "LedgerPrintAxioms.lean"
BUILD_DIR = ".ledger-build"
SHOW = 5  # problems / theorems named in a detail

_MARK_RE = re.compile(MARKER + r" (\d+)")
_DEPENDS_RE = re.compile(r"depends on axioms:\s*\[([^\]]*)\]")
_NO_AXIOMS = "does not depend on any axioms"
_SORRY_RE = re.compile(r"declaration uses 'sorry'")


def named_theorems(contract: Contract | None) -> list[str]:
    """Every theorem the contract names, once each, in order (``_root_.`` dropped, components
    canonical: ``verify.lean.scan.theorem_key``)."""
    if contract is None:
        return []
    out: list[str] = []
    for name in [r.theorem for r in contract.lean_refs] + [c.theorem for c in contract.claims]:
        name = theorem_key(name)
        if name and name not in out:
            out.append(name)
    return out


def scan_check(
    scan: LeanScan,
    scans: Sequence[FileScan],
    names: Sequence[str],
    has_contract: bool,
    extra: Sequence[Problem] = (),
) -> Check:
    """``lean.scan`` from the scan, the names the contract gives and the problems with the
    bundle's other files (``verify.lean.bundle``)."""
    files = len(scans)
    if files == 0:
        return failed("lean.scan", "the bundle has no .lean file")
    problems = sorted([*scan.problems, *extra], key=lambda p: (p.path, p.line, p.col))
    if problems:
        shown = "; ".join(str(p) for p in problems[:SHOW])
        more = f" (and {len(problems) - SHOW} more)" if len(problems) > SHOW else ""
        return failed("lean.scan", f"{len(problems)} problem(s): {shown}{more}")
    private = set().union(*(s.private for s in scans))
    bad: list[str] = []
    for n in names:
        where = [s.path for s in scans for d in s.declarations if d == n]
        if not plain_name(n):  # «a.b», «x: y»: not what the contract seems to say; and the
            # name would be quoted in the '#print axioms' answer that lean.kernel parses
            bad.append(f"theorem {n}: name components must be plain identifiers")
        elif len(where) > 1:
            bad.append(f"theorem {n} is declared {len(where)} times ({', '.join(where)})")
        elif n not in scan.declarations:
            bad.append(f"theorem {n} is not declared in any .lean file")
        elif n not in scan.theorems:
            bad.append(f"{n} is declared, but not as a theorem or lemma")
        elif n in private:
            bad.append(f"theorem {n} is private (it cannot be checked from outside its file)")
    if bad:
        return failed("lean.scan", "; ".join(bad))
    what = f"{files} .lean file(s), {scan.bytes_scanned} bytes, {len(scan.theorems)} theorem(s)"
    if not has_contract:
        return passed(
            "lean.scan", f"{what}: no escape found; no contract, so no theorems were named"
        )
    if not names:
        return passed("lean.scan", f"{what}: no escape found; the contract names no theorems")
    verdicts = verdicts_for(scan, names)  # issue 33: statements that prove nothing
    empty = [f"theorem {n}: {v.why}" for n, v in verdicts.items() if v.vacuous]
    if empty:
        return failed("lean.scan", "; ".join(empty[:SHOW]) + _more(len(empty)))
    return passed(
        "lean.scan",
        f"{what}: no escape found; all {len(names)} theorem(s) the contract names are declared; "
        + summary(verdicts),
    )


def _more(count: int) -> str:
    return f" (and {count - SHOW} more)" if count > SHOW else ""


def lean_name(name: str) -> str:
    """``name`` as Lean source: components that are not plain identifiers are «escaped»."""
    try:
        components = name_parts(name)
    except ValueError:
        components = name.split(".")
    parts = []
    for p in components:
        plain = IDENT_RE.fullmatch(p) and p not in REJECT_WORDS and p not in COMMANDS
        parts.append(p if plain else f"«{p}»")
    return ".".join(parts)


def axioms_source(modules: Sequence[str], names: Sequence[str]) -> str:
    """The generated file of step 3b."""
    lines = [f"import {m}" for m in modules]
    for i, n in enumerate(names):
        lines.append(f'#print "{MARKER} {i}"')
        lines.append(f"#print axioms {lean_name(n)}")
    return "\n".join(lines) + "\n"


def parse_axioms(output: str, count: int) -> list[list[str] | None]:
    """Per named theorem (by marker index): its axioms, or None when the output has no answer."""
    found: list[list[str] | None] = [None] * count
    marks = list(_MARK_RE.finditer(output))
    for k, m in enumerate(marks):
        i = int(m.group(1))
        if not 0 <= i < count:
            continue
        seg = output[m.end() : marks[k + 1].start() if k + 1 < len(marks) else len(output)]
        deps = list(_DEPENDS_RE.finditer(seg))  # the last: a name cannot spoof the list
        dep = deps[-1] if deps else None
        if dep is not None:
            found[i] = [a.strip() for a in dep.group(1).split(",") if a.strip()]
        elif _NO_AXIOMS in seg:
            found[i] = []
    return found


def lake_src_dirs(lakefile: Path) -> list[str]:
    """The ``srcDir`` values of a ``lakefile.toml`` (package and ``lean_lib`` entries), if any."""
    import tomllib  # only with a Lean toolchain and a Lake project (start-up, issue 12)

    try:
        doc = tomllib.loads(lakefile.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    found = [doc.get("srcDir")]
    libs = doc.get("lean_lib")
    if isinstance(libs, list):
        found += [lib.get("srcDir") for lib in libs if isinstance(lib, dict)]
    dirs = {str(d).strip("./") for d in found if isinstance(d, str) and d.strip("./")}
    return sorted(dirs, key=len, reverse=True)


def theorem_modules(
    scans: Sequence[FileScan], names: Sequence[str], src_dirs: Sequence[str] = ()
) -> list[str]:
    """The modules declaring the named theorems (each once), relative to a Lake ``srcDir``."""
    out: list[str] = []
    for n in names:
        for s in scans:
            if n in s.theorems:
                path = s.path
                for d in src_dirs:
                    if path.startswith(d + "/"):
                        path = path[len(d) + 1 :]
                        break
                mod = module_name(path)
                if mod not in out:
                    out.append(mod)
                break
    return out


def compile_order(scans: Sequence[FileScan]) -> list[FileScan] | str:
    """Files in an order where each comes after the bundle files it imports, or a cycle message."""
    by_module = {s.module: s for s in scans}
    order: list[FileScan] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(s: FileScan, trail: list[str]) -> str | None:
        if state.get(s.module) == 2:
            return None
        if state.get(s.module) == 1:
            return "import cycle: " + " -> ".join([*trail, s.module])
        state[s.module] = 1
        for imp in s.imports:
            dep = by_module.get(imp)
            if dep is not None:
                err = visit(dep, [*trail, s.module])
                if err:
                    return err
        state[s.module] = 2
        order.append(s)
        return None

    for s in sorted(scans, key=lambda s: s.path):
        err = visit(s, [])
        if err:
            return err
    return order


def compile_argv(lean: str, path: str) -> list[str]:
    """argv compiling bundle file ``path`` into ``BUILD_DIR`` (modules named from the root)."""
    stem = path[: -len(".lean")]
    return [
        lean,
        "--root=.",
        "-o",
        f"{BUILD_DIR}/{stem}.olean",
        "-i",
        f"{BUILD_DIR}/{stem}.ilean",
        path,
    ]


def _first_lines(res: ToolResult, limit: int = 3) -> str:
    if res.timed_out:
        return "timed out"
    lines = [ln.strip() for ln in (res.stdout + "\n" + res.stderr).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln] or lines
    text = " | ".join(errors[:limit]) or f"exit status {res.returncode}"
    return text[:600]


def kernel_check(ctx: Context, scans: Sequence[FileScan], names: Sequence[str]) -> Check:
    lean, lake = find_tool("lean"), find_tool("lake")
    if lean is None and lake is None:
        return skipped("lean.kernel", "no Lean toolchain (lean or lake) on PATH")
    tool = lake if lean is None else lean
    assert tool is not None
    version = tool_version(tool)
    name = "lake" if tool == lake else "lean"
    order = compile_order(scans)
    if isinstance(order, str):
        return failed("lean.kernel", order, name, version)
    work = ctx.scratch()
    # the verifier's Lean decides the version, never the bundle's own pin (elan reads this file)
    (work / "lean-toolchain").unlink(missing_ok=True)
    timeout = ctx.options.timeout
    has_lakefile = (work / "lakefile.toml").is_file()
    if has_lakefile and lake is not None:
        name, version = "lake", tool_version(lake)
        res = run_tool([lake, "build"], cwd=work, timeout=timeout)
        if not res.ok:
            return failed("lean.kernel", f"lake build failed: {_first_lines(res)}", name, version)
        outputs = res.stdout + res.stderr
        runner = [lake, "env", "lean", AXIOMS_FILE]
        env: dict[str, str] = {}
    elif lean is not None:
        prefix = run_tool([lean, "--print-prefix"], cwd=work, timeout=60)
        if not prefix.ok or not prefix.stdout.strip():
            return failed(
                "lean.kernel", f"lean --print-prefix failed: {_first_lines(prefix)}", name, version
            )
        lib = Path(prefix.stdout.strip().splitlines()[-1]) / "lib" / "lean"
        env = {"LEAN_PATH": f"{work / BUILD_DIR}:{lib}"}
        outputs = ""
        for s in order:
            (work / BUILD_DIR / s.path).parent.mkdir(parents=True, exist_ok=True)
            res = run_tool(compile_argv(lean, s.path), cwd=work, timeout=timeout, env=env)
            if not res.ok:
                return failed(
                    "lean.kernel", f"{s.path} does not compile: {_first_lines(res)}", name, version
                )
            outputs += res.stdout + res.stderr
        runner = [lean, AXIOMS_FILE]
    else:
        return skipped(
            "lean.kernel", "only lake on PATH and the bundle has no lakefile.toml", "lake", version
        )
    if _SORRY_RE.search(outputs):
        return failed(
            "lean.kernel", "a declaration uses 'sorry' (Lean's own warning)", name, version
        )
    if not names:
        return passed(
            "lean.kernel",
            f"{len(order)} file(s) compiled; the contract names no theorems",
            name,
            version,
        )
    src_dirs = lake_src_dirs(work / "lakefile.toml") if runner[0] == lake else []
    modules = theorem_modules(scans, names, src_dirs)
    (work / AXIOMS_FILE).write_text(axioms_source(modules, names), "utf-8")
    res = run_tool(runner, cwd=work, timeout=timeout, env=env)
    if not res.ok:
        return failed("lean.kernel", f"#print axioms failed: {_first_lines(res)}", name, version)
    return axioms_check(res, names, len(order), name, version)


def axioms_check(
    res: ToolResult, names: Sequence[str], files: int, name: str, version: str
) -> Check:
    """``lean.kernel`` from the ``#print axioms`` run's output (step 3c)."""
    found = parse_axioms(res.stdout + res.stderr, len(names))
    bad: list[str] = []
    for n, axioms in zip(names, found, strict=True):
        if axioms is None:
            bad.append(f"{n}: no '#print axioms' answer")
        elif not set(axioms) <= ALLOWED_AXIOMS:
            extra = ", ".join(a for a in axioms if a not in ALLOWED_AXIOMS)
            bad.append(f"{n} depends on {extra}")
    if bad:
        return failed("lean.kernel", "; ".join(bad[:SHOW]), name, version)
    shown = ", ".join(names[:SHOW]) + (" ..." if len(names) > SHOW else "")
    return passed(
        "lean.kernel",
        f"{files} file(s) compiled; {len(names)} theorem(s) depend on no axiom beyond "
        f"propext, Classical.choice, Quot.sound: {shown}",
        name,
        version,
    )


def run(ctx: Context) -> list[Check]:
    """The checks ``lean.scan`` and ``lean.kernel`` for ``ctx.bundle``."""
    files = {f.path: f.data for f in ctx.bundle.with_suffix(".lean")}
    scan, scans = scan_details(files)
    names = named_theorems(ctx.contract)
    extra = bundle_problems({f.path: f.data for f in ctx.bundle.files})
    first = scan_check(scan, scans, names, ctx.contract is not None, extra)
    first = Check(first.id, first.status, first.detail, "verify.lean.scan", "1")
    if first.status != "passed":
        if find_tool("lean") is None and find_tool("lake") is None:
            second = skipped("lean.kernel", "no Lean toolchain (lean or lake) on PATH")
        else:
            second = skipped(
                "lean.kernel",
                "not run: lean.scan failed (files are compiled only after a clean scan)",
            )
        return [first, second]
    return [first, kernel_check(ctx, scans, names)]
