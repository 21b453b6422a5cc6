"""Where the log meets the verifier (SPEC 7 ``check``, ``seal``, ``verify``).

``ledger``'s core never imports ``verify``; this module (used only by the CLI) does both:

* ``seal``: read each bundle, refuse an unregistered or revoked key, run every check, refuse the
  whole batch if any bundle has a failed check (nothing is appended), then append each bundle in
  its own transaction and write its offline receipt;
* ``verify``: the evidence and the checks live in the library (``ledger.library.evidence``);
  the names the shell used are kept here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nacl.signing

from ledger.core.bundle import Bundle
from ledger.core.entries import MAX_DETAIL, node_key_id
from ledger.core.errors import (
    BadInput,
    LedgerError,
    TamperDetected,
)
from ledger.core.faults import kill_point
from ledger.core.fsutil import write_atomic
from ledger.core.receipt import FILE_NAME, Receipt
from ledger.library import evidence
from ledger.log import Log, Sealed
from verify.context import Options
from verify.integrity import Evidence
from verify.report import Check, Report
from verify.runner import check_bundle

Progress = Callable[[str], None]


def contract_fields(bundle: Bundle, report: Report) -> dict[str, Any]:
    """What a bundle entry records besides the bundle itself: kernel, obligations, checks."""
    from verify.contract import load_contract

    kernel: dict[str, str] = {"name": "", "version": ""}
    obligations: list[dict[str, str]] = []
    try:
        contract = load_contract(bundle.file("contract.yaml"))
    except LedgerError:
        contract = None
    if contract is not None:
        if contract.kernel is not None:
            kernel = {"name": str(contract.kernel.name), "version": str(contract.kernel.version)}
        else:
            kernel = {"name": str(contract.name), "version": str(contract.version)}
        obligations = [
            {
                "obligation": str(c.obligation),
                "theorem": str(c.theorem),
                "property": str(c.property),
            }
            for c in contract.claims
        ]
    return {
        "kernel": kernel,
        "obligations": obligations,
        "checks": [_record(c) for c in report.checks],
    }


def _record(c: Check) -> dict[str, str]:
    rec = c.to_record()
    rec["detail"] = fit_text(rec["detail"])
    return rec


def fit_text(text: str, limit: int = MAX_DETAIL) -> str:
    """``text`` whole when it fits a check's detail in an entry (``MAX_DETAIL`` characters, what
    every reader of the log accepts: a certificate naming all the obligations a contract may
    claim fits); else cut at the last word boundary and marked with an ellipsis (it was cut at
    400 characters mid-word before, issue 11)."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + "…"


@dataclass(frozen=True)
class SealResult:
    directory: Path
    sealed: Sealed
    bundle: Bundle
    report: Report
    receipt: Path | None
    receipt_error: str | None = None  # the entry was appended; only its receipt is missing


@dataclass(frozen=True)
class Refused:
    directory: Path
    reason: str


def check_dirs(
    dirs: Sequence[Path], options: Options, progress: Progress | None = None
) -> list[tuple[Path, Bundle, Report]]:
    bundles = [(d, Bundle.from_dir(d)) for d in dirs]  # bad input stops before any check
    out = []
    for d, b in bundles:
        if progress is not None:
            progress(str(d))
        out.append((d, b, check_bundle(b, options)))
    return out


def seal_checked(
    log: Log,
    checked: Sequence[tuple[Path, Bundle, Report]],
    node: nacl.signing.SigningKey,
    write_receipts: bool = True,
    progress: Progress | None = None,
    refused: list[Refused] | None = None,
) -> list[SealResult]:
    """Append each checked bundle in its own transaction and write its receipt.

    A bundle this key sealed before is answered with that entry (``Sealed.already``) and its
    receipt written afresh. A bundle the log refuses (the key revoked meanwhile, an entry
    over the size limit) is recorded in ``refused`` with the reason and the others go on; with
    ``refused`` None the first refusal is raised (after the earlier ones were appended). A
    receipt that cannot be written (disk full) does not undo or hide the seal: the result says
    so in ``receipt_error`` and ``ledger receipt write`` makes it later (issue 9 items 17, 19).
    """
    results: list[SealResult] = []
    for d, bundle, report in checked:
        if progress is not None:
            progress(str(d))
        kill_point("seal.checked")
        try:
            sealed = log.seal(bundle, contract_fields(bundle, report), node)
        except BadInput as e:
            if refused is None:
                raise
            refused.append(Refused(d, str(e)))
            continue
        receipt_path = None
        receipt_error = None
        if write_receipts:
            try:
                receipt_path = write_receipt(log, sealed.index, d)
                kill_point("seal.receipt-written")
            except (LedgerError, OSError) as e:
                receipt_error = str(e) if isinstance(e, LedgerError) else (e.strerror or str(e))
        results.append(SealResult(d, sealed, bundle, report, receipt_path, receipt_error))
    return results


def write_receipt(log: Log, index: int, directory: Path) -> Path:
    """Write a fresh receipt for entry ``index`` as ``directory/ledger-receipt.json``."""
    path = directory / FILE_NAME
    write_atomic(path, make_receipt(log, index).to_bytes(), 0o644, exclusive=False)
    return path


def make_receipt(log: Log, index: int) -> Receipt:
    """A fresh receipt for entry ``index`` against the log's latest checkpoint (with the witness
    cosignatures the log collected for it, ``ledger witness add-checkpoint``), carrying the
    signer's registration and, when the key was revoked inside that tree, its revocation (so an
    offline check of the receipt fails as an online one would)."""
    ev = evidence_from_store(log, index)
    if ev.history_problem is not None:
        raise TamperDetected(f"cannot write a receipt: {ev.history_problem}")
    from ledger.trust import with_cosignatures  # issue 14: cosignatures collected for it

    note = with_cosignatures(ev.checkpoint, log.store.meta("witness.cosigned_note"))
    return Receipt(log.origin, ev.item, note, ev.signer, ev.revocation, revoked=ev.revoked)


def evidence_from_store(log: Log, index: int) -> Evidence:
    """``ledger.library.evidence.evidence_from_store`` of the log's store."""
    return evidence.evidence_from_store(log.store, index)


def files_from_store(
    log: Log, entry_bytes: bytes, index: int | None = None
) -> dict[str, bytes] | None:
    """``ledger.library.evidence.files_from_store`` of the log's store."""
    return evidence.files_from_store(log.store, entry_bytes, index)


def check_node_may_seal(log: Log, sk: nacl.signing.SigningKey) -> bytes:
    """Refuse early (before any check runs) a node key that is unregistered or revoked."""
    kid = node_key_id(bytes(sk.verify_key))
    log.check_may_seal(kid)
    return kid


