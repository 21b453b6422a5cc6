"""Packaging smoke test: build the wheel, install it (without dependencies) into a fresh venv
that borrows only the third-party packages of the project's environment, and run the installed
``ledger`` from outside the repository, so a missing subpackage or data file fails here."""

from __future__ import annotations

import json
import site
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.helpers.ledgers import REPO


def test_wheel_installs_and_runs(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = dist.glob("kernel_ledger-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for want in (
        "ledger_cli/__init__.py",
        "ledger_cli/__main__.py",
        "ledger_cli/commands.py",
        "ledger/http/web/pages.py",
        "ledger/http/templates/openapi.json",
        "ledger/http/templates/entry.html",  # the pages (Jinja2), package data
        "ledger_cli/help.json",  # ledger --help without the command tree (ledger_cli.quickhelp)
        "verify/lean/scan.py",
        "verify/ptxsim/machine.py",
        "verify/contract_schema.json",
    ):
        assert want in names, want
    assert not any(n.startswith(("tests/", "bundles/", "kernels/", "keys/")) for n in names)

    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300
    )
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # third-party dependencies come from the project's environment; the project itself does not
    deps = [p for p in site.getsitepackages() if "site-packages" in p]
    (Path(purelib) / "deps.pth").write_text("\n".join(deps) + "\n")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(purelib)
    out = subprocess.run(
        [str(py), "-c", "import ledger, verify.ptxsim, ledger.http.web.pages; "
         "print(ledger.__file__); "
         "from ledger.http.web.render import environment as e; e().get_template('entry.html')"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert out.startswith(purelib), out
    res = subprocess.run(
        [
            str(py),
            "-m",
            "ledger_cli",
            "check",
            str(REPO / "bundles" / "vector_add"),
            "--json",
            "--no-gpu",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"] in ("verified", "partial")
