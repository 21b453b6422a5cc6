#!/usr/bin/env bash
# Set up (scripts/setup.sh --test) and run the whole test suite, lint and type checks.
# Fails when any test, ruff or mypy fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check ledger verify tests bench scripts kernels/build.py
.venv/bin/mypy
.venv/bin/python kernels/build.py --check
mkdir -p artifacts
.venv/bin/python scripts/device_check.py --interpreter-only --out artifacts/device-check.md
.venv/bin/python -m pytest -q "$@"
