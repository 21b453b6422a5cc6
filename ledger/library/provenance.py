"""SLSA Provenance v1 (``https://slsa.dev/provenance/v1``) of a sealed kernel's PTX, built from its
``.cu`` by ``kernel.build`` (``ledger attest --build``; docs/attestations.md).

The subject is the PTX (``sha256``, ``blake3``); the ``.cu`` is the one resolved dependency; the
external parameters are ``kernel.build``'s argv and the paths; the nvcc version is the one the
seal-time ``rebuild.ptx`` check recorded, else the release nvcc wrote into the PTX header; the
builder id names the sealing node key. ``internalParameters.ledger`` carries the entry's log
evidence (the certificate predicate's ``log`` object, a receipt), so the provenance is checked
against the log the same way: signature by the registered signer, inclusion, and the PTX and
``.cu`` digests against the sealed manifest (the argv against ``contract.yaml`` when the bundle's
files are given).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ledger.core import dsse, intoto
from ledger.core.attestation import certificate_predicate, receipt_of_predicate
from ledger.core.encoding import hex_encode
from ledger.core.errors import BadInput, TamperDetected
from ledger.library import attest_checks as att

if TYPE_CHECKING:
    from ledger.library.verifier import Verifier

BUILD_TYPE = "https://kernel-ledger.dev/build/nvcc-ptx/v1"
BUILDER = "https://kernel-ledger.dev/builder/node/"
_RELEASE = re.compile(rb"^// Cuda compilation tools, release [0-9.]+, (V[0-9.]+)\s*$", re.M)


def build_of(files: dict[str, bytes]) -> dict[str, Any]:
    """``kernel.build``, ``kernel.source`` and ``kernel.ptx`` of the bundle's contract."""
    from verify.contract import parse_yaml

    data = files.get("contract.yaml")
    if data is None:
        raise BadInput("the bundle has no contract.yaml")
    doc = parse_yaml(data)
    kernel = doc.get("kernel") if isinstance(doc, dict) else None
    if not isinstance(kernel, dict):
        raise BadInput("contract.yaml has no kernel section")
    build, source, ptx = kernel.get("build"), kernel.get("source"), kernel.get("ptx")
    if not (isinstance(build, list) and build and all(isinstance(a, str) for a in build)
            and isinstance(source, str) and isinstance(ptx, str)):
        raise BadInput("the contract gives no kernel.build with kernel.source (a .cu): no build "
                       "to attest")
    for path in (source, ptx):
        if path not in files:
            raise BadInput(f"kernel build file {path!r} is not in the bundle")
    return {"argv": list(build), "source": source, "ptx": ptx}


def nvcc_version(predicate: dict[str, Any], ptx: bytes) -> str:
    """The nvcc release of the seal-time ``rebuild.ptx`` check, else the PTX header's."""
    for c in predicate["certificate"]["checks"]:
        if c["id"] == "rebuild.ptx" and c["version"]:
            return str(c["version"])
    m = _RELEASE.search(ptx[:4096])
    return m.group(1).decode() if m else "unknown"


def provenance_statement(cert_statement: dict[str, Any], files: dict[str, bytes],
                         version: str) -> dict[str, Any]:
    """The SLSA Provenance v1 statement beside the certificate statement of the same entry
    (``version``: the kernel-ledger version, the builder's)."""
    pred = cert_statement["predicate"]
    build = build_of(files)
    src, ptx = build["source"], build["ptx"]
    log = pred["log"]
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": build,
            "internalParameters": {"nvcc_version": nvcc_version(pred, files[ptx]),
                                   "ledger": log},
            "resolvedDependencies": [{"name": src, "digest": intoto.digests(files[src])}],
        },
        "runDetails": {
            "builder": {"id": BUILDER + pred["signer"]["key_id"],
                        "version": {"kernel-ledger": version}},
            "metadata": {"invocationId": f"{log['origin']}#{log['index']}",
                         "startedOn": pred["sealed"]},
        },
    }
    subject = [{"name": ptx, "digest": intoto.digests(files[ptx])}]
    return intoto.statement(subject, intoto.SLSA_PROVENANCE_V1, predicate)


def verify_provenance(
    env: dsse.Envelope, st: intoto.Statement, verifier: Verifier,
    files: dict[str, bytes] | None, where: str,
) -> att.Attested:
    """Verify a provenance statement (module docstring)."""
    internal = _get(st.predicate, "buildDefinition", "internalParameters")
    log = internal.get("ledger")
    rec = receipt_of_predicate({"log": log})
    cert_pred = certificate_predicate(rec, verifier.log_key(rec.checkpoint).name)
    kid = att.check_signature(env, cert_pred)
    if log != cert_pred["log"]:
        raise TamperDetected(f"{where}: internalParameters.ledger is not its entry's evidence")
    ext = _get(st.predicate, "buildDefinition", "externalParameters")
    deps = _get(st.predicate, "buildDefinition").get("resolvedDependencies")
    src, ptx = ext.get("source"), ext.get("ptx")
    if not isinstance(deps, list) or len(deps) != 1 or not isinstance(deps[0], dict):
        raise BadInput("the provenance needs one resolvedDependency, the .cu")
    if not (isinstance(src, str) and isinstance(ptx, str)):
        raise BadInput("the provenance's externalParameters name no source and ptx")
    if set(st.subjects) != {ptx} or deps[0].get("name") != src:
        raise TamperDetected(f"{where}: the subject is not the PTX or the material not the .cu")
    digest = deps[0].get("digest")
    named: dict[str, str | None] = {ptx: st.subjects[ptx].get("blake3"),
             src: digest.get("blake3") if isinstance(digest, dict) else None}
    cert = att.verify_logged(verifier, rec, files, where, named, kid)
    manifest = {p: hex_encode(d) for p, d in att.manifest_rows(rec)}
    for name, value in named.items():
        if value != manifest.get(name):
            raise TamperDetected(f"{where}: {name[:120]!r} is not the sealed manifest's")
    if files is not None:
        att.check_subject_files(st, files, where)
        if build_of(files) != ext:
            raise TamperDetected(f"{where}: externalParameters are not the contract's build")
    return att.Attested(st, cert, kid, "files" if files is not None else "manifest")


def _get(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    for k in keys:
        obj = obj.get(k)  # type: ignore[assignment]
        if not isinstance(obj, dict):
            raise BadInput(f"the provenance has no {'.'.join(keys)} object")
    return obj

