"""Issue 33 item 7: one definition of the text from outside that may be accepted and shown
(ledger/core/text.py), applied where text is accepted (note text and key names, a contract's
kernel name and version, a revocation reason, a bundle's file names) and where it is printed (the
human output, ``ledger checkpoint`` and every ``--json`` output)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ledger.core.errors import BadInput, BundleError, ContractError
from ledger.core.note import NoteSigner, NoteVerifier, open_note, sign_note
from ledger.core.text import UNSAFE, check_text, json_safe, shown, unsafe_at
from tests.helpers.ledgers import (
    add_node,
    assert_one_error_line,
    fake_fields,
    new_ledger,
    run_cli,
    write_bundle,
)

CSI = "\u009b"  # a C1 control: the start of an escape sequence on many terminals
RLO = "\u202e"  # right-to-left override ("Trojan Source")
HOSTILE = ("\x1b", "\x7f", "\x85", CSI, "\u061c", "\u200f", RLO, "\u2066", "\u2069", "\u2028")
FIX = Path(__file__).resolve().parents[2] / "fixtures" / "contracts"


@pytest.mark.parametrize("c", HOSTILE)
def test_the_one_definition(c: str) -> None:
    text = f"ab{c}cd"
    assert UNSAFE.search(text) is not None
    assert unsafe_at(text) == 2 and shown(text) == "ab?cd"
    with pytest.raises(BadInput, match=f"U\\+{ord(c):04X} at 2"):
        check_text(text, "thing")
    out = json_safe({"k": text})
    assert c not in out and f"\\u{ord(c):04x}" in out
    assert json.loads(out) == {"k": text}  # the same string back


def test_what_stays() -> None:
    for text in ("plain", "café — 中文", "a\tb\nc", "emoji \U0001f600"):
        assert shown(text) == text
        assert json.loads(json_safe([text])) == [text]
    assert unsafe_at("a\nb") == 1 and unsafe_at("a\nb", "\n") is None
    assert unsafe_at("a\tb", "\n") == 1 and unsafe_at("a\tb", "\t\n") is None
    assert json_safe({"a": "—"}) == '{"a": "—"}'  # readable: not every non-ASCII is escaped


def _signer() -> NoteSigner:
    return NoteSigner("log.example", b"", b"\x01" * 32)


@pytest.mark.parametrize("c", [CSI, RLO, "\u2028"])
def test_note_text_and_key_names_refuse_them(c: str) -> None:
    s = _signer()
    with pytest.raises(BadInput, match=f"U\\+{ord(c):04X}"):
        sign_note(f"log.example\n1\nx{c}y\n".encode(), [s])
    good = sign_note(b"log.example\n1\nabc\n", [s])
    with pytest.raises(BadInput, match=f"U\\+{ord(c):04X}"):
        open_note(good.replace(b"abc", f"a{c}c".encode()), [s.verifier])
    with pytest.raises(BadInput, match="empty or holds"):
        NoteSigner(f"log{c}", b"", b"\x01" * 32)
    with pytest.raises(BadInput, match="empty or holds"):
        NoteVerifier(f"log{c}", b"\x00" * 4, b"\x02" * 32)
    assert open_note(good, [s.verifier]).text == b"log.example\n1\nabc\n"


@pytest.mark.parametrize("c", HOSTILE)
def test_bundle_file_names_refuse_them(c: str) -> None:
    from ledger.core.bundle import Bundle, check_path, make_manifest, parse_manifest

    name = f"sub/a{c}b.txt"
    with pytest.raises(BundleError, match=f"U\\+{ord(c):04X} at 5"):
        check_path(name)
    files = {"contract.yaml": b"x", "k.ptx": b"", "p.lean": b"", "s.fut": b""}
    Bundle.from_files(files)
    with pytest.raises(BundleError, match="bad file name"):  # a submission's files
        Bundle.from_files({**files, name: b"x"})
    with pytest.raises(BundleError, match="bad file name"):  # a manifest naming one
        parse_manifest(make_manifest([(p, b"\0" * 32) for p in (*files, name)]))


_VERSION = '  name: clean_vadd\n  version: "1.0.0"'


@pytest.mark.parametrize(("old", "new"), [
    (_VERSION, '  name: clean_vadd\n  version: "1.0\\u009b31m"'),  # YAML's escape of a CSI
    (_VERSION, f'  name: clean_vadd\n  version: "1.0{RLO}"'),
    ("  name: clean_vadd\n", f"  name: clean{RLO}_vadd\n"),
])
def test_contract_name_and_version_refuse_them(old: str, new: str) -> None:
    from verify.contract import load_contract

    clean = (FIX / "clean.yaml").read_text()
    assert clean.count(old) == 1
    with pytest.raises(ContractError, match="control or bidi character"):
        load_contract(clean.replace(old, new).encode())
    assert load_contract(clean.encode()).version == "1.0.0"


def test_revoke_refuses_them(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "h")
    add_node(log)
    kid = log.store.key_rows()[0].key_id
    size = log.store.size()
    for bad in (f"stolen{RLO}", f"stolen{CSI}2J", "two\nlines"):
        with pytest.raises(BadInput, match="--reason holds"):
            log.revoke(kid, bad)
    assert log.store.size() == size  # nothing appended
    log.close()
    res = run_cli("keys", "revoke", kid.hex(), "--reason", f"x{RLO}y", home=tmp_path / "h")
    assert "--reason holds the control or bidi character U+202E" in assert_one_error_line(res, 2)


def _hostile_ledger(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ledger holding what an older version (or another log) let in: a kernel version with a
    CSI and a bidi override, a revocation reason with both, and a stored checkpoint note with a
    signature line whose name holds a CSI."""
    import ledger.log as log_mod
    from ledger.core.bundle import Bundle

    home = tmp / "h"
    log = new_ledger(home)
    sk = add_node(log)
    fields = fake_fields("x")
    fields["kernel"]["version"] = f"1.0{CSI}31m{RLO}"
    log.seal(Bundle.from_dir(write_bundle(tmp / "b", "bx", "x")), fields, sk)
    with monkeypatch.context() as m:  # as written before the check existed
        m.setattr(log_mod, "check_text", lambda *a, **k: None, raising=False)
        log.revoke(log.store.key_rows()[0].key_id, f"stolen{CSI}2J{RLO}")
    log.close()
    db = sqlite3.connect(home / "ledger.db")
    (size, note), = db.execute("SELECT size, note FROM checkpoints ORDER BY size DESC LIMIT 1")
    db.execute("INSERT INTO checkpoints(size, note) VALUES(?, ?)",
               (size, bytes(note) + f"— evil{CSI}31m AAAAAAAA\n".encode()))
    db.commit()
    db.close()
    return home


def test_printed_text_is_escaped_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _hostile_ledger(tmp_path, monkeypatch)
    runs = {
        "checkpoint": run_cli("checkpoint", home=home),
        "checkpoint --json": run_cli("checkpoint", "--json", home=home),
        "show --json": run_cli("show", "1", "--json", home=home),
        "show": run_cli("show", "1", home=home),
        "keys list --json": run_cli("keys", "list", "--json", home=home),
        "keys list": run_cli("keys", "list", home=home),
        "show revocation --json": run_cli("show", "2", "--json", home=home),
    }
    for name, res in runs.items():
        assert res.returncode == 0, (name, res.stderr)
        assert CSI not in res.stdout and RLO not in res.stdout, name
    assert "— evil?31m AAAAAAAA" in runs["checkpoint"].stdout
    assert "\\u009b31m\\u202e" in runs["show --json"].stdout
    assert json.loads(runs["show --json"].stdout) != {}
    assert "\\u009b2J\\u202e" in runs["keys list --json"].stdout
    assert "\\u009b2J\\u202e" in runs["show revocation --json"].stdout
    parsed = json.loads(runs["checkpoint --json"].stdout)
    assert f"evil{CSI}31m" in parsed["note"]  # escaped on the wire, the same text when read
