#!/usr/bin/env bash
# The long campaigns beside the suite (issue 30): every attack campaign in tests/campaigns/ (the
# red-team rounds, fault and crash loops, the bring-your-own kernel rounds, the real-kernel corpus),
# the fuzzers, and the end-to-end sweeps (the guides in tests/docs/, the web pages in a browser,
# every command at 80 columns), all marked `campaign` (tests/conftest.py). scripts/test.sh leaves them
# out to keep the suite under 8 minutes on an idle 2-core machine; run them before a release,
# after a change to the interpreter, the contract reader, the store or the server, or nightly.
# Fails when any test fails. Extra arguments go to pytest (e.g. -k round3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-auto}" --dist loadfile -m campaign "$@"
