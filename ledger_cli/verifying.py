"""``ledger verify`` (SPEC 7) as a plain function, and the report helpers ``check`` and ``seal``
share with it. Free of typer: ``ledger_cli.commands`` declares the command's parameters for the
typer app and calls ``verify`` here; ``ledger_cli.quickverify`` calls the same function for a
plain command line without building the app (issue 12, start-up). Every module ``verify`` uses
is imported when it runs.

``verify`` is a thin caller of the library's ``Verifier`` (``ledger.library.verifier``):

1. resolve the trust (``--policy``, ``--witness``, ``--quorum``, ``--vkey``) into one ``Policy``;
2. name the entry: from a receipt (``--receipt``, offline, proofs also from this machine's
   ledger of that log) or from the ledger (a digest, prefix, index, ``NAME@VERSION`` or bundle
   directory); the files from ``--bundle``, the receipt's directory or the store;
3. ``Verifier.examine``: the integrity checks and every other check, the checkpoint guard
   (witness quorum, checkpoint memory) folded into ``integrity.checkpoint``;
4. ``Verifier.certify``: the policy's rules on a bundle that did not fail (one line, exit 1);
5. print the report (SPEC 8, with ``index``, ``signer`` and the ``partial`` line under
   ``--json``) and return the exit code (``report_exit``).
"""

from __future__ import annotations

from ledger.core.errors import BadInput, LedgerError
from ledger_cli import output
from ledger_cli.home import home_dir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from ledger.core.note import NoteVerifier
    from ledger.library.evidence import Found
    from ledger.library.verifier import Verifier
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
    """Rebuild a sealed bundle, re-run every check, confirm hashes, signatures and proofs, apply
    the trust policy; the exit code (SPEC 7). A thin caller of the library's ``Verifier``
    (``ledger.library.verifier``). Errors are raised (``ledger_cli.exits`` maps them)."""
    from ledger.core.errors import PolicyError
    from ledger.library.evidence import check_given_files

    options = options_of(seed, no_gpu, trust_bundle_code)
    required = [r.strip() for r in (require or "").split(",") if r.strip()]
    files = _bundle_files(bundle) if bundle is not None else None
    verifier, found = _found(hash, bundle, receipt, files, vkey_opt, witness, quorum, policy,
                             home, options)
    try:
        check_given_files(found.evidence, bundle, receipt)
        with output.progress("verifying", check_steps(), enabled=not json_out) as bar:
            done = verifier.examine(found, table_steps(bar, json_out))
    finally:
        if verifier.log is not None:
            verifier.log.close()
    report = done.report
    if done.error is not None:
        output.error_line(str(done.error))
    refused: str | None = None
    if done.error is None and report.verdict != "failed" and _is_bundle(found):
        try:
            verifier.certify(done)
        except PolicyError as e:
            refused = str(e)
            output.error_line(refused)
    if json_out:  # SPEC 8's report, plus which entry it verified and who signed it
        obj = report_json(report)
        obj["index"] = found.evidence.item.index
        obj["signer"] = entry_signer(found.evidence.item.entry)
        if refused is not None:
            obj["policy"] = refused
        output.emit_json(obj)
    else:
        print_report(report, json_out)
    return 1 if refused is not None else report_exit(report, required)


def _bundle_files(path: Path) -> dict[str, bytes]:
    from ledger.library.evidence import read_bundle_dir

    return read_bundle_dir(path)


def _is_bundle(found: Found) -> bool:
    from ledger.library.evidence import entry_type

    return entry_type(found.evidence.item.entry) == "bundle"


def _found(
    hash: str, bundle: Path | None, receipt: Path | None, files: dict[str, bytes] | None,
    vkey_opt: str | None, witness: list[str] | None, quorum: int | None, policy: Path | None,
    home: Path | None, options: Options,
) -> tuple[Verifier, Found]:
    """The verifier (the policy in force, ``--vkey``/``--witness``/``--quorum`` over it) and
    the evidence ``hash`` names: from ``--receipt`` (offline; proofs also from this machine's
    ledger of that log), else from the ledger at ``--home``."""
    import dataclasses

    from ledger import trust
    from ledger.core.note import parse_vkey
    from ledger.library.logs import LocalLog
    from ledger.library.verifier import Verifier

    pol, witnesses, need = trust.resolve(policy, witness or [], quorum)
    base = pol or trust.Policy()
    if receipt is not None:
        from ledger.core.fsutil import read_small
        from ledger.core.receipt import MAX_RECEIPT_BYTES, Receipt
        from ledger.library import evidence

        rec = Receipt.from_bytes(read_small(receipt, MAX_RECEIPT_BYTES, "receipt"))
        evidence.match_receipt(rec, hash)
        vk = parse_vkey(vkey_opt) if vkey_opt else base.log or home_vkey(home)
        store = trust.local_store(home_dir(home), vk)  # this log's ledger here, if any
        log = LocalLog.of(store) if store is not None else None
        keys = base.log_keys if vk is base.log else (vk,)
        verifier = Verifier(dataclasses.replace(base, log=vk, log_keys=keys,
                                                witnesses=witnesses, quorum=need),
                            log, rerun=True, options=options)
        if files is None and evidence.entry_type(rec.item.entry) == "bundle":
            try:
                files = evidence.read_bundle_dir(receipt.parent)
            except BadInput as e:  # a receipt copied out of its bundle, say
                raise BadInput(
                    f"{e} (the receipt's directory {receipt.parent} is taken as the bundle; "
                    "give the bundle's directory with --bundle DIR)"
                ) from e
        return verifier, verifier.receipt(receipt, files)
    from ledger_cli.home import open_log

    opened = open_log(home)  # checks the directory and the recorded verifier key
    local = LocalLog.of(opened.store)
    try:
        vk = parse_vkey(vkey_opt) if vkey_opt else base.log or opened.verifier
        keys = base.log_keys if vk is base.log else (vk,)
        verifier = Verifier(dataclasses.replace(base, log=vk, log_keys=keys,
                                                witnesses=witnesses, quorum=need),
                            local, rerun=True, options=options)
        found = verifier.find(hash)
    except BaseException:
        local.close()
        raise
    fix = (f"the ledger at {local.home} holds an older tree: bring it up to date (`ledger "
           f"mirror URL --home {local.home}`) or verify against one that holds the newer tree")
    return verifier, dataclasses.replace(found, files=files or found.files, fix=fix)


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


def partial_text(report: Report) -> str:
    """The one line naming a ``partial`` verdict's skipped checks (SPEC 7), "" otherwise."""
    from ledger.library.certificate import partial_line

    return partial_line(report.checks)


def report_json(report: Report) -> dict[str, Any]:
    """SPEC 8's report object, each check with its ``tool`` and ``version``, plus ``partial``
    (the one line of a partial verdict, "" else) and ``obligations``: the ``certificate``
    check's proof obligations as data (``{"id", "status", "evidence"}``, docs/schemas/)."""
    from ledger.core.verdict import obligation_states

    obj = report.to_json()
    obj["checks"] = [c.to_record() for c in report.checks]
    obj["partial"] = partial_text(report)
    cert = report.get("certificate")
    obj["obligations"] = [{"id": po, "status": status, "evidence": ev}
                          for po, status, ev in obligation_states(cert.detail if cert else "")]
    return obj


def warning_lines(report: Report) -> list[str]:
    """The warnings a passed check carries in its detail (``; warning: ...``: contract.lint's
    idle blocks, ``verify.idle``), each as ``warning: <check>: <text>`` for under the verdict,
    where a reader sees what a passed row's detail hides."""
    out = []
    for c in report.checks:
        if c.status != "failed" and "; warning: " in c.detail:
            out += [f"warning: {c.id}: {w}" for w in c.detail.split("; warning: ")[1:]]
    return out


def print_report(report: Report, json_out: bool) -> None:
    if json_out:
        output.emit_json(report_json(report))
    else:
        output.report_table(report)
        line = partial_text(report)
        if line:
            output.plain(line)
        for warning in warning_lines(report):
            output.plain(warning)


def report_exit(report: Report, required: list[str]) -> int:
    from verify.runner import required_missing

    if report.verdict == "failed":
        return 1
    missing = required_missing(report, required)
    if missing:
        output.error_line(f"required checks could not run: {', '.join(missing)}")
        return 3
    return 0
