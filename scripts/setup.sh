#!/usr/bin/env bash
# Set up everything the project needs on a fresh machine (idempotent).
#   scripts/setup.sh          the main job: a venv with the package and its dependencies, and
#                             bubblewrap (the sandbox for bundle references; Debian package)
#   scripts/setup.sh --test   also the test tools: pytest, hypothesis, ruff, mypy, pymerkle, and the
#                             system packages the tests use as independent clients (b3sum, Go with
#                             golang.org/x/mod, headless Chromium, nginx for ledger publish,
#                             PostgreSQL), the postgres extra (psycopg) and the triton extra
#   scripts/setup.sh --gpu    also CuPy for a CUDA device, the wheel of the CUDA major version
#                             installed (scripts/cuda_extra.py picks gpu-cuda12 or gpu-cuda13)
#   scripts/setup.sh --activate-line
#                             print only the line that puts `ledger` on PATH (no install):
#                             eval "$(scripts/setup.sh --activate-line)"
# At the end it prints that line: `ledger` lives in .venv/bin, which is not on PATH until you
# run `source .venv/bin/activate` or that export line (README, "Set up").
# A PostgreSQL ledger (ledger init --db postgresql://...) needs the postgres extra:
#   .venv/bin/python -m pip install -e '.[postgres]'    (docs/dependencies.md)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
activate_line() {
  printf 'export PATH=%q:"$PATH"\n' "$(pwd -P)/.venv/bin"  # %q: any directory name
}
ready_message() {  # the last lines: `ledger` is on PATH, or the line that puts it there, last
  echo "setup: ready (.venv)" >&2
  if [ "$(command -v ledger 2>/dev/null)" = "$(pwd -P)/.venv/bin/ledger" ]; then
    echo "setup: \`ledger\` is on PATH" >&2
  else
    echo "setup: to run \`ledger\`, put .venv/bin on PATH in each new shell, either" >&2
    echo "         source $(pwd -P)/.venv/bin/activate" >&2
    echo "       or" >&2
    echo "         $(activate_line)" >&2
  fi
}
# sourced (tests/scripts/test_setup.py reads the last lines without installing): functions only
if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi
if [ "${1:-}" = "--activate-line" ]; then
  activate_line
  exit 0
fi
want_test=0
want_gpu=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    --gpu) want_gpu=1 ;;
    *) echo "setup: unknown option $arg (options: --test, --gpu, --activate-line)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then PY=$cand; break; fi
  done
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY" >&2
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
if [ $want_test = 1 ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,postgres,triton]'
else
  .venv/bin/python -m pip install -q --disable-pip-version-check -e .
  echo "setup: for a ledger on PostgreSQL also run: .venv/bin/python -m pip install -e '.[postgres]'" >&2
fi
if [ $want_gpu = 1 ]; then
  # the one place the CuPy wheel is chosen: scripts/cuda_extra.py (docs/device-run.md)
  if ! extra=$(.venv/bin/python scripts/cuda_extra.py); then
    echo "setup: --gpu: no CuPy extra fits this machine (see above)" >&2
    exit 3
  fi
  echo "setup: installing CuPy for this CUDA: .[$extra]" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extra]"
fi

# ptxas: the CUDA toolkit when present, else the nvidia-cuda-nvcc wheel (SPEC 8 ptx.assemble).
if ! command -v ptxas >/dev/null 2>&1 && ! ls /usr/local/cuda*/bin/ptxas >/dev/null 2>&1; then
  echo "setup: no CUDA toolkit; installing ptxas from the nvidia-cuda-nvcc wheel" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[cuda]' || \
    echo "setup: could not install nvidia-cuda-nvcc; ptx.assemble will report skipped" >&2
fi

# bubblewrap: the sandbox a bundle's own reference runs in (verify/sandbox.py), for the main job
# (the example bundles with bundle references) and the tests; without it those falsify checks are
# skipped with the reason
pkgs=()
command -v bwrap >/dev/null 2>&1 || pkgs+=(bubblewrap)
# the shared libsodium ledger.core.native's sign_many/verify_many load (issue 30: not PyNaCl's
# private copy); without it they run their pure-Python twins
{ ldconfig -p 2>/dev/null | grep -q 'libsodium\.so'; } || pkgs+=(libsodium23)
if [ $want_test = 1 ]; then
  command -v b3sum >/dev/null 2>&1 || pkgs+=(b3sum)
  command -v go >/dev/null 2>&1 || pkgs+=(golang-go)
  [ -d /usr/share/gocode/src/golang.org/x/mod/sumdb ] || pkgs+=(golang-golang-x-mod-dev)
  command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
  # the serving benchmark's peer and load generator (bench/bench_serve.py, test_serve_nginx);
  # nginx also serves a published directory in tests/ledger/test_publish.py
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || pkgs+=(nginx-light)
  command -v wrk >/dev/null 2>&1 || pkgs+=(wrk)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs+=(postgresql)  # tests/test_postgres*
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${pkgs[*]} (Debian packages)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  else
    echo "setup: not root or no apt-get: checks and tests needing ${pkgs[*]} will say skipped" >&2
  fi
fi
# the project's own modules compiled once, here: the editable install leaves them as source, and
# where PYTHONDONTWRITEBYTECODE is set (it is on the project's build machines) Python would
# compile about a hundred modules afresh on every `ledger` run, 0.3-0.4 s of CPU a command
# (`ledger log` 0.61 -> 0.36 s, `ledger check bundles/vector_add` 1.59 -> 1.20 s). A module
# edited later is recompiled in memory as usual (the timestamp no longer matches).
.venv/bin/python -m compileall -q ledger ledger_cli verify >/dev/null
ready_message
