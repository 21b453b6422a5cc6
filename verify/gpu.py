"""The CUDA-device engine of the falsification tests (SPEC 8 ``falsify.*``: "run on a CUDA device
through CuPy").

1. ``probe()`` imports CuPy and asks the CUDA runtime for a device; any failure (CuPy absent, no
   driver, no device) answers (None, reason) so the caller falls back to the interpreter;
2. ``CupyEngine.launch`` writes the PTX to a temporary file and loads it with
   ``cupy.RawModule(path=...)`` (``RawModule(code=...)`` compiles CUDA C++, not PTX); the driver
   JIT-compiles the sm_86 PTX for the device at hand. A load failure is ``CannotCheck``;
3. buffers go to the device (``cupy.asarray``), scalars are numpy scalars of the parameter's dtype;
   the kernel runs with the grid, block and dynamic shared memory given, the device synchronises,
   and every ``out``/``inout`` buffer is copied back into the host array in place;
4. an error raised by the launch or the synchronisation (an illegal address, a trap) is reported as
   a ``device_error`` finding, which fails the test. A device cannot report races, barrier
   divergence or bounds: ``verify.falsify`` checks coverage from the 0xFF poison and runs the
   interpreter on the smallest size for the rest.

CuPy is optional (the ``gpu-cuda12`` or ``gpu-cuda13`` extra, matching the installed CUDA:
``scripts/setup.sh --gpu`` picks it); nothing here imports it at module load, and the tests
inject a fake ``cupy`` module to exercise both the selection logic and the marshalling.
"""

from __future__ import annotations

import hashlib
import importlib
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ledger.core.errors import CannotCheck
from verify.compare import cast_to
from verify.engine import Arg, BufferArg, Dim3, LaunchOutcome, Observed

DEFAULT_SHARED_LIMIT = 48 << 10  # above this a kernel must opt in to more dynamic shared memory


def probe() -> tuple[CupyEngine | None, str]:
    """(a ready engine, "") when CuPy imports and sees a device; else (None, why not)."""
    try:
        cupy = importlib.import_module("cupy")
    except ImportError:
        return None, "CuPy is not installed"
    except (OSError, RuntimeError) as e:
        return None, f"CuPy could not load: {e}"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except (OSError, RuntimeError) as e:  # CUDARuntimeError derives from RuntimeError
        return None, f"no CUDA device ({e})"
    if count < 1:
        return None, "no CUDA device"
    try:
        props = cupy.cuda.runtime.getDeviceProperties(0)
    except (OSError, RuntimeError) as e:
        return None, f"CUDA device 0 cannot be queried ({e})"
    name = props.get("name", b"CUDA device")
    if isinstance(name, bytes):
        name = name.decode("utf-8", errors="replace")
    return CupyEngine(cupy, str(name)), ""


class CupyEngine:
    """Launches PTX on CUDA device 0 through CuPy (see the module docstring)."""

    name = "cupy"
    observes_findings = False

    def __init__(self, cupy: Any, device_name: str) -> None:
        self._cp = cupy
        self.device_name = device_name
        self.version = f"cupy {getattr(cupy, '__version__', '?')}"
        self.description = f"{self.version} on {device_name} (GPU)"
        self._modules: dict[bytes, Any] = {}

    def _function(self, ptx: bytes, entry: str) -> Any:
        key = hashlib.sha256(ptx).digest()
        module = self._modules.get(key)
        try:
            if module is None:
                with tempfile.TemporaryDirectory(prefix="ledger-ptx-") as d:
                    path = Path(d) / "kernel.ptx"
                    path.write_bytes(ptx)
                    module = self._cp.RawModule(path=str(path))
                    fn = module.get_function(entry)  # loads (JIT-compiles) the module now
                self._modules[key] = module
                return fn
            return module.get_function(entry)
        except (OSError, RuntimeError, ValueError) as e:
            raise CannotCheck(f"the CUDA driver could not load entry {entry!r}: {e}") from e

    def _set_constants(self, ptx: bytes, constants: Mapping[str, bytes]) -> None:
        """Copy ``kernel.constants`` into the module's ``__constant__`` arrays (issue 32)."""
        module = self._modules[hashlib.sha256(ptx).digest()]
        for name, raw in constants.items():
            host = np.frombuffer(raw, np.uint8).copy()
            try:
                module.get_global(name).copy_from_host(host.ctypes.data, host.nbytes)
            except (AttributeError, RuntimeError, ValueError) as e:
                raise CannotCheck(f"cannot set __constant__ {name!r} on the device: {e}") from e

    def launch(
        self,
        ptx: bytes,
        entry: str,
        grid: Dim3,
        block: Dim3,
        args: Sequence[Arg],
        dynamic_shared: int,
        second_schedule: bool = True,  # a device runs its own schedule: nothing to repeat
        waivers: Mapping[tuple[str, int], int] | None = None,  # a device reports no findings
        constants: Mapping[str, bytes] | None = None,
        blocks: Sequence[int] | None = None,  # never sampled on a device (docs/falsification.md)
    ) -> LaunchOutcome:
        if blocks is not None:
            raise CannotCheck("a device runs every block of a launch (no block sampling)")
        cp = self._cp
        fn = self._function(ptx, entry)
        if constants:
            self._set_constants(ptx, constants)
        if dynamic_shared > DEFAULT_SHARED_LIMIT:
            try:
                fn.max_dynamic_shared_size_bytes = dynamic_shared
            except (AttributeError, RuntimeError) as e:
                raise CannotCheck(f"cannot grant {dynamic_shared} B of dynamic shared: {e}") from e
        device_args: list[Any] = []
        copies: list[tuple[BufferArg, Any]] = []
        for a in args:
            if isinstance(a, BufferArg):
                dev = cp.asarray(a.data)
                device_args.append(dev)
                if a.intent != "in":
                    copies.append((a, dev))
            else:
                device_args.append(cast_to(a.dtype, [a.value])[0])  # bf16: its bit pattern
        t0 = time.perf_counter()
        try:
            fn(grid, block, tuple(device_args), shared_mem=dynamic_shared)
            cp.cuda.runtime.deviceSynchronize()
        except RuntimeError as e:  # CUDADriverError / CUDARuntimeError
            seconds = time.perf_counter() - t0
            msg = f"the launch of {entry} failed on {self.device_name}: {e}"
            return LaunchOutcome(self.description, (Observed("device_error", msg),), 0, seconds)
        seconds = time.perf_counter() - t0
        for host, dev in copies:
            host.data[...] = np.asarray(cp.asnumpy(dev)).reshape(host.data.shape)
        return LaunchOutcome(self.description, (), 0, seconds)
