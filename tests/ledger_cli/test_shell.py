"""The shell's surface (issue 11): version, -h, `python -m ledger_cli` running once, every command
registered, help text a person reads (no Python types, no internal references), usage errors
(exit 2) for out-of-range options, shell completion offered."""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import __version__
from ledger_cli import main

COMMANDS = ["init", "vkey", "checkpoint", "check", "seal", "verify", "show", "log", "audit",
            "serve", "export-tiles", "mirror", "submit", "new", "keys", "proof", "receipt",
            "witness", "publish"]


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            pytest.raises(SystemExit) as done:
        main(list(args))
    code = done.value.code
    return (code if isinstance(code, int) else 0), out.getvalue(), err.getvalue()


def test_version() -> None:
    assert run("--version") == (0, f"ledger {__version__}\n", "")


def test_python_m_runs_once_and_names_itself_ledger() -> None:
    res = subprocess.run([sys.executable, "-m", "ledger_cli", "--version"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert (res.returncode, res.stdout, res.stderr) == (0, f"ledger {__version__}\n", "")
    res = subprocess.run([sys.executable, "-m", "ledger_cli", "-h"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0 and res.stdout.count("Usage: ledger ") == 1, res.stdout


def _helps() -> list[list[str]]:
    """Every command and group of the shell, read from the app itself (none left out)."""
    from typer.main import get_command

    from ledger_cli import app

    def walk(cmd: object, path: list[str]) -> list[list[str]]:
        subs = getattr(cmd, "commands", {})
        return [path] + [p for name in sorted(subs) for p in walk(subs[name], [*path, name])]

    return walk(get_command(app), [])


def test_every_command_is_registered() -> None:
    code, out, _ = run("-h")
    assert code == 0
    listed = set(re.findall(r"^  ([a-z][a-z-]+)  ", out.split("\nCommands:\n", 1)[1], re.M))
    assert set(COMMANDS) <= listed, sorted(set(COMMANDS) - listed)
    assert "--install-completion" in out and "--show-completion" in out


@pytest.mark.parametrize("argv", _helps(), ids=lambda a: " ".join(a) or "ledger")
def test_help_reads_without_python_types_or_internal_references(argv: list[str]) -> None:
    code, out, err = run(*argv, "-h")
    assert code == 0 and err == ""
    assert "Usage: ledger" in out
    bad = re.findall(r"<[A-Za-z_\[\]]+(?: range)?>|SPEC \d|[Ii]ssue \d|TYPE_CHECKING", out)
    assert bad == [], out


def test_help_fits_80_columns_and_lists_commands_on_whole_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At COLUMNS=80 no help line overflows, and a command's summary in a list reads as one
    paragraph: every continuation line is full, not broken where the docstring broke."""
    monkeypatch.setenv("COLUMNS", "80")
    for argv in _helps():
        code, out, _ = run(*argv, "-h")
        assert code == 0
        lines = out.splitlines()
        assert [ln for ln in lines if len(ln) > 80] == [], argv
        section, rows = "", []
        for ln in lines:
            section = ln if re.match(r"^\S.*:$", ln) else section
            if section == "Commands:" and ln.startswith("  "):
                rows.append(ln)
        for this, nxt in itertools.pairwise(rows):
            # a continuation line after a line whose text ends well before the width: the
            # summary was broken where its docstring broke, not where the list wraps
            if re.match(r" {4,}\S", nxt):
                assert len(this.rstrip()) > 50, (argv, this, nxt)


@pytest.mark.parametrize("argv", [["log", "--limit", "0"], ["log", "--start", "-1"]])
def test_out_of_range_options_are_usage_errors(argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.startswith("ledger: error: ") and err.count("\n") == 1, err


def test_witness_commands_take_json(tmp_path: pytest.TempPathFactory) -> None:
    import json

    wdir = str(tmp_path) + "/w"
    code, out, _ = run("witness", "init", "--name", "witness.example", "--dir", wdir, "--json")
    made = json.loads(out)
    assert code == 0 and made["name"] == "witness.example"
    assert made["vkey"].startswith("witness.example+")
    code, out, _ = run("witness", "vkey", "--dir", wdir, "--json")
    assert code == 0 and json.loads(out) == {"vkey": made["vkey"]}
    # add-log and add-checkpoint too, against the witness served on a loopback port
    from ledger.core.note import open_note, parse_vkey
    from ledger.http.witness import make_witness_app
    from tests.helpers.ledgers import cli_json
    from tests.helpers.server import BackgroundServer

    home = Path(str(tmp_path)) / "log"
    log_vkey = cli_json("init", "--origin", "test.example/w", home=home)["vkey"]
    code, out, _ = run("witness", "add-log", log_vkey, "--dir", wdir, "--json")
    assert code == 0 and json.loads(out) == {"origin": "test.example/w"}
    with BackgroundServer(make_witness_app(Path(wdir))) as ws:
        got = cli_json("witness", "add-checkpoint", ws.url, "--vkey", made["vkey"], home=home)
    assert got["origin"] == "test.example/w" and got["size"] == 0
    assert got["witness"] == made["vkey"] and len(got["root"]) == 44
    open_note(got["note"].encode(), [parse_vkey(log_vkey), parse_vkey(made["vkey"])])


def test_shell_completion_completes_commands() -> None:
    """The bash completion protocol (what ``--install-completion`` installs) answers with the
    matching commands and subcommands."""
    import os

    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_LEDGER_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(cword)}
        res = subprocess.run([sys.executable, "-m", "ledger_cli"], capture_output=True,
                             text=True, env=env, timeout=120, check=False)
        assert res.returncode == 0, res.stderr
        return res.stdout.split()

    assert complete("ledger se", 1) == ["seal", "serve"]
    assert complete("ledger receipt ", 2) == ["write", "refresh"]
    assert "--limit" in complete("ledger log --", 2)


@pytest.mark.parametrize("columns", ["80", "200"])
def test_quick_help_is_what_the_command_tree_prints(
    monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    """``ledger ... --help`` answered from ledger_cli/help.json (no command tree loaded: issue
    12) prints exactly what the command tree prints at any width of 80 columns or more, for every
    command and group; a bare group prints its help and exits 2 as click does. When this fails,
    run `python -m ledger_cli.quickhelp` to write the file again."""
    import json

    from ledger_cli import commands, quickhelp

    monkeypatch.setenv("COLUMNS", columns)
    helps = json.loads(Path(quickhelp.HELP_FILE).read_text(encoding="utf-8"))
    assert sorted(helps) == sorted(" ".join(a) for a in _helps()), \
        "ledger_cli/help.json is stale: run `python -m ledger_cli.quickhelp`"
    for key, entry in helps.items():
        argv = key.split() if key else []
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            commands.main([*argv, "--help"])
        assert (done.value.code, out.getvalue()) == (0, entry["help"]), \
            f"help of {key!r} changed: run `python -m ledger_cli.quickhelp`"
        assert run(*argv, "-h") == (0, entry["help"], "")  # through ledger_cli.main
        if entry["group"]:
            assert run(*argv) == (2, entry["help"], "")


def test_quick_help_steps_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    """Narrower terminals, options before the flag, unknown commands and completion requests go
    to the command tree."""
    from ledger_cli import quickhelp

    assert quickhelp.answer(["--version"]) == 0
    assert quickhelp.answer(["seal"]) is None  # a command without its arguments
    assert quickhelp.answer(["nope", "--help"]) is None
    assert quickhelp.answer(["--home", "x", "--help"]) is None
    monkeypatch.setenv("COLUMNS", "79")
    assert quickhelp.answer(["--help"]) is None
    code, out, _ = run("--help")
    assert code == 0 and max(len(ln) for ln in out.splitlines()) <= 79
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("_LEDGER_COMPLETE", "complete_bash")
    assert quickhelp.answer([]) is None


