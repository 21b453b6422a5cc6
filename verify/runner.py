"""Run every verifier check on a bundle and build the SPEC 8 report.

Order (each group sees the results before it through ``Context.results``):

1. integrity (given by the caller: ``ledger verify`` passes the log's five integrity checks;
   ``ledger check`` gets ``integrity.manifest`` computed here from the files);
2. ``contract.schema``, ``contract.lint`` (sets ``ctx.contract``);
3. ``lean.scan``, ``lean.kernel``; 4. ``ptx.parse``, ``ptx.assemble``;
5. ``futhark.spec``, ``futhark.run``; 6. ``rebuild.ptx``; 7. ``falsify.<TEST-ID>``;
8. ``certificate`` (reads everything above).

A group that raises an unexpected project error becomes a failed check naming it: the run never
stops half-way and never reports a check it did not run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from ledger.bundle import Bundle
from ledger.errors import LedgerError
from verify.context import Context, Options
from verify.report import Check, Report, failed, passed

GROUPS: tuple[tuple[str, str], ...] = (
    ("verify.contract", "contract.schema"),
    ("verify.lean", "lean.scan"),
    ("verify.ptx", "ptx.parse"),
    ("verify.futhark", "futhark.spec"),
    ("verify.rebuild", "rebuild.ptx"),
    ("verify.falsify", "falsify"),
    ("verify.certificate", "certificate"),
)

Progress = Callable[[str], None]


def manifest_check(bundle: Bundle) -> Check:
    return passed(
        "integrity.manifest",
        f"{len(bundle.files)} files hash to the manifest; digest {bundle.digest.hex()}",
        "blake3",
    )


def check_bundle(
    bundle: Bundle,
    options: Options | None = None,
    integrity: Sequence[Check] | None = None,
    progress: Progress | None = None,
) -> Report:
    ctx = Context(bundle, options or Options())
    ctx.results.extend(integrity if integrity is not None else [manifest_check(bundle)])
    try:
        for module_name, first_id in GROUPS:
            if progress is not None:
                progress(first_id)
            run: Callable[[Context], list[Check]] = importlib.import_module(module_name).run
            try:
                ctx.results.extend(run(ctx))
            except LedgerError as e:
                ctx.results.append(failed(first_id, f"check could not complete: {e}"))
    finally:
        ctx.close()
    return Report(bundle.digest.hex(), tuple(ctx.results))


def compare_recorded(report: Report, recorded: Sequence[Check]) -> Report:
    """Annotate each re-run check with what was recorded at seal time when the two differ."""
    before = {c.id: c for c in recorded}
    out: list[Check] = []
    for c in report.checks:
        old = before.get(c.id)
        if old is not None and old.status != c.status:
            tool = f" with {old.tool} {old.version}".rstrip() if old.tool else ""
            c = Check(
                c.id, c.status, f"{c.detail} [at seal time: {old.status}{tool}]", c.tool, c.version
            )
        out.append(c)
    seen = {c.id for c in report.checks}
    for old in recorded:
        if old.id not in seen and not old.id.startswith("integrity."):
            out.append(failed(old.id, f"recorded at seal time ({old.status}) but not re-run now"))
    return Report(report.bundle_digest, tuple(out))


def required_missing(report: Report, require: Sequence[str]) -> list[str]:
    """Required check ids (``falsify.*`` style wildcards allowed) that did not pass or fail."""
    missing: list[str] = []
    for want in require:
        if want.endswith("*"):
            hits = [c for c in report.checks if c.id.startswith(want[:-1])]
        else:
            hits = [c for c in report.checks if c.id == want]
        if not hits or any(c.status == "skipped" for c in hits):
            missing.append(want)
    return missing
