"""Suite-wide isolation: the verifier's checkpoint memory (issue 14) and the user's trust policy
live under the user's cache and config directories; the tests use a private pair instead, so a
developer's own ~/.cache/kernel-ledger and ~/.config/kernel-ledger are neither read nor written.

Hypothesis runs without its per-example deadline and too-slow health check: those are wall-clock
time boxes, and a unit test's verdict must not depend on the machine's load."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("suite")


@pytest.fixture(scope="session", autouse=True)
def _private_cache_and_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("user-dirs")
    saved = {k: os.environ.get(k) for k in ("LEDGER_CACHE_DIR", "XDG_CONFIG_HOME", "LEDGER_POLICY")}
    os.environ["LEDGER_CACHE_DIR"] = str(root / "cache")
    os.environ["XDG_CONFIG_HOME"] = str(root / "config")
    os.environ.pop("LEDGER_POLICY", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# Long campaigns (issue 30: the suite stays under 8 minutes on an idle 2-core machine): every
# attack campaign in tests/campaigns/ (the red-team rounds, fault and crash loops, the
# bring-your-own kernel rounds, the real-kernel corpus) and the fuzzers elsewhere. They are marked
# ``campaign`` here, in one place, and run by ``scripts/campaigns.sh`` (``pytest -m campaign``)
# beside the suite, which ``scripts/test.sh`` runs with ``-m "not campaign"``. Each fuzzer is named
# by its path below tests/; the folder tests/campaigns/ is a campaign as a whole.
CAMPAIGN_FOLDERS = ("campaigns/",)
CAMPAIGNS = frozenset({
    "verify/test_contract_fuzz.py",
    "verify/lean/test_scan_fuzz.py",
    "ledger/store/test_fuzz_ledger.py",
})
TESTS = Path(__file__).resolve().parent


def is_campaign(path: Path) -> bool:
    """Whether the test file at ``path`` belongs to the long campaigns, not the suite."""
    rel = path.resolve().relative_to(TESTS).as_posix()
    return rel in CAMPAIGNS or rel.startswith(CAMPAIGN_FOLDERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_campaign(item.path):
            item.add_marker(pytest.mark.campaign)
