"""Every command of the CLI at COLUMNS=80, piped (issue 11): no line longer than 80
columns, and no two check ids cut to the same text. One sealed ledger, module-scoped."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.ledgers import REPO, cli_json, run_cli

BUNDLE = REPO / "bundles" / "vector_add"
WIDTH = 80


def run80(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(WIDTH), "LEDGER_HOME": str(home)}
    env.pop("LEDGER_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "ledger_cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def ledger80(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cols")
    home = root / "home"
    bundle = root / "vector_add"
    shutil.copytree(BUNDLE, bundle, ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    cli_json("init", "--origin", "test.example/cols", home=home)
    cli_json("keys", "new", "a-node-key-with-a-rather-long-name", home=home)
    cli_json("keys", "register", "a-node-key-with-a-rather-long-name", home=home)
    res = run80("seal", str(bundle), "--no-gpu", home=home)
    assert res.returncode == 0, res.stderr
    (root / "seal.txt").write_text(res.stdout)
    return {"home": home, "bundle": bundle, "root": root}


def _check_lines(text: str) -> None:
    """No line over the width, and no table row cropped at the edge (rich crops what it cannot
    fit: a row that starts with a border must end with one)."""
    long = [ln for ln in text.splitlines() if len(ln) > WIDTH]
    assert long == [], "\n".join(long)
    cropped = [ln for ln in text.splitlines()
               if ln[:1] in "┏┃┡│└" and ln.rstrip()[-1:] not in "┓┃┩│┘"]
    assert cropped == [], "\n".join(cropped)


def _check_ids(text: str) -> None:
    """Cells of the 'check' column: none cut (an ellipsis), none equal to another."""
    cells = [m.group(1).strip() for m in re.finditer(r"^│ ?([^│]+?) *│", text, re.M)]
    ids = [c for c in cells if c]
    assert ids and not any("…" in c for c in ids), ids
    assert len(ids) == len(set(ids)), ids


# `checkpoint` prints the signed note verbatim (data: a folded signature line would not verify)
COMMANDS = [
    ["vkey"], ["log"], ["log", "--limit", "1"], ["show", "1"], ["audit"],
    ["keys", "list"], ["proof", "inclusion", "1"], ["proof", "consistency", "1", "2"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_reading_commands_fit_80_columns(ledger80: dict[str, Path], argv: list[str]) -> None:
    res = run80(*argv, home=ledger80["home"])
    assert res.returncode == 0, res.stderr
    _check_lines(res.stdout)
    _check_lines(res.stderr)


def test_seal_and_verify_tables_fit_80_columns(ledger80: dict[str, Path]) -> None:
    seal = (ledger80["root"] / "seal.txt").read_text()
    res = run80("verify", "1", "--no-gpu", home=ledger80["home"])
    assert res.returncode == 0, res.stderr
    _check_lines(seal)
    _check_lines(res.stdout)
    _check_ids(res.stdout)
    assert "integrity.checkpoint" in res.stdout  # ids whole, not cut
    # the certificate's obligations each start a line of the detail column
    assert re.search(r"│ PO\d (ok|partial|failed|missing) \(", res.stdout), res.stdout
    # tool versions shortened to the tool and its version number
    assert "Cuda compilation tools" not in res.stdout and "Copyright" not in res.stdout
    if shutil.which("ptxas") or Path("/usr/local/cuda/bin/ptxas").exists():
        assert re.search(r"ptxas \d+\.\d+", res.stdout) and "r13" not in res.stdout, res.stdout


def test_long_details_read_down_the_column() -> None:
    """At 80 columns a long detail (the certificate) shows each "; "-part outside parentheses
    on its own line; the recorded text itself is untouched."""
    from ledger_cli.output import LONG_DETAIL, detail_lines

    short = "a; b"
    assert detail_lines(short) == short
    cert = ("partial: lean.kernel skipped (no Lean toolchain) - PO1 partial (K.a; falsify.F-1; "
            "missing lean.kernel); PO2 ok (K.b; falsify.F-1); not claimed: PO3; size domain: "
            "1 ≤ n ≤ 2^24; oracle trusted:k")
    assert len(cert) >= LONG_DETAIL
    assert detail_lines(cert).split("\n") == [
        "partial: lean.kernel skipped (no Lean toolchain) - PO1 partial (K.a; falsify.F-1; "
        "missing lean.kernel);", "PO2 ok (K.b; falsify.F-1);", "not claimed: PO3;",
        "size domain: 1 ≤ n ≤ 2^24;", "oracle trusted:k"]
    assert detail_lines(cert).replace(";\n", "; ") == cert


def test_tool_versions_shortened() -> None:
    from ledger_cli.output import short_tool

    nvcc = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, "
            "V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0")
    assert short_tool("ptxas", nvcc) == "ptxas 13.0.88"
    # what verify records for ptxas: its last line
    assert short_tool("ptxas", "Build cuda_13.0.r13.0/compiler.36424714_0") == "ptxas 13.0"
    assert short_tool("lean", "Lean (version 4.21.0-rc1, x86_64-unknown-linux-gnu, commit 1, "
                      "Release)") == "lean 4.21.0-rc1"
    assert short_tool("PyYAML", "6.0.2") == "PyYAML 6.0.2"
    assert short_tool("lean", "") == "lean"
    assert short_tool("", "") == ""


def test_writing_commands_fit_80_columns(ledger80: dict[str, Path], tmp_path: Path) -> None:
    """The commands that create and move things print at COLUMNS=80 too (deep paths, long key
    names): init, keys new/register/revoke, receipt write, export-tiles, publish, mirror, the
    witness commands, check and (with nvcc) new."""
    from ledger.http.server import make_app
    from tests.helpers.server import BackgroundServer
    from verify.tools import find_tool

    deep = tmp_path / ("a-rather-long-directory-name-" * 3) / "deeper"
    deep.mkdir(parents=True)
    home = ledger80["home"]
    other = deep / "other-home"
    vkey = cli_json("vkey", home=home)["vkey"]
    runs = [
        (["init", "--origin", "test.example/a-second-log-with-a-long-origin"], other),
        (["keys", "new", "another-node-key-with-a-long-name"], home),
        (["keys", "register", "another-node-key-with-a-long-name"], home),
        (["receipt", "write", "1", "--out", str(deep)], home),
        (["export-tiles", str(deep / "tiles")], home),
        (["publish", str(deep / "published")], home),
        (["witness", "init", "--name", "witness.example", "--dir", str(deep / "w")], None),
        (["witness", "vkey", "--dir", str(deep / "w")], None),
        (["witness", "add-log", vkey, "--dir", str(deep / "w")], None),
        (["check", str(ledger80["bundle"]), "--no-gpu"], None),
    ]
    kid = cli_json("keys", "list", home=home)["keys"]
    with BackgroundServer(make_app(home)) as srv:
        runs.append((["mirror", srv.url, "--vkey", vkey], deep / "mirror-home"))
        for argv, where in runs:
            res = run80(*argv, home=where or deep / "unused")
            assert res.returncode == 0, (argv, res.stderr)
            _check_lines(res.stdout)
            _check_lines(res.stderr)
    newest = cli_json("keys", "list", home=home)["keys"]
    assert len(newest) == len(kid) + 1
    res = run80("keys", "revoke", newest[-1]["key_id"], "--reason", "a reason that is long "
                "enough to need more than one line at eighty columns, really", home=home)
    assert res.returncode == 0, res.stderr
    _check_lines(res.stdout)
    if find_tool("nvcc", cuda=True) is not None:
        cu = deep / "scale.cu"
        cu.write_text('extern "C" __global__ void scale(float *x, int n) {\n'
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) x[i] *= 2.0f;\n}\n")
        res = run80("new", str(deep / "scale"), "--cu", str(cu), home=deep / "unused")
        assert res.returncode == 0, res.stderr
        _check_lines(res.stdout)


def test_submit_and_receipt_refresh_fit_80_columns(
    ledger80: dict[str, Path], tmp_path: Path
) -> None:
    """Shared sealing's two client commands at COLUMNS=80: submit (check, sign, send, wait,
    receipt) and receipt refresh, against a real server taking submissions."""
    from ledger.http.server import make_app
    from tests.helpers.server import BackgroundServer

    home = ledger80["home"]
    vkey = cli_json("vkey", home=home)["vkey"]
    bundle = tmp_path / ("a-rather-long-directory-name-" * 3) / "saxpy"
    shutil.copytree(REPO / "bundles" / "saxpy", bundle,
                    ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    with BackgroundServer(make_app(home, accept_submissions=True)) as srv:
        for argv in (
            ["submit", str(bundle), "--server", srv.url, "--key",
             "a-node-key-with-a-rather-long-name", "--vkey", vkey],
            ["receipt", "refresh", str(bundle / "ledger-receipt.json"), "--server", srv.url,
             "--vkey", vkey],
        ):
            res = run80(*argv, home=home)
            assert res.returncode == 0, (argv, res.stderr)
            _check_lines(res.stdout)
            _check_lines(res.stderr)


# --- issue 34: the auditor's terminal --------------------------------------------------------

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _cells(text: str) -> list[str]:
    return [c.strip() for ln in text.splitlines() if ln.startswith("│")
            for c in ln.strip("│").split("│")]


def test_log_has_verdict_and_signer_and_never_splits_a_token(ledger80: dict[str, Path]) -> None:
    home = ledger80["home"]
    res = run80("log", home=home)
    assert res.returncode == 0, res.stderr
    _check_lines(res.stdout)
    header = next(ln for ln in res.stdout.splitlines() if ln.startswith("┃"))
    assert "verdict" in header and "signer" in header, res.stdout
    items = {i["index"]: i for i in cli_json("log", home=home)["entries"]}
    name = "a-node-key-with-a-rather-long-name"
    assert items[1]["verdict"] in ("verified", "partial") and items[1]["signer_name"] == name
    cells = _cells(res.stdout)
    # the kernel as "name version", the verdict, the signer's whole name: each in one cell
    assert "vector_add 1.0.0" in cells and items[1]["verdict"] in cells and name in cells
    hashes = [i[k] for i in items.values()
              for k in ("leaf_hash", "bundle_digest", "signer", "key") if i[k]]
    for cell in cells:
        for tok in re.findall(r"\b[0-9a-f]{6,}\b", cell):  # a hash is whole or a shortened head
            assert any(h.startswith(tok) for h in hashes) and len(tok) >= 16, (tok, res.stdout)
        for tok in re.findall(r"\d{4}-[0-9T:Z-]*", cell):
            assert TIME.fullmatch(tok), (tok, res.stdout)  # a time is never cut


def test_log_kernel_filters_by_name_prefix_or_part_any_case(ledger80: dict[str, Path]) -> None:
    home = ledger80["home"]
    for query in ("VECTOR", "tor_a", "vec*add"):
        res = run80("log", "--kernel", query, home=home)
        assert res.returncode == 0, res.stderr
        _check_lines(res.stdout)
        assert "vector_add 1.0.0" in _cells(res.stdout), (query, res.stdout)
        assert "a-node-key" not in res.stdout.split("\n", 3)[-1].replace(
            "a-node-key-with-a-rather-long-name", "")  # the key's own entry is not listed
        found = cli_json("log", "--kernel", query, home=home)["entries"]
        assert [(i["index"], i["kernel"]) for i in found] == [
            (1, {"name": "vector_add", "version": "1.0.0"})]
    assert cli_json("log", "--kernel", "gemm", home=home)["entries"] == []


def test_show_prints_the_kernel_as_name_and_version(ledger80: dict[str, Path]) -> None:
    res = run80("show", "1", home=ledger80["home"])
    assert res.returncode == 0, res.stderr
    assert "  kernel: vector_add 1.0.0" in res.stdout.splitlines()
    assert "{'name'" not in res.stdout and "'version'" not in res.stdout


@pytest.mark.parametrize("index", [0, 1])
def test_show_never_splits_a_token(ledger80: dict[str, Path], index: int) -> None:
    """``show`` at 80 columns: the key registration's base64 ``pop`` and ``signature`` (and a
    bundle entry's signature) stay on their line, whole or cut with an ellipsis, never folded
    onto the next line; the last line says --json has them whole."""
    home = ledger80["home"]
    res = run80("show", str(index), home=home)
    assert res.returncode == 0, res.stderr
    _check_lines(res.stdout)
    entry = cli_json("show", str(index), home=home)["entry"]
    lines = res.stdout.splitlines()
    for key in ("pop", "signature"):
        if key not in entry:
            continue
        value = entry[key]
        line = next(ln for ln in lines if ln.startswith(f"  {key}: "))
        shown = line[len(f"  {key}: "):]
        assert shown == value or (shown.endswith("…") and value.startswith(shown[:-1])), line
        follower = lines[lines.index(line) + 1]
        assert re.match(r"  [a-z_]+: |  manifest:|  claim |  check |\(", follower), follower
    assert "pop" in entry or index == 1
    assert lines[-1] == "(… marks a value cut to fit the width; --json shows every value whole)"
    # on a pipe (no width) nothing is cut
    piped = run_cli("show", str(index), home=home)
    assert "…" not in piped.stdout and f"  signature: {entry['signature']}" in piped.stdout


@pytest.mark.parametrize("argv, command", [
    (["verify", "--no-such-flag"], "ledger verify"),
    (["show"], "ledger show"),
    (["keys", "register"], "ledger keys register"),
    (["log", "--kernel"], "ledger log"),
])
def test_a_usage_error_names_the_subcommands_help(ledger80: dict[str, Path], argv: list[str],
                                                  command: str) -> None:
    res = run80(*argv, home=ledger80["home"])
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledger: error: "), res.stderr
    assert lines[0].endswith(f"Try '{command} --help'."), res.stderr


def test_check_ids_never_cut_to_the_same_text(ledger80: dict[str, Path]) -> None:
    res = run80("check", str(ledger80["bundle"]), "--no-gpu", home=ledger80["home"])
    assert res.returncode in (0, 1), res.stderr
    _check_lines(res.stdout)
    _check_ids(res.stdout)
    first = [m.group(1).strip() for m in re.finditer(r"^│ ?([^│]+?) *│", res.stdout, re.M)]
    falsify = [c for c in first if c.startswith("falsify.")]
    assert len(falsify) >= 2 and len(set(falsify)) == len(falsify), res.stdout
