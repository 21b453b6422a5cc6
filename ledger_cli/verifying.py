"""``ledger verify`` (SPEC 7) as a plain function, and the report helpers ``check`` and ``seal``
share with it. Free of typer: ``ledger_cli.commands`` declares the command's parameters for the
typer app and calls ``verify`` here; ``ledger_cli.quickverify`` calls the same function for a
plain command line without building the app (issue 12, start-up). Every module ``verify`` uses
is imported when it runs.

``verify``:

1. resolve the trust (``--policy``, ``--witness``, ``--quorum``) and the checkpoint memory;
2. gather the evidence: from a receipt (``--receipt``, offline, proofs also from this machine's
   ledger of that log) or from the ledger's store; the files from ``--bundle``, the receipt's
   directory or the store;
3. run the integrity checks and every other check (``ledger_cli.wiring.verify_evidence``);
4. guard the checkpoint (witness quorum, the memory of the largest checkpoint verified), folded
   into ``integrity.checkpoint``;
5. print the report (SPEC 8, with ``index`` and ``signer`` under ``--json``) and return the exit
   code (``report_exit``).
"""

from __future__ import annotations

from ledger.core.errors import BadInput, LedgerError
from ledger_cli import output
from ledger_cli.home import home_dir, open_log

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledger.core.note import NoteVerifier
    from ledger.store import Store
    from verify.context import Options
    from verify.report import Report


def check_steps() -> int:
    """How many steps a bundle's check reports: one per check group (verify.runner.GROUPS)."""
    from verify.runner import GROUPS

    return len(GROUPS)


def table_steps(bar: output.Bar, json_out: bool) -> Callable[[str], None]:
    """The progress callback of a check whose report prints as a table: it moves ``bar`` and,
    when the last group (``certificate``) begins, loads the table's modules: the process then
    waits for nvcc and ptxas, so they load during that wait rather than after it (issue 12)."""

    def step(first_id: str) -> None:
        bar.step(first_id)
        if first_id == "certificate" and not json_out:
            output.prepare_table()

    return step


def options_of(seed: int | None, no_gpu: bool, trust: bool = False) -> Options:
    from verify.context import Options

    return Options(seed=seed, use_gpu=not no_gpu, trust_bundle_code=trust)


def verify(
    hash: str,
    bundle: Path | None,
    receipt: Path | None,
    vkey_opt: str | None,
    require: str | None,
    witness: list[str] | None,
    quorum: int | None,
    policy: Path | None,
    home: Path | None,
    json_out: bool,
    seed: int | None,
    no_gpu: bool,
    trust_bundle_code: bool,
) -> int:
    """Rebuild a sealed bundle, re-run every check, confirm hashes, signatures and proofs; the
    exit code (SPEC 7). Errors are raised (``ledger_cli.exits`` maps them)."""
    import dataclasses

    from ledger import trust
    from ledger.core.note import parse_vkey
    from ledger.core.receipt import Receipt
    from ledger_cli import wiring
    from verify.integrity import Evidence

    options = options_of(seed, no_gpu, trust_bundle_code)
    prove: trust.Prover | None = None
    local: Store | None = None  # offline: this log's own ledger at LEDGER_HOME, for proofs
    pol, witnesses, need = trust.resolve(policy, witness or [], quorum)
    memory = trust.CheckpointMemory.default()
    required = [r.strip() for r in (require or "").split(",") if r.strip()]
    files = wiring.read_bundle_dir(bundle) if bundle is not None else None
    if receipt is not None:
        from ledger.core.fsutil import read_small
        from ledger.core.receipt import MAX_RECEIPT_BYTES

        data = read_small(receipt, MAX_RECEIPT_BYTES, "receipt")
        rec = Receipt.from_bytes(data)
        wiring.match_receipt(rec, hash)
        vk = parse_vkey(vkey_opt) if vkey_opt else pol.log if pol and pol.log else home_vkey(home)
        prove = trust.receipt_prover(data, vk, memory)
        local = trust.local_store(home_dir(home), vk)  # this log's ledger here, if any
        if local is not None:
            prove = trust.first_proof(prove, trust.store_prover(local))
        fix = (f"bring the receipt forward with `ledger receipt refresh {receipt} --server URL` "
               "(a newer checkpoint and a consistency proof), then verify again")
        if files is None and wiring.entry_type(rec.item.entry) == "bundle":
            try:
                files = wiring.read_bundle_dir(receipt.parent)
            except BadInput as e:  # a receipt copied out of its bundle, say
                raise BadInput(
                    f"{e} (the receipt's directory {receipt.parent} is taken as the bundle; "
                    "give the bundle's directory with --bundle DIR)"
                ) from e
        ev = Evidence(rec.item, rec.checkpoint, rec.signer, rec.revocation, False,
                      receipt_problem=rec.problem(vk.name), revoked=rec.revoked,
                      later=wiring.later_at_hand(local, rec.item.entry))
    else:
        log = open_log(home, read_only=True)
        index = log.store.resolve(hash)
        vk = parse_vkey(vkey_opt) if vkey_opt else pol.log if pol and pol.log else log.verifier
        ev = wiring.evidence_from_store(log, index)
        ev = dataclasses.replace(ev, checkpoint=trust.with_cosignatures(
            ev.checkpoint, log.store.meta("witness.cosigned_note")))  # server.COSIGNED_META
        prove = trust.store_prover(log.store)
        fix = (f"the ledger at {log.home} holds an older tree: bring it up to date (`ledger "
               f"mirror URL --home {log.home}`) or verify against one that holds the newer tree")
        if files is None:
            files = wiring.files_from_store(log, ev.item.entry, index)
    wiring.check_given_files(ev, bundle, receipt)
    with output.progress("verifying", check_steps(), enabled=not json_out) as bar:
        report = wiring.verify_evidence(ev, vk, files, options, table_steps(bar, json_out))
    try:
        report, problem = wiring.apply_guard(
            report, lambda: trust.guard(ev.checkpoint, vk, witnesses, need, memory, prove, fix)
        )
    finally:
        if local is not None:
            local.close()
    if problem is not None:
        output.error_line(problem)
    if json_out:  # SPEC 8's report, plus which entry it verified and who signed it
        obj = report.to_json()
        obj["index"] = ev.item.index
        obj["signer"] = entry_signer(ev.item.entry)
        output.emit_json(obj)
        return report_exit(report, required)
    print_report(report, json_out)
    return report_exit(report, required)


def home_vkey(home: Path | None) -> NoteVerifier:
    from ledger.log import pinned_vkey

    path = home_dir(home) / "log.vkey"
    vk = pinned_vkey(home_dir(home))
    if vk is None:
        raise BadInput("give --vkey VKEY: no ledger verifier key to trust at " + str(path))
    return vk


def entry_signer(entry: bytes) -> str | None:
    """The entry's ``signer`` (node key id, hex), None when the entry names none."""
    from ledger.core.entries import decode_entry

    try:
        return decode_entry(entry).signer
    except LedgerError:
        return None


def print_report(report: Report, json_out: bool) -> None:
    if json_out:
        output.emit_json(report.to_json())
    else:
        output.report_table(report)


def report_exit(report: Report, required: list[str]) -> int:
    from verify.runner import required_missing

    if report.verdict == "failed":
        return 1
    missing = required_missing(report, required)
    if missing:
        output.error_line(f"required checks could not run: {', '.join(missing)}")
        return 3
    return 0
