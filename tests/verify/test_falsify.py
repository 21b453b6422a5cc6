"""Engine selection and the CuPy path of verify.falsify / verify.gpu, by fault injection.

No CUDA device (and no CuPy) exists on the machines that run these tests, so a fake ``cupy``
module is put into ``sys.modules`` (monkeypatch). Its runtime answers the device queries as the
test wants; its kernels run the real PTX through the real interpreter on the host arrays, so the
marshalling of ``verify.gpu.CupyEngine`` (argument order, scalar dtypes, copy-back of outputs) is
exercised end to end against the bundled vector_add kernel.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger.core.bundle import Bundle
from verify import falsify, gpu
from verify.context import Options
from verify.contract import load_contract
from verify.model import Contract

ROOT = Path(__file__).resolve().parents[2]
VADD = ROOT / "bundles" / "vector_add"


def vadd() -> tuple[Contract, bytes]:
    bundle = Bundle.from_dir(VADD)
    contract = load_contract(bundle.file("contract.yaml"))
    assert contract.kernel is not None
    return contract, bundle.file(contract.kernel.ptx)


class FakeDeviceArray:
    def __init__(self, host: np.ndarray) -> None:
        self.host = host.copy()


class FakeKernel:
    """Runs the PTX with the interpreter (``mode="run"``), or misbehaves as told."""

    def __init__(self, ptx: bytes, entry: str, mode: str) -> None:
        self.ptx, self.entry, self.mode = ptx, entry, mode
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, grid: Any, block: Any, args: tuple[Any, ...], shared_mem: int = 0) -> None:
        self.calls.append((grid, block, args, shared_mem))
        if self.mode == "crash":
            raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
        if self.mode == "lazy":  # writes nothing: outputs keep the poison
            return
        from verify import ptxsim

        sim_args: list[Any] = []
        for i, a in enumerate(args):
            if isinstance(a, FakeDeviceArray):
                sim_args.append(ptxsim.Buffer(data=a.host, intent="inout", name=f"arg{i}"))
            else:  # a numpy scalar of the parameter's dtype
                assert isinstance(a, np.generic)
                kind = {"f": ".f", "u": ".u", "i": ".s"}[a.dtype.kind]
                sim_args.append(ptxsim.Scalar(value=a.item(), ptx_type=f"{kind}{8 * a.itemsize}"))
        ptxsim.launch(
            ptxsim.load_module(self.ptx),
            self.entry,
            grid,
            block,
            sim_args,
            dynamic_shared=shared_mem,
            run_on=True,  # a device finishes the launch whatever the interpreter finds
        )


def fake_cupy(count: int | None, mode: str = "run", load_error: str = "") -> types.ModuleType:
    """A stand-in for the ``cupy`` package: ``count`` devices, or None to fail the query."""
    cp = types.ModuleType("cupy")
    cp.__version__ = "99.0"  # type: ignore[attr-defined]
    runtime = types.SimpleNamespace()

    def get_count() -> int:
        if count is None:
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return count

    runtime.getDeviceCount = get_count
    runtime.getDeviceProperties = lambda i: {"name": b"Fake GPU 9000"}
    runtime.deviceSynchronize = lambda: None
    cp.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]

    class RawModule:
        def __init__(self, path: str) -> None:
            if load_error:
                raise RuntimeError(load_error)
            self.ptx = Path(path).read_bytes()

        def get_function(self, entry: str) -> FakeKernel:
            return FakeKernel(self.ptx, entry, mode)

    cp.RawModule = RawModule  # type: ignore[attr-defined]
    cp.asarray = FakeDeviceArray  # type: ignore[attr-defined]
    cp.asnumpy = lambda d: d.host  # type: ignore[attr-defined]
    return cp


def test_no_cupy_falls_back_to_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # "import cupy" raises ImportError
    engine = falsify.choose_engine(Options())
    assert isinstance(engine, falsify.InterpreterEngine)
    assert engine.observes_findings
    assert engine.description.startswith("interpreter ptxsim ")
    assert engine.description.endswith("(CPU; CuPy is not installed)")


def test_cupy_without_device_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(None))
    engine = falsify.choose_engine(Options())
    assert isinstance(engine, falsify.InterpreterEngine)
    assert "no CUDA device (cudaErrorNoDevice" in engine.description
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(0))
    assert falsify.choose_engine(Options()).description.endswith("(CPU; no CUDA device)")


def test_use_gpu_false_never_touches_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1))
    engine = falsify.choose_engine(Options(use_gpu=False, interp_step_limit=1234))
    assert isinstance(engine, falsify.InterpreterEngine)
    assert engine.step_limit == 1234 and "GPU use disabled" in engine.description


def test_device_present_chooses_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(2))
    engine = falsify.choose_engine(Options())
    assert isinstance(engine, gpu.CupyEngine)
    assert engine.name == "cupy" and not engine.observes_findings
    assert engine.description == "cupy 99.0 on Fake GPU 9000 (GPU)"


def test_cupy_engine_passes_vector_add_and_cross_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1))
    contract, ptx = vadd()
    assert contract.kernel is not None
    engine, why = gpu.probe()
    assert engine is not None and why == ""
    test = contract.falsification[0]
    check = falsify.run_test(contract.kernel, test, ptx, 7, engine)
    assert check.status == "passed", check.detail
    assert check.detail.startswith("cupy 99.0 on Fake GPU 9000 (GPU): n=1,256,1000,4099; seed 7;")
    assert "max 0 ulp; coverage from poison; interpreter ptxsim" in check.detail
    assert ": n=1: no race/bounds/barrier/initialisation/step-limit findings" in check.detail
    assert (check.tool, check.version) == ("cupy", "cupy 99.0")


def test_cupy_engine_marshals_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1))
    contract, ptx = vadd()
    assert contract.kernel is not None
    engine, _ = gpu.probe()
    assert engine is not None
    case = falsify.make_case(
        contract.kernel, contract.falsification[0], {"n": 300}, np.random.default_rng(1)
    )
    out = engine.launch(ptx, "vector_add", case.grid, case.block, case.args, 0)
    assert out.findings == () and out.engine == engine.description
    kern = next(iter(engine._modules.values())).get_function("vector_add")
    assert isinstance(kern, FakeKernel)
    c = case.args[2]
    assert isinstance(c, falsify.BufferArg)
    np.testing.assert_array_equal(c.data, case.inputs["a"] + case.inputs["b"])


def test_cupy_unwritten_output_is_caught_by_poison(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1, mode="lazy"))
    contract, ptx = vadd()
    assert contract.kernel is not None
    engine, _ = gpu.probe()
    assert engine is not None
    check = falsify.run_test(contract.kernel, contract.falsification[0], ptx, 7, engine)
    assert check.status == "failed"
    assert check.detail == (
        "cupy 99.0 on Fake GPU 9000 (GPU): n=1; seed 7: unwritten [coverage/PO1]: c[0] never "
        "written (still 0xFF poison after the launch); 1 of 1 elements unwritten "
        "(oracle trusted:vector_add_f32)"
    )


def test_cupy_device_error_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1, mode="crash"))
    contract, ptx = vadd()
    assert contract.kernel is not None
    engine, _ = gpu.probe()
    assert engine is not None
    check = falsify.run_test(contract.kernel, contract.falsification[0], ptx, 7, engine)
    assert check.status == "failed"
    assert (
        "device_error [bounds/PO2]: the launch of vector_add failed on Fake GPU 9000: "
        "cudaErrorIllegalAddress" in check.detail
    )


def test_cupy_load_failure_is_skipped_not_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    err = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported"
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1, load_error=err))
    contract, ptx = vadd()
    assert contract.kernel is not None
    engine, _ = gpu.probe()
    assert engine is not None
    check = falsify.run_test(contract.kernel, contract.falsification[0], ptx, 7, engine)
    assert check.status == "skipped"
    assert (
        "could not run it: the CUDA driver could not load entry 'vector_add': "
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in check.detail
    )


def test_findings_attached_to_unsupported_ptx_still_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: the interpreter stops on something it cannot model after a finding."""
    from verify import ptxsim

    def stop(*args: Any, **kwargs: Any) -> Any:
        err = ptxsim.UnsupportedPtx("nanosleep at PTX line 50: not modelled")
        err.findings = (
            ptxsim.Finding("race", "race: shared byte 4 ...", 40, (0, 0, 0), (1, 0, 0), 4),
        )
        raise err

    monkeypatch.setattr(ptxsim, "launch", stop)
    contract, ptx = vadd()
    assert contract.kernel is not None
    engine = falsify.InterpreterEngine()
    check = falsify.run_test(contract.kernel, contract.falsification[0], ptx, 7, engine)
    assert check.status == "failed"
    assert check.detail.endswith(
        ": n=1; seed 7: race [race_free/PO7]: shared byte 4 ... (oracle trusted:vector_add_f32)"
    )


def test_cupy_run_is_cross_checked_for_races_by_the_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a "GPU" the racy softmax may give right values; the interpreter run still fails it."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1))
    planted = ROOT / "tests" / "fixtures" / "planted" / "missing_barrier"
    bundle = Bundle.from_dir(planted)
    contract = load_contract(bundle.file("contract.yaml"))
    assert contract.kernel is not None
    engine, _ = gpu.probe()
    assert engine is not None
    test = contract.falsification[0]
    check = falsify.run_test(contract.kernel, test, bundle.file(contract.kernel.ptx), 21, engine)
    assert check.status == "failed"
    small = min(test.sizes, key=lambda b: sum(b.values()))
    where = ",".join(f"{k}={v}" for k, v in small.items())
    interp = falsify.InterpreterEngine().version
    assert check.detail.startswith(f"interpreter {interp} (CPU): {where}: race [race_free/PO7]: ")
