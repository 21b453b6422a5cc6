"""Issue 9 items 7, 8, 9: audit against a trusted key, entry shapes, text from others on a
terminal."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.core.bundle import Bundle
from ledger.core.entries import (
    MAX_DETAIL,
    MAX_TEXT,
    bundle_fields,
    check_entry_shape,
    node_key_id,
    sign_entry,
)
from ledger.core.errors import BadInput
from tests.helpers.ledgers import (
    add_node,
    cli_json,
    fake_fields,
    new_ledger,
    run_cli,
    seal_fake,
    write_bundle,
)

# -- item 7: audit checks against a key the user trusts --------------------------------------------


@pytest.fixture(scope="module")
def two_ledgers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("two")
    homes = []
    for name in ("a", "b"):
        log = new_ledger(root / name, "test.example/same-origin")
        sk = add_node(log)
        seal_fake(log, sk, root / f"{name}-bundles", name)
        log.close()
        homes.append(root / name)
    return homes[0], homes[1]


def test_audit_vkey_rejects_a_forged_database(
    two_ledgers: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = two_ledgers
    copy = tmp_path / "auditor"
    copy.mkdir(mode=0o700)
    shutil.copy(b / "ledger.db", copy / "ledger.db")  # the forger's database, self-consistent
    vkey = (a / "log.vkey").read_text().strip()
    out = cli_json("audit", "--vkey", vkey, home=copy, ok=(1,))
    assert out["ok"] is False
    assert any("not the trusted" in p["message"] for p in out["problems"])


def test_audit_default_key_is_the_one_init_recorded(
    two_ledgers: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = two_ledgers
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    shutil.copy(a / "log.vkey", home / "log.vkey")
    shutil.copy(b / "ledger.db", home / "ledger.db")  # database swapped, log.vkey kept
    res = run_cli("audit", home=home)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "recorded at init" in res.stderr


def test_init_prints_the_key_to_pin(tmp_path: Path) -> None:
    res = run_cli("init", "--origin", "test.example/pin", home=tmp_path / "h")
    assert res.returncode == 0
    vkey = (tmp_path / "h" / "log.vkey").read_text().strip()
    assert vkey in res.stdout and "--vkey" in res.stdout


# -- item 8: entry shapes --------------------------------------------------------------------------

ODD: dict[str, Any] = {
    "kernel": {"name": ["not", "text"], "version": "1"},
    "obligations": ["PO1", 5, {"obligation": {"x": 1}}],
    "checks": [1, "x", {"id": 3}, {"id": "a", "status": "bogus", "detail": None}],
}


@pytest.mark.parametrize(
    "fields",
    [
        {**fake_fields(), "kernel": {"name": 1, "version": "1"}},
        {**fake_fields(), "kernel": {"name": "k"}},
        {**fake_fields(), "obligations": ["PO1"]},
        {**fake_fields(), "obligations": [{"obligation": "PO1"}]},
        {**fake_fields(), "checks": [{"id": "a", "status": "maybe", "detail": ""}]},
        {**fake_fields(),
         "checks": [{"id": "a", "status": "passed", "detail": "x" * (MAX_DETAIL + 1)}]},
        {**fake_fields(), "checks": [{"id": "a", "status": "passed", "detail": "",
                                      "tool": "x" * (MAX_TEXT + 1)}]},
        {**fake_fields(), "checks": "passed"},
        {**fake_fields(), "kernel": {"name": "k", "version": "1", "é": "x"}},
        {**fake_fields(), "checks": [{"id": "a", "status": "passed", "detail": "", "<b>": ""}]},
    ],
)
def test_odd_shapes_are_refused_on_append(tmp_path: Path, fields: dict[str, Any]) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    b = Bundle.from_dir(write_bundle(tmp_path, "b", "odd"))
    with pytest.raises(BadInput):
        log.seal(b, fields, sk)
    assert log.store.size() == 1
    log.close()


def test_the_log_writes_valid_shapes() -> None:
    check_entry_shape({"type": "bundle", **fake_fields()})
    check_entry_shape({"type": "key-revocation", "reason": "rotated"})
    with pytest.raises(BadInput):
        check_entry_shape({"type": "key-registration", "name": "[/]"})


@pytest.fixture(scope="module")
def odd_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger that already holds an odd-shaped entry (written before validation existed)."""
    root = tmp_path_factory.mktemp("odd")
    home = root / "home"
    log = new_ledger(home)
    sk = add_node(log)
    b = Bundle.from_dir(write_bundle(root, "b", "odd"))
    kid = node_key_id(bytes(sk.verify_key))
    with log.store.writer() as w:
        entry = sign_entry(bundle_fields(log._chain(w), b, ODD, kid), sk)
        w.put_blobs((f.digest, f.data) for f in b.files)
        w.append(entry, "bundle", b.digest)
        log._checkpoint(w)
    log.close()
    return home


@pytest.mark.parametrize("cmd", [["show", "1"], ["verify", "1"], ["log"]])
@pytest.mark.parametrize("json_out", [False, True])
def test_stored_odd_shapes_render_without_crashing(
    odd_home: Path, cmd: list[str], json_out: bool
) -> None:
    res = run_cli(*cmd, *(["--json"] if json_out else []), home=odd_home)
    assert res.returncode in (0, 1), res.stderr
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr


# -- item 9: text from bundles and entries is escaped ----------------------------------------------

MARKUP = "1.0.0[/][bold red]spoof[/bold red][link=http://x]"
CONTROL = "ok\x1b[2J\x1b]0;owned\x07\rfake\u202e"


def test_markup_and_controls_in_reason_and_kernel(tmp_path: Path) -> None:
    home = tmp_path / "home"
    log = new_ledger(home)
    sk = add_node(log)
    fields = fake_fields()
    fields["kernel"] = {"name": MARKUP, "version": MARKUP}
    fields["checks"][0]["detail"] = MARKUP + CONTROL
    log.seal(Bundle.from_dir(write_bundle(tmp_path, "b", "m")), fields, sk)
    with pytest.raises(BadInput, match="control or bidi character"):  # refused since issue 33
        log.revoke(log.store.key_rows()[0].key_id, MARKUP + CONTROL)
    import ledger.log as log_mod

    with pytest.MonkeyPatch.context() as m:  # as an older version wrote it: shown, escaped
        m.setattr(log_mod, "check_text", lambda *a, **k: None, raising=False)
        log.revoke(log.store.key_rows()[0].key_id, MARKUP + CONTROL)
    log.close()
    for cmd in (["keys", "list"], ["log"], ["show", "1"]):
        res = run_cli(*cmd, home=home)
        assert res.returncode == 0, (cmd, res.stderr)
        assert "[/]" in res.stdout, cmd  # shown literally, not interpreted
        assert "\x1b" not in res.stdout and "\r" not in res.stdout and "\u202e" not in res.stdout


def test_report_table_escapes_check_text(capsys: pytest.CaptureFixture[str]) -> None:
    from ledger_cli import output
    from verify.report import Check, Report

    rep = Report(MARKUP, (Check("x[/]", "failed", MARKUP + CONTROL, "[b]t", "v"),))
    output.report_table(rep)
    out = capsys.readouterr().out
    assert "[/]" in out and "\x1b[2J" not in out


def test_error_line_strips_controls(capsys: pytest.CaptureFixture[str]) -> None:
    from ledger_cli import output

    output.error_line("bad " + CONTROL)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\r" not in err


def test_check_with_markup_in_contract(tmp_path: Path) -> None:
    d = write_bundle(tmp_path, "b", "c")
    (d / "contract.yaml").write_text("metadata:\n  version: '1.0.0[/]'\n  description: '[/]x'\n")
    res = run_cli("check", str(d))
    assert res.returncode in (0, 1), res.stderr
    assert "internal error" not in res.stderr


@pytest.mark.parametrize("text", ["plain", "ünïcödé ✓", "\U0001f600 emoji", "tab\there", "q\"\\"])
def test_plain_entries_encode_as_the_checked_path_does(text: str) -> None:
    """seal_many skips canonical's plainness walk for entries ``plain_entry`` vouches for: the
    signed and the stored bytes are the same as through the walk, and a member the shape rules
    do not cover (a float, a big integer, a non-ASCII name) is not vouched for."""
    from ledger.core.canonical import canonical_json_extend
    from ledger.core.entries import plain_entry

    fields = fake_fields(text)
    fields["checks"][0]["detail"] = text
    obj = {"type": "bundle", "origin": "o", "time": "t", "v": 2, "prev_size": 2**53,
           "prev_root": "00", "bundle_digest": text, "manifest": text, "signer": "ab", **fields}
    check_entry_shape(obj)
    assert plain_entry(obj)
    fast, fast_sig = canonical_json_extend(obj, "signature", known_plain=True)
    slow, slow_sig = canonical_json_extend(obj, "signature")
    assert fast == slow and fast_sig("c2ln") == slow_sig("c2ln")
    for odd in ({"prev_size": 2**53 + 1}, {"prev_size": 1.5}, {"é": "x"}, {"prev_size": True}):
        assert not plain_entry({**obj, **odd})


def test_emoji_codes_in_check_text_print_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """``:name:`` in a detail or a tool is the bundle's text: shown as written, never turned
    into an emoji (rich's consoles would by default; markup escaping does not cover it)."""
    from ledger_cli import output
    from verify.report import Check, Report

    rep = Report("d", (Check("c", "failed", "kernel :smile: took :100: steps", ":x:", "v"),))
    output.report_table(rep)
    out = capsys.readouterr().out
    assert ":smile:" in out and ":100:" in out and ":x:" in out
    assert "\U0001f604" not in out and "\U0001f4af" not in out
