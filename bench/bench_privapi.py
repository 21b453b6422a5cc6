"""Issue 30, "no private API of any dependency": today's code against a base checkout, same run.

The base is another checkout of the project (``--base``, e.g. made with
``git worktree add /tmp/privapi-base 7de7b8a`` and its C module built in place with
``.venv/bin/python setup.py build_ext --inplace``); both trees run on this checkout's
``.venv`` (the same dependencies), each through ``PYTHONPATH`` from a neutral directory, so that
only the project's code differs. Per round, in the same run, alternating which tree goes first:

1. start-up (wall time of a child, and its CPU time: user + system): ``ledger --help``
   (quickhelp), a plain ``ledger verify 1 --no-gpu --seed 1`` (quickverify; no typer) and
   ``ledger checkpoint --json`` (the typer command tree: typer's parameter conversion, where the
   base avoided pydantic through typer's privates);
2. Ed25519 (``ledger.core.native``): signatures and verifications per CPU second of
   ``sign_many``/``verify_many`` (two threads) over 4,000 messages (base: PyNaCl's libsodium;
   now: the system's shared libsodium);
3. serving (``ledger serve``, base: a subclass of uvicorn's protocol; now:
   ``ledger.http.guard``): requests per second of ``wrk -t1 -c16`` for ``--duration`` seconds,
   on a full tile (the fast path) and on ``/api/v1/entries/1`` (the ASGI path).

Ratios are new / base per round (start-up: time, lower is better; the rest: rate, higher is
better), reported as min-median-max over ``--repeat`` rounds, with the load average.

    .venv/bin/python bench/bench_privapi.py --base /tmp/privapi-base [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")

def child_env(tree: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    env.update(PYTHONPATH=str(tree), LEDGER_HOME=str(home), OPENBLAS_NUM_THREADS="1")
    return env


def wall(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, env=env, cwd=tempfile.gettempdir(),
                       timeout=300, check=False)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{argv}: exit {p.returncode}: {p.stderr.decode()[-400:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


ED25519 = """
import json, sys, time
import nacl.signing
from ledger.core import native
sk = nacl.signing.SigningKey(b"k" * 32)
sk64 = bytes(sk) + bytes(sk.verify_key)
msgs = [b"message %d " % i * 8 for i in range(4000)]
assert native.AVAILABLE
t = time.process_time(); sigs = native.sign_many(sk64, msgs); s = time.process_time() - t
jobs = [(bytes(sk.verify_key), m, g) for m, g in zip(msgs, sigs)]
t = time.process_time(); bad = native.verify_many(jobs, threads=2); v = time.process_time() - t
assert bad == []
print(json.dumps({"ed25519 sign": len(msgs) / s, "ed25519 verify": len(msgs) / v}))
"""


def ed25519(env: dict[str, str]) -> dict[str, float]:
    p = subprocess.run([PY, "-c", ED25519], capture_output=True, env=env, text=True,
                       cwd=tempfile.gettempdir(), timeout=300, check=True)
    out: dict[str, float] = json.loads(p.stdout)
    return out


def serve_rates(env: dict[str, str], port: int, paths: list[str], seconds: int) -> list[float]:
    """Requests/s of wrk on each path against ``ledger serve`` run from the tree of ``env``."""
    import httpx

    server = subprocess.Popen([PY, "-m", "ledger_cli", "serve", "--port", str(port)], env=env,
                              cwd=tempfile.gettempdir(), stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if httpx.get(url + paths[0], timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        rates = []
        for path in paths:
            cpu0 = proc_cpu(server.pid)
            out = subprocess.run(["wrk", "-t1", "-c16", f"-d{seconds}s", url + path],
                                 capture_output=True, text=True, check=True).stdout
            cpu = proc_cpu(server.pid) - cpu0
            done = next(ln for ln in out.splitlines() if " requests in " in ln)
            if "Non-2xx" in out:
                raise SystemExit(f"{path}: non-2xx answers:\n{out}")
            rates.append(int(done.split()[0]) / cpu)  # requests per CPU second of the server
        return rates
    finally:
        server.terminate()
        server.wait(timeout=30)


def make_ledger(home: Path, env: dict[str, str], work: Path) -> None:
    bundle = work / "vector_add"
    shutil.copytree(ROOT / "bundles" / "vector_add", bundle,
                    ignore=shutil.ignore_patterns("ledger-receipt*"))
    ledger = [PY, "-m", "ledger_cli"]
    for args in (["init", "--origin", "bench.example/privapi"], ["keys", "new", "alice"],
                 ["keys", "register", "alice"], ["seal", str(bundle), "--no-gpu", "--seed", "1"]):
        subprocess.run([*ledger, *args, "--json"], env=env, capture_output=True, check=True,
                       cwd=tempfile.gettempdir())
    bench, tiles = str(ROOT / "bench"), str(work / "tiles")
    code = (f"import sys; sys.path.insert(0, {bench!r}); from bench_mirror import build_origin; "
            f"build_origin(__import__('pathlib').Path({tiles!r}), 300)")
    subprocess.run([PY, "-c", code], env=env, check=True, cwd=tempfile.gettempdir())


def spread(xs: list[float]) -> str:
    return f"{min(xs):.3f}-{statistics.median(xs):.3f}-{max(xs):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--starts", type=int, default=3, help="start-ups per command and round")
    ap.add_argument("--duration", type=int, default=2, help="seconds of wrk per path")
    ap.add_argument("--skip-serve", action="store_true")
    args = ap.parse_args()
    trees = {"base": args.base.resolve(), "new": ROOT}
    for tree in trees.values():
        subprocess.run([PY, "-m", "compileall", "-q", "ledger", "ledger_cli", "verify"],
                       cwd=tree, check=True, capture_output=True)
    work = Path(tempfile.mkdtemp(prefix="bench-privapi-"))
    home = work / "home"
    make_ledger(home, child_env(ROOT, home), work)
    cmds = {
        "--help": [PY, "-m", "ledger_cli", "--help"],
        "verify": [PY, "-m", "ledger_cli", "verify", "1", "--no-gpu", "--seed", "1"],
        "checkpoint": [PY, "-m", "ledger_cli", "checkpoint", "--json"],
    }
    ratios: dict[str, list[float]] = {}
    absolute: dict[str, dict[str, list[float]]] = {"base": {}, "new": {}}
    print(f"cpus {os.cpu_count()}, load at start {os.getloadavg()}", flush=True)
    for r in range(args.repeat):
        order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
        got: dict[str, dict[str, float]] = {"base": {}, "new": {}}
        for name, argv in cmds.items():
            for which in order:
                env = child_env(trees[which], home)
                runs = [wall(argv, env) for _ in range(args.starts)]
                got[which][name] = statistics.median(w for w, _ in runs)
                got[which][name + " cpu"] = statistics.median(c for _, c in runs)
        for which in order:
            got[which].update(ed25519(child_env(trees[which], home)))
        if not args.skip_serve:
            for which in order:
                tile, api = serve_rates(child_env(trees[which], work / "tiles"), 18900 + r,
                                        ["/tile/0/000", "/api/v1/entries/1"], args.duration)
                got[which].update({"serve tile": tile, "serve api": api})
        for key, value in got["new"].items():
            ratios.setdefault(key, []).append(value / got["base"][key])
            for which in ("base", "new"):
                absolute[which].setdefault(key, []).append(got[which][key])
        print(f"round {r + 1}: load {os.getloadavg()[0]:.2f}", flush=True)
    print("\nnew / base (start-up: seconds, lower is better; the rest: per CPU second, higher"
          " is better), min-median-max over rounds:")
    for key, xs in ratios.items():
        b, n = absolute["base"][key], absolute["new"][key]
        print(f"  {key:14s} ratio {spread(xs)}   base median {statistics.median(b):.4g}"
              f"   new median {statistics.median(n):.4g}")
    print(f"load at end {os.getloadavg()}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
