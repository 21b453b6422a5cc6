"""``rebuild.ptx`` for a Triton kernel (``kernel.build[0] == "triton"``; ``verify.triton_build``).

1. check the argv (``parse_build``): the options of one compile, the kernel's source and PTX;
2. Triton installed beside this Python (the ``triton`` extra), else ``skipped``; a different
   Triton version than the contract's ``--version`` is ``skipped`` and says both (Triton's PTX
   changes between releases, so a rebuild with another one can show nothing either way);
3. in a scratch copy of the bundle without the bundle's PTX, run the driver inside bubblewrap at
   ``BUILD_DIR`` (it imports the bundle's Python file): no sandbox here is ``skipped`` with the
   reason, unless ``--trust-bundle-code``;
4. compare byte for byte with the bundle's PTX (``verify.rebuild``'s rules, without nvcc's module
   id, which Triton has no counterpart of).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ledger.core.errors import BadInput
from verify.confine import BUILD_DIR, sandbox_status
from verify.context import Context, Started, done
from verify.report import Check, failed, passed, skipped
from verify.tools import RunningTool
from verify.triton_build import (
    DRIVER,
    DRIVER_AT,
    confined_python_argv,
    driver_command,
    installed,
    parse_build,
    unconfined_env,
)

TOOL = "triton"


def start(ctx: Context) -> Started:
    """The Triton rebuild started now, compared in ``finish()``."""
    k = ctx.contract.kernel if ctx.contract is not None else None
    assert k is not None and k.source  # verify.rebuild dispatches here only with both
    try:
        tb = parse_build(k.build, k.ptx, k.source)
    except BadInput as e:
        return done([failed("rebuild.ptx", f"refused build command: {e}", tool=TOOL)])
    here = installed()
    if here is None:
        return done([skipped(
            "rebuild.ptx", "Triton is not installed beside the verifier (the `triton` extra: "
            "pip install 'kernel-ledger[triton]')", tool=TOOL,
        )])  # fmt: skip
    site, version = here
    if version != tb.version:
        return done([skipped(
            "rebuild.ptx", f"the PTX was built with Triton {tb.version} and Triton {version} is "
            "installed here: its PTX differs between releases, so this rebuild shows nothing",
            TOOL, version,
        )])  # fmt: skip
    bwrap, why = sandbox_status()
    if bwrap is None and not ctx.options.trust_bundle_code:
        return done([skipped(
            "rebuild.ptx", "Triton compiles by importing the bundle's Python file: it runs only "
            f"in a sandbox, and here there is {why.removeprefix('no ')} (--trust-bundle-code "
            "runs it without one)", TOOL, version,
        )])  # fmt: skip
    scratch = ctx.scratch()
    target = scratch / k.ptx
    target.unlink()
    timeout = max(ctx.options.timeout, 300.0)
    if bwrap is not None:
        tool = RunningTool(
            confined_python_argv(bwrap, scratch, site, driver_command(tb, site, DRIVER_AT)),
            cwd=scratch, timeout=timeout,
        )  # fmt: skip
        where, cache = f" (built at {BUILD_DIR})", None
    else:
        cache = tempfile.TemporaryDirectory(prefix="ledger-triton-")
        tool = RunningTool(
            driver_command(tb, site, str(DRIVER)), cwd=scratch, timeout=timeout,
            env=unconfined_env(Path(cache.name)),
        )  # fmt: skip
        where = " (Triton ran without a sandbox: --trust-bundle-code)"
    cmd = " ".join(k.build)

    def finish() -> list[Check]:
        res = tool.result()
        if cache is not None:
            cache.cleanup()
        if res.timed_out:
            return [failed("rebuild.ptx", f"{cmd}: timed out after {timeout:g} s", TOOL, version)]
        if not res.ok or not target.is_file():
            lines = (res.stderr + res.stdout).strip().splitlines()
            err = (lines[-1] if lines else "no diagnostics").strip()[:300]
            return [failed("rebuild.ptx", f"{cmd}: exit {res.returncode}, no PTX written: "
                           f"{err}{where}", TOOL, version)]  # fmt: skip
        return [_compare(ctx.bundle.file(k.ptx), target.read_bytes(), k.ptx, cmd, where, version)]

    return Started(finish, [tool])


def _compare(bundled: bytes, rebuilt: bytes, ptx: str, cmd: str, where: str,
             version: str) -> Check:
    from verify.ptxdiff import first_difference

    if rebuilt != bundled:
        return failed("rebuild.ptx", f"{cmd}: rebuilt {ptx} differs from the bundle's; "
                      f"{first_difference(bundled, rebuilt)}{where}", TOOL, version)  # fmt: skip
    return passed("rebuild.ptx", f"{cmd}: rebuilt {ptx} equals the bundle's PTX "
                  f"({len(bundled)} bytes){where}", TOOL, version)  # fmt: skip
