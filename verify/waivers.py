"""Contract waivers (issue 32; contracts/README.md "Waivers"): ``kernel.waivers`` names a finding
class, a PTX location and a written reason. This module resolves each waiver to the PTX lines it
covers:

1. the waiver's ``entry`` must be the kernel's entry (the only one the verifier launches);
2. ``line``: one instruction line of that entry's body (not a directive, label or blank line);
3. ``label``: every instruction line from that label of the entry to its next label.

``resolve`` gives (finding kind, PTX line) -> waiver index for the interpreter
(``verify.ptxsim.launch(waivers=...)``), which then keeps a covered finding as *waived* instead of
reporting it, and a problem line per waiver that matches no instruction (``contract.lint`` gate
``waivers`` fails on any). A waiver no falsification test's run used fails the falsify checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from verify.model import Waiver

_LABEL = re.compile(r"^\s*([$%A-Za-z_][\w$]*)\s*:")
_COMMENT = re.compile(r"//[^\n]*")


def _entry_span(lines: Sequence[str], entry: str) -> tuple[int, int] | None:
    """1-based (first, last) lines of ``entry``'s body, or None when it is not in the PTX."""
    head = re.compile(rf"\.entry\s+{re.escape(entry)}\s*\(")
    start = next((i for i, ln in enumerate(lines) if head.search(ln)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if ".entry" in lines[i] and
                re.search(r"\.entry\s+[\w$]+\s*\(", lines[i])), len(lines))
    return start + 1, end


def _is_instruction(text: str) -> bool:
    t = _COMMENT.sub("", text).strip().lstrip("{").strip()
    return bool(t) and ";" in t and not t.startswith(".") and _LABEL.match(t) is None


def resolve(waivers: Sequence[Waiver], ptx: bytes, entry: str) -> tuple[
        dict[tuple[str, int], int], list[str]]:
    """(kind, line) -> waiver index, and one problem per waiver that covers no instruction."""
    lines = ptx.decode("utf-8", "replace").splitlines()
    span = _entry_span(lines, entry)
    covered: dict[tuple[str, int], int] = {}
    problems: list[str] = []
    for i, w in enumerate(waivers):
        where = f"waiver {i} ({w.finding} at {w.where()})"
        if w.entry != entry:
            problems.append(f"{where}: entry {w.entry!r} is not the kernel's entry {entry!r}")
            continue
        if span is None:
            problems.append(f"{where}: the PTX has no entry {entry!r}")
            continue
        at = _lines_of(w, lines, span)
        if not at:
            what = (f"PTX line {w.line} is not an instruction of {entry}" if w.line is not None
                    else f"no label {w.label!r} in {entry}, or no instruction after it")
            problems.append(f"{where} matches nothing: {what}")
            continue
        for ln in at:
            covered.setdefault((w.finding, ln), i)
    return covered, problems


def _lines_of(w: Waiver, lines: Sequence[str], span: tuple[int, int]) -> list[int]:
    first, last = span
    if w.line is not None:
        ok = first <= w.line <= last and _is_instruction(lines[w.line - 1])
        return [w.line] if ok else []
    start = next((n for n in range(first, last + 1)
                  if (m := _LABEL.match(lines[n - 1])) and m.group(1) == w.label), None)
    if start is None:
        return []
    out = []
    for n in range(start + 1, last + 1):
        if _LABEL.match(lines[n - 1]):
            break
        if _is_instruction(lines[n - 1]):
            out.append(n)
    return out


def describe(w: Waiver) -> str:
    """``global_race at vector_add PTX line 57 ("reason")`` for details."""
    return f"{w.finding} at {w.where()} ({w.reason!r})"
