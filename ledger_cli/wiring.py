"""Where the log meets the verifier (SPEC 7 ``check``, ``seal``, ``verify``).

``ledger``'s core never imports ``verify``; this module (used only by the CLI) does both:

* ``seal``: read each bundle, refuse an unregistered or revoked key, run every check, refuse the
  whole batch if any bundle has a failed check (nothing is appended), then append each bundle in
  its own transaction and write its offline receipt;
* ``verify``: gather evidence from the store (or a receipt), rebuild the bundle from the stored
  blobs (or take a directory), run the integrity checks and then every other check, and compare
  with what was recorded at seal time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nacl.signing

from ledger.core import merkle
from ledger.core.bundle import Bundle, parse_manifest
from ledger.core.encoding import hex_encode
from ledger.core.entries import MAX_DETAIL, Entry, decode_entry, node_key_id
from ledger.core.errors import (
    BadInput,
    LedgerError,
    TamperDetected,
    UnknownHash,
    VerificationFailed,
)
from ledger.core.faults import kill_point
from ledger.core.fsutil import write_atomic
from ledger.core.note import NoteVerifier
from ledger.core.receipt import FILE_NAME, Included, Receipt
from ledger.log import Log, Sealed
from ledger.revocation import revoked_list
from ledger.store import Store
from ledger.store.common import checkpoint_of
from verify.context import Options
from verify.integrity import Evidence, Later, check_evidence
from verify.report import Check, Report, failed, passed
from verify.runner import check_bundle, compare_recorded

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


def _key_events(
    log: Log, signer: str, size: int, root: bytes | None
) -> tuple[int | None, int | None, str | None]:
    """Replay the stored entries ``0 .. size-1`` (never the ``keys``/``revocations`` index, which
    is only a hint): the index of the signer's registration and of its revocation, and a problem
    when the entries do not rebuild the checkpoint's tree (then a revocation could be hidden)."""
    store = log.store
    stack: list[bytes] = []  # roots of the complete subtrees so far, left to right
    reg = rev = None
    needle = f'"key_id":"{signer}"'.encode()
    expect = 0
    for idx, data in store.scan(
        "SELECT idx, data FROM entries WHERE idx >= 0 AND idx < ? ORDER BY idx", (size,)
    ):
        data = bytes(data)
        if idx != expect:
            return reg, rev, f"entry {expect} is missing from the stored log (run `ledger audit`)"
        h = merkle.leaf_hash(data)
        n = expect
        while n & 1:
            h = merkle.node_hash(stack.pop(), h)
            n >>= 1
        stack.append(h)
        expect += 1
        if needle in data:
            try:
                obj = decode_entry(data)
            except LedgerError:
                continue
            if obj.key_id != signer:
                continue
            if obj.type == "key-registration" and reg is None:
                reg = idx
            elif obj.type == "key-revocation" and rev is None:
                rev = idx
    if expect != size:
        return reg, rev, f"the stored log ends at {expect} entries, before its checkpoint of {size}"
    if root is not None and merkle.combine(stack) != root:
        return (
            reg,
            rev,
            (
                "the stored entries do not rebuild the checkpoint's tree, so a revocation could be "
                "hidden (run `ledger audit`)"
            ),
        )
    return reg, rev, None


def evidence_from_store(log: Log, index: int) -> Evidence:
    """Collect the evidence for entry ``index`` from a (possibly tampered) store. Whatever cannot
    be produced is left empty, so the matching check fails with its own message instead of the
    command stopping. The signer's registration and revocation come from replaying the signed
    entries up to the checkpoint, never from the key index tables."""
    store = log.store
    note = store.checkpoint()
    entry = store.entry(index)
    root: bytes | None = None
    try:
        cp = checkpoint_of(note)
        size, root = min(cp.size, store.size()), cp.root
        if cp.size > store.size():
            root = None  # the checkpoint claims more than is stored: inclusion fails anyway
    except LedgerError:
        size = store.size()

    def proof(i: int) -> tuple[bytes, ...]:
        try:
            return tuple(store.inclusion_proof(i, size)) if i < size else ()
        except LedgerError:
            return ()

    signer = revocation = None
    problem = None
    try:
        signer_id = decode_entry(entry).signer
    except LedgerError:
        signer_id = None
    if signer_id is not None:
        reg, rev, problem = _key_events(log, signer_id, size, root)
        if reg is not None:
            signer = Included(reg, store.entry(reg), proof(reg))
        if rev is not None:
            revocation = Included(rev, store.entry(rev), proof(rev))
    return Evidence(Included(index, entry, proof(index)), note, signer, revocation, True, problem,
                    revoked=revoked_list(store, size))


def verify_evidence(
    ev: Evidence,
    vkey: NoteVerifier,
    files: dict[str, bytes] | None,
    options: Options,
    progress: Progress | None = None,
) -> Report:
    integrity, entry = check_evidence(ev, vkey, files)
    digest = (entry.bundle_digest if entry is not None else None) or ""
    if entry is None or entry.type != "bundle":
        return Report(digest, tuple(integrity))
    bundle = None
    if files is not None and not any(c.status == "failed" for c in integrity):
        try:
            bundle = Bundle.from_files(files)
        except LedgerError as e:
            integrity.append(failed("integrity.manifest", f"bundle cannot be rebuilt: {e}"))
    if bundle is None or any(c.status == "failed" for c in integrity):
        return Report(digest, tuple(integrity))
    report = check_bundle(bundle, options, integrity=integrity, progress=progress)
    return compare_recorded(report, recorded_checks(entry))


def recorded_checks(entry: Entry) -> list[Check]:
    """The seal-time checks an entry records, skipping any item of an odd shape (entries stored
    before shapes were validated must still be verifiable, never a crash)."""
    out: list[Check] = []
    for r in entry.checks or ():
        if not isinstance(r, dict):
            continue
        try:
            out.append(Check.from_record(r))
        except (KeyError, ValueError, TypeError):
            continue
    return out


def files_from_store(
    log: Log, entry_bytes: bytes, index: int | None = None
) -> dict[str, bytes] | None:
    """The files of a bundle entry from the store (``index``: the entry's, where its files are
    kept), or None when it is no bundle entry, or its stored bytes or manifest no longer parse
    (``integrity.manifest`` then fails on the entry itself). A file missing from the store is
    left out, so ``integrity.manifest`` names it."""
    try:
        obj = decode_entry(entry_bytes)
        if obj.manifest is None:
            return None
        rows = parse_manifest(obj.manifest.encode("utf-8"))
    except LedgerError:  # altered in the database: the integrity checks say how
        return None
    out: dict[str, bytes] = {}
    for rel, digest in rows:
        data = log.store.blob(digest, index)
        if data is not None:
            out[rel] = data
    return out


def later_at_hand(local: Store | None, entry: bytes) -> Later | None:
    """Offline, with the log's own ledger at hand: what it proves about the entry's signer in its
    newer tree (``ledger.revocation.later_evidence``), for ``integrity.signer``."""
    from ledger.core.encoding import hex_decode
    from ledger.revocation import later_evidence

    try:
        signer = decode_entry(entry).signer
    except LedgerError:
        return None
    got = None if local is None or signer is None else later_evidence(local, hex_decode(signer))
    return None if got is None else Later(*got)


def entry_type(entry: bytes) -> str:
    try:
        return decode_entry(entry).type
    except LedgerError:
        return ""


def check_given_files(ev: Evidence, bundle_dir: Path | None, receipt: Path | None) -> None:
    """``verify`` of a key entry has no bundle to check: a ``--bundle`` given with it, or a
    receipt of it lying in a bundle directory, is bad input, not something to ignore and then
    report "verified" (issue 9 item 4)."""
    etype = entry_type(ev.item.entry)
    if etype == "bundle":
        return
    what = f"entry {ev.item.index} is a {etype or 'malformed'} entry, not a bundle"
    if bundle_dir is not None:
        raise BadInput(f"{what}: --bundle does not apply to it")
    if receipt is not None and os.path.lexists(receipt.parent / "contract.yaml"):
        raise BadInput(f"{what}, but its receipt lies in the bundle directory {receipt.parent}")


def match_receipt(receipt: Receipt, text: str) -> None:
    """The user's <hash> must name the receipt's entry (bundle digest or leaf hash prefix)."""
    t = text.strip().lower()
    obj = decode_entry(receipt.item.entry)
    names = [hex_encode(merkle.leaf_hash(receipt.item.entry)), obj.bundle_digest or ""]
    if t.isdigit() and int(t) == receipt.item.index:
        return
    if len(t) < 8 or not any(n.startswith(t) for n in names if n):
        raise UnknownHash(f"{text!r} does not name the receipt's entry {receipt.item.index}")


def check_node_may_seal(log: Log, sk: nacl.signing.SigningKey) -> bytes:
    """Refuse early (before any check runs) a node key that is unregistered or revoked."""
    kid = node_key_id(bytes(sk.verify_key))
    log.check_may_seal(kid)
    return kid


def read_bundle_dir(path: Path) -> dict[str, bytes]:
    from ledger.core.bundle import read_dir

    if not path.exists():
        raise BadInput(f"{path}: no such bundle directory")
    return read_dir(path)


def apply_guard(report: Report, run: Callable[[], str]) -> tuple[Report, str | None]:
    """Run the guard when the report's ``integrity.checkpoint`` passed and fold its outcome into
    that check (failed with the reason, or passed with the account appended). Returns the new
    report and the failure line (None when it passed or did not run)."""
    checks = list(report.checks)
    at = next((i for i, c in enumerate(checks) if c.id == "integrity.checkpoint"), None)
    if at is None or checks[at].status != "passed":
        return report, None
    base = checks[at].detail
    problem: str | None = None
    try:
        account = run()
    except VerificationFailed as e:
        problem = str(e)
        checks[at] = failed("integrity.checkpoint", f"{base}; but {problem}")
    else:
        if account:
            checks[at] = passed("integrity.checkpoint", f"{base}; {account}")
    return dataclasses.replace(report, checks=tuple(checks)), problem
