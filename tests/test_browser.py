"""The HTML pages in a real browser (SPEC 9): headless Chromium loads the entry page from a live
server, the DOM holds the entry (with hostile text escaped, never executed), and a screenshot is
kept under artifacts/ for people to look at."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.server import make_app
from tests.helpers.ledgers import REPO
from tests.helpers.server import BackgroundServer
from tests.test_server import EVIL, build_ledger

ARTIFACTS = REPO / "artifacts"


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium on PATH (Debian package `chromium`)")


def run_browser(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
         f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("browser") / "home"
    build_ledger(home, 12).close()
    with BackgroundServer(make_app(home)) as srv:
        yield srv.url


def test_entry_page_in_chromium(site: str, tmp_path: Path) -> None:
    exe = chromium()
    res = run_browser(exe, tmp_path / "profile", "--dump-dom", f"{site}/entry/3")
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert "Entry 3: kern2" in dom
    assert "k2.ptx" in dom and "lean.scan" in dom and "Inclusion proof" in dom
    assert "&lt;script&gt;alert" in dom  # the hostile name is text ...
    assert "<script>alert" not in dom  # ... and never became an element
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "entry-page.png"
    shot.unlink(missing_ok=True)
    res = run_browser(exe, tmp_path / "profile2", f"--screenshot={shot}",
                      "--window-size=1280,1600", f"{site}/entry/3")
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_home_page_in_chromium(site: str, tmp_path: Path) -> None:
    exe = chromium()
    res = run_browser(exe, tmp_path / "profile", "--dump-dom", f"{site}/")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Recent entries" in res.stdout and 'href="/entry/12"' in res.stdout
    assert EVIL not in res.stdout


PAGES = {"home": "/", "entry": "/entry/3", "search-kernel": "/search?q=kern2"}
WIDTHS = {"desktop": (1280, 1000), "phone": (390, 1400)}


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_every_page_screenshot(site: str, tmp_path: Path, width: str) -> None:
    """Each page at 1280 and 390 px wide, under artifacts/screenshots/ (docs/screenshots/ holds a
    copy: `cp artifacts/screenshots/*.png docs/screenshots/`)."""
    exe = chromium()
    out = ARTIFACTS / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    w, h = WIDTHS[width]
    for name, path in PAGES.items():
        shot = out / f"{name}-{w}.png"
        shot.unlink(missing_ok=True)
        res = run_browser(exe, tmp_path / f"p-{name}", f"--screenshot={shot}",
                          f"--window-size={w},{h}", f"{site}{path}")
        assert res.returncode == 0, res.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5_000
