"""``Verifier(policy, log).verify(ref)`` (SPEC 10 "Library"): one call answers "does the ledger
vouch for this kernel under my rules?".

Steps of ``verify``:

1. name the entry: ``ref`` is a bundle digest or leaf hash (or a unique prefix of 8+ hex
   digits), an index, ``NAME@VERSION`` (the entries sealing it, narrowed by the policy's
   signers; more than one left is ``UnknownHash`` listing them), a bundle directory (its
   manifest gives the digest; its ``ledger-receipt.json`` is the evidence when present) or a
   receipt file;
2. gather the evidence (entry, inclusion proof, checkpoint, the signer's registration and
   revocation) and the bundle's files from the log (or the directory, or the verified cache);
3. run the integrity checks under the policy's log key (``verify.integrity``); with
   ``rerun=True`` every other check is run again (as ``ledger verify`` does), else the checks
   the signer recorded at seal time stand beside them (the entry's signature covers them);
4. guard the checkpoint: the policy's witness quorum (``PolicyError`` rule ``quorum``), then the
   checkpoint memory (a rolled-back or forked log raises ``Unproven``/``Equivocation``);
5. a failed verification raises the error tree's ``VerificationFailed`` (``TamperDetected`` for
   a file or entry that does not match, a signer revoked before the entry was sealed); a signer
   revoked afterwards is ``PolicyError`` rule ``signers`` unless ``allow_revoked``;
6. build the ``Certificate`` and apply the policy's rules (``certificate.judge``).

The verified cache (``ledger.library.cache``) keeps what step 2 fetched, so a second call for the
same ref needs no log: its files are hashed again, its receipt re-checked and its checkpoint
guarded against rollback again.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core.encoding import hex_encode
from ledger.core.entries import Entry, decode_entry
from ledger.core.errors import (
    BadInput,
    CannotCheck,
    LedgerError,
    PolicyError,
    TamperDetected,
    UnknownHash,
    VerificationFailed,
)
from ledger.core.merkle import leaf_hash
from ledger.core.note import NoteVerifier, checked_once, note_text, parse_checkpoint
from ledger.core.receipt import FILE_NAME, MAX_RECEIPT_BYTES, Receipt
from ledger.kernels import is_name_ref, split_ref
from ledger.library.certificate import (
    Certificate,
    CheckResult,
    Signer,
    judge,
    obligations_of,
    partial_line,
    signer_allowed,
)
from ledger.library.evidence import Found, receipt_evidence
from ledger.library.logs import LocalLog, ReadLog
from ledger.trust import CheckpointMemory, Policy, QuorumMissing, Unproven
from verify.integrity import Evidence, check_evidence
from verify.report import Check, Report, passed

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger.library.cache import Cache
    from verify.context import Options


@dataclasses.dataclass(frozen=True)
class Examined:
    """Steps 3 and 4 done: the report (the guard's outcome folded into
    ``integrity.checkpoint``) and the guard's error, if it failed."""

    found: Found
    report: Report
    vkey: NoteVerifier
    error: VerificationFailed | None = None


class Verifier:
    """Verify refs against one read-only ``log`` (None: only the verified cache and refs that
    carry their own evidence, a receipt or a bundle directory with its receipt) under
    ``policy``. ``memory``: the checkpoint memory (default: the user's)."""

    def __init__(
        self, policy: Policy, log: ReadLog | None = None, *, rerun: bool = False,
        options: Options | None = None, cache: Cache | None = None,
        memory: CheckpointMemory | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        if policy.log is None:
            raise BadInput("the policy names no log key (its \"log\" field): nothing to trust")
        self.policy = policy
        self.log = log
        self.rerun = rerun
        self.options = options
        self.cache = cache
        self.memory = memory if memory is not None else CheckpointMemory.default()
        self.progress = progress

    # -- 1, 2: naming the entry and gathering its evidence ---------------------------------------

    def find(self, ref: str | Path) -> Found:
        text = str(ref)
        path = Path(text)
        if isinstance(ref, Path) or (_path_like(text) and path.exists()):
            return self._from_path(path)
        if is_name_ref(text):
            return self._by_name(*split_ref(text))
        return self._from_log(self._need_log().resolve(text))

    def _need_log(self) -> ReadLog:
        if self.log is None:
            raise BadInput("no log to read: give the Verifier a log (ledger.open_log)")
        return self.log

    def _from_log(self, index: int) -> Found:
        log = self._need_log()
        ev = log.evidence(index)
        return Found(ev, log.files(index, ev.item.entry), log.prover(), log.where)

    def _by_name(self, name: str, version: str) -> Found:
        log = self._need_log()
        indices = log.lookup(name, version)
        if not indices:
            raise UnknownHash(f"no entry of {log.where} seals {name}@{version}")
        found = [self._from_log(i) for i in indices]
        allowed = [f for f in found if signer_allowed(self._signer(f.evidence), self.policy)]
        if not allowed:
            who = ", ".join(sorted({self._signer(f.evidence).name for f in found}))
            raise PolicyError("signers", f"{name}@{version} was sealed only by {who}, not by one "
                              f"of {', '.join(self.policy.signers)}")
        digests = {_digest(f) for f in allowed}
        if len(allowed) > 1 and len(digests) > 1:
            listed = "; ".join(
                f"entry {f.evidence.item.index} ({_digest(f)}, signer "
                f"{self._signer(f.evidence).name})" for f in allowed[:10])
            raise UnknownHash(f"{name}@{version} is ambiguous: {listed}; name one by digest, or "
                              "narrow the policy's signers")
        return allowed[-1]  # the same bundle sealed again: the newest entry

    def _from_path(self, path: Path) -> Found:
        from ledger.library.evidence import read_bundle_dir

        if path.is_dir():
            files = read_bundle_dir(path)
            receipt = path / FILE_NAME
            if receipt.is_file():
                return self._from_receipt(receipt, files)
            from ledger.core.bundle import Bundle, blake3_digest, make_manifest

            bundle = Bundle.from_files(files)
            digest = blake3_digest(make_manifest((f.path, f.digest) for f in bundle.files))
            got = self._from_log(self._need_log().resolve(hex_encode(digest)))
            return dataclasses.replace(got, files=files)
        if path.is_file():
            beside = None
            if (path.parent / "contract.yaml").is_file():
                beside = read_bundle_dir(path.parent)
            return self._from_receipt(path, beside)
        raise BadInput(f"{path}: no such bundle directory or receipt file")

    def _from_receipt(self, path: Path, files: dict[str, bytes] | None) -> Found:
        from ledger.core.fsutil import read_small

        data = read_small(path, MAX_RECEIPT_BYTES, "receipt")
        fix = (f"bring the receipt forward with `ledger receipt refresh {path} --server URL` "
               "(a newer checkpoint and a consistency proof), then verify again")
        return self.receipt_data(data, files, str(path), fix)

    def receipt_data(
        self, data: bytes, files: dict[str, bytes] | None, where: str, fix: str = ""
    ) -> Found:
        """The evidence of the receipt ``data`` (a file's bytes, or an attestation's
        ``predicate.log``): step 2 for evidence that travels with the ref."""
        from ledger.trust import first_proof, receipt_prover

        rec = Receipt.from_bytes(data)
        vk = self._vkey(rec.checkpoint)
        at_hand = self.log.store if isinstance(self.log, LocalLog) else None
        ev = receipt_evidence(rec, vk.name, at_hand)
        if files is None and self.log is not None:
            files = self.log.files(rec.item.index, rec.item.entry)
        prover = receipt_prover(data, vk, self.memory)
        local = self.log.prover() if self.log is not None else None
        return Found(ev, files, first_proof(prover, local) if local else prover, where, fix)

    def receipt(self, path: Path, files: dict[str, bytes] | None) -> Found:
        """The evidence of the receipt file at ``path`` (``files``: the bundle's, if known)."""
        return self._from_receipt(path, files)

    # -- 3 .. 6 ----------------------------------------------------------------------------------

    def verify(self, ref: str | Path) -> Certificate:
        """The certificate of the entry ``ref`` names, when it verifies and meets the policy;
        else ``PolicyError`` (the rule and why) or another ``VerificationFailed``."""
        refused: VerificationFailed | None = None
        if self.cache is not None:
            cached = self.cache.lookup(str(ref), self.policy)
            if cached is not None:
                try:
                    return self.check(cached)
                except (TamperDetected, Unproven) as e:
                    self.cache.forget(cached)  # changed on disk (or too old): fetched again
                    refused = e
                except PolicyError as e:  # the log may hold another entry the policy accepts
                    refused = e
                if self.log is None:
                    raise refused
        try:
            found = self.find(ref)
        except (BadInput, CannotCheck) as e:  # no log to fetch it again from: the refusal stands
            if refused is not None:
                raise refused from e
            raise
        cert = self.check(found)
        if self.cache is not None:
            self.cache.keep(found, cert, self._vkey(found.evidence.checkpoint))
        return cert

    def examine(self, found: Found, progress: Callable[[str], None] | None = None) -> Examined:
        """Steps 3 and 4, raising nothing for a failed check: what ``ledger verify`` prints
        (``progress``: called as each group of re-run checks begins)."""
        ev = found.evidence
        vk = self._vkey(ev.checkpoint)
        with checked_once():  # the checkpoint's signature: checked in step 3, reused in step 4
            report = self._report(ev, vk, found.files, progress or self.progress)
            report, error = self._guard(report, ev.checkpoint, vk, found)
        return Examined(found, report, vk, error)

    def check(self, found: Found) -> Certificate:
        """Steps 3 to 6 for evidence already gathered."""
        with checked_once():
            return self.certify(self.examine(found))

    def certify(self, done: Examined) -> Certificate:
        """Steps 5 and 6: raise for a failed verification or an unmet policy rule, else the
        certificate."""
        if isinstance(done.error, QuorumMissing):
            raise PolicyError("quorum", str(done.error)) from done.error
        if done.error is not None:
            raise done.error
        report = self._failures(done.report, done.found.evidence)
        cert = self._certificate(report, done.found, done.vkey)
        judge(cert, self.policy)
        return cert

    def log_key(self, note: bytes) -> NoteVerifier:
        """The policy's log key a checkpoint ``note`` is checked under."""
        return self._vkey(note)

    def _vkey(self, note: bytes) -> NoteVerifier:
        """The policy's log key whose name is the checkpoint's origin (the first one else)."""
        keys = self.policy.log_keys
        origin = note.split(b"\n", 1)[0].decode("utf-8", "replace")
        return next((k for k in keys if k.name == origin), keys[0])

    def _report(
        self, ev: Evidence, vk: NoteVerifier, files: dict[str, bytes] | None,
        progress: Callable[[str], None] | None,
    ) -> Report:
        if self.rerun:
            from ledger.library.evidence import verify_evidence
            from verify.context import Options

            return verify_evidence(ev, vk, files, self.options or Options(), progress)
        from ledger.library.evidence import recorded_checks

        integrity, entry = check_evidence(ev, vk, files)
        digest = (entry.bundle_digest if entry is not None else None) or ""
        if entry is None or entry.type != "bundle":
            return Report(digest, tuple(integrity))
        seal = [c for c in recorded_checks(entry) if not c.id.startswith("integrity.")]
        return Report(digest, tuple(integrity) + tuple(seal))

    def _guard(
        self, report: Report, note: bytes, vk: NoteVerifier, found: Found
    ) -> tuple[Report, VerificationFailed | None]:
        """The witness quorum and the checkpoint memory, folded into ``integrity.checkpoint``
        (``ledger.library.evidence.apply_guard``); the guard's error beside the report."""
        from ledger import trust
        from ledger.library.evidence import apply_guard

        p = self.policy
        caught: list[VerificationFailed] = []

        def run() -> str:
            try:
                return trust.guard(note, vk, p.witnesses, p.quorum, self.memory, found.prover,
                                   found.fix)
            except VerificationFailed as e:
                caught.append(e)
                raise

        report, _problem = apply_guard(report, run)
        return report, caught[0] if caught else None

    def _failures(self, report: Report, ev: Evidence) -> Report:
        """Raise for a failed report; a signer revoked after the entry, with ``allow_revoked``,
        is shown as such and accepted."""
        bad = [c for c in report.checks if c.status == "failed"]
        if not bad and report.checks:
            return report
        revoked_after = (ev.revocation is not None and ev.revocation.index > ev.item.index)
        if [c.id for c in bad] == ["integrity.signer"] and ev.revocation is not None:
            if not (revoked_after and self.policy.allow_revoked):
                raise PolicyError("signers", bad[0].detail)
            checks = tuple(passed(c.id, f"{c.detail} (after the entry; the policy allows it)")
                           if c is bad[0] else c for c in report.checks)
            return Report(report.bundle_digest, checks)
        what = "; ".join(f"{c.id}: {c.detail}" for c in bad[:3]) or "no checks ran"
        if any(c.id.startswith("integrity.") for c in bad):
            raise TamperDetected(f"entry {ev.item.index} does not verify: {what}")
        raise VerificationFailed(f"entry {ev.item.index} failed its checks: {what}")

    def _signer(self, ev: Evidence) -> Signer:
        entry = _decoded(ev.item.entry)
        kid = str(entry.signer or "") if entry is not None else ""
        name = ""
        reg = _decoded(ev.signer.entry) if ev.signer is not None else None
        if reg is not None and reg.key_id == kid:
            name = str(reg.name or "")
        if ev.revocation is not None:
            status = "revoked"
        else:
            status = "registered" if ev.revocations_known else "unproven"
        return Signer(kid, name, ev.signer.index if ev.signer else None,
                      ev.revocation.index if ev.revocation else None, status)

    def _certificate(self, report: Report, found: Found, vk: NoteVerifier) -> Certificate:
        ev = found.evidence
        entry = _decoded(ev.item.entry)
        if entry is None or entry.type != "bundle":
            raise BadInput(f"entry {ev.item.index} is no bundle entry: no kernel to vouch for")
        kernel = entry.kernel or {}
        checks = tuple(_result(c) for c in report.checks)
        cert_check = report.get("certificate")
        cp = parse_checkpoint(note_text(ev.checkpoint))
        return Certificate(
            verdict=report.verdict, partial=partial_line(checks),
            bundle_digest=str(entry.bundle_digest), kernel_name=str(kernel.get("name", "")),
            kernel_version=str(kernel.get("version", "")), checks=checks,
            obligations=obligations_of(cert_check.detail) if cert_check else (),
            signer=self._signer(ev), index=ev.item.index,
            leaf_hash=hex_encode(leaf_hash(ev.item.entry)), sealed=entry.time,
            checkpoint=ev.checkpoint, tree_size=cp.size,
            witnesses=self._cosigners(ev.checkpoint), log=found.where,
        )

    def _cosigners(self, note: bytes) -> tuple[str, ...]:
        from ledger.trust import cosigned_by, witness_groups

        if not self.policy.witnesses:
            return ()
        return tuple(g[0].label for g in witness_groups(self.policy.witnesses)
                     if cosigned_by(note, g))


@functools.lru_cache(maxsize=64)
def _decoded(data: bytes) -> Entry | None:
    """The decoded entry (each of a verification's few entries is decoded once: an ``Entry``
    is frozen), None when it does not decode."""
    try:
        return decode_entry(data)
    except LedgerError:
        return None


def _path_like(text: str) -> bool:
    """A ref that names a file or directory rather than an entry: it has a path separator or a
    leading dot, or it is neither hex, an index nor ``NAME@VERSION``."""
    t = text.strip().lower()
    if "/" in t or t.startswith("."):
        return True
    return not (is_name_ref(t) or all(c in "0123456789abcdef" for c in t))


def _digest(found: Found) -> str:
    entry = _decoded(found.evidence.item.entry)
    return str(entry.bundle_digest) if entry is not None else ""


def _result(c: Check) -> CheckResult:
    return CheckResult(c.id, c.status, c.detail, c.tool, c.version)

