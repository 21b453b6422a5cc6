"""What text from outside may hold (issue 33 item 7): the one definition, for input and output.

Text that did not come from this program (bundle contracts, kernel names and versions, signed
notes, revocation reasons, answers of other hosts) is shown on terminals and read by people. Some
characters change what a terminal or an editor shows instead of showing themselves:

* C0 controls (U+0000-U+001F but tab and newline), DEL (U+007F) and the C1 controls
  (U+0080-U+009F: U+009B is a CSI, the start of an escape sequence on many terminals);
* the bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F,
  U+202A-U+202E, U+2066-U+2069), which reorder the characters around them ("Trojan Source");
* the line and paragraph separators U+2028 and U+2029 (a line break to some readers, not to
  others).

``UNSAFE`` matches exactly these. Where a format lets us refuse them (note text and key names,
a contract's kernel name and version, a revocation reason given to ``ledger revoke``, a bundle's
file names in ``ledger.core.bundle.check_path``), ``check_text`` or ``unsafe_at`` refuses them
with one ``BadInput`` line; where text is printed, ``shown`` replaces
each by ``?`` (the human output) and ``json_safe`` writes each as a ``\\uXXXX`` escape inside
the JSON string (the ``--json`` output: a JSON reader gets the very same string back, a terminal
showing the JSON shows the escape). Entries already in a log are not refused for them (a
signed entry a log accepted stays verifiable); they are escaped wherever they are printed. File
names are the exception: a name becomes a path on disk when a bundle is rebuilt, so
``check_path`` refuses one in a signed manifest too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ledger.core.errors import BadInput

UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
# what else is refused, by what is allowed of tab and newline: "\t\n" both (``UNSAFE``), "\n"
# only (a signed note's text, C2SP), "" neither (one line: a name, a version, a reason)
_REFUSED = {
    "\t\n": UNSAFE,
    "\n": re.compile(UNSAFE.pattern[:-1] + "\t]"),
    "": re.compile(UNSAFE.pattern[:-1] + "\t\n]"),
}


def unsafe_at(text: str, allow: str = "") -> int | None:
    """The index of the first character of ``text`` that may not be accepted: one ``UNSAFE``
    matches, or a tab or newline not in ``allow`` ("", "\n" or "\t\n"); None when there is
    none."""
    found = _REFUSED[allow].search(text)
    return None if found is None else found.start()


def check_text(text: str, what: str, allow: str = "") -> None:
    """``BadInput`` naming ``what``, the character and its place, when ``text`` holds a character
    ``unsafe_at`` finds (``allow``: which of tab and newline may appear)."""
    at = unsafe_at(text, allow)
    if at is not None:
        raise BadInput(f"{what} holds the control or bidi character U+{ord(text[at]):04X} at {at}")


def shown(text: object) -> str:
    """``text`` for a terminal: each ``UNSAFE`` character becomes ``?``; tabs and newlines stay."""
    return UNSAFE.sub("?", str(text))


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def json_safe(obj: Any, indent: int | None = None) -> str:
    """``obj`` as JSON text (UTF-8 kept readable) in which every ``UNSAFE`` character is a
    ``\\uXXXX`` escape: outside its strings JSON text is ASCII, so each one found is inside a
    string, where the escape stands for the same character."""
    return UNSAFE.sub(_escape, json.dumps(obj, indent=indent, ensure_ascii=False))


__all__ = ["UNSAFE", "check_text", "json_safe", "shown", "unsafe_at"]
