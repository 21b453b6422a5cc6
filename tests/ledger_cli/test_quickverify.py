"""``ledger verify`` without the command tree (ledger_cli.quickverify, issue 12 start-up) is the
typer app's ``verify``, exactly: for any command line its parse either equals the values the app
hands the command or steps aside (the app answers), the option set is the command's own, and a
real run prints the same bytes and exits with the same code either way."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.bundle import Bundle
from ledger_cli import commands, quickverify, verifying
from tests.helpers.ledgers import REPO, add_node, fake_fields, new_ledger, write_bundle

# command lines the quick path takes (and must: start-up is its point)
PLAIN = [
    ["verify", "1", "--no-gpu", "--seed", "1"],
    ["verify", "1"],
    ["verify", "--json", "abcdef12"],
    ["verify", "1", "--seed=0", "--quorum", "2", "--witness", "w1", "--witness=w2"],
    ["verify", "1", "--vkey", "example.com+1234abcd+AQ", "--require", "lean.kernel,falsify.*"],
    ["verify", "1", "--home", "/nonexistent/h", "--policy", "p.json", "--bundle", "b",
     "--receipt", "r.json", "--trust-bundle-code", "--json", "--no-gpu"],
    ["verify", "1", "--seed", "999999999999999999", "--witness=a=b"],
]
# command lines the app answers: usage errors, help, completion, unusual forms
STEPS_ASIDE = [
    [], ["verify"], ["check", "x"], ["Verify", "1"], ["--version"], ["verify", ""],
    ["verify", "-h"], ["verify", "1", "--help"], ["verify", "1", "2"], ["verify", "--", "1"],
    ["verify", "-"], ["verify", "-1"], ["verify", "1", "--nope"], ["verify", "1", "-j"],
    ["verify", "1", "--seed"], ["verify", "1", "--seed="], ["verify", "1", "--seed", "-1"],
    ["verify", "1", "--seed", "01"], ["verify", "1", "--seed", "+1"],
    ["verify", "1", "--seed", "x"], ["verify", "1", "--seed", "1_0"],
    ["verify", "1", "--seed", "9999999999999999999"],
    ["verify", "1", "--quorum", "-1"], ["verify", "1", "--vkey", "-x"],
    ["verify", "1", "--vkey", ""], ["verify", "1", "--json", "--json"], ["verify", "1", "--json=1"],
    ["verify", "1", "--seed", "1", "--seed", "2"], ["verify", "1", "--home", "a", "--home", "b"],
    ["verify", "1", "--bundle", "a\x00b"],
]


def _typer(argv: list[str]) -> tuple[Any, ...]:
    """What the typer app does with ``argv``: the values it calls ``verifying.verify`` with, or
    its answer (exit code, stdout, stderr) when it calls nothing."""
    calls: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> int:
        calls.append(kwargs)
        return 0

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verifying, "verify", record)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                pytest.raises(SystemExit) as done:
            commands.main(list(argv))
    if calls:
        assert len(calls) == 1 and done.value.code == 0
        return ("ran", calls[0])
    return ("answered", done.value.code, out.getvalue(), err.getvalue())


def _quick(argv: list[str]) -> tuple[Any, ...] | None:
    """What ``ledger_cli.main`` does with ``argv`` through the quick path: the values it calls
    ``verifying.verify`` with (and the exit code it returns, passed through), or None."""
    calls: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> int:
        calls.append(kwargs)
        return 3

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verifying, "verify", record)
        code = quickverify.answer(list(argv))
    if code is None:
        assert calls == []
        return None
    assert code == 3 and len(calls) == 1
    assert calls[0] == quickverify.parse(list(argv))
    return ("ran", calls[0])


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("quickverify")
    (root / "dir").mkdir()
    (root / "file").write_text("x")
    return {"dir": str(root / "dir"), "file": str(root / "file"),
            "file/": str(root / "file") + "/", "missing": str(root / "missing")}


def test_plain_command_lines_take_the_quick_path(places: dict[str, str]) -> None:
    lines = [*PLAIN, ["verify", "1", "--bundle", places["dir"], "--receipt", places["file"],
                      "--policy", places["file/"], "--home", places["missing"]]]
    for argv in lines:
        quick = _quick(argv)
        assert quick is not None, argv
        assert quick == _typer(argv), argv


@pytest.mark.parametrize("argv", STEPS_ASIDE, ids=repr)
def test_anything_else_goes_to_the_app(argv: list[str]) -> None:
    assert quickverify.parse(argv) is None
    assert _quick(argv) is None


def test_completion_requests_go_to_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_LEDGER_COMPLETE", "complete_bash")
    assert quickverify.parse(PLAIN[0]) is None


def test_the_options_are_the_commands_own() -> None:
    """Every parameter of the app's ``verify`` is known to the quick path with its kind, its
    default and typer's default path checks, and nothing else is: a parameter added to the
    command fails here until ``quickverify`` reads it (or steps aside for it)."""
    from typer.main import get_command

    verify = get_command(commands.app).commands["verify"]  # type: ignore[attr-defined]
    seen: dict[str, Any] = {}
    for p in verify.params:
        if p.name == "help":
            continue
        info = p.type_descriptor.parameter_info
        if p.param_type_name == "argument":
            assert p.name == "hash" and p.required and not p.multiple
            continue
        (opt,) = p.opts
        seen[opt] = p.name
        if opt in quickverify.FLAGS:
            assert p.is_flag and not p.secondary_opts and p.default is False
            continue
        _, kind = quickverify.VALUES[opt]
        assert p.default is None and p.multiple == (kind == "many"), opt
        annotation = p.type_descriptor.annotation
        leaf = annotation.__args__[0] if kind == "many" else annotation
        assert leaf is {"path": Path, "int": int, "seed": int}.get(kind, str), opt
        if kind == "path":
            assert (info.exists, info.file_okay, info.dir_okay, info.writable, info.readable,
                    info.resolve_path, info.allow_dash, info.path_type) == \
                (False, True, True, False, True, False, False, None), opt
        if kind in ("int", "seed"):
            want = (0, quickverify.SEED_MAX) if kind == "seed" else (None, None)
            assert (info.min, info.max, info.clamp) == (*want, False), opt
    expected = {o: n for o, (n, _) in quickverify.VALUES.items()} | quickverify.FLAGS
    assert seen == expected
    assert set(quickverify.DEFAULTS) == set(expected.values())


# values of every shape: plain ones, and ones only the app can judge
PLAIN_VALUES = ["1", "0", "42", "abcdef12", "w", "x y", "é", "\udcff", "~", "a=b",
                "999999999999999999"]
ODD_VALUES = ["", "-1", "007", "+1", " 1", "1_0", "1.0", "٣", "9999999999999999999", "--json",
              "-"]
NOISE = ["", "-", "--", "-h", "--help", "-x", "--nope", "--json=1", "--seed=", "--vkey=", "2",
         "verify", "-1"]


@st.composite
def command_lines(draw: st.DrawFn, places: dict[str, str]) -> list[str]:
    """Mostly ``verify`` with a hash and options, values and real paths of every shape; now and
    then a word no plain command line has."""
    plain, odd = st.sampled_from([*PLAIN_VALUES, *places.values()]), st.sampled_from(ODD_VALUES)
    words: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.integers(0, 9))
        if kind < 3:
            words.append(draw(st.sampled_from(sorted(quickverify.FLAGS))))
        elif kind < 9:
            option = draw(st.sampled_from(sorted(quickverify.VALUES)))
            value = draw(odd if draw(st.integers(0, 3)) == 0 else plain)
            words += [f"{option}={value}"] if draw(st.booleans()) else [option, value]
        else:
            words.append(draw(st.sampled_from(NOISE)))
    if draw(st.integers(0, 9)):
        words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(["1", "abcdef12"])))
    return draw(st.sampled_from([["verify"]] * 8 + [[], ["check"]])) + words


@settings(max_examples=400)
@given(data=st.data())
def test_quick_parse_is_the_apps_or_nothing(places: dict[str, str], data: st.DataObject) -> None:
    """For any command line of known options, values of every shape and real paths: where the
    quick path runs the command it runs it with the app's values, else the app answers."""
    argv = data.draw(command_lines(places))
    quick = _quick(argv)
    if quick is not None:
        assert quick == _typer(argv), argv


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("quickverify-ledger")
    log = new_ledger(root / "home")
    sk = add_node(log)
    assert log.seal(Bundle.from_dir(write_bundle(root, "b")), fake_fields(), sk).index == 1
    log.close()
    return root / "home"


def _same_dirs(data: bytes) -> bytes:
    """Output with the checks' temporary directories (ptxas names its input) named alike: the
    one difference between any two runs."""
    return re.sub(rb"ledger-check-[0-9a-z_]{8}", b"ledger-check-XXXXXXXX", data)


def _run(code: str, argv: list[str], env: dict[str, str], cache: Path) -> tuple[Any, ...]:
    shutil.rmtree(cache, ignore_errors=True)  # the same checkpoint memory for both runs
    res = subprocess.run(
        [sys.executable, "-c", f"{code}\nmain({argv!r})"], cwd=REPO, capture_output=True,
        env=dict(env, LEDGER_CACHE_DIR=str(cache)), timeout=600, check=False,
    )
    return res.returncode, _same_dirs(res.stdout), _same_dirs(res.stderr)


@pytest.mark.parametrize("argv", [
    ["verify", "1", "--no-gpu", "--seed", "1"],  # a failing bundle: the table, exit 1
    ["verify", "1", "--no-gpu", "--seed", "1", "--json"],
    ["verify", "0", "--json"],  # a key entry
    ["verify", "1", "--no-gpu", "--seed", "1", "--require", "lean.kernel"],
    ["verify", "99"],  # no such entry: one error line, exit 2
    ["verify", "1", "--receipt", "/nonexistent/r.json"],
], ids=" ".join)
@pytest.mark.parametrize("columns", [None, "100", "200"])
def test_a_run_prints_the_same_bytes_either_way(
    sealed: Path, tmp_path: Path, argv: list[str], columns: str | None
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LEDGER_DEBUG")}
    env["LEDGER_HOME"] = str(sealed)
    if columns is not None:
        env["COLUMNS"] = columns
    assert quickverify.parse(argv) is not None
    quick = _run("from ledger_cli import main", argv, env, tmp_path / "cache")
    app = _run("from ledger_cli.commands import main", argv, env, tmp_path / "cache")
    assert quick == app
    assert quick[1] or quick[2]
    if "--json" in argv and quick[0] != 2:
        assert json.loads(quick[1])["verdict"]


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminal")
def test_on_a_terminal_the_report_is_the_same(sealed: Path, tmp_path: Path) -> None:
    """On a terminal (colour, the terminal's width) stdout is the same bytes either way."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LEDGER_DEBUG",
                                                            "NO_COLOR", "TERM")}
    env.update(LEDGER_HOME=str(sealed), TERM="xterm-256color")
    argv = ["verify", "1", "--no-gpu", "--seed", "1"]
    outs = []
    for code in ("from ledger_cli import main", "from ledger_cli.commands import main"):
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        leader, follower = os.openpty()
        with open(os.devnull, "wb") as null:
            proc = subprocess.Popen(
                [sys.executable, "-c", f"{code}\nmain({argv!r})"], cwd=REPO, stdin=null,
                stdout=follower, stderr=null,
                env=dict(env, LEDGER_CACHE_DIR=str(tmp_path / "cache")),
            )
        os.close(follower)
        data = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            data += chunk
        os.close(leader)
        outs.append((proc.wait(timeout=600), _same_dirs(data)))
    assert outs[0] == outs[1]
    assert outs[0][0] == 1 and b"\x1b[" in outs[0][1]  # coloured, on the terminal
