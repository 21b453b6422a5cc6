"""``ledger lock add NAME@VERSION`` and ``ledger lock verify`` (SPEC 7; issue 31): a program's lock
file of kernels, as ``go.sum`` is for Go modules, and the build gate that checks it. The work is
in the library (``ledger.library.lockfile``, ``ledger.library.verifier``); ``register(app)``
adds the group to the typer app (``ledger_cli.commands``).

The log is ``--log LOCATION`` (a ledger directory, a ``ledger serve`` URL or a static mirror),
else the ledger at ``--home``; the policy is the one ``ledger verify`` uses (``--policy``, else
``$LEDGER_POLICY``, else the user's config), its log key else the home ledger's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ledger_cli.options import HomeOpt, JsonOpt, new_app

if TYPE_CHECKING:
    from ledger.library.verifier import Verifier

LockFileOpt = Annotated[
    Path, typer.Option("--file", help="The lock file.", metavar="FILE")
]
PolicyOpt = Annotated[
    Path | None,
    typer.Option("--policy", help="Trust policy file (default: $LEDGER_POLICY, else "
                 "$XDG_CONFIG_HOME/kernel-ledger/policy.json)."),
]
LogOpt = Annotated[
    str | None,
    typer.Option("--log", help="The log: a ledger directory, a server URL or a static mirror "
                 "(default: the ledger at --home).", metavar="LOCATION"),
]


def cli_verifier(policy: Path | None, log: str | None, home: Path | None) -> Verifier:
    """A ``Verifier`` under the policy in force, reading ``log`` (else the home ledger), with no
    verified cache (a build gate asks the log every time)."""
    import dataclasses

    from ledger import trust
    from ledger.core.errors import BadInput
    from ledger.library.logs import LocalLog, ReadLog, open_log
    from ledger.library.verifier import Verifier
    from ledger_cli.home import open_log as open_home

    pol = trust.resolve(policy, [], None)[0] or trust.Policy()
    read: ReadLog
    if log is None:
        opened = open_home(home)
        read = LocalLog.of(opened.store)
        if pol.log is None:
            pol = dataclasses.replace(pol, log=opened.verifier, log_keys=(opened.verifier,))
    else:
        if pol.log is None:
            raise BadInput("the policy names no log key (its \"log\" field): give --policy")
        read = open_log(log, pol.log)
    return Verifier(pol, read)


def register(app: typer.Typer) -> None:
    """Add the ``lock`` group to the typer app."""
    from ledger_cli import output

    lock_app = new_app("A program's lock file of kernels (name, version, digest, log).")
    app.add_typer(lock_app, name="lock")

    @lock_app.command("add")
    def lock_add(
        ref: Annotated[str, typer.Argument(help="The kernel, NAME@VERSION.", metavar="REF")],
        file: LockFileOpt = Path("kernels.lock"),
        policy: PolicyOpt = None,
        log: LogOpt = None,
        home: HomeOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Verify NAME@VERSION under the policy and record it (name, version, digest, log) in
        the lock file."""
        from ledger.kernels import split_ref
        from ledger.library.lockfile import LockFile

        split_ref(ref)
        verifier = cli_verifier(policy, log, home)
        try:
            cert = verifier.verify(ref)
        finally:
            if verifier.log is not None:
                verifier.log.close()
        assert verifier.policy.log is not None
        lock = LockFile.read(file, missing_ok=True).with_kernel(cert, verifier.policy.log.name)
        lock.write()
        if json_out:
            output.emit_json({"file": str(file), "kernel": {"name": cert.kernel_name,
                              "version": cert.kernel_version}, "bundle_digest": cert.bundle_digest,
                              "origin": verifier.policy.log.name, "partial": cert.partial})
        else:
            output.plain(f"locked {cert.kernel} {cert.bundle_digest} ({verifier.policy.log.name}) "
                         f"in {file}")

    @lock_app.command("verify")
    def lock_verify(
        file: LockFileOpt = Path("kernels.lock"),
        policy: PolicyOpt = None,
        log: LogOpt = None,
        home: HomeOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Verify every locked kernel again under the policy: one line per kernel that is
        missing, changed, below the policy, or from a log that rolled back (exit 1; 3 when the
        log could not be reached)."""
        from ledger.library.lockfile import LockFile, Problem

        lock = LockFile.read(file)
        verifier = cli_verifier(policy, log, home)
        assert verifier.policy.log is not None
        origin = verifier.policy.log.name
        try:
            problems = [Problem(k.ref, f"locked from the log {k.origin}, not {origin}", 1)
                        for k in lock.kernels if k.origin != origin]
            problems += lock.verify(verifier)
        finally:
            if verifier.log is not None:
                verifier.log.close()
        bad = {p.ref: p for p in problems}
        for p in problems:
            output.error_line(p.line())
        if json_out:
            output.emit_json({"file": str(file), "ok": not problems, "kernels": [
                {"ref": k.ref, "bundle_digest": k.digest, "origin": k.origin,
                 "status": "failed" if k.ref in bad else "ok",
                 "reason": bad[k.ref].reason if k.ref in bad else ""} for k in lock.kernels]})
        elif not problems:
            output.plain(f"{len(lock.kernels)} locked kernel(s) verified ({file})")
        if problems:
            raise typer.Exit(3 if all(p.exit_code == 3 for p in problems) else 1)
