"""Compile one Triton kernel to PTX for a named target, without a GPU (docs/kernels.md "Triton").

Run as a standalone script (it imports nothing of this project, so it can run in the verifier's
sandbox with only the Python installation and Triton's own package bound read-only):

    python -I -S triton_driver.py --site SITE --kernel FILE.py:NAME --signature "*fp32,i32"
        [--constexpr NAME=VALUE ...] --num-warps 4 --num-stages 3 --target sm_86 -o OUT.ptx

``--site`` is the directory holding the ``triton`` package (added to ``sys.path``). The kernel
file is imported (Triton compiles by reading the decorated Python function), so this runs the
bundle's code: the verifier runs it only inside bubblewrap (``verify.triton_build``). Line
information is turned off (``TRITON_DISABLE_LINE_INFO=1``: it would embed the absolute paths of
the kernel file and of Triton's own sources) and FP fusion is pinned on, so two compiles of the
same kernel with the same Triton give the same bytes. Exit 0 written, 2 bad input, 3 failed.
"""

import argparse
import importlib.util
import json
import os
import sys


def _value(text: str) -> object:
    """A constexpr value: an int, a float, True/False, else the string."""
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--signature", required=True)
    ap.add_argument("--constexpr", action="append", default=[])
    ap.add_argument("--num-warps", type=int, required=True)
    ap.add_argument("--num-stages", type=int, required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("-o", required=True)
    a = ap.parse_args()
    os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    os.environ["TRITON_DEFAULT_FP_FUSION"] = "1"
    sys.path.insert(0, a.site)
    path, _, name = a.kernel.rpartition(":")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("ledger_triton_kernel", path)
    if spec is None or spec.loader is None:
        print(f"triton: cannot import {path}", file=sys.stderr)
        return 2
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if fn is None or not hasattr(fn, "arg_names"):
        print(f"triton: {path} has no @triton.jit function {name!r}", file=sys.stderr)
        return 2
    consts = {}
    for item in a.constexpr:
        key, _, val = item.partition("=")
        consts[key] = _value(val)
    unknown = sorted(set(consts) - set(fn.arg_names))
    if unknown:
        print(f"triton: {name} has no parameter {unknown[0]!r}", file=sys.stderr)
        return 2
    types = [t.strip() for t in a.signature.split(",") if t.strip()]
    runtime = [n for n in fn.arg_names if n not in consts]
    if len(types) != len(runtime):
        print(f"triton: --signature gives {len(types)} types for {len(runtime)} parameters "
              f"({', '.join(runtime)})", file=sys.stderr)
        return 2
    sig = dict(zip(runtime, types, strict=True))
    sig.update({k: "constexpr" for k in consts})
    arch = int(a.target.removeprefix("sm_"))
    src = ASTSource(fn, sig, constexprs=consts)
    opts = {"num_warps": a.num_warps, "num_stages": a.num_stages, "enable_fp_fusion": True}
    kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)
    with open(a.o, "w", encoding="utf-8") as f:
        f.write(kernel.asm["ptx"])
    md = kernel.metadata
    # what a launch needs, for ledger new's scaffold: dynamic shared memory, threads, version
    info = {"name": md.name, "shared": md.shared, "num_warps": md.num_warps,
            "triton": triton.__version__}
    print(json.dumps(info, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
