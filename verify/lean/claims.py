"""Does a theorem's statement claim anything? (issue 33 item 2)

A proof-obligation theorem backs no claim when

- its hypotheses contradict each other (``(h : False)``, ``(h : i < 0)`` over ``Nat``,
  ``a < b`` and ``b ≤ a``): anything follows from them (``h.elim``);
- its conclusion holds by logic alone, whatever its variables: ``True ∨ False``, ``¬False``,
  ``P → P``, ``n = n + 0``, ``a + b = b + a`` (comparisons whose sides are the same integer
  polynomial are decided; comparisons of numbers only, ``256 ≤ 1024``, are not);
- its conclusion follows from its hypotheses by logic alone, read the same way (it restates them:
  ``(h : i < n) : i < n``).

``judge(statements)`` answers for a batch of theorems (name -> the token texts of the signature,
``verify.lean.scan``): each gets a ``Verdict``. The statements are read by
``verify.lean.statement`` (bounded), translated by ``verify.lean.smt`` and decided by the Z3
SMT solver (PyPI ``z3-solver``, which installs the ``z3`` executable beside the interpreter), run
as a separate process with a time limit per question and for the batch, an address-space limit
and a scrubbed environment (``verify.tools.run_tool``); what it reads is SMT-LIB text written
here, never bundle text. Verdicts are cached per signature in this process.

``unchecked`` means the statement is outside the fragment decided here (a part with no
arithmetic meaning, a signature the reader cannot read, a solver answer of ``unknown``, no
solver): nothing is claimed about it either way.
"""

from __future__ import annotations

import shutil
import sysconfig
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from verify.lean.scan import LeanScan
from verify.lean.smt import Queries, queries
from verify.lean.statement import StatementError, parse_signature

QUERY_MS = 2000  # per solver question
BATCH_SECONDS = 60.0  # one solver run, all theorems of a bundle
SOLVER_MEMORY = 1 << 30  # address space of the solver process
MAX_THEOREMS = 500  # judged per batch; the rest are unchecked
OUTSIDE = "unchecked: statement outside the decidable fragment"
_CACHE: dict[tuple[str, ...], Verdict] = {}
_CACHE_MAX = 4096


@dataclass(frozen=True)
class Verdict:
    kind: str  # "claims" | "contradictory" | "trivial" | "restates" | "unchecked"
    why: str  # for the detail: what was found, or why it is unchecked
    valid: bool = False  # the conclusion holds for every value of its variables (a note)

    @property
    def vacuous(self) -> bool:
        return self.kind in ("contradictory", "trivial", "restates")


WHY = {
    "contradictory": "its hypotheses contradict each other, so it proves nothing",
    "trivial": "its conclusion holds by logic alone, whatever its variables: it proves nothing",
    "restates": "its conclusion follows from its hypotheses by logic alone: it proves nothing",
}


def solver() -> str | None:
    """The ``z3`` executable: the one ``z3-solver`` installed beside this interpreter, else on
    PATH; None when there is none."""
    here = Path(sysconfig.get_path("scripts")) / "z3"
    if here.is_file():
        return str(here)
    return shutil.which("z3")


def judge(statements: Mapping[str, Sequence[str]]) -> dict[str, Verdict]:
    """A verdict for each theorem (name -> signature token texts)."""
    out: dict[str, Verdict] = {}
    todo: dict[str, Queries] = {}
    for name, toks in statements.items():
        key = tuple(toks)
        if key in _CACHE:
            out[name] = _CACHE[key]
            continue
        try:
            todo[name] = queries(parse_signature(toks))
        except (StatementError, RecursionError) as e:
            out[name] = Verdict("unchecked", f"{OUTSIDE} (not read: {e})")
        except Exception as e:  # Untranslatable outside a comparison, a limit
            out[name] = Verdict("unchecked", f"{OUTSIDE} ({type(e).__name__}: {e})")
    if todo:
        out.update(_solve(todo))
    for name, v in out.items():  # unchecked ones too: lint and certificate ask again
        if len(_CACHE) < _CACHE_MAX:
            _CACHE[tuple(statements[name])] = v
    return out


def _script(todo: Mapping[str, Queries]) -> tuple[str, list[str]]:
    names = list(todo)[:MAX_THEOREMS]
    lines = [f"(set-option :timeout {QUERY_MS})"]
    for i, name in enumerate(names):
        q = todo[name]
        for label, body in (("hyps", q.hyps), ("logic", q.logic), ("restates", q.restates),
                            ("valid", q.valid)):  # fmt: skip
            if label == "valid" and not body:
                continue
            lines += ["(push 1)", *body, f'(echo "@{i} {label}")', "(check-sat)", "(pop 1)"]
    return "\n".join(lines) + "\n", names


def _answers(text: str) -> dict[tuple[int, str], str]:
    """``(theorem index, question) -> sat | unsat | unknown`` from the solver's output."""
    found: dict[tuple[int, str], str] = {}
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("@") and k + 1 < len(lines):
            i, _, label = line[1:].partition(" ")
            if i.isdigit():
                ans = lines[k + 1].strip()
                found[(int(i), label)] = ans if ans in ("sat", "unsat") else "unknown"
    return found


def _solve(todo: Mapping[str, Queries]) -> dict[str, Verdict]:
    from verify.tools import run_tool

    z3 = solver()
    if z3 is None:
        why = f"{OUTSIDE} (no SMT solver: z3 is not installed)"
        return {n: Verdict("unchecked", why) for n in todo}
    script, names = _script(todo)
    with tempfile.TemporaryDirectory(prefix="ledger-smt-") as tmp:
        (Path(tmp) / "q.smt2").write_text(script, "utf-8")
        res = run_tool(
            [z3, "-smt2", f"-T:{int(BATCH_SECONDS)}", "q.smt2"],
            cwd=Path(tmp),
            timeout=BATCH_SECONDS + 5,
            mem_bytes=SOLVER_MEMORY,
            fsize_bytes=1 << 20,
        )
    found = _answers(res.stdout)
    out = {n: Verdict("unchecked", f"{OUTSIDE} (more than {MAX_THEOREMS} theorems)") for n in todo}
    for i, name in enumerate(names):
        out[name] = _verdict(todo[name], {q: a for (k, q), a in found.items() if k == i})
    return out


def _verdict(q: Queries, ans: Mapping[str, str]) -> Verdict:
    valid = ans.get("valid") == "unsat"
    if ans.get("hyps") == "unsat":
        return Verdict("contradictory", WHY["contradictory"], valid)
    if ans.get("logic") == "unsat":
        return Verdict("trivial", WHY["trivial"], valid)
    if ans.get("restates") == "unsat":
        return Verdict("restates", WHY["restates"], valid)
    if ans.get("hyps") != "sat" or ans.get("logic") != "sat" or ans.get("restates") != "sat":
        return Verdict("unchecked", f"{OUTSIDE} (the solver answered unknown or not at all)")
    if q.abstracted:
        shown = ", ".join(sorted(set(q.abstracted))[:3])
        return Verdict("unchecked", f"{OUTSIDE} (no arithmetic meaning here: {shown[:200]})")
    return Verdict("claims", "", valid)


SYNTACTIC = "states only True (or x = x): it proves nothing"


def verdicts_for(scan: LeanScan, names: Iterable[str]) -> dict[str, Verdict]:
    """Verdicts for the theorems ``names`` of ``scan`` (names it does not declare are left out);
    one the scan already found to state only ``True`` or ``x = x`` is ``trivial`` unasked."""
    statements = {name: (*variables, *sig) for name, variables, sig in scan.statements}
    wanted = [n for n in dict.fromkeys(names) if n in statements]
    out = judge({n: statements[n] for n in wanted if n not in scan.vacuous})
    if scan.meaning:  # what <, + or a numeral mean may not be what the solver was told
        why = f"{OUTSIDE} (the bundle may change what its symbols mean: {scan.meaning[0]})"
        out = {n: Verdict("unchecked", why) for n in out}
    out.update({n: Verdict("trivial", SYNTACTIC) for n in wanted if n in scan.vacuous})
    return out


def vacuous_reasons(scan: LeanScan, names: Iterable[str]) -> dict[str, str]:
    """The theorems of ``names`` that prove nothing, with why (for ``contract.lint``)."""
    return {n: v.why for n, v in verdicts_for(scan, names).items() if v.vacuous}


def summary(verdicts: Mapping[str, Verdict]) -> str:
    """What the solver found about passing theorems, for the ``lean.scan`` detail."""
    claims = [n for n, v in verdicts.items() if v.kind == "claims"]
    unchecked = [n for n, v in verdicts.items() if v.kind == "unchecked"]
    valid = [n for n, v in verdicts.items() if v.valid and not v.vacuous]
    parts = [f"{len(claims)} statement(s) claim something (hypotheses consistent, conclusion not "
             "a matter of logic alone)"]  # fmt: skip
    if unchecked:
        shown = ", ".join(unchecked[:5]) + (" ..." if len(unchecked) > 5 else "")
        first = verdicts[unchecked[0]].why.removeprefix(OUTSIDE).strip()
        parts.append(f"{len(unchecked)} {OUTSIDE}: {shown} {first}".rstrip())
    if valid:
        parts.append(f"{len(valid)} hold for every value of their variables (facts of arithmetic)")
    return "; ".join(parts)
