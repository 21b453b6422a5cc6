"""Words for an auditor on the entry page (issue 34): what each proof obligation PO1-PO8 means
(SPEC 8; ``verify.model.OBLIGATION_TITLES`` and ``verify.certificate`` say the same for the
verifier, which the server does not import), and why a verdict is ``partial``, as a short list.
"""

from __future__ import annotations

from collections.abc import Sequence

# what each obligation asks of the kernel, and what backs it, for a reader who is no GPU expert
OBLIGATION_WORDS = {
    "PO1": "Coverage: every output element is written, and written exactly once (no thread "
           "skips one, no two threads write the same one).",
    "PO2": "Memory bounds: every read and write of global and shared memory stays inside its "
           "buffer.",
    "PO3": "Barriers: every barrier (__syncthreads) is reached by the whole block, never inside "
           "a branch only some threads take.",
    "PO4": "Rounding: floating-point results stay within the stated error bound (ulps or "
           "relative error) of the reference.",
    "PO5": "Resources: registers, shared memory and spills, as ptxas reports them, stay within "
           "the contract's budget.",
    "PO6": "Initialisation: no thread reads shared memory before something was written there.",
    "PO7": "Race freedom: no two threads touch the same shared-memory word between two barriers "
           "with at least one of them writing.",
    "PO8": "Agreement: the kernel finishes and its outputs agree with the reference "
           "implementation.",
}

SHORT = {"PO1": "coverage", "PO2": "memory bounds", "PO3": "barriers", "PO4": "rounding",
         "PO5": "resources", "PO6": "initialisation", "PO7": "race freedom", "PO8": "agreement"}

BACKING = ("Each claimed obligation is backed twice: by a Lean theorem (scanned, then checked by "
           "the Lean kernel) and by dynamic evidence (falsification tests on the PTX, or ptxas "
           "for resources). 'ok' means both legs held at seal time; 'partial' means a leg could "
           "not run there (a skipped check); 'failed' means a leg failed.")

MAX_REASON = 160  # characters of a check's detail a reason shows (the checks table has it all)


def words(obligation: str) -> str:
    return OBLIGATION_WORDS.get(obligation, "not one of PO1..PO8")


def _first_clause(detail: str) -> str:
    text = " ".join(detail.split())
    for stop in ("; ", ". "):
        if stop in text:
            text = text.split(stop, 1)[0]
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def partial_reasons(checks: Sequence[dict[str, str]],
                    obligations: Sequence[dict[str, str]]) -> list[str]:
    """Why the verdict is not ``verified`` although nothing failed: each skipped check (its id
    and the first clause of its detail; not the certificate, whose detail the obligations below
    it sum up) and each claimed obligation not fully backed."""
    out = [f"{c['id']} skipped: {_first_clause(c['detail'])}"
           for c in checks if c.get("status") == "skipped" and c.get("id") != "certificate"]
    for o in obligations:
        if o.get("status") in ("partial", "not judged"):
            what = SHORT.get(o["obligation"], "unknown obligation")
            out.append(f"{o['obligation']} ({what}) {o['status']}: not every leg of its evidence "
                       "ran at seal time")
    return out
