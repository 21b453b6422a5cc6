"""nginx (Debian nginx-light) serving a directory written by ``ledger publish`` on a free loopback
port, with the headers docs/scale-out.md gives (one copy, for tests/ledger/test_publish.py and
bench/bench_mirror.py). Unprivileged-ish: its own prefix, pid, logs and temp paths in a
temporary directory; as root, workers run as root to read pytest's 0700 directories."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

CONF = """
daemon off;
worker_processes {workers};
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
{user}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    types {{ }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location = /checkpoint {{
            default_type "text/plain; charset=utf-8";
            add_header Cache-Control "no-cache";
        }}
        location /tile/entries/ {{
            add_header Content-Encoding gzip;
            add_header Cache-Control "public, max-age=31536000, immutable";
        }}
        location /tile/ {{ add_header Cache-Control "public, max-age=31536000, immutable"; }}
        location /api/v1/blobs/ {{
            add_header Cache-Control "public, max-age=31536000, immutable";
        }}
    }}
}}
"""


class NginxUnavailable(Exception):
    """nginx is not installed or did not start (the reason is the message)."""


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def nginx_serving(root: Path, tmp: Path, workers: int = 1) -> Iterator[str]:
    """Serve ``root``; yields the base URL. ``NginxUnavailable`` when it cannot start."""
    exe = nginx_binary()
    if exe is None:
        raise NginxUnavailable("no nginx on PATH or in /usr/sbin (Debian nginx-light: "
                               "scripts/setup.sh --test)")
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    user = "user root root;" if os.geteuid() == 0 else ""
    conf = tmp / "nginx.conf"
    conf.write_text(CONF.format(tmp=tmp, port=port, root=root.resolve(), user=user,
                                workers=workers))
    log = tmp / "error.log"
    proc = subprocess.Popen([exe, "-e", str(log), "-p", str(tmp), "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                text = log.read_text(errors="replace")[-300:] if log.exists() else ""
                raise NginxUnavailable(f"nginx exited at start ({proc.returncode}): {text!r}")
            try:
                httpx.get(url + "/checkpoint", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise NginxUnavailable("nginx did not answer within 20 s") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
