"""Property tests: load_contract, lint and eval_expr never raise anything but ContractError.

Example counts are fixed here and recorded in contracts/README.md ("Robustness").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.errors import ContractError
from verify.contract import eval_expr, load_contract, parse_yaml
from verify.contract_lint import lint_contract, schema_errors
from verify.model import Contract

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "contracts"
CLEAN = (FIX / "clean.yaml").read_bytes()
FILES = {n: (FIX / n).read_bytes() for n in ("vadd.ptx", "vadd.cu", "vadd.fut", "Clean.lean")}

RANDOM_BYTES = 400
MUTATIONS = 600
RANDOM_DOCS = 400
EXPRESSIONS = 600


def _fuzz(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def _exercise(data: bytes) -> Contract | None:
    """Load; when it loads, lint it and schema-check it too. Only ContractError may escape."""
    try:
        c = load_contract(data)
    except ContractError as e:
        assert str(e) and "\n" not in str(e)  # one clear line
        return None
    lint_contract(c, {**FILES, "contract.yaml": data})
    assert isinstance(schema_errors(parse_yaml(data)), list)
    return c


@_fuzz(RANDOM_BYTES)
@given(st.binary(max_size=2048))
def test_random_bytes(data: bytes) -> None:
    _exercise(data)


_YAML_BYTES = [*b":-[]{}&*!|>'\"#%@`,? \n\t0123456789.e_", 0xC3, 0xFF, 0x00]


@_fuzz(MUTATIONS)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["flip", "insert", "delete", "yaml"]),
            st.integers(min_value=0, max_value=len(CLEAN) - 1),
            st.integers(min_value=0, max_value=255),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_mutations_of_a_valid_contract(ops: list[tuple[str, int, int]]) -> None:
    data = bytearray(CLEAN)
    for op, pos, val in ops:
        pos %= max(len(data), 1)
        if op == "flip":
            data[pos] ^= 1 << (val % 8)
        elif op == "insert":
            data.insert(pos, val)
        elif op == "delete" and data:
            del data[pos]
        else:
            data[pos] = _YAML_BYTES[val % len(_YAML_BYTES)]
    _exercise(bytes(data))


_KEYS = [
    "metadata",
    "version",
    "description",
    "equations",
    "formula",
    "lean_theorem",
    "proof_obligations",
    "property",
    "lean",
    "theorem",
    "status",
    "falsification_tests",
    "id",
    "sizes",
    "tolerance",
    "ulp",
    "rel",
    "abs",
    "why",
    "size_domain",
    "size_constraints",
    "min",
    "max",
    "multiple_of",
    "properties",
    "seed",
    "inputs",
    "low",
    "high",
    "certificate",
    "obligation",
    "kernel",
    "name",
    "entry",
    "ptx",
    "params",
    "ptr",
    "scalar",
    "shape",
    "value",
    "intent",
    "launch",
    "grid",
    "block",
    "shared_bytes",
    "resources",
    "max_registers",
    "spills",
    "build",
    "source",
    "futhark",
    "reference",
    "target",
    "n",
]
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(
        [
            "n",
            "ceil_div(n, 256)",
            "f32",
            "u32",
            "in",
            "out",
            "PO1",
            "coverage",
            "FALSIFY-X-1",
            "proved",
            "sorry",
            "nvcc",
            "sm_86",
            "vadd.ptx",
            "",
        ]
    )
    | st.text(max_size=12)
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=30,
)


@_fuzz(RANDOM_DOCS)
@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=8), _VALUES)
def test_random_structured_documents(doc: dict[str, Any], metadata: Any) -> None:
    doc.setdefault("metadata", metadata)
    _exercise(yaml.safe_dump(doc, allow_unicode=True).encode())


_EXPR_TOKENS = [
    "n",
    "m",
    "k",
    "0",
    "1",
    "256",
    "+",
    "-",
    "*",
    "//",
    "%",
    "(",
    ")",
    ",",
    "ceil_div(",
    "min(",
    "max(",
    " ",
    "/",
    "**",
    "x",
    "9999999999",
]


@_fuzz(EXPRESSIONS)
@given(
    st.lists(st.sampled_from(_EXPR_TOKENS), max_size=30),
    st.dictionaries(st.sampled_from(["n", "m", "k"]), st.integers(-(10**6), 10**6)),
)
def test_eval_expr_never_crashes(tokens: list[str], sizes: dict[str, int]) -> None:
    try:
        v = eval_expr("".join(tokens), sizes)
    except ContractError:
        return
    assert isinstance(v, int)
