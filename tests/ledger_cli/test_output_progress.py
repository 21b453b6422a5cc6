"""Progress bars that move (issue 11): a check reports one step per check group, a mirror and an
export know their totals. The bar is driven as the commands drive it, on a terminal console."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ledger_cli import output


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(output, "err", Console(file=buf, force_terminal=True, width=80))
    return buf


def test_steps_move_the_bar(terminal: io.StringIO) -> None:
    from verify.runner import GROUPS

    with output.progress("checking", len(GROUPS)) as bar:
        for _, first_id in GROUPS:
            bar.step(first_id)
        (task,) = bar.bar.tasks
        assert task.total == len(GROUPS)
        assert task.completed == len(GROUPS) - 1  # the last group has started
        assert GROUPS[-1][1] in task.description


def test_a_total_learned_later_is_shown(terminal: io.StringIO) -> None:
    with output.progress("mirroring", None) as bar:
        bar.update(3, total=10)
        (task,) = bar.bar.tasks
        assert (task.completed, task.total) == (3, 10)


def test_export_reports_every_tile(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    from ledger.export import export_tiles
    from tests.helpers.ledgers import add_node, new_ledger, seal_fake

    root = Path(str(tmp_path))
    log = new_ledger(root / "home")
    sk = add_node(log)
    for i in range(3):
        seal_fake(log, sk, root / "b", str(i))
    seen: list[tuple[int, int]] = []
    size, written = export_tiles(log.home, root / "out", lambda d, t: seen.append((d, t)))
    assert size == 4 and seen and seen[-1][0] == seen[-1][1] == written - 1
    assert [d for d, _ in seen] == list(range(1, len(seen) + 1))


def test_check_details_kept_whole_up_to_the_entry_limit() -> None:
    from ledger.core.entries import MAX_DETAIL, MAX_OBLIGATIONS, check_entry_shape
    from ledger_cli.wiring import fit_text

    whole = "word " * 150  # 750 characters: cut at 400 before
    assert fit_text(whole) == whole
    # a certificate naming every obligation a contract may claim is kept whole, and the log
    # accepts an entry holding it
    line = ("PO8 partial (HistogramU32.slot_words_disjoint; falsify.FALSIFY-HIST-002; "
            "tolerance ulp 0; missing lean.kernel); ")
    cert = "partial: " + line * MAX_OBLIGATIONS
    assert fit_text(cert) == cert
    entry = {"type": "bundle", "kernel": {"name": "k", "version": "1"}, "obligations": [],
             "checks": [{"id": "certificate", "status": "skipped", "detail": cert}]}
    check_entry_shape(entry)
    long = "certificate " * 1000
    cut = fit_text(long)
    assert len(cut) <= MAX_DETAIL and cut.endswith("certificate…")


HOSTILE = ["1.0.0[/]", "[bold red]x[/bold red]", "[link=https://evil.example]y[/link]",
           "a\x1b[31mb", "[/", "]", "\\[x]"]


def test_markup_in_any_field_prints_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every field a bundle or an entry controls (check id, status, tool, version, detail, the
    digest in the title, any table cell, a progress description; the status is one of three
    words) is printed as text: rich never
    reads it as markup, nothing crashes, and control characters are neutralised."""
    from verify.report import Check, Report

    for width in (200, 80):  # the wide report table and the narrow one (tool in the detail)
        buf = io.StringIO()
        monkeypatch.setattr(output, "out", Console(file=buf, width=width, highlight=False))
        monkeypatch.setattr(output, "err", Console(file=io.StringIO(), force_terminal=True))
        for text in HOSTILE:
            check = Check(id=text, status="failed", detail=text, tool=text, version=text)
            output.report_table(Report(text, (check,)), recorded=(check,))
            long = Check(id="c", status="passed", detail=f"{text}; " * 40, tool=text)
            output.report_table(Report("d", (long,)))
            output.rows_table(text, [text, "b"], [[text, text]])
            output.plain(text)
            with output.progress(text, 2) as bar:
                bar.step(text)
                bar.update(1, text, total=3)
        printed = buf.getvalue()
        for text in HOSTILE:
            assert output.clean(text) in printed, (width, text)
        assert "\x1b" not in printed


def test_mirror_and_publish_report_their_totals(tmp_path: pytest.TempPathFactory) -> None:
    """The bars of ``mirror`` and ``publish`` get a known total from the start and end full
    (``mirror`` showed N/? before): every report names the same total, the counts never go back,
    and the last count is the total."""
    from pathlib import Path

    from ledger.http.server import make_app
    from ledger.mirror import Mirror, Remote
    from ledger.publish import open_target, publish
    from tests.helpers.ledgers import add_node, new_ledger, seal_fake
    from tests.helpers.server import BackgroundServer

    root = Path(str(tmp_path))
    log = new_ledger(root / "home")
    sk = add_node(log)
    for i in range(5):
        seal_fake(log, sk, root / "b", str(i))
    vkey = str(log.store.meta("vkey"))
    size = log.store.size()
    seen: list[tuple[int, int]] = []
    with BackgroundServer(make_app(log.home)) as srv:
        remote = Remote(srv.url)
        try:
            Mirror(root / "m", remote, vkey, progress=lambda d, t: seen.append((d, t))).sync()
        finally:
            remote.close()
    assert seen and {t for _, t in seen} == {size} and seen[-1][0] == size
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    published: list[tuple[int, int]] = []
    target = open_target(str(root / "pub"))
    publish(log.home, target, lambda d, t: published.append((d, t)))
    assert published and len({t for _, t in published}) == 1 and published[-1][1] > 0
    assert published[-1][0] == published[-1][1]
    assert [d for d, _ in published] == sorted(d for d, _ in published)
    log.close()


def test_no_console_is_made_for_a_bar_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal the bar is a no-op without making rich's stderr console (whose module a
    verify would otherwise load before nvcc starts); ``FORCE_COLOR`` and ``TTY_COMPATIBLE=1``,
    which make rich call stderr a terminal, still get a bar."""
    import sys

    monkeypatch.setattr(output, "err", None, raising=False)  # no console made yet
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    with output.progress("x", 2) as bar:
        assert bar.bar is None
    assert output.err is None  # still none made
    for var, value in (("FORCE_COLOR", "1"), ("TTY_COMPATIBLE", "1")):
        monkeypatch.setattr(output, "err", None)
        monkeypatch.setenv(var, value)
        with output.progress("x", 2) as bar:
            bar.step("y")
            assert bar.bar is not None, var
        monkeypatch.delenv(var)
