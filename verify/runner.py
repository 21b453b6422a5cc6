"""Run every verifier check on a bundle and build the SPEC 8 report.

Order (each group sees the results before it through ``Context.results``):

1. integrity (given by the caller: ``ledger verify`` passes the log's five integrity checks;
   ``ledger check`` gets ``integrity.manifest`` computed here from the files);
2. ``contract.schema``, ``contract.lint`` (sets ``ctx.contract``);
3. ``lean.scan``, ``lean.kernel``; 4. ``ptx.parse``, ``ptx.assemble``;
5. ``futhark.spec``, ``futhark.run``; 6. ``rebuild.ptx``; 7. ``falsify.<TEST-ID>``;
8. ``certificate`` (reads everything above).

The groups are the modules named in ``GROUPS``, each with ``run(ctx) -> list[Check]``. A
group whose work is an external tool (``STARTS``: ``rebuild``, nvcc, then ``ptx``, ptxas) also
has ``start(ctx) -> Started``: the runner starts those tools as soon as the contract is read and
then runs the other groups, so ptxas and nvcc run in their own processes while this one
interprets the falsification tests (issue 15: the two overlap on a machine with two cores or
more); their checks are collected before ``certificate``, which reads every result, and the
report lists every check in the order above whatever finished first. ``contract`` has a
``start`` too: ``contract.schema`` at once (the tools need ``ctx.contract``), ``contract.lint``
when collected, after the tools started. Each group's module is imported when the group begins,
not with this module: the interpreter (``falsify``: numpy and ``verify.ptxsim``, a third of
``ledger verify``'s imports) then loads while nvcc already runs, instead of before it starts
(issue 12, start-up).

A group that raises an unexpected project error becomes a failed check naming it: the run never
stops half-way and never reports a check it did not run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType

from ledger.core.bundle import Bundle
from ledger.core.encoding import hex_encode
from ledger.core.errors import LedgerError
from verify.context import Context, Options, Started, done
from verify.report import Check, Report, failed, passed

# (group, the id of its first check: for progress and for a group that fails as a whole)
GROUPS: tuple[tuple[str, str], ...] = (
    ("contract", "contract.schema"),
    ("lean", "lean.scan"),
    ("ptx", "ptx.parse"),
    ("futhark", "futhark.spec"),
    ("rebuild", "rebuild.ptx"),
    ("falsify", "falsify"),
    ("certificate", "certificate"),
)
# groups with an external tool (``start``), begun right after the contract is read: nvcc first,
# the slowest tool (~0.2 s against ptxas's ~0.02 s for a small kernel), so that it starts earliest
STARTS = ("rebuild", "ptx")
# groups that read ``ctx.results``: every group before them has finished when they start
READS_RESULTS = frozenset({"certificate"})


def group_module(name: str) -> ModuleType:
    """The module of the group ``name`` in ``GROUPS``, imported now (plain imports rather than
    importlib, so that the layering test sees the runner's dependencies)."""
    if name == "contract":
        from verify import contract
        return contract
    if name == "lean":
        from verify import lean
        return lean
    if name == "ptx":
        from verify import ptx
        return ptx
    if name == "futhark":
        from verify import futhark
        return futhark
    if name == "rebuild":
        from verify import rebuild
        return rebuild
    if name == "falsify":
        from verify import falsify
        return falsify
    if name == "certificate":
        from verify import certificate
        return certificate
    raise KeyError(name)

Progress = Callable[[str], None]


def manifest_check(bundle: Bundle) -> Check:
    return passed(
        "integrity.manifest",
        f"{len(bundle.files)} files hash to the manifest; digest {hex_encode(bundle.digest)}",
        "blake3",
    )


def _begin(name: str, first_id: str, ctx: Context) -> Started:
    """Run the group, or start it when it has background work (``start``)."""
    module = group_module(name)
    begin: Callable[[Context], Started] | None = getattr(module, "start", None)
    try:
        if begin is not None:
            return begin(ctx)
        run: Callable[[Context], list[Check]] = module.run
        return done(run(ctx))
    except LedgerError as e:
        return done([failed(first_id, f"check could not complete: {e}")])


def _collect(first_id: str, started: Started) -> list[Check]:
    try:
        return started.finish()
    except LedgerError as e:
        started.cancel()
        return [failed(first_id, f"check could not complete: {e}")]


def check_bundle(
    bundle: Bundle,
    options: Options | None = None,
    integrity: Sequence[Check] | None = None,
    progress: Progress | None = None,
) -> Report:
    ctx = Context(bundle, options or Options())
    ctx.results.extend(integrity if integrity is not None else [manifest_check(bundle)])
    slots: list[tuple[str, Started | None]] = [(first_id, None) for _, first_id in GROUPS]

    def settle(upto: int) -> None:
        for i in range(upto):
            first_id, started = slots[i]
            if started is not None:
                ctx.results.extend(_collect(first_id, started))
                slots[i] = (first_id, None)

    try:
        # the first group reads the contract (ctx.contract); the groups with external tools
        # start right after it, so that their tools run while every other group works
        (name, first_id), *_ = GROUPS
        if progress is not None:
            progress(first_id)
        slots[0] = (first_id, _begin(name, first_id, ctx))
        at = {name: i for i, (name, _) in enumerate(GROUPS)}
        for name in STARTS:
            i = at[name]
            slots[i] = (slots[i][0], _begin(name, slots[i][0], ctx))
        for i, (name, first_id) in enumerate(GROUPS[1:], start=1):
            if progress is not None:
                progress(first_id)
            if name in READS_RESULTS:
                settle(i)
            if slots[i][1] is None:
                slots[i] = (first_id, _begin(name, first_id, ctx))
        settle(len(slots))
    finally:
        for _, started in slots:  # only when the run was abandoned half-way
            if started is not None:
                started.cancel()
        ctx.close()
    return Report(hex_encode(bundle.digest), tuple(ctx.results))


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
