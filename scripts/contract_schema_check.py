"""Generate ``verify/_contract_schema_check.py``, the fast accept path of ``contract.schema``.

fastjsonschema's ``compile_to_code`` turns ``verify/contract_schema.json`` (JSON Schema draft-04)
into plain Python once, here, so that no ``ledger verify`` compiles the schema at start-up; the
module is checked in, and ``tests/verify/test_contract_lint.py`` fails when regenerating it does
not give the same text (the schema changed, or fastjsonschema's version did: pyproject pins the
minor version). The generated function stops at the first error; ``verify.contract_lint``
answers with it only "valid", and lets jsonschema list every error of a rejected document.

    .venv/bin/python scripts/contract_schema_check.py          # rewrite the module
    .venv/bin/python scripts/contract_schema_check.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "verify" / "contract_schema.json"
TARGET = ROOT / "verify" / "_contract_schema_check.py"

HEADER = '''\
"""GENERATED FILE, do not edit: ``verify/contract_schema.json`` compiled by fastjsonschema {version}
(``compile_to_code``, no defaults, no formats). Regenerate with
``.venv/bin/python scripts/contract_schema_check.py``; a test checks that doing so gives this text.
``validate`` (fastjsonschema's ``{entry}``) returns the document or raises
``fastjsonschema.JsonSchemaValueException`` at the first error (``verify.contract_lint``).
"""
# ruff: noqa
# mypy: ignore-errors

'''


def generate() -> str:
    """The module's text: the header, then fastjsonschema's code for the schema."""
    import fastjsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    code = fastjsonschema.compile_to_code(
        schema, use_default=False, use_formats=False, detailed_exceptions=False
    )
    entry = "validate_" + "".join(c if c.isalnum() else "_" for c in schema["id"])
    if f"def {entry}(" not in code:
        raise SystemExit(f"fastjsonschema named its entry point otherwise than {entry}")
    head = HEADER.format(version=fastjsonschema.VERSION, entry=entry)
    return head + code.rstrip("\n") + f"\n\n\nvalidate = {entry}\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the module is out of date")
    args = ap.parse_args()
    text = generate()
    if args.check:
        same = TARGET.is_file() and TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET.relative_to(ROOT)}: {'up to date' if same else 'OUT OF DATE'}")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
