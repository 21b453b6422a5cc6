"""The network commands of ``ledger_cli/net.py``: ``ledger submit`` when the entry was included
but its receipt could not be written (issue 33 item 8): exit ``SEALED_NO_RECEIPT`` (4), one line
naming the entry, nothing lost; the same ``submit`` run again answers with the entry, exits 0
and writes the receipt. The full disk is injected as the seal tests inject it
(``LEDGER_FAULT_WRITE_ENOSPC``: the atomic write of the receipt fails with ENOSPC)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ledger.http.server import make_app
from ledger_cli.exits import SEALED_NO_RECEIPT
from tests.helpers.ledgers import REPO, run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.test_mirror import make_origin, vkey_of

# the receipt is the 5th atomic write of a first ``submit`` to a log: the checkpoint memory
# (empty: a cache directory of the test's own) writes its "seen" record and the note when the
# server's checkpoint is first checked, and both again for the checkpoint of the answer; another
# count fails the test below loudly (exit 0, not 4)
FAULT_AT = "5"


def _submit(bundle: Path, url: str, home: Path, vkey: str, fault: bool) -> (
        subprocess.CompletedProcess[str]):
    env = dict(os.environ, LEDGER_HOME=str(home), LEDGER_CACHE_DIR=str(home.parent / "cache"))
    env.pop("LEDGER_DEBUG", None)
    if fault:
        env["LEDGER_FAULT_WRITE_ENOSPC"] = FAULT_AT
    return subprocess.run(
        [sys.executable, "-m", "ledger_cli", "submit", str(bundle), "--server", url, "--key",
         "node", "--vkey", vkey, "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )


def test_submit_included_without_its_receipt_exits_4_and_a_rerun_writes_it(
    tmp_path: Path,
) -> None:
    log = make_origin(tmp_path / "log", 2)
    vkey, home = vkey_of(log), log.home
    bundle = tmp_path / "vector_add"
    shutil.copytree(REPO / "bundles" / "vector_add", bundle,
                    ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    before = log.store.size()
    with BackgroundServer(make_app(home, accept_submissions=True)) as srv:
        res = _submit(bundle, srv.url, home, vkey, fault=True)
        assert res.returncode == SEALED_NO_RECEIPT == 4, res.stderr
        out = json.loads(res.stdout)
        assert out["index"] == before and out["receipt"] is None
        assert "No space left" in out["receipt_error"] and out["already_sealed"] is False
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert f"included as entry {before}, but its receipt could not be written" in lines[0]
        assert not (bundle / "ledger-receipt.json").exists()
        assert not [p.name for p in bundle.iterdir() if p.name.endswith(".tmp")]
        assert log.store.size() == before + 1  # the entry is committed
        # the same command again: the entry it holds, exit 0, the receipt written
        again = _submit(bundle, srv.url, home, vkey, fault=False)
        assert again.returncode == 0, again.stderr
        redo = json.loads(again.stdout)
        assert (redo["index"], redo["already_sealed"]) == (before, True)
        assert redo["receipt"] == str(bundle / "ledger-receipt.json")
    assert log.store.size() == before + 1  # nothing appended by the re-run
    log.close()
    offline = run_cli("verify", out["bundle_digest"], "--receipt", redo["receipt"], "--vkey",
                      vkey, "--json", home=tmp_path / "nowhere")
    assert offline.returncode == 0, offline.stderr  # the receipt verifies with the key alone
