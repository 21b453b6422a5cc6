"""Crash, disk-full and race campaign against the ledger's writers and readers (issue 9).

Real processes, real faults, no mocks of the code under test:

* **kill -9 at every step**: each run of ``seal`` (its write phase, receipt included), ``init``,
  ``keys new`` and ``receipt write`` is traced with ``strace``, which delivers SIGKILL at the
  n-th call of one file-changing system call (``write``, ``pwrite64``, ``fsync``, ``fdatasync``,
  ``ftruncate``, ``fchmod``, ``rename``, ``link``, ``unlink``, ``mkdir``), for every n that the
  operation makes. After each kill the ledger must audit clean, hold the bundle's entry at most
  once, hold only a complete, valid receipt or none, and a plain retry must reach the finished
  state (for ``seal``, the re-run alone: it answers "already sealed as entry N" and writes the
  receipt, issue 33 item 8).
* **disk full at each write**: the same calls fail with ENOSPC instead (``strace -e
  inject=...:error=ENOSPC``). The command must exit with one ``ledger: error:`` line (no
  traceback, no "internal error"), leave the ledger auditing clean, and exit with the code that
  matches what it left (``enospc_answer``): a seal whose entry committed without its receipt
  exits 4 naming the entry and the receipt.
* **symlink and rename races**: a thread swaps a bundle's subdirectory and files for symlinks to a
  secret while the bundle is read, over and over; planted symlinks at every name the ledger
  writes. A secret byte in anything read, or a write through a link, is a failure.

The checks of a bundle (ptxas, Lean, falsification) are replaced by a stand-in report in the seal
runs: they write nothing to the ledger, and running them thousands of times would take hours.
Everything after them is the real ``ledger seal`` command code.

    .venv/bin/python scripts/fault_campaign.py            # the full campaign
    .venv/bin/python scripts/fault_campaign.py --quick    # a bounded slice (the test suite's)
    .venv/bin/python scripts/fault_campaign.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SYSCALLS = (
    "write",
    "pwrite64",
    "fsync",
    "fdatasync",
    "ftruncate",
    "fchmod",
    "rename",
    "link",
    "unlink",
    "mkdir",
)
ORIGIN = "campaign.example/log"

# The seal driver: the real CLI, with the checks replaced by a stand-in report.
DRIVER = """
import sys
from ledger_cli import wiring
from verify.report import Report, passed
wiring.check_bundle = lambda b, options, **kw: Report(
    b.digest.hex(), (passed("integrity.manifest", "campaign stand-in for the checks"),))
from ledger_cli.commands import main
main(sys.argv[1:])
"""


@dataclass
class Section:
    name: str
    runs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        self.outcomes["FAILED"] += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "outcomes": dict(self.outcomes),
            "failures": self.failures[:20],
        }


def env_for(home: Path) -> dict[str, str]:
    env = dict(os.environ, LEDGER_HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
    env.pop("LEDGER_DEBUG", None)
    return env


def ledger_argv(args: list[str], driver: bool = False) -> list[str]:
    if driver:
        return [sys.executable, "-c", DRIVER, *args]
    return [sys.executable, "-m", "ledger_cli", *args]


def run(
    args: list[str],
    home: Path,
    driver: bool = False,
    inject: str | None = None,
) -> subprocess.CompletedProcess[str]:
    argv = ledger_argv(args, driver)
    if inject is not None:
        argv = ["strace", "-qq", "-o", "/dev/null", "-e", f"inject={inject}", *argv]
    return subprocess.run(
        argv, cwd=REPO, env=env_for(home), capture_output=True, text=True, timeout=300, check=False
    )


def count_calls(args: list[str], home: Path, driver: bool = False) -> dict[str, int]:
    """How many times the operation makes each file-changing call (a dry run under strace -c)."""
    out = Path(tempfile.mkstemp(prefix="strace-")[1])
    try:
        argv = ["strace", "-c", "-o", str(out), "-e", "trace=" + ",".join(SYSCALLS)]
        argv += ledger_argv(args, driver)
        subprocess.run(argv, cwd=REPO, env=env_for(home), capture_output=True, timeout=300)
        counts: dict[str, int] = {}
        for line in out.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[-1] in SYSCALLS and parts[3].isdigit():
                counts[parts[-1]] = int(parts[3])
        return counts
    finally:
        out.unlink()


def one_error_line(res: subprocess.CompletedProcess[str]) -> bool:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    return (
        "Traceback" not in res.stderr
        and "internal error" not in res.stderr
        and all(ln.startswith("ledger: error: ") for ln in lines)
    )


# -- state checks -----------------------------------------------------------------------------


def audit_ok(home: Path) -> str | None:
    from ledger.audit import audit
    from ledger.core.errors import LedgerError
    from ledger.log import Log

    try:
        log = Log.open(home)
    except LedgerError as e:
        return f"ledger does not open: {e}"
    try:
        res = audit(log.store, log.verifier)
        return None if res.ok else f"audit failed: {res.sorted_problems()[:2]}"
    finally:
        log.close()


def entries_for(home: Path, digest: bytes) -> int:
    from ledger.log import Log

    log = Log.open(home)
    try:
        return len(log.store.indices_for_digest(digest))
    finally:
        log.close()


def receipt_state(home: Path, bundle_dir: Path) -> str:
    """'none', 'valid', or what is wrong with the receipt in ``bundle_dir``."""
    from ledger.core.bundle import read_dir
    from ledger.core.errors import LedgerError
    from ledger.core.receipt import FILE_NAME, Receipt
    from ledger.log import pinned_vkey
    from verify.integrity import Evidence, check_evidence

    path = bundle_dir / FILE_NAME
    if not path.exists():
        return "none"
    try:
        rec = Receipt.from_bytes(path.read_bytes())
        vk = pinned_vkey(home)
        assert vk is not None
        checks, _ = check_evidence(
            Evidence(rec.item, rec.checkpoint, rec.signer, rec.revocation, False,
                     revoked=rec.revoked),  # the revoked-key list the receipt carries
            vk,
            read_dir(bundle_dir),
        )
    except LedgerError as e:
        return f"receipt unreadable: {e}"
    bad = [c for c in checks if c.status != "passed"]
    return "valid" if not bad else f"receipt does not verify: {bad[0].id}: {bad[0].detail}"


def stray_temps(directory: Path) -> int:
    return sum(1 for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- sections -----------------------------------------------------------------------------------


def make_ledger(root: Path) -> Path:
    home = root / "home"
    for args in (
        ["init", "--origin", ORIGIN],
        ["keys", "new", "node"],
        ["keys", "register", "node"],
    ):
        res = run(args, home)
        if res.returncode != 0:
            raise SystemExit(f"setup failed: {args}: {res.stderr}")
    return home


def make_bundle(root: Path, salt: str) -> tuple[Path, bytes]:
    from ledger.core.bundle import Bundle

    d = root / f"b-{salt}"
    d.mkdir(parents=True)
    for name, text in (
        ("contract.yaml", f"metadata:\n  version: '1.0.0'\n  description: {salt}\n"),
        ("k.ptx", f"// {salt}\n"),
        ("proof.lean", "theorem t : 1 = 1 := rfl\n"),
        ("spec.fut", "entry main (x: i32) = x\n"),
        ("sub/notes.txt", f"{salt}\n"),
    ):
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    return d, Bundle.from_dir(d).digest


Points = dict[str, list[int]] | None  # call -> which invocations (None: all, or the quick slice)


def _points(call: str, n: int, quick: bool, only: Points, step: int) -> range | list[int]:
    if only is not None:
        return [w for w in only.get(call, []) if w <= n]
    return range(1, n + 1, max(1, n // step)) if quick else range(1, n + 1)


def seal_points(quick: bool, root: Path, section: Section, mode: str, only: Points = None) -> None:
    """kill -9 (mode 'kill') or ENOSPC (mode 'enospc') at every file-changing call of a seal."""
    home = make_ledger(root)
    probe, _ = make_bundle(root, "probe")
    counts = count_calls(["seal", str(probe)], home, driver=True)
    k = 0
    for call, n in sorted(counts.items()):
        for when in _points(call, n, quick, only, 3):
            k += 1
            d, digest = make_bundle(root, f"{mode}-{k}")
            action = "signal=KILL" if mode == "kill" else "error=ENOSPC"
            res = run(["seal", str(d), "--json"], home, True, f"{call}:{action}:when={when}")
            section.runs += 1
            where = f"{call}#{when}"
            if mode == "enospc" and not one_error_line(res):
                section.fail(f"{where}: exit {res.returncode}: {res.stderr.strip()[:200]}")
                continue
            problem = audit_ok(home)
            if problem:
                section.fail(f"{where}: {problem}")
                continue
            sealed = entries_for(home, digest)
            if sealed > 1:
                section.fail(f"{where}: bundle sealed {sealed} times")
                continue
            rstate = receipt_state(home, d)
            if rstate not in ("none", "valid"):
                section.fail(f"{where}: {rstate}")
                continue
            wrong = enospc_answer(res, sealed, rstate) if mode == "enospc" else None
            if wrong:
                section.fail(f"{where}: {wrong}")
                continue
            section.outcomes[
                (f"exit {res.returncode}, " if mode == "enospc" else "")
                + f"{'sealed' if sealed else 'not sealed'}, receipt {rstate}"
                + (f", {stray_temps(d)} stray temp file" if stray_temps(d) else "")
            ] += 1
            # recovery: sealing is idempotent (issue 33 item 8), so the plain re-run alone
            # reaches the finished state: a retry of a committed seal answers "already sealed as
            # entry N", writes (or refreshes) the receipt and exits 0, like a first seal
            again = run(["seal", str(d)], home, True)
            if again.returncode != 0:
                section.fail(f"{where}: retry gave exit {again.returncode}: "
                             f"{again.stderr.strip()[:200]}")
                continue
            if sealed and "already sealed" not in again.stdout + again.stderr:
                section.fail(f"{where}: retry of a committed seal did not say already sealed")
                continue
            after = receipt_state(home, d)
            if after != "valid":
                section.fail(f"{where}: the retry left the receipt {after}")
                continue
            if entries_for(home, digest) != 1 or audit_ok(home):
                section.fail(f"{where}: not exactly one entry after recovery")


def enospc_answer(res: subprocess.CompletedProcess[str], sealed: int, rstate: str) -> str | None:
    """What is wrong with a seal's answer to a full disk, given what it left (None: nothing).

    The exit codes of README "Exit codes": 0, the entry and a receipt that verifies; 4
    (``SEALED_NO_RECEIPT``), the entry committed, no receipt, and the one line names the entry
    and the receipt that could not be written; 3, nothing appended, or the entry and its receipt
    written but the output not (the line then says "sealed as entry"); 2, nothing appended.
    """
    from ledger_cli.exits import SEALED_NO_RECEIPT

    code, err = res.returncode, res.stderr.strip()[:200]
    if code == 0:
        ok = sealed == 1 and rstate == "valid"
    elif code == SEALED_NO_RECEIPT:
        ok = (sealed == 1 and rstate == "none" and "sealed as entry" in err
              and "receipt could not be written" in err)
    elif code == 3:
        ok = sealed == 0 or ("sealed as entry" in err and rstate == "valid")
    elif code == 2:
        ok = sealed == 0
    else:
        ok = False
    if ok:
        return None
    return f"exit {code} with {'an entry' if sealed else 'no entry'}, receipt {rstate}: {err}"


def init_points(quick: bool, root: Path, section: Section, mode: str, only: Points = None) -> None:
    counts = count_calls(["init", "--origin", ORIGIN], root / "probe-home")
    k = 0
    for call, n in sorted(counts.items()):
        for when in _points(call, n, quick, only, 2):
            k += 1
            base = root / f"init-{mode}-{k}"
            base.mkdir()
            home = base / "home"
            action = "signal=KILL" if mode == "kill" else "error=ENOSPC"
            res = run(["init", "--origin", ORIGIN], home, False, f"{call}:{action}:when={when}")
            section.runs += 1
            where = f"{call}#{when}"
            if mode == "enospc" and not one_error_line(res):
                section.fail(f"{where}: {res.stderr.strip()[:200]}")
                continue
            built = (home / "ledger.db").exists()
            if built and audit_ok(home):
                section.fail(f"{where}: a ledger that does not audit: {audit_ok(home)}")
                continue
            again = run(["init", "--origin", ORIGIN], home)
            if built:
                ok = again.returncode == 2 and "holds a ledger already" in again.stderr
            else:
                ok = again.returncode == 0 and audit_ok(home) is None
            if not ok:
                section.fail(
                    f"{where}: second init: exit {again.returncode} {again.stderr.strip()}"
                )
                continue
            strays = [p.name for p in base.iterdir() if p.name != "home"]
            section.outcomes[
                ("complete ledger" if built else "no ledger, init again worked")
                + (", temporary directory left beside it" if strays else "")
            ] += 1


def keys_points(quick: bool, root: Path, section: Section, mode: str) -> None:
    home = make_ledger(root / f"keys-{mode}")
    counts = count_calls(["keys", "new", "probe"], home)
    k = 0
    for call, n in sorted(counts.items()):
        for when in _points(call, n, quick, None, 2):
            k += 1
            name = f"k{k}"
            action = "signal=KILL" if mode == "kill" else "error=ENOSPC"
            res = run(["keys", "new", name], home, False, f"{call}:{action}:when={when}")
            section.runs += 1
            where = f"{call}#{when}"
            if mode == "enospc" and not one_error_line(res):
                section.fail(f"{where}: {res.stderr.strip()[:200]}")
                continue
            had = (home / "keys" / f"{name}.key").exists()
            if not had:
                again = run(["keys", "new", name], home)
                if again.returncode != 0:
                    section.fail(f"{where}: keys new again: {again.stderr.strip()}")
                    continue
            reg = run(["keys", "register", name], home)
            if reg.returncode != 0:
                section.fail(f"{where}: register after the fault: {reg.stderr.strip()}")
                continue
            section.outcomes["key complete" if had else "no key, keys new again worked"] += 1


def reader_race(quick: bool, root: Path, section: Section, seconds: float | None = None) -> None:
    """Swap a subdirectory and a file for symlinks to secrets while the bundle is read."""
    from ledger.core.bundle import read_dir
    from ledger.core.errors import BundleError

    secret = root / "secret"
    secret.mkdir()
    d, _ = make_bundle(root, "race")
    real = (d / "sub" / "notes.txt").read_bytes()
    (secret / "notes.txt").write_bytes(b"S" * len(real))
    (secret / "k.ptx").write_bytes(b"S" * len((d / "k.ptx").read_bytes()))
    stop = threading.Event()

    def attacker() -> None:
        while not stop.is_set():
            for name, target in (("sub", secret), ("k.ptx", secret / "k.ptx")):
                try:
                    os.rename(d / name, root / f"held-{name}")
                    os.symlink(target, d / name)
                    os.unlink(d / name)
                    os.rename(root / f"held-{name}", d / name)
                except OSError:
                    pass

    t = threading.Thread(target=attacker, daemon=True)
    t.start()
    deadline = time.monotonic() + (seconds if seconds is not None else 5 if quick else 60)
    try:
        while time.monotonic() < deadline:
            section.runs += 1
            try:
                files = read_dir(d)
            except BundleError as e:
                msg = str(e)
                kind = "changed while reading" if "changed while" in msg else msg.split(":")[-1]
                section.outcomes[f"refused ({kind.strip()})"] += 1
                continue
            if any(b"S" * 3 in v for v in files.values()):
                section.fail("a secret was read through a swapped link")
            elif files.get("sub/notes.txt") == real:
                section.outcomes["read, exactly the bundle's own bytes"] += 1
            else:
                section.outcomes["read, a subset (a file was moved away mid-read)"] += 1
    finally:
        stop.set()
        t.join()
    for name in ("sub", "k.ptx"):
        if (d / name).is_symlink():
            (d / name).unlink()
        if (root / f"held-{name}").exists():
            os.rename(root / f"held-{name}", d / name)


def planted_links(root: Path, section: Section) -> None:
    """A symlink planted at every name the ledger writes: never written through."""
    home = root / "planted"
    victim = root / "victim"

    def fresh_victim() -> None:
        victim.write_bytes(b"untouched")

    def check(what: str, res: subprocess.CompletedProcess[str], ok: tuple[int, ...]) -> None:
        section.runs += 1
        if victim.read_bytes() != b"untouched":
            section.fail(f"{what}: written through the planted link")
        elif res.returncode not in ok or not one_error_line(res):
            section.fail(f"{what}: exit {res.returncode} {res.stderr.strip()[:200]}")
        else:
            section.outcomes[f"{what}: exit {res.returncode}, link not followed"] += 1

    fresh_victim()
    home.mkdir(mode=0o700)
    (home / "log.key").symlink_to(victim)
    check("init with log.key a symlink", run(["init", "--origin", ORIGIN], home), (2,))
    (home / "log.key").unlink()
    (home / "write.lock").symlink_to(victim)
    res = run(["init", "--origin", ORIGIN], home)
    check("init with write.lock a symlink", res, (0,))
    check("append with write.lock a symlink", run(["keys", "register", "x"], home), (2, 3))
    (home / "write.lock").unlink()
    (home / "keys").mkdir(mode=0o700)
    for suffix in (".key", ".pub"):
        fresh_victim()
        (home / "keys" / f"n{suffix}").symlink_to(victim)
        check(f"keys new with n{suffix} a symlink", run(["keys", "new", "n"], home), (0, 2))
        for p in (home / "keys").glob("n.*"):
            p.unlink()
    run(["keys", "new", "node"], home)
    run(["keys", "register", "node"], home)
    d, _ = make_bundle(root, "planted")
    fresh_victim()
    (d / "ledger-receipt.json").symlink_to(victim)
    res = run(["seal", str(d)], home, True)
    check("seal with the receipt name a symlink", res, (0,))
    if (d / "ledger-receipt.json").is_symlink():
        section.fail("the receipt symlink was left in place")
    out = root / "tiles"
    out.mkdir()
    fresh_victim()
    (out / "checkpoint").symlink_to(victim)
    # publish reads the checkpoint at DEST before it writes (issue 33 item 6) and refuses one
    # that is a symlink, with one line, rather than replacing it (6b1cab1)
    check("export-tiles with checkpoint a symlink", run(["export-tiles", str(out)], home), (2,))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a bounded slice (about a minute)")
    ap.add_argument("--json", type=Path, help="also write the counts here")
    ap.add_argument("--only", help="comma-separated section names")
    args = ap.parse_args()
    if shutil.which("strace") is None:
        print(
            "fault_campaign: strace is not installed; the fault sections cannot run",
            file=sys.stderr,
        )
        return 3
    sections: dict[str, Callable[[Path, Section], None]] = {
        "seal-kill": lambda r, s: seal_points(args.quick, r, s, "kill"),
        "seal-enospc": lambda r, s: seal_points(args.quick, r, s, "enospc"),
        "init-kill": lambda r, s: init_points(args.quick, r, s, "kill"),
        "init-enospc": lambda r, s: init_points(args.quick, r, s, "enospc"),
        "keys-kill": lambda r, s: keys_points(args.quick, r, s, "kill"),
        "keys-enospc": lambda r, s: keys_points(args.quick, r, s, "enospc"),
        "reader-race": lambda r, s: reader_race(args.quick, r, s),
        "planted-links": planted_links,
    }
    wanted = args.only.split(",") if args.only else list(sections)
    results: dict[str, Section] = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ledger-campaign-") as tmp:
        for name in wanted:
            root = Path(tmp) / name
            root.mkdir()
            sec = Section(name)
            start = time.monotonic()
            sections[name](root, sec)
            results[name] = sec
            print(
                f"{name}: {sec.runs} runs, {len(sec.failures)} failures, "
                f"{time.monotonic() - start:.0f} s; {dict(sec.outcomes)}",
                flush=True,
            )
            for f in sec.failures[:10]:
                print(f"  FAILED {f}", flush=True)
    total = sum(s.runs for s in results.values())
    failures = sum(len(s.failures) for s in results.values())
    print(f"total: {total} runs, {failures} failures, {time.monotonic() - t0:.0f} s")
    if args.json:
        args.json.write_text(
            json.dumps({k: v.to_json() for k, v in results.items()}, indent=1) + "\n"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
