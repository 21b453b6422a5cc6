"""The library's loader on a real GPU (issue 31: ``load_cupy`` "run for real on a machine with a
GPU"; the tests use a stand-in CuPy module). On a CUDA machine with CuPy:

1. make a fresh ledger in a temporary directory with the real CLI (``init``, a node key,
   ``seal bundles/vector_add``);
2. ``ledger.load_cupy("vector_add@1.0.0", policy, kernel="vector_add")`` under a policy naming
   the log's key and requiring the falsification checks;
3. launch the kernel on 2^20 + 3 random float32 pairs and compare ``c`` with ``a + b`` exactly;
4. refuse the same kernel under a policy whose signers exclude the sealing node.

Exit status: 0 loaded, launched and equal, and refused as expected; 1 a wrong result or a
refusal that did not happen; 3 no CuPy or no CUDA device (the loader's own ``CannotCheck``).

    .venv/bin/python scripts/library_device_check.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ledger  # noqa: E402


def cli(home: Path, *args: str) -> str:
    env = dict(os.environ, LEDGER_HOME=str(home))
    res = subprocess.run([sys.executable, "-m", "ledger_cli", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"ledger {' '.join(args)} failed ({res.returncode}): {res.stderr}")
    return res.stdout


def main() -> int:
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["LEDGER_CACHE_DIR"] = str(root / "cache")
        home = root / "home"
        cli(home, "init", "--origin", "device-check.example/log")
        cli(home, "keys", "new", "gpu-node")
        cli(home, "keys", "register", "gpu-node")
        bundle = root / "vector_add"
        shutil.copytree(ROOT / "bundles" / "vector_add", bundle)
        (bundle / "ledger-receipt.json").unlink(missing_ok=True)
        cli(home, "seal", str(bundle), "--key", "gpu-node")
        policy = root / "policy.json"
        vkey = cli(home, "vkey").strip()
        policy.write_text(json.dumps({"log": vkey, "checks": ["falsify.*"]}))
        pol = ledger.load_policy(policy)
        try:
            kernel, cert = ledger.load_cupy("vector_add@1.0.0", pol, kernel="vector_add",
                                            log=home)
        except ledger.LedgerError as e:
            print(f"library_device_check: {e}", file=sys.stderr)
            return e.exit_code
        import cupy as cp  # present: load_cupy succeeded

        n = (1 << 20) + 3
        rng = np.random.default_rng(31)
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        da, db, dc = cp.asarray(a), cp.asarray(b), cp.zeros(n, dtype=cp.float32)
        kernel(((n + 255) // 256,), (256,), (da, db, dc, np.uint32(n)))
        c = cp.asnumpy(dc)
        ok = bool(np.array_equal(c, a + b))
        print(f"{cert.kernel} {cert.bundle_digest}: launched on {n} elements, "
              f"{'equal to a + b' if ok else 'NOT equal to a + b'}")
        strict = ledger.Policy(log=pol.log, signers=("someone-else",))
        try:
            ledger.load_cupy("vector_add@1.0.0", strict, kernel="vector_add", log=home)
        except ledger.PolicyError as e:
            print(f"refused as expected ({e.rule}): {e.reason}")
        else:
            print("NOT refused under a policy excluding the signer", file=sys.stderr)
            return 1
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
