"""What ``ledger verify`` loads (issue 12: a small verify spent ~45% of its time importing).

The modules are names in ``sys.modules`` after a real run in a fresh interpreter, never times:
the verify path must not load what it does not run (typer and the command tree, which a plain
command line does without, the sealing pool, the bundle-reference sandbox, the HTTP side, the
progress bar off a terminal), and it must load what it does run (numpy and the PTX interpreter
for the falsification tests, rich for the table), which shows the run went the whole way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from tests.helpers.ledgers import REPO, add_node, fake_fields, new_ledger

# loaded by no ``ledger verify`` of a bundle with a trusted reference, on a pipe
NOT_LOADED = (
    "typer",  # a plain command line runs without the command tree (ledger_cli.quickverify)
    "ledger_cli.commands",
    "ledger_cli.options",
    "ledger_cli.scaffold",
    "ledger.keys",  # key files and their passphrase crypto: verify reads no key file
    "pydantic",  # typer's parameter conversion: a plain verify runs without typer
    "pydantic_core",
    "annotated_types",
    "typer._adapters",
    "importlib.metadata",  # pydantic's plugin loader
    "multiprocessing",  # ledger.sealers' pool, for a batch seal of 4,096 bundles or more
    "concurrent.futures",
    "verify.sandbox",  # only for a bundle's own reference (kernel.reference: {file, function})
    "tomllib",  # a Lake project's lakefile, only with a Lean toolchain
    "rich.progress",  # the progress bar, only on a terminal
    "httpx",
    "jinja2",
    "starlette",
    "uvicorn",
    "psycopg",
    "ledger.net.client",
    "ledger.http.server",
    "ledger.mirror",
    "ledger.witness",
    # contract.schema's error listing, for a contract the generated fastjsonschema check rejects
    "jsonschema",
)
# what the run does: the falsification tests on the CPU interpreter, the report table
LOADED = ("numpy", "verify.ptxsim", "verify.falsify", "rich.table", "ledger_cli.quickverify")

RUN = """
import sys
from ledger_cli import main

try:
    main(["verify", "1", "--no-gpu", "--seed", "1"])
except SystemExit as e:
    code = e.code
blas = os.environ.get("OPENBLAS_NUM_THREADS")
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules), "blas": blas}, f)
"""


def _sealed_vector_add(tmp_path: Path) -> dict[str, str]:
    """A ledger with ``bundles/vector_add`` at index 1; the environment for a child that runs
    ``ledger verify`` on it."""
    bundle = tmp_path / "vector_add"
    shutil.copytree(REPO / "bundles" / "vector_add", bundle,
                    ignore=shutil.ignore_patterns("ledger-receipt*"))
    home = tmp_path / "home"
    log = new_ledger(home)
    sk = add_node(log)
    assert log.seal(Bundle.from_dir(bundle), fake_fields(), sk).index == 1
    log.close()
    # not measured by coverage (scripts/coverage.sh): its start-up hook in the child imports what
    # the command does not (multiprocessing among them)
    env = {k: v for k, v in os.environ.items() if k not in (
        "LEDGER_DEBUG", "COLUMNS", "COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG",
        "OPENBLAS_NUM_THREADS")}
    env["LEDGER_HOME"] = str(home)
    return env


def test_verify_loads_only_what_it_runs(tmp_path: Path) -> None:
    env = _sealed_vector_add(tmp_path)
    found = tmp_path / "modules.json"
    res = subprocess.run(
        [sys.executable, "-c", "import json, os\n" + RUN, str(found)], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )
    got = json.loads(found.read_text())
    assert got["code"] in (0, 1) and "verdict: " in res.stdout, (got["code"], res.stderr)
    modules = set(got["modules"])
    assert [m for m in LOADED if m not in modules] == []
    assert sorted(m for m in modules
                  if m in NOT_LOADED or any(m.startswith(n + ".") for n in NOT_LOADED)) == []
    # numpy's OpenBLAS loaded without worker threads (ledger_cli.main): on a small machine one
    # spun beside the interpreter from numpy's import until the first tool started
    assert got["blas"] == "1"


# Every process the run starts, with what the interpreter had loaded at that moment.
STARTS = """
import json, subprocess, sys

seen = []
popen_init = subprocess.Popen.__init__


def spy(self, args, *rest, **kw):
    names = [str(a).rsplit("/", 1)[-1] for a in args]
    # a tool run inside bubblewrap (verify.confine) is recorded as the tool it runs
    at = next((i for i, n in enumerate(names) if n in ("nvcc", "ptxas")), 0)
    seen.append([names[at], list(args[at + 1:at + 2])]
                + [m in sys.modules for m in ("numpy", "verify.ptxsim", "verify.lean.scan",
                                              "verify.ptx")])
    popen_init(self, args, *rest, **kw)


subprocess.Popen.__init__ = spy
from ledger_cli import main

try:
    main(["verify", "1", "--no-gpu", "--seed", "1", "--json"])
except SystemExit:
    pass
with open(sys.argv[1], "w") as f:
    json.dump(seen, f)
"""


def test_nvcc_starts_before_the_interpreter_loads(tmp_path: Path) -> None:
    """nvcc is the slowest step of a small verify (~0.2 s): it starts as soon as the contract
    is read, before numpy, the PTX interpreter, the Lean scanner and the PTX checks load (they
    load and run beside it), and before ptxas (issue 12, start-up: a small verify went from
    521-633 ms to 365-470 ms on a 2-CPU VM)."""
    from verify.tools import find_tool

    if find_tool("nvcc", cuda=True) is None:
        pytest.skip("no nvcc on PATH or in the CUDA locations: rebuild.ptx starts no tool")
    env = _sealed_vector_add(tmp_path)
    found = tmp_path / "starts.json"
    res = subprocess.run(
        [sys.executable, "-c", STARTS, str(found)], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert found.is_file(), res.stderr[-2000:]
    seen = json.loads(found.read_text())
    builds = [s for s in seen if s[0] == "nvcc" and s[1] != ["--version"]]
    assert len(builds) == 1, seen
    # none of numpy, the PTX interpreter, the Lean scanner, the PTX checks is loaded yet
    assert builds[0][2:] == [False, False, False, False], seen
    assert seen.index(builds[0]) < min(i for i, s in enumerate(seen) if s[0] == "ptxas"), seen
    assert json.loads(res.stdout)["verdict"] in ("verified", "partial"), res.stdout[-2000:]
