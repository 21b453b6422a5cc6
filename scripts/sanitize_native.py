"""Sanitizer campaign: the compiled module (``ledger/core/_native.c``) under AddressSanitizer and
UBSan.

``ledger.core._native`` parses untrusted bytes (entries a mirror or an audit reads, ``parse_plain``
and
``bundle_view``), writes canonical JSON of a bundle's fields (``join_plain``) and signs and
verifies on threads of its own. The suite holds each of those to its pure-Python twin, but a
read past a buffer or an undefined shift can give the right answer and still be a bug. This
campaign builds the module with ``-fsanitize=address,undefined`` (any report aborts the run) into
a copy of the working tree, and runs there the tests that reach it, their hypothesis examples
multiplied by ``--scale`` (``LEDGER_HYPOTHESIS_SCALE``, tests/helpers/examples.py):

* tests/ledger/core/test_native.py: every function against its twin, damaged entries, the shape
rules;
* tests/ledger/core/test_canonical.py: the canonical parser on random and damaged bytes;
* tests/ledger/store/test_fuzz_ledger.py: the entry decoder on random bytes and one-byte mutations;
* tests/ledger/test_sealers.py: entries made by ``join_plain`` in forked workers and stored;
* tests/campaigns/test_hostile_entries.py, tests/ledger/store/test_sqlite.py,
tests/campaigns/test_tampering.py, tests/ledger/test_mirror.py (not with
  ``--quick``): the scanner and the signature threads on real ledgers, damaged, audited and
  mirrored.

Python itself is not instrumented: the runtime is preloaded (``LD_PRELOAD``), leak checking is
off (the interpreter keeps its objects at exit), every Python object comes from ``malloc``
(``PYTHONMALLOC=malloc``, so ASan sees its bounds), and a report stops the test process and is
printed with the tests' output (``-s``). ``--thread`` builds with ThreadSanitizer instead, for
the signing and verify threads (its races with the uninstrumented interpreter are not seen).
Needs gcc with its sanitizer runtimes (Debian ``gcc``, as set-up installs for the module).

    .venv/bin/python scripts/sanitize_native.py                # scale 10: about 8 minutes here
    .venv/bin/python scripts/sanitize_native.py --scale 100    # over an hour
    .venv/bin/python scripts/sanitize_native.py --quick        # scale 1, the first four files
    .venv/bin/python scripts/sanitize_native.py --thread       # ThreadSanitizer

Exit status: 0 when every test passed and no sanitizer reported anything, 1 when a test failed or
a report was written, 2 when the campaign cannot run here (no gcc or no sanitizer runtime, bad
arguments). Results of runs: docs/reliability.md, "Sanitizers".
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/ledger/core/test_native.py", "tests/ledger/core/test_canonical.py",
         "tests/ledger/store/test_fuzz_ledger.py", "tests/ledger/test_sealers.py"]
SLOW_TESTS = ["tests/campaigns/test_hostile_entries.py", "tests/ledger/store/test_sqlite.py",
              "tests/campaigns/test_tampering.py", "tests/ledger/test_mirror.py"]
FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer"]
# per mode: the compiler's sanitizer flags, the runtimes to preload, the environment they read
MODES: dict[str, tuple[list[str], tuple[str, ...], dict[str, str]]] = {
    "address": (
        ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
        ("libasan.so", "libubsan.so"),
        {
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
            "PYTHONMALLOC": "malloc",  # every object from malloc, so ASan sees each one's bounds
        },
    ),
    "thread": (["-fsanitize=thread"], ("libtsan.so",), {"TSAN_OPTIONS": "halt_on_error=1"}),
}

# the first line of a report from either runtime
MARKERS = ("ERROR: AddressSanitizer", ": runtime error: ", "WARNING: ThreadSanitizer")


class CannotRun(Exception):
    """The campaign cannot run on this machine (exit 2)."""


def runtime(name: str) -> str:
    """The path of gcc's shared sanitizer runtime ``name`` (``libasan.so``)."""
    try:
        out = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True,
                             timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        raise CannotRun(f"gcc is not usable here ({e})") from e
    if not os.path.isabs(out) or not os.path.exists(out):
        raise CannotRun(f"gcc has no {name} here (Debian: the gcc package's libasan/libubsan)")
    return out


def copy_tree(dest: Path) -> None:
    """The working tree's files that git knows of (tracked, and untracked but not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
        capture_output=True, timeout=60, check=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / ".venv").symlink_to(ROOT / ".venv")


def build(tree: Path, flags: list[str]) -> Path:
    """``ledger/core/_native.c`` built with the sanitizers into ``tree``'s ledger/ (where the copy's
    ``import ledger`` finds it first)."""
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = tree / "ledger" / "core" / f"_native{suffix}"
    cmd = ["gcc", "-shared", "-fPIC", *FLAGS, *flags, f"-I{include}",
           str(tree / "ledger" / "core" / "_native.c"), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if res.returncode != 0:
        raise CannotRun(f"the sanitized build failed: {res.stderr.strip()[-300:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=10,
                    help="multiply each hypothesis test's examples by this (default 10)")
    ap.add_argument("--quick", action="store_true",
                    help="scale 1, and only the first four test files")
    ap.add_argument("--thread", dest="mode", action="store_const", const="thread",
                    default="address",
                    help="ThreadSanitizer instead of ASan + UBSan (the C signing and verify "
                    "threads)")
    ap.add_argument("--keep", action="store_true", help="keep the campaign's directory")
    args = ap.parse_args(argv)
    if args.scale < 1:
        print("sanitize_native: --scale must be 1 or more", file=sys.stderr)
        return 2
    scale = 1 if args.quick else args.scale
    tests = TESTS if args.quick else TESTS + SLOW_TESTS
    work = Path(tempfile.mkdtemp(prefix="ledger-sanitize-"))
    try:
        try:
            flags, runtimes, options = MODES[args.mode]
            preload = ":".join(runtime(n) for n in runtimes)
            copy_tree(work / "tree")
            build(work / "tree", flags)
        except (CannotRun, subprocess.SubprocessError, OSError) as e:
            print(f"sanitize_native: cannot run here: {e}", file=sys.stderr)
            return 2
        env = {
            **os.environ,
            "LD_PRELOAD": preload,
            **options,
            "LEDGER_HYPOTHESIS_SCALE": str(scale),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.pop("LEDGER_NATIVE", None)  # the module must be on
        for name in [k for k in env if k.startswith("COVERAGE_")]:
            del env[name]  # a run under coverage (the suite) does not measure the copy
        check = ("from ledger import native, _native; "
                 "assert native.AVAILABLE, 'the compiled module did not load'; "
                 "print(_native.__file__)")
        probe = subprocess.run([str(ROOT / ".venv/bin/python"), "-c", check], cwd=work / "tree",
                               env=env, capture_output=True, text=True, timeout=120, check=False)
        if probe.returncode != 0 or not probe.stdout.startswith(str(work / "tree")):
            print("sanitize_native: cannot run here: the sanitized module does not load "
                  f"({(probe.stderr or probe.stdout).strip()[-300:]})", file=sys.stderr)
            return 2
        print(f"sanitized module ({args.mode}): {probe.stdout.strip()}; scale {scale}; "
              f"{len(tests)} test files",
              flush=True)
        t0 = time.monotonic()
        # -s: a report is written to stderr by the process it stops, past pytest's capture
        proc = subprocess.Popen(
            [str(ROOT / ".venv/bin/python"), "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
             *tests],
            cwd=work / "tree", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        assert proc.stdout is not None
        reports = 0
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            sys.stdout.write(line)
            sys.stdout.flush()
            reports += any(m in line for m in MARKERS)
        code = proc.wait()
        took = time.monotonic() - t0
        if code != 0 or reports:
            print(f"sanitize_native: FAILED after {took:.0f} s (pytest exit {code}, "
                  f"{reports} sanitizer report(s) above)", file=sys.stderr)
            return 1
        print(f"sanitize_native: clean: every test passed, no sanitizer report ({took:.0f} s)")
        return 0
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
