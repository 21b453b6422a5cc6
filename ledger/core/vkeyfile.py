"""The one reader of verifier-key files (a note verifier key, ``name+keyid+base64``: SPEC 5).

Every verifier key that comes from a file is read here with a size bound (``MAX_VKEY_FILE``):
``LEDGER_HOME/log.vkey`` (``ledger.log.pinned_vkey``) and the ``--vkey``/``--witness`` values of
the command line, which are a key or the name of a file holding one (``read_vkey``). A file over
the bound, not UTF-8, or not one key is bad input (exit 2); it is never read to its end."""

from __future__ import annotations

from pathlib import Path

from ledger.core.errors import BadInput, KeyFileError
from ledger.core.fsutil import read_small
from ledger.core.note import NoteVerifier, parse_vkey

MAX_VKEY_FILE = 4096  # a key is ~100 bytes; a policy of several lives elsewhere (ledger.trust)


def read_vkey_file(path: Path, what: str = "verifier key file") -> NoteVerifier:
    """The verifier key held in the file ``path`` (surrounding whitespace ignored)."""
    data = read_small(path, MAX_VKEY_FILE, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KeyFileError(f"{what} {path} is not UTF-8") from e
    return parse_vkey(text.strip())


def read_vkey(text_or_file: str) -> NoteVerifier:
    """A verifier key given as an option: the key itself, or the name of a file holding it."""
    path = Path(text_or_file)
    try:
        is_file = path.is_file()
    except (OSError, ValueError) as e:  # a name too long to be a file, a NUL
        raise BadInput(f"cannot read the verifier key file {text_or_file[:100]!r}") from e
    if is_file:
        return read_vkey_file(path)
    return parse_vkey(text_or_file.strip())
