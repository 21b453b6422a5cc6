"""The evidence a verification rests on, gathered from a read-only log, and the checks run
on it (SPEC 7 ``verify``, SPEC 8): moved here from the shell's ``ledger_cli.wiring`` so that the
library (``ledger.library.verifier``) and the command line share one copy.

* ``evidence_from_store``: the entry, its inclusion proof, the checkpoint, the signer's
  registration and revocation found by replaying the signed entries (never the key index);
* ``files_from_store``: the bundle's files from the content-addressed blobs;
* ``verify_evidence``: the integrity checks, then every other check of the rebuilt bundle,
  compared with what the entry recorded at seal time;
* ``apply_guard``: the witness quorum and checkpoint memory folded into ``integrity.checkpoint``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core import merkle
from ledger.core.bundle import Bundle, parse_manifest
from ledger.core.encoding import hex_encode
from ledger.core.entries import Entry, decode_entry
from ledger.core.errors import BadInput, LedgerError, UnknownHash, VerificationFailed
from ledger.core.note import NoteVerifier
from ledger.core.receipt import Included, Receipt
from ledger.revocation import revoked_list
from ledger.store.common import checkpoint_of
from verify.context import Options
from verify.integrity import Evidence, Later, check_evidence
from verify.report import Check, Report, failed, passed
from verify.runner import check_bundle, compare_recorded

if TYPE_CHECKING:
    from ledger.store import Store
    from ledger.trust import Prover

@dataclasses.dataclass(frozen=True)
class Found:
    """An entry named by a ref: its evidence, the bundle's files, a prover for the guard."""

    evidence: Evidence
    files: dict[str, bytes] | None
    prover: Prover | None  # ledger.trust's, named only for the type
    where: str
    fix: str = ""  # what to do about a checkpoint older than the one remembered


Progress = Callable[[str], None]


def _key_events(
    store: Store, signer: str, size: int, root: bytes | None
) -> tuple[int | None, int | None, str | None]:
    """Replay the stored entries ``0 .. size-1`` (never the ``keys``/``revocations`` index, which
    is only a hint): the index of the signer's registration and of its revocation, and a problem
    when the entries do not rebuild the checkpoint's tree (then a revocation could be hidden)."""
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


def evidence_from_store(store: Store, index: int) -> Evidence:
    """Collect the evidence for entry ``index`` from a (possibly tampered) store. Whatever cannot
    be produced is left empty, so the matching check fails with its own message instead of the
    command stopping. The signer's registration and revocation come from replaying the signed
    entries up to the checkpoint, never from the key index tables."""
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
        reg, rev, problem = _key_events(store, signer_id, size, root)
        if reg is not None:
            signer = Included(reg, store.entry(reg), proof(reg))
        if rev is not None:
            revocation = Included(rev, store.entry(rev), proof(rev))
    return Evidence(Included(index, entry, proof(index)), note, signer, revocation, True, problem,
                    revoked=revoked_list(store, size))


def receipt_evidence(rec: Receipt, name: str, local: Store | None = None) -> Evidence:
    """The evidence an offline receipt carries (its entry, checkpoint, the signer's registration,
    revocation and the committed revoked-key list: ``ledger.core.revoked``), and, with the log's
    own ledger ``local`` at hand, what that newer tree proves of the signer (``later_at_hand``)."""
    return Evidence(rec.item, rec.checkpoint, rec.signer, rec.revocation, False,
                    receipt_problem=rec.problem(name), revoked=rec.revoked,
                    later=later_at_hand(local, rec.item.entry))


def later_at_hand(local: Store | None, entry: bytes) -> Later | None:
    """Offline, with the log's own ledger at hand: what it proves about the entry's signer in its
    newer tree (``ledger.revocation.later_evidence``), for ``integrity.signer``."""
    if local is None:  # nothing at hand: no need to decode the entry
        return None
    from ledger.core.encoding import hex_decode
    from ledger.revocation import later_evidence

    try:
        signer = decode_entry(entry).signer
    except LedgerError:
        return None
    got = None if signer is None else later_evidence(local, hex_decode(signer))
    return None if got is None else Later(*got)


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
    store: Store, entry_bytes: bytes, index: int | None = None
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
        data = store.blob(digest, index)
        if data is not None:
            out[rel] = data
    return out


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
    if t.isascii() and t.isdigit() and len(t) <= 20 and int(t) == receipt.item.index:
        return
    if len(t) < 8 or not any(n.startswith(t) for n in names if n):
        raise UnknownHash(f"{text!r} does not name the receipt's entry {receipt.item.index}")


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
