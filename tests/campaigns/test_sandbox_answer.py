"""Issue 33 item 3: the host side of the sandbox reads no more of a bundle reference's answer
than the contract allows for the chosen sizes (``verify.sandbox.answer_budget``).

A hostile reference answers a 4-element output with 10^9 bytes: straight onto the result stream
(a forged record, streamed in 1 MiB writes so the sandboxed child itself stays small) or as a
returned array. The verifier is run in a subprocess (a real sandbox, a real child) and reports
its own peak resident memory (``ru_maxrss`` of RUSAGE_SELF: the sandboxed child is not counted);
the hostile answer must be refused within 2x of the peak of a correct answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from verify import sandbox
from verify.oracle import OutputSpec
from verify.sandbox import Case, Limits, answer_budget, run_reference

BWRAP, WHY = sandbox.sandbox_status()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason=WHY)
ROOT = Path(__file__).resolve().parents[2]

GOOD = "return {'y': inputs['alpha'] * inputs['x'] + 1}"
# a forged record claiming 10^9 bytes of payload, written straight to the result stream
STREAM = """
import struct
head = b'A' + struct.pack('<IH', 0, 1) + b'y' + struct.pack('<Q', 10**9)
chunk = bytes(1 << 20)
for fd in range(3, 10):
    try:
        os.write(fd, head)
    except OSError:
        continue
    try:
        for _ in range(10**9 // len(chunk)):
            os.write(fd, chunk)
    except OSError:
        pass
os._exit(0)
"""
# a returned array of 2 * 10^8 bytes for a 4-element output (the runner's own path)
ARRAY = "return {'y': np.ones(2 * 10**8, np.uint8)}"

SCRIPT = """
import json, resource, sys
import numpy as np
from verify.oracle import OutputSpec
from verify.sandbox import Case, Limits, run_reference
body = sys.argv[1]
src = "import os\\nimport numpy as np\\ndef ref(inputs, sizes):\\n" + "".join(
    "    " + ln + "\\n" for ln in body.splitlines())
case = Case({"x": np.arange(4, dtype=np.float32), "alpha": np.array(2.0, np.float32)},
            {"n": 4}, [OutputSpec("y", "f32", (4,))])
lim = Limits(wall_seconds=120, cpu_seconds=60, mem_bytes=3 << 30)
res = run_reference({"ref.py": src.encode()}, "ref.py", "ref", [case], limits=lim)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, this process only
print(json.dumps({"error": res.cases[0].error, "peak_kib": peak}))
"""


def _verifier(body: str) -> tuple[str, int]:
    """Run the verifier's side in a fresh process: (the case's error, its peak RSS in KiB)."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, textwrap.dedent(body).strip()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return str(out["error"]), int(out["peak_kib"])


@needs_bwrap
@pytest.mark.parametrize("hostile", [STREAM, ARRAY], ids=["forged-stream", "returned-array"])
def test_a_huge_answer_is_refused_with_the_memory_of_a_correct_one(hostile: str) -> None:
    error, good_peak = _verifier(GOOD)
    assert error == ""
    error, bad_peak = _verifier(hostile)
    budget, _ = answer_budget(
        [Case({}, {"n": 4}, [OutputSpec("y", "f32", (4,))])], Limits().result_bytes
    )
    assert error == (
        f"returned more than {budget} bytes, the most the contract's outputs allow for 1 case(s), "
        "and was killed"
    )
    assert bad_peak < 2 * good_peak, (bad_peak, good_peak)
    print(f"peak RSS: correct {good_peak} KiB, hostile {bad_peak} KiB")


def test_the_budget_follows_the_contract_sizes() -> None:
    one = [Case({}, {"n": 4}, [OutputSpec("y", "f32", (4,))])]
    big = [Case({}, {"n": 10**6}, [OutputSpec("y", "f32", (10**6,)), OutputSpec("z", "u8", (3,))])]
    small, why = answer_budget(one, 1 << 30)
    assert 32 < small < 16 << 10 and "contract" in why
    large, _ = answer_budget(big, 1 << 30)
    assert 8 * (10**6 + 3) < large < 8 * (10**6 + 3) + (16 << 10)
    assert answer_budget(big * 200, 1 << 30) == (1 << 30, " and was killed")


@needs_bwrap
def test_a_float64_answer_for_an_f32_output_still_fits() -> None:
    # a bundle reference may compute in float64 and not cast: 8 bytes an element is allowed
    src = b"import numpy as np\ndef ref(inputs, sizes):\n    return {'y': np.arange(5000.0)}\n"
    case = Case({"x": np.zeros(5000, np.float32)}, {"n": 5000}, [OutputSpec("y", "f32", (5000,))])
    lim = Limits(wall_seconds=60, cpu_seconds=30, mem_bytes=2 << 30)
    res = run_reference({"ref.py": src}, "ref.py", "ref", [case], limits=lim)
    assert res.cases[0].error == ""
    np.testing.assert_array_equal(res.cases[0].outputs["y"], np.arange(5000.0))


@needs_bwrap
def test_an_answer_wider_than_64_bits_is_refused() -> None:
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("longdouble is 64 bits on this platform")
    src = b"import numpy as np\ndef ref(inputs, sizes):\n    return {'y': np.zeros(4, 'g')}\n"
    case = Case({"x": np.zeros(4, np.float32)}, {"n": 4}, [OutputSpec("y", "f32", (4,))])
    lim = Limits(wall_seconds=60, cpu_seconds=30, mem_bytes=2 << 30)
    res = run_reference({"ref.py": src}, "ref.py", "ref", [case], limits=lim)
    assert "wider than 64 bits" in res.cases[0].error
