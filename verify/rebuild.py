"""The ``rebuild.ptx`` check (SPEC 8 check ids; docs/external-tools.md "nvcc").

With ``kernel.source`` and ``kernel.build`` in the contract and nvcc available:

1. check the argv: the first item is exactly ``nvcc`` (which nvcc runs is decided by trusted
   settings, ``find_tool("nvcc", cuda=True)``, never by the contract); every other item is a flag
   from ``ALLOWED_FLAGS`` (with a plain value) or a plain value / bundle-relative path; ``-ptx`` is
   given, the output (``-o``) is exactly ``kernel.ptx`` and the source is named. Flags that run or
   load other programs (``-ccbin``, ``-Xcompiler``, ``--options-file``, ``--run`` ...) are refused
   because they are not on the list; ``-G`` (device debug) is refused: its output depends on
   the build machine. ``-lineinfo`` names the source by its absolute path, which is always
   ``BUILD_DIR`` below, so it rebuilds byte for byte and is allowed;
2. in a scratch copy of the bundle, delete the bundle's PTX and run nvcc with a timeout, inside
   bubblewrap (``verify.confine``: only ``/usr``, the CUDA installation and the scratch copy
   exist there, so an ``#include "/home/…/.ledger/log.key"`` finds nothing to quote in a
   diagnostic). The scratch copy is bound at the fixed path ``verify.confine.BUILD_DIR``
   (``/build/bundle``), where ``ledger new`` builds too: nvcc's module id (below) is hashed from
   the source's absolute path, so a bundle copied to any directory rebuilds byte for byte.
   Where no sandbox can run, the check is ``skipped`` and says why, unless the trusted option
   ``--trust-bundle-code`` runs nvcc without one (every detail then says so);
3. compare the output with the bundle's PTX byte for byte (worded as the bundle's, never as
   "sealed": a checked bundle may never have been sealed); on a mismatch the detail shows the
   first differing line (and says when it is the compiler-version comment nvcc writes). The one
   difference forgiven is nvcc's module id: internal-linkage symbols (an anonymous namespace,
   e.g. the ``cuda::std`` objects ``<cooperative_groups.h>`` pulls in) are named
   ``_INTERNAL_<id>_`` / ``_GLOBAL__N__<id>_`` with an 8-hex-digit id hashed from the source's
   absolute path, so a rebuild can match only a build made at the same path (``BUILD_DIR``:
   ``ledger new``'s, or an author's own build inside that sandbox). When the two files are
   equal once every id of the rebuilt PTX is replaced by the bundle's PTX's id at the same place,
   one to one, the check is ``skipped`` and says so: SPEC
   section 8 defines a pass as byte-for-byte equality, which cannot be shown here, and nothing
   else differs, so it is no failure either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ledger.core.bundle import check_path
from ledger.core.errors import BadInput, BundleError
from verify.confine import BUILD_DIR, confined_argv, sandbox_status
from verify.context import Context, Started, done
from verify.model import Kernel
from verify.ptxdiff import first_difference
from verify.report import Check, failed, passed, skipped
from verify.tools import RunningTool, find_tool, start_release, tool_release

# nvcc options that only steer PTX generation (names without leading dashes).
# fmt: off
ALLOWED_FLAGS = frozenset({
    "ptx", "o", "output-file", "arch", "gpu-architecture", "code", "gpu-code", "std",
    "maxrregcount", "I", "include-path", "D", "define-macro", "U", "undefine-macro", "x",
    "default-stream", "diag-suppress", "O0", "O1", "O2", "O3", "optimize", "ftz", "prec-div",
    "prec-sqrt", "fmad", "rdc", "relocatable-device-code", "extra-device-vectorization",
    "restrict", "use_fast_math", "use-fast-math", "expt-relaxed-constexpr", "extended-lambda",
    "expt-extended-lambda", "w", "disable-warnings", "src-in-ptx", "m64", "machine", "dopt",
    "Wno-deprecated-gpu-targets", "Werror", "lineinfo", "generate-line-info",
})
# fmt: on
# nvcc's per-source module id inside internal-linkage names (hashed from the source's path).
_MODULE_ID = re.compile(rb"(?:(?<=_INTERNAL_)|(?<=_GLOBAL__N__))[0-9a-f]{8}(?=_)")
_PATH_EMBEDDING = frozenset({"G", "device-debug", "g", "debug"})
_FLAG = re.compile(r"(--?)([A-Za-z][\w\-]*)(?:=(.*))?")
_JOINED = re.compile(r"-([DUI])(.+)")
_VALUE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.,+=/\-]*")


def _value_ok(v: str) -> bool:
    """A plain value (``sm_86``, ``c++17``, ``N=256``) or a bundle-relative path."""
    if not _VALUE.fullmatch(v):
        return False
    if "/" in v:
        try:
            check_path(v)
        except BundleError:
            return False
    return True


def check_build(build: Sequence[str], ptx: str, source: str) -> list[str]:
    """The argv to run after ``nvcc``; ``BadInput`` naming the first refused item."""
    if not build or build[0] != "nvcc":
        raise BadInput("kernel.build must start with 'nvcc'")
    out: str | None = None
    want_output = False
    has_ptx = False
    for i, item in enumerate(build[1:], start=1):
        if want_output:
            out, want_output = item, False
            continue
        if not item.startswith("-"):
            if not _value_ok(item):
                raise BadInput(
                    f"kernel.build[{i}] {item[:60]!r}: not a plain value or a bundle-relative path"
                )
            continue
        if jm := _JOINED.fullmatch(item):  # -DNAME=1, -UNAME, -Iinclude/dir
            if not _value_ok(jm.group(2)):
                raise BadInput(f"kernel.build[{i}] {item[:60]!r}: bad value")
            continue
        m = _FLAG.fullmatch(item)
        if m is None:
            raise BadInput(f"kernel.build[{i}] {item[:60]!r}: not a plain flag")
        name, value = m.group(2), m.group(3)
        if name in _PATH_EMBEDDING:
            raise BadInput(
                f"kernel.build[{i}] {item!r}: embeds absolute paths in the PTX, so "
                "the rebuild can never match byte for byte"
            )
        if name not in ALLOWED_FLAGS:
            raise BadInput(
                f"kernel.build[{i}] {item[:60]!r}: nvcc option not allowed in a "
                "rebuild (allowed: see docs/external-tools.md)"
            )
        if value is not None and not _value_ok(value):
            raise BadInput(f"kernel.build[{i}] {item[:60]!r}: value is not plain")
        if name == "ptx":
            has_ptx = True
        if name in ("o", "output-file"):
            if value is None:
                want_output = True
            else:
                out = value
    if want_output:
        raise BadInput("kernel.build ends with -o and no output path")
    if not has_ptx:
        raise BadInput("kernel.build does not ask for PTX (-ptx)")
    if out != ptx:
        raise BadInput(f"kernel.build writes {out!r}, not the kernel's PTX {ptx!r}")
    if source not in build[1:]:
        raise BadInput(f"kernel.build does not compile the kernel's source {source!r}")
    return list(build[1:])


def same_up_to_module_id(sealed: bytes, rebuilt: bytes) -> bool:
    """True when ``rebuilt`` equals ``sealed`` once nvcc's module ids are renamed one to one.

    The ids must pair up by position (the n-th id of one file with the n-th of the other) into a
    bijection, and the files must then be identical: renaming internal-linkage symbols
    consistently changes no instruction, but anything else that differs still fails."""
    a, b = _MODULE_ID.findall(sealed), _MODULE_ID.findall(rebuilt)
    if not a or len(a) != len(b):
        return False
    pairs = set(zip(a, b, strict=True))
    if len({x for x, _ in pairs}) != len(pairs) or len({y for _, y in pairs}) != len(pairs):
        return False
    back = {y: x for x, y in pairs}
    return _MODULE_ID.sub(lambda mt: back[mt.group(0)], rebuilt) == sealed


def rebuild_check(ctx: Context) -> Check:
    (check,) = start(ctx).finish()
    return check


def start(ctx: Context) -> Started:
    """``rebuild.ptx`` with nvcc started now and compared in ``finish()`` (the runner lets it run
    beside the falsification tests); a Triton build goes to ``verify.rebuild_triton``."""
    k = ctx.contract.kernel if ctx.contract is not None else None
    if k is not None and k.source and k.build and k.build[0] == "triton":
        present = {f.path for f in ctx.bundle.files}
        if k.source in present and k.ptx in present:
            from verify import rebuild_triton

            return rebuild_triton.start(ctx)
    ready = _prepare(ctx)
    if isinstance(ready, Started):
        return ready
    k, nvcc, args, bwrap = ready
    scratch = ctx.scratch()
    target = scratch / k.ptx
    target.unlink()
    timeout = ctx.options.timeout
    argv = [nvcc, *args]
    tool = RunningTool(
        argv if bwrap is None else confined_argv(bwrap, nvcc, scratch, argv, at=BUILD_DIR),
        cwd=scratch,
        timeout=timeout,
    )
    # every detail of a run outside the sandbox says so
    where = (f" (built at {BUILD_DIR})" if bwrap is not None else
             " (nvcc ran without a sandbox: --trust-bundle-code)")
    release = start_release(nvcc)  # beside nvcc
    cmd = " ".join(k.build)

    def finish() -> list[Check]:
        res = tool.result()
        version = release()
        if res.timed_out:
            return [failed("rebuild.ptx", f"{cmd}: timed out after {timeout:g} s", "nvcc", version)]
        if not res.ok or not target.is_file():
            # Only the diagnostic lines, not nvcc's echo of the offending source text.
            msgs = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if "error" in ln]
            err = " / ".join(msgs)[:400] or "no diagnostics"
            return [failed(
                "rebuild.ptx",
                f"{cmd}: exit {res.returncode}, no PTX written: {err}{where}",
                "nvcc",
                version,
            )]
        return [_compare(ctx.bundle.file(k.ptx), target.read_bytes(), k.ptx, cmd, where, version)]

    return Started(finish, [tool])


def _prepare(ctx: Context) -> Started | tuple[Kernel, str, list[str], str | None]:
    """The kernel, nvcc, its checked arguments and bwrap (None: trusted, no sandbox); or the
    finished check when the rebuild cannot or must not run."""
    k = ctx.contract.kernel if ctx.contract is not None else None
    if k is None:
        why = "contract not loaded" if ctx.contract is None else "contract has no kernel section"
        return done([skipped("rebuild.ptx", f"{why}: no build to run", tool="nvcc")])
    if not k.source or not k.build:
        return done([skipped(
            "rebuild.ptx", "the contract gives no .cu source and build command", tool="nvcc"
        )])
    present = {f.path for f in ctx.bundle.files}
    for role, path in (("source", k.source), ("ptx", k.ptx)):
        if path not in present:
            return done([failed(
                "rebuild.ptx", f"kernel.{role} {path!r} is not in the bundle", tool="nvcc"
            )])
    nvcc = find_tool("nvcc", cuda=True)
    if nvcc is None:
        return done([
            skipped("rebuild.ptx", "no nvcc on PATH or in the CUDA locations", tool="nvcc")
        ])
    try:
        args = check_build(k.build, k.ptx, k.source)
    except BadInput as e:
        return done(
            [failed("rebuild.ptx", f"refused build command: {e}", "nvcc", tool_release(nvcc))]
        )
    bwrap, why = sandbox_status()
    if bwrap is None and not ctx.options.trust_bundle_code:
        return done([skipped(
            "rebuild.ptx",
            "nvcc preprocesses the bundle's source, and an #include in it can read any file of "
            f"this machine: it runs only in a sandbox, and here there is {why.removeprefix('no ')}"
            " (--trust-bundle-code runs it without one)",
            "nvcc",
            tool_release(nvcc),
        )])
    return k, nvcc, args, bwrap


def _compare(bundled: bytes, rebuilt: bytes, ptx_path: str, cmd: str, where: str,
             version: str) -> Check:
    """Byte-for-byte equality with the bundle's PTX (passed), equality up to nvcc's module id
    (skipped), else failed with the first difference. Worded as the bundle's PTX, never "the
    sealed": ``ledger check`` runs on bundles that were never sealed."""
    if rebuilt != bundled and same_up_to_module_id(bundled, rebuilt):
        return skipped(
            "rebuild.ptx",
            f"{cmd}: byte-for-byte equality cannot be shown: nvcc names internal-linkage "
            "symbols with a module id hashed from the source's absolute path, the bundle's "
            f"PTX was not built at {BUILD_DIR} (as `ledger new` builds), and the rebuilt "
            f"{ptx_path} equals the bundle's PTX ({len(bundled)} bytes) once those ids are "
            f"renamed one to one{where}",
            "nvcc",
            version,
        )
    if rebuilt != bundled:
        return failed(
            "rebuild.ptx",
            f"{cmd}: rebuilt {ptx_path} differs from the bundle's; "
            f"{first_difference(bundled, rebuilt)}{where} (after editing the source, run "
            "`ledger rebuild DIR` to refresh the bundle's PTX)",
            "nvcc",
            version,
        )
    return passed(
        "rebuild.ptx",
        f"{cmd}: rebuilt {ptx_path} equals the bundle's PTX ({len(bundled)} bytes){where}",
        "nvcc",
        version,
    )


def run(ctx: Context) -> list[Check]:
    """``[rebuild.ptx]``."""
    return start(ctx).finish()
