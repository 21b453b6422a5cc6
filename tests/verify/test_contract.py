"""load_contract: hostile YAML, field-path errors, the typed model, and eval_expr."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core.errors import ContractError
from verify.contract import (
    MAX_BYTES,
    eval_expr,
    expr_names,
    load_contract,
    parse_yaml,
)
from verify.model import Launch, LeanRef, Param, Tolerance

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "contracts"
CLEAN = (FIX / "clean.yaml").read_bytes()


def _err(data: bytes) -> str:
    with pytest.raises(ContractError) as ei:
        load_contract(data)
    return str(ei.value)


def _mutate(old: str, new: str) -> bytes:
    text = CLEAN.decode()
    assert text.count(old) == 1, old
    return text.replace(old, new).encode()


# --- hostile YAML -----------------------------------------------------------------------------


def test_syntax_error_names_the_line() -> None:
    msg = _err(b"metadata:\n  version: '1'\n  description: [unclosed\n")
    assert msg.startswith("contract: line 4, column 1: YAML syntax error:"), msg


def test_billion_laughs_is_refused_at_the_first_anchor() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    msg = _err("\n".join(lines).encode())
    assert msg == "contract: line 1, column 5: YAML anchors (&a0) are not allowed"


def test_alias_without_anchor_is_refused() -> None:
    # An alias to an undefined anchor is still refused as an alias, never resolved.
    assert "YAML aliases (*name) are not allowed" in _err(b"metadata: *nothing\n")


def test_ten_megabyte_document_is_refused_before_parsing() -> None:
    data = b"metadata: {description: '" + b"x" * (10 << 20) + b"'}\n"
    assert _err(data) == f"contract: {len(data)} bytes is over the {MAX_BYTES}-byte limit"


def test_deep_flow_nesting_is_refused() -> None:
    msg = _err(b"[" * 5000 + b"]" * 5000)
    assert msg == "contract: line 1, column 33: nesting deeper than 32 levels"


def test_deep_block_nesting_is_refused() -> None:
    text = "".join("  " * i + "k:\n" for i in range(40)) + "  " * 40 + "v\n"
    assert _err(text.encode()).endswith("nesting deeper than 32 levels")


def test_too_many_nodes_is_refused() -> None:
    data = b"metadata: {}\nbig: [" + b"0," * 20_000 + b"0]\n"
    assert len(data) < MAX_BYTES
    assert "more than 10000 YAML nodes" in _err(data)


def test_duplicate_keys_are_refused_with_line() -> None:
    msg = _err(b"metadata: {version: '1'}\nequations: {}\nmetadata: {}\n")
    assert msg == "contract: line 3, column 1: duplicate key 'metadata'"


def test_duplicate_nested_key_is_refused() -> None:
    msg = _err(b"metadata:\n  version: '1'\n  version: '2'\n")
    assert msg == "contract: line 3, column 3: duplicate key 'version'"


def test_non_utf8_is_refused() -> None:
    assert _err(b'metadata: {description: "caf\xe9"}\n') == (
        "contract: not UTF-8 (bad byte at offset 28)"
    )
    assert _err("metadata: {}".encode("utf-16")).startswith("contract: not UTF-8")


def test_control_characters_are_refused() -> None:
    assert _err(b"\x01metadata: {}\n") == (
        "contract: character U+0001 at offset 0 is not allowed in YAML"
    )
    assert _err(b'metadata: {description: "a\x1bb"}\n') == (
        "contract: character U+001B at offset 26 is not allowed in YAML"
    )


def test_nul_is_refused() -> None:
    assert _err(b"metadata: {}\x00\n") == "contract: contains a NUL character"


@pytest.mark.parametrize(
    "doc, tag",
    [
        (b"!!python/object/apply:os.system ['touch /tmp/pwned']\n", "python/object/apply"),
        (b"metadata: !!python/object:builtins.dict {}\n", "python/object:builtins.dict"),
        (b"metadata: !!binary aGVsbG8=\n", "binary"),
        (b"metadata: !!set {a: null}\n", "set"),
        (b"metadata: !custom 1\n", "!custom"),
        (b"metadata: !!timestamp 2026-01-01\n", "timestamp"),
    ],
)
def test_yaml_tags_are_refused(doc: bytes, tag: str) -> None:
    msg = _err(doc)
    assert "YAML tag" in msg and tag in msg and "is not allowed" in msg


def test_merge_keys_are_refused() -> None:
    assert "merge keys (<<) are not allowed" in _err(b"metadata:\n  <<: {a: 1}\n")


@pytest.mark.parametrize(
    "doc, msg",
    [
        (b"1: a\n", "contract: line 1, column 1: mapping key 1 is not a string"),
        (b"true: a\n", "contract: line 1, column 1: mapping key True is not a string"),
        (b"? [a]\n: b\n", "contract: line 1, column 3: mapping key is a sequence, not a string"),
        (b"", "contract: the YAML document is empty"),
        (b"- 1\n", "contract: the document must be a mapping, got a list"),
        (
            b"a: 1\n---\nb: 2\n",
            "contract: line 2, column 1: YAML syntax error: but found another document",
        ),
    ],
)
def test_structural_refusals(doc: bytes, msg: str) -> None:
    assert _err(doc) == msg


def test_dates_stay_strings_and_yaml12_floats_are_numbers() -> None:
    doc = parse_yaml(b"a: 2026-02-18\nb: [1e-5, 1.5e38, -1.5e38, 2.0, 7, 1_000]\n")
    assert doc == {"a": "2026-02-18", "b": [1e-5, 1.5e38, -1.5e38, 2.0, 7, 1000]}


# --- what is not a contract ---------------------------------------------------------------------


def test_binding_registry_is_refused() -> None:
    assert _err(b"version: '1.0.0'\nbindings: []\n") == (
        "not a contract: this is a provable-contracts binding registry (top-level 'bindings'), "
        "not a kernel contract (no 'metadata')"
    )


def test_performance_contract_is_refused() -> None:
    assert _err(b"kind: PerformanceContract\nkernel: gemm\n") == (
        "not a contract: kind 'PerformanceContract' is not supported; expected a "
        "provable-contracts contract with a 'metadata' mapping"
    )


def test_missing_metadata() -> None:
    assert _err(b"equations: {}\n") == (
        "metadata: missing (a contract starts with a 'metadata' mapping)"
    )


# --- field paths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old, new, msg",
    [
        (
            'grid: ["ceil_div(n, 256)", 1, 1]',
            'grid: ["n ** 2", 1, 1]',
            "kernel.launch.grid[0]: expected an expression: expression 'n ** 2': unexpected '*'",
        ),
        (
            'grid: ["ceil_div(n, 256)", 1, 1]',
            "grid: [[n], 1, 1]",
            "kernel.launch.grid[0]: expected an expression, got a list",
        ),
        (
            "block: [256, 1, 1]",
            "block: [256, 1]",
            "kernel.launch.block: expected 3 expressions, got 2",
        ),
        (
            'grid: ["ceil_div(n, 256)", 1, 1]',
            "grid: [\"__import__('os')\", 1, 1]",
            "kernel.launch.grid[0]: expected an expression: expression \"__import__('os')\": "
            "unexpected \"'os')\"",
        ),
        (
            "{name: n, scalar: u32, value: n}",
            "{name: n, scalar: u32, ptr: u32, value: n}",
            "kernel.params[3]: needs exactly one of 'ptr' or 'scalar'",
        ),
        (
            "{name: n, scalar: u32, value: n}",
            "{name: n, scalar: u32}",
            "kernel.params[3].value: missing (a scalar needs a value expression)",
        ),
        (
            "{name: a, ptr: f32, intent: in, shape: [n]}",
            "{name: a, ptr: f128, shape: [n]}",
            "kernel.params[0].ptr: 'f128' is not one of f16, bf16, f32, f64, s32, u32, s64, u64, "
            "u8, s8",
        ),
        (
            "{name: a, ptr: f32, intent: in, shape: [n]}",
            "{name: a, ptr: f32, intent: rw, shape: [n]}",
            "kernel.params[0].intent: 'rw' is not one of in, out, inout",
        ),
        (
            "{name: b, ptr: f32, intent: in, shape: [n]}",
            "{name: a, ptr: f32, shape: [n]}",
            "kernel.params[1].name: duplicate parameter 'a'",
        ),
        (
            "{name: a, ptr: f32, intent: in, shape: [n]}",
            "{name: 1a, ptr: f32, shape: [n]}",
            "kernel.params[0].name: '1a' is not a name ([A-Za-z_][A-Za-z0-9_]*)",
        ),
        ("  target: sm_86\n", "  target: sm86\n", "kernel.target: 'sm86' is not an sm_NN target"),
        (
            "  target: sm_86\n",
            "  tagret: sm_86\n",
            "kernel.tagret: unknown field (allowed: name, version, entry, target, ptx, source, "
            "build, futhark, futhark_oracle, reference, params, launch, resources, size_domain, "
            "size_constraints, waivers, constants, preconditions)",
        ),
        (
            "build: [nvcc, -arch=sm_86, -ptx, -o, vadd.ptx, vadd.cu]",
            "build: [sh, -c, 'rm -rf /']",
            "kernel.build[0]: the build command must start with 'nvcc' or 'triton'",
        ),
        (
            '  version: "1.0.0"\n  entry',
            "  entry",
            "kernel.version: missing (recorded in the ledger entry)",
        ),
        (
            "spills: forbid",
            "spills: maybe",
            "kernel.resources.spills: 'maybe' is not forbid or allow",
        ),
        (
            "max_registers: 32",
            "max_registers: 300",
            "kernel.resources.max_registers: 300 is out of range [1, 255]",
        ),
        (
            "    tolerance: {ulp: 0}\n",
            "",
            "falsification_tests[0]: has sizes, properties but no tolerance (an executable test "
            "needs sizes, tolerance and properties)",
        ),
        (
            "tolerance: {ulp: 0}",
            "tolerance: {ulp: -1}",
            "falsification_tests[0].tolerance.ulp: must not be negative",
        ),
        (
            "tolerance: {ulp: 0}",
            "tolerance: {}",
            "falsification_tests[0].tolerance: needs ulp, rel or abs",
        ),
        (
            "tolerance: {ulp: 0}",
            "tolerance: {ulps: 0}",
            "falsification_tests[0].tolerance.ulps: unknown field (allowed: ulp, rel, abs, why)",
        ),
        (
            "{n: 1000}",
            "{n: -5}",
            "falsification_tests[0].sizes[1].n: -5 is out of range [0, 1099511627776]",
        ),
        (
            "{n: 1000}",
            "{n: true}",
            "falsification_tests[0].sizes[1].n: expected an integer, got a boolean",
        ),
        (
            "inputs: {low: -100.0, high: 100.0}",
            "inputs: {low: 5, high: 1}",
            "falsification_tests[0].inputs: low 5.0 is above high 1.0",
        ),
        (
            "inputs: {low: -100.0, high: 100.0}",
            "inputs: {low: .nan, high: 1}",
            "falsification_tests[0].inputs.low: expected a finite number",
        ),
        ("id: FALSIFY-CLEAN-001", "ident: FALSIFY-CLEAN-001", "falsification_tests[0].id: missing"),
        ("    theorem: Clean.index_injective\n", "", "certificate[0].theorem: missing"),
        (
            "lean: {theorem: Clean.index_injective, module: Clean, status: proved}",
            "lean: {module: Clean}",
            "proof_obligations[0].lean.theorem: missing",
        ),
        (
            '  version: "1.0.0"\n  description',
            "  version: [1]\n  description",
            "metadata.version: expected a string, got a list",
        ),
    ],
)
def test_errors_name_the_field(old: str, new: str, msg: str) -> None:
    assert _err(_mutate(old, new)) == msg


def test_messages_are_one_bounded_line() -> None:
    msg = _err(
        _mutate(
            "{name: a, ptr: f32, intent: in, shape: [n]}",
            "{name: a, ptr: '" + "f" * 5000 + "', shape: [n]}",
        )
    )
    assert len(msg) == 400 and msg.startswith("kernel.params[0].ptr: 'ffff") and msg.endswith("...")
    msg = _err(b'metadata: {}\nkernel: {"a\\nb\\tc": 1, name: k, version: "1"}\n')
    assert msg.startswith("kernel.a\\x0ab\\x09c: unknown field")
    assert "\n" not in msg


def test_kernel_as_string_is_refused() -> None:
    assert _err(b"metadata: {}\nkernel: gemm_cta64\n") == (
        "kernel: expected a mapping (the executable-kernel extension), got a string"
    )


def test_section_types() -> None:
    assert _err(b"metadata: {}\ncertificate: {}\n") == "certificate: expected a list, got a mapping"
    assert _err(b"metadata: []\n") == "metadata: expected a mapping, got a list"
    assert _err(b"metadata: {}\nequations: [a]\n") == "equations: expected a mapping, got a list"
    assert _err(b"metadata: {}\nfalsification_tests: [1]\n") == (
        "falsification_tests[0]: expected a mapping, got an integer"
    )


# --- the typed model ----------------------------------------------------------------------------


def test_clean_contract_model() -> None:
    c = load_contract(CLEAN)
    assert (c.name, c.version, c.description) == (
        "clean_vadd",
        "1.0.0",
        "f32 vector add (test fixture)",
    )
    assert c.equations == ("vector_add",)
    k = c.kernel
    assert k is not None
    assert (k.entry, k.ptx, k.source, k.futhark, k.target) == (
        "vector_add",
        "vadd.ptx",
        "vadd.cu",
        "vadd.fut",
        "sm_86",
    )
    assert k.build == ("nvcc", "-arch=sm_86", "-ptx", "-o", "vadd.ptx", "vadd.cu")
    assert k.reference == "vector_add_f32"
    assert k.params[0] == Param("a", "ptr", "f32", intent="in", shape=("n",))
    assert k.params[2] == Param("c", "ptr", "f32", intent="out", shape=("n",))
    assert k.params[3] == Param("n", "scalar", "u32", value="n")
    assert k.launch == Launch(("ceil_div(n, 256)", "1", "1"), ("256", "1", "1"), "0")
    assert (k.max_registers, k.max_shared_bytes, k.allow_spills) == (32, 0, False)
    (t,) = c.falsification
    assert t.executable and t.id == "FALSIFY-CLEAN-001"
    assert t.sizes == ({"n": 1}, {"n": 1000}, {"n": 4099})
    assert t.tolerance == Tolerance(ulp=0.0)
    assert (t.seed, t.input_low, t.input_high) == (7, -100.0, 100.0)
    assert t.properties == ("reference", "coverage", "bounds")
    assert [(cl.obligation, cl.property) for cl in c.claims] == [
        ("PO1", "coverage"),
        ("PO2", "bounds"),
        ("PO5", "resources"),
        ("PO8", "reference"),
    ]
    assert c.lean_refs[:2] == (
        LeanRef("Clean.index_injective", "proved", "proof_obligations[0].lean"),
        LeanRef("Clean.guard_in_bounds", "proved", "proof_obligations[1].lean"),
    )
    assert [(r.theorem, r.status) for r in c.lean_refs[2:]] == [
        ("Clean.index_injective", "claimed"),
        ("Clean.guard_in_bounds", "claimed"),
        ("Clean.resources_fit", "claimed"),
        ("Clean.work_bounded", "claimed"),
    ]


def test_prose_tests_load_as_not_executable_and_equation_theorems_are_collected() -> None:
    doc = b"""
metadata: {version: 1.0, description: d}
equations:
  e: {formula: "y = x", lean_theorem: Theorems.E}
falsification_tests:
  - {id: FALSIFY-X-001, rule: r, prediction: p, test: t, if_fails: f}
"""
    c = load_contract(doc)
    assert c.kernel is None and c.name == "e" and c.version == "1.0"
    (t,) = c.falsification
    assert not t.executable and t.sizes == () and t.properties == ()
    assert c.lean_refs == (LeanRef("Theorems.E", "claimed", "equations.e.lean_theorem"),)


def test_tolerance_rel_abs_and_defaults() -> None:
    c = load_contract(_mutate("tolerance: {ulp: 0}", "tolerance: {rel: 1e-5, abs: 1e-6}"))
    assert c.falsification[0].tolerance == Tolerance(rel=1e-5, abs=1e-6)
    c = load_contract(_mutate("  target: sm_86\n", "").replace(b"    seed: 7\n", b""))
    assert c.kernel is not None and c.kernel.target == "sm_86"
    assert c.falsification[0].seed == 0


# --- eval_expr ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, sizes, want",
    [
        ("ceil_div(n, 256)", {"n": 1}, 1),
        ("ceil_div(n, 256)", {"n": 256}, 1),
        ("ceil_div(n, 256)", {"n": 257}, 2),
        ("ceil_div(n, 256)", {"n": 0}, 0),
        ("1 + 2 * 3", {}, 7),
        ("(1 + 2) * 3", {}, 9),
        ("10 - 4 - 3", {}, 3),
        ("17 // 5 % 2", {}, 1),
        ("m * k + min(m, k) - max(m, 2)", {"m": 3, "k": 4}, 12 + 3 - 3),
        ("-n + 5", {"n": 2}, 3),
        ("  42  ", {}, 42),
        ("max(ceil_div(m*n, 32), 1)", {"m": 5, "n": 7}, 2),
    ],
)
def test_eval_expr(expr: str, sizes: dict[str, int], want: int) -> None:
    assert eval_expr(expr, sizes) == want


@pytest.mark.parametrize(
    "expr, msg",
    [
        ("m + 1", "expression 'm + 1': size 'm' is not bound"),
        ("n // 0", "expression 'n // 0': division by zero"),
        ("n % (n - n)", "expression 'n % (n - n)': division by zero"),
        ("n / 2", "expression 'n / 2': unexpected '/ 2'"),
        ("n ** 2", "expression 'n ** 2': unexpected '*'"),
        ("pow(n, 2)", "expression 'pow(n, 2)': unexpected '('"),
        ("min(n)", "expression 'min(n)': expected ',', got ')'"),
        ("(n", "expression '(n': expected ')', got end of expression"),
        ("", "expression is empty"),
        ("n +", "expression 'n +': ends too early"),
        ("9" * 30 + " * " + "9" * 30, "value out of range (over 2**63)"),
        ("x" * 300, "expression longer than 256 characters"),
        ("(" * 40 + "n" + ")" * 40, "nested deeper than 32"),
    ],
)
def test_eval_expr_errors(expr: str, msg: str) -> None:
    with pytest.raises(ContractError) as ei:
        eval_expr(expr, {"n": 4})
    assert msg in str(ei.value)


def test_expr_names() -> None:
    assert expr_names("ceil_div(n * m, k) + 1") == {"n", "m", "k"}
    assert expr_names("256") == frozenset()
