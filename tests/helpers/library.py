"""A ledger holding one kernel as the library tests use it (``make_world``): ``vector_add@1.0.0``
sealed by node ``alice`` with recorded seal-time checks (lean.kernel skipped, falsify against a
trusted oracle passed, PO1 ok and PO2 partial)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nacl.signing

import ledger
from ledger.core.bundle import Bundle, blake3_digest, make_manifest
from ledger.core.encoding import hex_encode
from ledger.core.note import parse_vkey
from ledger.log import Log
from ledger.trust import CheckpointMemory
from tests.helpers.ledgers import add_node, new_ledger, write_bundle

CERT_DETAIL = ("partial: PO1 ok (VectorAdd.index_partition; falsify.VADD-1); PO2 partial "
               "(VectorAdd.bounds; missing lean.kernel)")


def kernel_fields(name: str = "vector_add", version: str = "1.0.0",
                  oracle: str = "trusted:vector_add") -> dict[str, Any]:
    def rec(cid: str, status: str, detail: str, tool: str = "", ver: str = "") -> dict[str, str]:
        return {"id": cid, "status": status, "detail": detail, "tool": tool, "version": ver}

    return {
        "kernel": {"name": name, "version": version},
        "obligations": [{"obligation": "PO1", "theorem": "VectorAdd.index_partition",
                         "property": "bounds"}],
        "checks": [
            rec("integrity.manifest", "passed", "files hash to the manifest"),
            rec("lean.scan", "passed", "no escape hatches", "lean-scan", "1"),
            rec("lean.kernel", "skipped", "no Lean toolchain on PATH; install elan"),
            rec("falsify.VADD-1", "passed", f"ptxsim: 12 cases agree; oracle {oracle}",
                "ptxsim", "0.1"),
            rec("certificate", "skipped", CERT_DETAIL),
        ],
    }


@dataclass
class World:
    home: Path
    log: Log
    alice: nacl.signing.SigningKey
    bundle: Path
    index: int
    digest: str
    vkey: str
    mem: CheckpointMemory

    def policy(self, **kw: Any) -> ledger.Policy:
        return ledger.Policy(log=parse_vkey(self.vkey), **kw)

    def verifier(self, policy: ledger.Policy | None = None, **kw: Any) -> ledger.Verifier:
        kw.setdefault("memory", self.mem)
        return ledger.Verifier(policy or self.policy(), ledger.LocalLog(self.home), **kw)


def seal(log: Log, sk: nacl.signing.SigningKey, d: Path, **kw: Any) -> int:
    return log.seal(Bundle.from_dir(d), kernel_fields(**kw), sk).index


def make_world(tmp_path: Path) -> World:
    home = tmp_path / "home"
    log = new_ledger(home)
    alice = add_node(log, "alice")
    d = write_bundle(tmp_path / "bundles", "vector_add", "va")
    index = seal(log, alice, d)
    hexd = digest_of(d)
    return World(home, log, alice, d, index, hexd, log.verifier.vkey,
                 CheckpointMemory(tmp_path / "mem"))


def digest_of(d: Path) -> str:
    """The bundle digest of directory ``d`` (hex)."""
    b = Bundle.from_dir(d)
    return hex_encode(blake3_digest(make_manifest((f.path, f.digest) for f in b.files)))
