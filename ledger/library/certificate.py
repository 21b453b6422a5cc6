"""The ``Certificate`` a verification returns, and the policy's rules applied to it (SPEC 10).

A certificate is built from the verification report (SPEC 8) and the evidence it rests on:

* the verdict and, for ``partial``, one line naming each skipped check and why
  (``partial_line``);
* every check with id, status, detail, tool and version;
* every proof obligation with its status (``ok``, ``partial``, ``failed``) and evidence, read
  from the ``certificate`` check's detail (``PO1 ok (theorem; falsify.X)``);
* the kernel's name and version, the signer with its registration and revocation;
* the entry's index, leaf hash and sealed time, the checkpoint and the witnesses that cosigned.

``judge(cert, policy)`` raises ``PolicyError`` at the first rule not met, in this order:
``signers``, ``oldest_checkpoint``, ``verdict``, ``checks``, ``obligations``, ``oracles``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core.errors import PolicyError
from ledger.core.verdict import first_clause, obligation_states, oracle_kinds
from ledger.core.verdict import partial_line as verdict_line
from ledger.trust import PO_STATUSES, VERDICTS, Policy
from verify.report import Check


@dataclass(frozen=True)
class CheckResult:
    """One check of the verification (SPEC 8 ids)."""

    id: str
    status: str  # passed | failed | skipped
    detail: str
    tool: str = ""
    version: str = ""

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "status": self.status, "detail": self.detail,
                "tool": self.tool, "version": self.version}


@dataclass(frozen=True)
class Obligation:
    """One claimed proof obligation as the ``certificate`` check judged it."""

    id: str  # PO1..PO8
    status: str  # ok | partial | failed
    evidence: str  # the theorem and the checks backing it, as the certificate names them

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "status": self.status, "evidence": self.evidence}


@dataclass(frozen=True)
class Signer:
    """The node key that sealed the entry: its registration and (if any) revocation entries.
    ``status``: ``registered``, ``revoked`` (at ``revoked_at``) or ``unproven`` (an offline
    receipt cannot show that no revocation exists)."""

    key_id: str
    name: str
    registered_at: int | None
    revoked_at: int | None
    status: str

    def to_json(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "name": self.name, "registered_at": self.registered_at,
                "revoked_at": self.revoked_at, "status": self.status}


@dataclass(frozen=True)
class Certificate:
    """What the ledger vouches for, and on what evidence (``Verifier.verify``'s answer)."""

    verdict: str  # verified | partial (a failed verification raises)
    partial: str  # "" for verified, else "partial: X skipped (why), ..."
    bundle_digest: str  # hex
    kernel_name: str
    kernel_version: str
    checks: tuple[CheckResult, ...]
    obligations: tuple[Obligation, ...]
    signer: Signer
    index: int
    leaf_hash: str  # hex
    sealed: str  # the entry's time (RFC 3339)
    checkpoint: bytes  # the signed note the verification rests on (with cosignatures)
    tree_size: int
    witnesses: tuple[str, ...]  # the policy's witnesses that cosigned it
    log: str  # where the log was read

    @property
    def kernel(self) -> str:
        return f"{self.kernel_name}@{self.kernel_version}"

    def check(self, check_id: str) -> CheckResult | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "partial": self.partial, "bundle_digest": self.bundle_digest,
            "kernel": {"name": self.kernel_name, "version": self.kernel_version},
            "checks": [c.to_json() for c in self.checks],
            "obligations": [o.to_json() for o in self.obligations],
            "signer": self.signer.to_json(), "index": self.index, "leaf_hash": self.leaf_hash,
            "sealed": self.sealed, "tree_size": self.tree_size,
            "checkpoint": self.checkpoint.decode("utf-8", "replace"),
            "witnesses": list(self.witnesses), "log": self.log,
        }


# -- reading the report ------------------------------------------------------------------------

def obligations_of(detail: str) -> tuple[Obligation, ...]:
    """The obligations the ``certificate`` check's detail lists, each with its evidence."""
    return tuple(Obligation(po, status, ev) for po, status, ev in obligation_states(detail))


def partial_line(checks: Sequence[CheckResult | Check]) -> str:
    """``partial: lean.kernel skipped (no Lean toolchain), ...`` (SPEC 7: a ``partial`` verdict
    names its skipped checks in one line; ``ledger.core.verdict``); "" when none was skipped."""
    return verdict_line((c.id, c.status, c.detail) for c in checks)


def oracles_of(detail: str) -> list[str]:
    """The oracle kinds (``trusted``, ``bundle``, ``futhark``) a ``falsify.*`` detail names."""
    return oracle_kinds(detail)


# -- the policy's rules ------------------------------------------------------------------------


def signer_allowed(signer: Signer, policy: Policy) -> bool:
    if not policy.signers:
        return True
    return any(s.lower() in (signer.key_id.lower(), signer.name.lower()) for s in policy.signers)


def judge(cert: Certificate, policy: Policy) -> None:
    """Raise ``PolicyError`` at the first rule of ``policy`` that ``cert`` does not meet."""
    s = cert.signer
    if not signer_allowed(s, policy):
        raise PolicyError("signers", f"{cert.kernel} was sealed by {s.name} ({s.key_id}), "
                          f"not by one of {', '.join(policy.signers)}")
    if cert.tree_size < policy.oldest_checkpoint:
        raise PolicyError("oldest_checkpoint", f"the checkpoint has tree size {cert.tree_size}, "
                          f"older than the oldest accepted ({policy.oldest_checkpoint})")
    if VERDICTS.index(_least(cert.verdict)) < VERDICTS.index(policy.verdict):
        raise PolicyError("verdict", f"{cert.kernel} is {cert.partial or cert.verdict}; the "
                          f"policy requires {policy.verdict}")
    _judge_checks(cert, policy)
    _judge_obligations(cert, policy)
    _judge_oracles(cert, policy)


def _least(verdict: str) -> str:
    return verdict if verdict in VERDICTS else "partial"


def _judge_checks(cert: Certificate, policy: Policy) -> None:
    for pattern in policy.checks:
        hits = [c for c in cert.checks if fnmatch.fnmatchcase(c.id, pattern)]
        if not hits:
            raise PolicyError("checks", f"required check {pattern} is not in {cert.kernel}'s "
                              "verification")
        for c in hits:
            if c.status != "passed":
                raise PolicyError("checks", f"required check {c.id} {c.status} "
                                  f"({first_clause(c.detail, 120)})")


def _judge_obligations(cert: Certificate, policy: Policy) -> None:
    have = {o.id: o for o in cert.obligations}
    for po, least in policy.obligations:
        o = have.get(po)
        if o is None:
            raise PolicyError("obligations", f"{cert.kernel} claims no {po}")
        if PO_STATUSES.index(o.status) < PO_STATUSES.index(least):
            raise PolicyError("obligations", f"{po} is {o.status}, the policy requires {least} "
                              f"({o.evidence})")


def _judge_oracles(cert: Certificate, policy: Policy) -> None:
    for c in cert.checks:
        if not c.id.startswith("falsify.") or c.status != "passed":
            continue
        bad = [k for k in oracles_of(c.detail) if k not in policy.oracles]
        if bad:
            raise PolicyError("oracles", f"{c.id} compared with a {bad[0]} oracle, which the "
                              f"policy does not count (accepted: {', '.join(policy.oracles)})")
