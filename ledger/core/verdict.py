"""A verdict in words (SPEC 7: "a ``partial`` verdict always names its skipped checks in one
line"), and the proof obligations a ``certificate`` check's detail judges. Pure text work on
(id, status, detail) triples, so the CLI, the library and the web pages print the same line.

    partial: lean.kernel skipped (no Lean toolchain on PATH), certificate skipped (PO2 partial)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# the certificate check's detail judges each claim: "PO1 ok (...)", "PO2 partial (...)",
# "PO3 FAILED (...)" (verify.certificate)
_PO = re.compile(r"\b(PO[1-8]) (ok|partial|FAILED) \(")
REASON_CHARS = 60
# How falsify details and the certificate spell an oracle: "oracle <kind>:<name>" (verify.oracle
# re-exports it; the attestation predicate lists the kinds, ledger.core.attestation)
ORACLE_IN_DETAIL = re.compile(r"\boracle ((?:trusted|bundle|futhark):[^\s;,()]*[^\s;,():])")


def obligation_states(detail: str) -> list[tuple[str, str, str]]:
    """(obligation, ``ok``|``partial``|``failed``, evidence) for each claim the detail judges."""
    found = list(_PO.finditer(detail))
    out: list[tuple[str, str, str]] = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(detail)
        text = detail[m.end():end].rstrip(" ;,.")
        text = text[:-1] if text.endswith(")") else text
        out.append((m.group(1), m.group(2).lower(), text))
    return out


def first_clause(detail: str, limit: int = REASON_CHARS) -> str:
    """The first clause of a check's detail (up to a ``;`` outside parentheses), cut short."""
    line = (detail.splitlines() or [""])[0]
    depth = 0
    for i, ch in enumerate(line):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth <= 0:
            line = line[:i]
            break
    line = line.strip().rstrip(".")
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def skip_reason(check_id: str, detail: str) -> str:
    """Why a skipped check was skipped; for the ``certificate``, its obligations not ``ok``."""
    if check_id == "certificate":
        weak = [f"{po} {status}" for po, status, _ in obligation_states(detail) if status != "ok"]
        if weak:
            return ", ".join(weak)
    return first_clause(detail)


def partial_line(checks: Iterable[tuple[str, str, str]]) -> str:
    """``partial: X skipped (why), ...`` for the skipped checks among (id, status, detail);
    "" when none was skipped."""
    skipped = [(cid, detail) for cid, status, detail in checks if status == "skipped"]
    if not skipped:
        return ""
    return "partial: " + ", ".join(f"{cid} skipped ({skip_reason(cid, d)})" for cid, d in skipped)


def oracle_kinds(detail: str) -> list[str]:
    """The oracle kinds (``trusted``, ``bundle``, ``futhark``) a ``falsify.*`` detail names."""
    return [m.group(1).split(":")[0] for m in ORACLE_IN_DETAIL.finditer(detail)]
