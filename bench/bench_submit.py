"""Shared sealing at scale (issue 13): many nodes submitting to one `ledger serve
--accept-submissions`, against sealing the same bundles locally, in the same run.

Each round, per backend (SQLite; PostgreSQL with ``--backend postgresql`` or ``both``):

* **campaign**: a fresh ledger with ``--keys`` registered node keys; ``ledger serve
  --accept-submissions`` as a subprocess on 127.0.0.1; ``--keys`` submitter processes (one node,
  one key each) of ``--submitters / --keys`` threads each, together submitting ``--submissions``
  distinct bundles through ``ledger submit``'s own code path (``ledger.submit.submit_bundle``
  with a checkpoint memory per node, as the CLI passes it: fetch and verify the checkpoint, sign
  a v2 entry over it, post, wait for the batch, check consistency and inclusion, fetch the
  signer's registration). The bundles are prepared before a common start; throughput is
  submissions over the wall time from the start to the last answer. The server's per-key rate
  limit is lifted (``LEDGER_SUBMIT_RATE``; ``--default-rate`` keeps the default 1/s, burst 10):
  the campaign measures contention and batching, not the limiter.
* **checks** (after the timing): 0 failures; the indices are exactly the ``--submissions``
  indices after the registrations, contiguous; every bundle in the log once; each acknowledged
  entry stored at its index; every receipt verifies offline with the log key alone (the
  integrity checks ``ledger verify --receipt`` runs: checkpoint signature, inclusion, node
  signature, signer registration, manifest against the bundle's files); ``ledger audit`` passes.
* **peer**: the same bundles sealed locally into a fresh ledger with the same keys, as ``ledger
  seal`` appends them (``Log.seal``, one transaction each: chain, sign, entry, blobs, tree, a
  signed checkpoint, COMMIT), by ``--seal-writers`` processes (1, and 8 = one per node, by
  default), run just before and just after each campaign (the ratio is against the mean of the
  two, so load that changes during a round weighs on both sides). Not timed on that side: the
  bundle checks (neither side runs them) and the receipt ``ledger seal`` writes (``make_receipt``
  replays the whole log, so its cost grows with the log: 2.4 ms per seal on average over the
  first 100 seals, 5.2 ms over the first 1,000, measured at load 9), which the campaign's
  submitters do get and verify: the ratio is conservative for submit.

With ``--kill`` one more round per backend (not timed) kills the server with SIGKILL once a
third of the submissions are acknowledged, restarts it on the same port, and checks the same
things plus: every submission acknowledged before the kill is in the log at its index, none
twice (the submitters re-post the same bytes; the server answers an entry it holds with its
index).

Everything (server, submitters, the PostgreSQL server) shares the machine's CPUs: on 2 cores
the campaign's figure is what one small host does with its clients on it, not a server alone.

    .venv/bin/python bench/bench_submit.py [--submissions 2000] [--submitters 64] [--keys 8]
        [--rounds 3] [--backend sqlite|postgresql|both] [--kill] [--default-rate]

Prints a markdown section (and writes it to --out when given); exit 1 when any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from ledger.core.bundle import Bundle  # noqa: E402
from ledger.core.encoding import b64_decode, b64_encode  # noqa: E402
from ledger.keys import load_node_secret  # noqa: E402
from ledger.log import Log  # noqa: E402
from tests.helpers.ledgers import add_node, fake_fields  # noqa: E402

ORIGIN = "bench.example/submit"
NO_LIMIT = "100000/100000"  # LEDGER_SUBMIT_RATE: sustained/burst submissions per key


def bundle_files(tag: str, i: int) -> dict[str, bytes]:
    """A small, distinct 4-file bundle (about 1 KiB), the same in the campaign and the peer."""
    return {
        "contract.yaml": f"metadata: {{version: '1.0.0', description: {tag}-{i}}}\n".encode(),
        "k.ptx": f"// kernel {tag}-{i}\n.visible .entry k()\n{{\n}}\n".encode() * 12,
        "proof.lean": b"theorem t : 1 = 1 := rfl\n",
        "spec.fut": b"entry main (x: i32) = x\n",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- child processes ---------------------------------------------------------------------------


def submitter(spec: dict[str, Any]) -> None:
    """One node: prepare its bundles, print ``ready``, wait for a line on stdin, submit them from
    ``threads`` threads, printing one JSON line per answer (or failure), then ``done``."""
    from ledger.core.note import parse_vkey
    from ledger.submit import submit_bundle
    from ledger.trust import CheckpointMemory

    sk, _ = load_node_secret(Path(spec["keydir"]), spec["key"])
    vkey = parse_vkey(spec["vkey"])
    memory = CheckpointMemory(Path(spec["cache"]))
    items = [(i, Bundle.from_files(bundle_files(spec["tag"], i)), fake_fields(f"{spec['tag']}{i}"))
             for i in spec["items"]]
    lock = threading.Lock()
    print("ready", flush=True)
    sys.stdin.readline()

    def one(item: tuple[int, Bundle, dict[str, Any]]) -> None:
        i, bundle, extra = item
        t = time.perf_counter()
        try:
            done = submit_bundle(spec["url"], bundle, extra, sk, vkey, memory=memory)
            line = {"i": i, "index": done.index, "attempts": done.attempts, "signed": done.signed,
                    "retried": list(done.retried), "seconds": time.perf_counter() - t,
                    "receipt": b64_encode(done.receipt().to_bytes())}
        except Exception as e:  # reported as a failure, counted by the parent
            line = {"i": i, "error": f"{type(e).__name__}: {e}",
                    "seconds": time.perf_counter() - t}
        text = json.dumps(line)
        with lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    cpu = time.process_time()
    with ThreadPoolExecutor(spec["threads"]) as pool:
        list(pool.map(one, items))
    print(json.dumps({"cpu": time.process_time() - cpu}), flush=True)
    print("done", flush=True)


def sealer(spec: dict[str, Any]) -> None:
    """The peer: seal bundles locally as ``ledger seal`` appends them (``Log.seal``, one
    transaction each), after ``ready`` / a line on stdin; prints ``done``."""
    log = Log.open(Path(spec["home"]))
    keys = {k: load_node_secret(log.keydir, k)[0] for k in {k for _i, k in spec["items"]}}
    items = [(Bundle.from_files(bundle_files(spec["tag"], i)), fake_fields(f"{spec['tag']}{i}"),
              keys[k]) for i, k in spec["items"]]
    print("ready", flush=True)
    sys.stdin.readline()
    for bundle, extra, sk in items:
        log.seal(bundle, extra, sk)
    print("done", flush=True)
    log.close()


def child(mode: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, f"--{mode}", json.dumps(spec)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )


def start_together(procs: list[subprocess.Popen[str]]) -> float:
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"bench_submit: a child did not get ready ({line!r})")
    t = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    return t


# --- the server --------------------------------------------------------------------------------


class Server:
    """``ledger serve --accept-submissions`` as a subprocess on a fixed loopback port."""

    def __init__(self, home: Path, rate: str | None, log_path: Path) -> None:
        self.home, self.rate, self.log_path = home, rate, log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        env = {**os.environ, "LEDGER_HOME": str(self.home)}
        env.pop("LEDGER_SUBMIT_RATE", None)
        if self.rate is not None:
            env["LEDGER_SUBMIT_RATE"] = self.rate
        t = time.perf_counter()
        with self.log_path.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ledger_cli", "serve", "--accept-submissions", "--port",
                 str(self.port)], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.url + "/checkpoint", timeout=2).status_code == 200:
                    return time.perf_counter() - t
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench_submit: ledger serve did not start "
                                 f"(see {self.log_path})")
            time.sleep(0.02)

    def cpu(self) -> float:
        """CPU seconds the server process has used."""
        assert self.proc is not None
        f = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- one round ---------------------------------------------------------------------------------


@dataclass
class Campaign:
    seconds: float = 0.0
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    acked_before_kill: dict[int, dict[str, Any]] = field(default_factory=dict)
    restart_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    batches: int = 0
    base: int = 0
    server_cpu: float = 0.0  # seconds, over the timed part (without a kill)
    client_cpu: float = 0.0

    def latencies(self) -> list[float]:
        return sorted(r["seconds"] for r in self.results.values())


def new_ledger(root: Path, keys: int, url: str | None) -> Path:
    home = root / "home"
    log = Log.init(home, ORIGIN, url)
    for k in range(keys):
        add_node(log, f"node{k}")
    log.close()
    return home


def campaign(root: Path, args: argparse.Namespace, tag: str, url: str | None,
             kill: bool) -> Campaign:
    home = new_ledger(root, args.keys, url)
    log = Log.open(home)
    vkey = log.verifier.vkey
    out = Campaign(base=log.store.size())
    checkpoints_before = sum(1 for _ in log.store.checkpoints())
    log.close()
    server = Server(home, None if args.default_rate else NO_LIMIT, root / "serve.err")
    server.start()
    per_key = [list(range(k, args.submissions, args.keys)) for k in range(args.keys)]
    threads = max(1, args.submitters // args.keys)
    procs = [
        child("submitter", {
            "keydir": str(home / "keys"), "key": f"node{k}", "vkey": vkey, "url": server.url,
            "cache": str(root / f"node{k}-cache"), "threads": threads, "items": items,
            "tag": tag,
        })
        for k, items in enumerate(per_key)
    ]
    lock = threading.Lock()
    acked = threading.Event()
    kill_at = args.submissions // 3

    def reader(p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            with lock:
                if "cpu" in r:
                    out.client_cpu += r["cpu"]
                elif "error" in r:
                    out.failures.append(r)
                else:
                    out.results[r["i"]] = r
                if len(out.results) >= kill_at:
                    acked.set()

    try:
        cpu0 = server.cpu()
        t = start_together(procs)
        readers = [threading.Thread(target=reader, args=(p,)) for p in procs]
        for th in readers:
            th.start()
        if kill:
            if not acked.wait(600):
                raise SystemExit("bench_submit: too few acknowledgements to kill at")
            with lock:
                server.kill9()
                out.acked_before_kill = dict(out.results)
            time.sleep(0.3)
            out.restart_seconds = server.start()
        for p in procs:
            p.wait(3600)
        for th in readers:
            th.join()
        out.seconds = time.perf_counter() - t
        out.server_cpu = server.cpu() - cpu0 if not kill else 0.0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        server.stop()
    check_campaign(home, args, tag, out, checkpoints_before)
    return out


def check_campaign(home: Path, args: argparse.Namespace, tag: str, out: Campaign,
                   checkpoints_before: int) -> None:
    """The issue's checks, after the timing; what fails goes to ``out.problems``."""
    from ledger.audit import audit
    from ledger.core.entries import decode_entry
    from ledger.core.receipt import Receipt
    from verify.integrity import Evidence, check_evidence

    p = out.problems
    n = args.submissions
    if out.failures:
        p.append(f"{len(out.failures)} submissions failed, first: {out.failures[0]['error']}")
    log = Log.open(home)
    store = log.store
    size = store.size()
    indices = sorted(r["index"] for r in out.results.values())
    if indices != list(range(out.base, out.base + n)):
        p.append(f"indices not the {n} contiguous ones after {out.base}: "
                 f"{len(indices)} answers, {len(set(indices))} distinct")
    if size != out.base + n:
        p.append(f"log size {size}, want {out.base + n}")
    digests = [decode_entry(store.entry(i)).bundle_digest for i in range(out.base, size)]
    want = {Bundle.from_files(bundle_files(tag, i)).digest.hex() for i in range(n)}
    if len(set(digests)) != len(digests) or set(digests) != want:
        p.append(f"bundles in the log: {len(digests)} entries, {len(set(digests))} distinct, "
                 f"{len(want & set(digests))} of the {n} submitted")
    bad_receipts = 0
    for i, r in out.results.items():
        rec = Receipt.from_bytes(b64_decode(r["receipt"], what="receipt"))
        if rec.item.index != r["index"] or store.entry(r["index"]) != rec.item.entry:
            bad_receipts += 1
            continue
        checks, entry = check_evidence(
            Evidence(rec.item, rec.checkpoint, rec.signer, rec.revocation, False), log.verifier,
            bundle_files(tag, i),
        )
        if entry is None or any(c.status != "passed" for c in checks):
            bad_receipts += 1
    if bad_receipts:
        p.append(f"{bad_receipts} receipts do not verify offline")
    for i, r in out.acked_before_kill.items():
        if store.entry(r["index"]) != b64_receipt_entry(r):
            p.append(f"bundle {i}, acknowledged before the kill at {r['index']}, is not there")
    res = audit(store, log.verifier)
    if not res.ok:
        p.append(f"audit: {res.problems[:3]}")
    out.batches = sum(1 for _ in store.checkpoints()) - checkpoints_before
    log.close()


def b64_receipt_entry(r: dict[str, Any]) -> bytes:
    from ledger.core.receipt import Receipt

    return Receipt.from_bytes(b64_decode(r["receipt"], what="receipt")).item.entry


def local_seal(root: Path, args: argparse.Namespace, tag: str, url: str | None,
               writers: int) -> float:
    """Seals per second of the same bundles, sealed locally by ``writers`` processes."""
    home = new_ledger(root, args.keys, url)
    shares = [[(i, f"node{i % args.keys}") for i in range(w, args.submissions, writers)]
              for w in range(writers)]
    procs = [child("sealer", {"home": str(home), "items": s, "tag": tag}) for s in shares]
    t = start_together(procs)
    for p in procs:
        got, _ = p.communicate(timeout=3600)
        if p.returncode != 0 or "done" not in got:
            raise SystemExit(f"bench_submit: a local sealer failed ({p.returncode})")
    seconds = time.perf_counter() - t
    from ledger.audit import audit

    log = Log.open(home)
    res = audit(log.store, log.verifier)
    size = log.store.size()
    log.close()
    if not res.ok or size != args.keys + args.submissions:
        raise SystemExit(f"bench_submit: local seal left size {size}, audit ok={res.ok}")
    return args.submissions / seconds


def peers(root: Path, args: argparse.Namespace, tag: str, backend: str, pg: Any,
          counts: list[int]) -> dict[int, float]:
    """Local seal rates by writer count, each in a fresh ledger (a fresh database)."""
    out = {}
    for w in counts:
        wroot = root / f"seal-{w}"
        wroot.mkdir(parents=True)
        out[w] = local_seal(wroot, args, tag,
                            pg.new_database() if backend == "postgresql" else None, w)
    return out


# --- main --------------------------------------------------------------------------------------


def fmt_range(xs: list[float], f: Callable[[float], str]) -> str:
    if len(xs) == 1:
        return f(xs[0])
    return f"{f(statistics.median(xs))} ({f(min(xs))}-{f(max(xs))})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--submissions", type=int, default=2000)
    ap.add_argument("--submitters", type=int, default=64)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    ap.add_argument("--seal-writers", default="1,8",
                    help="comma-separated writer-process counts of the local-seal peer")
    ap.add_argument("--kill", action="store_true", help="add a kill -9 round per backend")
    ap.add_argument("--default-rate", action="store_true",
                    help="keep the server's default per-key rate limit")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    writer_counts = [int(w) for w in args.seal_writers.split(",") if w]
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    pg: Any = None
    if "postgresql" in backends:
        from tests.helpers.postgres import PgServer

        pg = PgServer(fsync=True).start()
    rows: dict[str, dict[str, list[float]]] = {b: {} for b in backends}
    kills: dict[str, Campaign] = {}
    details: list[str] = []
    failed = False
    try:
        for r in range(args.rounds + (1 if args.kill else 0)):
            kill = args.kill and r == args.rounds
            for backend in backends:
                tag = f"r{r}{backend[0]}"
                url = pg.new_database() if backend == "postgresql" else None
                root = Path(tempfile.mkdtemp(prefix=f"bench-submit-{backend}-"))
                try:
                    counts = [] if kill else writer_counts
                    before = peers(root / "before", args, tag, backend, pg, counts)
                    load = os.getloadavg()[0]
                    c = campaign(root, args, tag, url, kill)
                    after = peers(root / "after", args, tag, backend, pg, counts)
                    rate = args.submissions / c.seconds
                    lat = c.latencies()
                    retried = sum(len(x["retried"]) for x in c.results.values())
                    resigned = sum(1 for x in c.results.values() if x["signed"] > 1)
                    server_ms = ("n/a (restarted)" if kill else
                                 f"{c.server_cpu / args.submissions * 1e3:.1f} ms")
                    line = (f"{backend} round {r + 1}{' (kill -9)' if kill else ''}: "
                            f"{rate:.1f} submissions/s, {c.batches} checkpoints, latency p50 "
                            f"{lat[len(lat) // 2] if lat else 0:.2f} s max "
                            f"{lat[-1] if lat else 0:.2f} s, {retried} retries, {resigned} "
                            f"re-signed, {len(c.failures)} failures, CPU per submission: "
                            f"server {server_ms}, submitters "
                            f"{c.client_cpu / args.submissions * 1e3:.1f} ms (load {load:.1f})")
                    if kill:
                        line += (f"; killed after {len(c.acked_before_kill)} acknowledged, "
                                 f"restarted in {c.restart_seconds:.1f} s")
                    if c.problems:
                        failed = True
                        line += "; CHECKS FAILED: " + "; ".join(c.problems)
                    else:
                        line += "; all checks passed"
                    print(line, file=sys.stderr)
                    details.append(line)
                    if kill:
                        kills[backend] = c
                        continue
                    got = rows[backend]
                    got.setdefault("submit", []).append(rate)
                    got.setdefault("batches", []).append(float(c.batches))
                    got.setdefault("p50", []).append(lat[len(lat) // 2] if lat else 0.0)
                    for w in writer_counts:
                        got.setdefault(f"seal{w}", []).extend([before[w], after[w]])
                        s = (before[w] + after[w]) / 2
                        got.setdefault(f"ratio{w}", []).append(rate / s)
                        line = (f"{backend} round {r + 1}: local seal, {w} writer(s): "
                                f"{before[w]:.0f}/s before, {after[w]:.0f}/s after; ratio "
                                f"{rate / s:.3f}")
                        print(line, file=sys.stderr)
                        details.append(line)
                finally:
                    shutil.rmtree(root, ignore_errors=True)
    finally:
        if pg is not None:
            pg.stop()
    load_after = os.getloadavg()

    def n0(x: float) -> str:
        return f"{x:,.0f}"

    def n2(x: float) -> str:
        return f"{x:.2f}"

    cmd = (f".venv/bin/python bench/bench_submit.py --submissions {args.submissions} "
           f"--submitters {args.submitters} --keys {args.keys} --rounds {args.rounds} "
           f"--backend {args.backend}{' --kill' if args.kill else ''}"
           f"{' --default-rate' if args.default_rate else ''}")
    lines = [
        f"Command: `{cmd}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
        f"{platform.python_version()}; {started}; load average (1 min) {load_before[0]:.1f} "
        f"at start, {load_after[0]:.1f} at end; server rate limit "
        f"{'default' if args.default_rate else 'lifted (' + NO_LIMIT + ')'}",
        "",
        f"| backend | submissions/s (campaign) | checkpoints per {args.submissions:,} | "
        "answer p50 s | "
        + " | ".join(f"local seal/s, {w} writer{'s' if w > 1 else ''} | ratio" for w in
                     writer_counts) + " |",
        "|---|---|---|---|" + "---|---|" * len(writer_counts),
    ]
    for b in backends:
        got = rows[b]
        if not got:
            continue
        cells = [fmt_range(got["submit"], n0), fmt_range(got["batches"], n0),
                 fmt_range(got["p50"], n2)]
        for w in writer_counts:
            cells += [fmt_range(got[f"seal{w}"], n0), fmt_range(got[f"ratio{w}"], n2)]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += ["", f"median (min-max) over {args.rounds} rounds (local seal: run before and after "
              "each campaign, the ratio against the mean of the two); each round:", ""]
    lines += [f"- {d}" for d in details]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("--submitter", "--sealer"):
        (submitter if sys.argv[1] == "--submitter" else sealer)(json.loads(sys.argv[2]))
    else:
        raise SystemExit(main())
