"""The ``certificate`` check (SPEC 8): every claimed proof obligation is backed by a named theorem
and by evidence. It runs last and reads the checks before it (``ctx.results``).

Each claim of ``ctx.contract.claims`` (obligation PO1..PO8, Lean theorem, dynamic property) is
judged on three legs, each ``ok``, ``missing`` (the evidence could not be produced here: a skipped
check) or ``failed``:

1. the theorem passed the static scan: ``lean.scan`` passed AND, recomputed with
   ``verify.lean.scan_sources`` over the bundle's ``.lean`` files, the theorem is among the scan's
   theorems and not in its rejected set (lean.scan failed or absent: failed; skipped: missing),
   and its statement says something: a theorem whose conclusion is only ``True`` (or ``x = x``),
   or that ``verify.lean.claims`` finds proves nothing (contradictory hypotheses, a conclusion
   true by logic alone or restating the hypotheses), backs no obligation (failed); one outside
   the fragment the solver decides backs it only partly (missing). Beyond that, whether the
   statement is the obligation is not checked: the detail names the theorem so a reader can
   compare;
2. the theorem passed the Lean kernel: ``lean.kernel`` passed (failed: failed; skipped or not
   run, e.g. no Lean toolchain: missing);
3. the property is backed: ``resources`` by ``ptx.assemble`` passed; every other property by the
   ``falsify.<ID>`` checks of the executable falsification tests that list it: one of them failed
   on this property (its finding tag, e.g. ``[race_free/PO7]``, names it; a failure without a tag,
   such as values out of tolerance, counts against every property) -> failed; else one passed ->
   ok; else one skipped or failed on another property -> missing; no such test, or none ran ->
   failed.

Issue 15: a passed test that ran at the author's sizes only (its detail says
``verify.falsify.AUTHOR_ONLY``: no size domain to choose sizes from) backs its claims only as
"missing" (partial); ``rounding`` and ``reference`` claims name the tolerance relied on; the
detail ends with the kernel's size domain, the sizes the claim covers.

Verdict: no contract or no claim at all -> failed ("no proof obligations claimed"); an unknown
obligation or property, or any leg failed -> failed; else any leg missing -> skipped, the detail
starting "partial:" and naming what is missing; else passed. The detail lists each obligation as
``PO1 ok (VectorAdd.index_partition; falsify.FALSIFY-VADD-001)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger.core.errors import LedgerError
from verify.context import Context
from verify.model import OBLIGATIONS, PROPERTIES, Claim, Contract, domain_text
from verify.report import Check, failed, passed, skipped
from verify.waivers import describe as describe_waiver

CHECK_ID = "certificate"


@dataclass
class Legs:
    """What backs one claim: evidence names, and reasons for what is missing or failed."""

    evidence: list[str] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (check id, reason)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. the tolerance relied on

    @property
    def state(self) -> str:
        return "failed" if self.failures else "partial" if self.missing else "ok"


@dataclass(frozen=True)
class LeanFacts:
    """The static scan recomputed here: theorems found, and the rejected ones with a reason."""

    theorems: frozenset[str]
    rejected: Mapping[str, str]
    vacuous: frozenset[str] = frozenset()  # statement ``True`` or ``x = x``: proves nothing
    key: Callable[[str], str] | None = None  # a contract's name as the scan records names
    # issue 33 (verify.lean.claims): why a theorem proves nothing (beyond ``True``/``x = x``),
    # and the theorems whose statement is outside the fragment the solver decides
    why: Mapping[str, str] = field(default_factory=dict)
    unchecked: Mapping[str, str] = field(default_factory=dict)


def _short(detail: str, limit: int = 100) -> str:
    line = detail.splitlines()[0] if detail else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def lean_facts(ctx: Context) -> LeanFacts | str:
    """Recompute the static Lean scan over the bundle's ``.lean`` files (or say why not)."""
    try:
        from verify.lean import scan_sources
        from verify.lean.scan import theorem_key
    except ImportError as e:
        return f"verify.lean is unavailable ({e})"
    files = {f.path: f.data for f in ctx.bundle.with_suffix(".lean")}
    try:
        scan: Any = scan_sources(files)
    except LedgerError as e:
        return f"the Lean scan could not run: {e}"
    theorems = frozenset(str(t) for t in scan.theorems)
    problems = [str(p) for p in getattr(scan, "problems", ())]
    why = f"rejected by the scan ({problems[0]})" if problems else "rejected by the scan"
    rejected = {str(name): why for name in scan.rejected}
    vacuous = frozenset(str(t) for t in getattr(scan, "vacuous", ()))
    reasons: dict[str, str] = {}
    unchecked: dict[str, str] = {}
    if ctx.contract is not None:
        from verify.lean.claims import verdicts_for

        names = [theorem_key(c.theorem) for c in ctx.contract.claims]
        for name, v in verdicts_for(scan, names).items():
            if v.vacuous and name not in vacuous:
                reasons[name] = v.why
            elif v.kind == "unchecked":
                unchecked[name] = v.why
    vacuous |= frozenset(reasons)
    return LeanFacts(theorems, rejected, vacuous, theorem_key, reasons, unchecked)


def _key(facts: LeanFacts, name: str) -> str:
    return facts.key(name) if facts.key is not None else name


def _theorem_legs(ctx: Context, claim: Claim, facts: LeanFacts | str, legs: Legs) -> None:
    scan = ctx.result("lean.scan")
    if scan is None:
        legs.failures.append("lean.scan did not run")
    elif scan.status == "failed":
        legs.failures.append(f"lean.scan failed ({_short(scan.detail)})")
    elif scan.status == "skipped":
        legs.missing.append(("lean.scan", f"lean.scan skipped ({_short(scan.detail)})"))
    elif isinstance(facts, str):
        legs.missing.append(("lean.scan", facts))
    elif (key := _key(facts, claim.theorem)) in facts.rejected:
        legs.failures.append(f"{claim.theorem} {facts.rejected[key]}")
    elif key not in facts.theorems:
        legs.failures.append(f"{claim.theorem} not found in the bundle's Lean files")
    elif key in facts.why:
        legs.failures.append(f"{claim.theorem}: {facts.why[key]}")
    elif key in facts.vacuous:
        legs.failures.append(
            f"{claim.theorem} states only True (or x = x): it proves nothing about the kernel"
        )
    elif key in facts.unchecked:  # not shown to claim anything: the claim is partial
        legs.missing.append(("lean.scan", f"{claim.theorem} {facts.unchecked[key]}"))
    else:
        legs.evidence.insert(0, claim.theorem)
    kernel = ctx.result("lean.kernel")
    if kernel is None:
        legs.missing.append(("lean.kernel", "lean.kernel did not run"))
    elif kernel.status == "failed":
        legs.failures.append(f"lean.kernel failed ({_short(kernel.detail)})")
    elif kernel.status == "skipped":
        legs.missing.append(("lean.kernel", f"lean.kernel skipped ({_short(kernel.detail)})"))
    else:
        legs.evidence.append("lean.kernel")


def _property_legs(ctx: Context, contract: Contract, claim: Claim, legs: Legs) -> None:
    if claim.property == "resources":
        asm = ctx.result("ptx.assemble")
        if asm is None:
            legs.failures.append("ptx.assemble did not run")
        elif asm.status == "failed":
            legs.failures.append(f"ptx.assemble failed ({_short(asm.detail)})")
        elif asm.status == "skipped":
            legs.missing.append(("ptx.assemble", f"ptx.assemble skipped ({_short(asm.detail)})"))
        else:
            legs.evidence.append("ptx.assemble")
        return
    tests = [t for t in contract.falsification if t.executable and claim.property in t.properties]
    if not tests:
        legs.failures.append(f"no executable falsification test lists {claim.property}")
        return
    bad: list[str] = []
    good: list[str] = []
    other: list[str] = []
    for t in tests:
        c = ctx.result(f"falsify.{t.id}")
        if c is None:
            continue
        if c.status == "passed":
            good.append(c.id)
        elif c.status == "skipped":
            other.append(f"{c.id} skipped")
        else:
            broken = broken_property(c.detail)
            if broken is None or _same_evidence(broken, claim.property):
                bad.append(c.id if broken is None else f"{c.id} ({broken})")
            else:  # the test failed on another property: no evidence either way for this one
                other.append(f"{c.id} failed on {broken}")
    if bad:
        legs.failures.append(f"{', '.join(bad)} failed")
    elif good:
        _size_and_tolerance_legs(ctx, contract, claim, good, legs)
    elif other:
        legs.missing.append((", ".join(o.split(" ")[0] for o in other), "; ".join(other)))
    else:
        legs.failures.append(f"falsify checks for {claim.property} did not run")


def oracle_note(ctx: Context) -> str:
    """``; oracle ...`` naming what the falsify checks compared with (SPEC 3); a certificate that
    rests only on the bundle's own reference says it is the weaker kind of evidence."""
    from verify.oracle import ORACLE_IN_DETAIL, WEAKER

    names: list[str] = []
    for c in ctx.results:
        if c.id.startswith("falsify."):
            for m in ORACLE_IN_DETAIL.finditer(c.detail):
                if m.group(1) not in names:
                    names.append(m.group(1))
    if not names:
        return ""
    text = "; " + " and ".join(f"oracle {n}" for n in names)
    if all(n.startswith("bundle:") for n in names):
        text += f" only: {WEAKER}"
    return text


def _size_and_tolerance_legs(
    ctx: Context, contract: Contract, claim: Claim, good: list[str], legs: Legs
) -> None:
    """Passed tests back the claim; those that ran at the author's sizes only (``falsify``
    could not extend them) leave it partial; value claims name the tolerance relied on."""
    from verify.contract_lint import tolerance_text
    from verify.falsify import AUTHOR_ONLY

    extended = []
    for cid in good:
        c = ctx.result(cid)
        if c is not None and AUTHOR_ONLY in c.detail:
            legs.missing.append((cid, f"{cid} backed by author-chosen sizes only ({AUTHOR_ONLY})"))
        else:
            extended.append(cid)
    legs.evidence.extend(extended)
    if claim.property in ("rounding", "reference"):
        by_id = {f"falsify.{t.id}": t for t in contract.falsification}
        tols = sorted({tolerance_text(by_id[c].tolerance) for c in good if c in by_id})
        if tols:
            legs.notes.append(f"tolerance {' / '.join(tols)}")


_TAG = re.compile(r"\[([a-z_]+)/PO[1-8]\]: ")


def broken_property(detail: str) -> str | None:
    """The property a failed ``falsify.*`` check names in its finding tag (``race [race_free/PO7]:
    ...``), or None when it failed otherwise (values out of tolerance, a contract error)."""
    m = _TAG.search(detail)
    return m.group(1) if m else None


def _same_evidence(broken: str, claimed: str) -> bool:
    values = ("reference", "rounding")  # both are judged on the output values
    return broken == claimed or (broken in values and claimed in values)


def judge_claim(ctx: Context, contract: Contract, claim: Claim, facts: LeanFacts | str) -> Legs:
    legs = Legs()
    if claim.obligation not in OBLIGATIONS:
        legs.failures.append(f"unknown obligation {claim.obligation!r}")
    if claim.property not in PROPERTIES:
        legs.failures.append(f"unknown property {claim.property!r}")
    if not claim.theorem:
        legs.failures.append("names no theorem")
    if legs.failures:
        return legs
    _theorem_legs(ctx, claim, facts, legs)
    _property_legs(ctx, contract, claim, legs)
    return legs


def _line(claim: Claim, legs: Legs) -> str:
    if legs.failures:
        return f"{claim.obligation} FAILED ({claim.theorem or '?'}: {'; '.join(legs.failures)})"
    shown = [claim.theorem] + [e for e in legs.evidence if e not in (claim.theorem, "lean.kernel")]
    shown += legs.notes
    if legs.missing:
        shown.append("missing " + ", ".join(label for label, _ in legs.missing))
        return f"{claim.obligation} partial ({'; '.join(shown)})"
    return f"{claim.obligation} ok ({'; '.join(shown)})"


def run(ctx: Context) -> list[Check]:
    contract = ctx.contract
    if contract is None:
        return [failed(CHECK_ID, "no contract could be read, so no proof obligation is backed")]
    if not contract.claims:
        return [failed(CHECK_ID, "no proof obligations claimed")]
    facts = lean_facts(ctx)
    judged = [(c, judge_claim(ctx, contract, c, facts)) for c in contract.claims]
    judged.sort(key=lambda cl: (cl[0].obligation, cl[0].theorem))
    lines = [_line(c, legs) for c, legs in judged]
    claimed = {c.obligation for c, _ in judged}
    unclaimed = [po for po in OBLIGATIONS if po not in claimed]
    tail = f"; not claimed: {', '.join(unclaimed)}" if unclaimed else ""
    if contract.kernel is not None:
        k = contract.kernel
        tail += f"; size domain: {domain_text(k.size_domain, k.size_constraints)}"
        if k.waivers:  # issue 32: waived findings are part of the claim, shown, never hidden
            tail += "; waived: " + "; ".join(describe_waiver(w) for w in k.waivers)
    body = "; ".join(lines) + tail + oracle_note(ctx)
    if any(legs.state == "failed" for _, legs in judged):
        bad = sorted({c.obligation for c, legs in judged if legs.state == "failed"})
        return [failed(CHECK_ID, f"{', '.join(bad)} not backed: {body}")]
    if any(legs.state == "partial" for _, legs in judged):
        missing = sorted({why for _, legs in judged for _, why in legs.missing})
        return [skipped(CHECK_ID, f"partial: {'; '.join(missing)} - {body}")]
    return [passed(CHECK_ID, f"{len(judged)} obligations backed by theorem and evidence: {body}")]
