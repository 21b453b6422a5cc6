"""(Re)build the corpus of real open-source kernels, corpus/real/<name>/ (issue 32).

Each bundle is made as a user makes one (docs/seal-your-own-kernel.md): ``ledger new`` on the
kernel's ``.cu`` (the upstream kernel, verbatim below a short prelude; its first lines name the
upstream file, commit and licence), then the scaffold's TODOs filled in from ``SPECS`` below:
the contract's claims, the numpy reference translated from the upstream CPU reference, a
Futhark specification, and the scaffold's Lean theorem proved by ``omega``.

    .venv/bin/python scripts/real_corpus.py [NAME ...] [--src DIR]

``--src DIR`` takes ``DIR/<name>.cu`` (the first import); otherwise the bundle's own ``.cu`` is
used, so the bundles can be rebuilt from what the repository holds. The buggy twins the tests
build are listed in corpus/real/twins.yaml.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus" / "real"
LLMC = "https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/"
SAMPLES = "https://github.com/NVIDIA/cuda-samples/blob/c94ff366aed18c797b8a85dfaac7817b0228b420/"


def p(name: str, dtype: str, intent: str, shape: list[Any], **dom: Any) -> dict[str, Any]:
    return {"name": name, "ptr": dtype, "intent": intent, "shape": shape, **dom}


def s(name: str, dtype: str = "s32", value: Any = None) -> dict[str, Any]:
    return {"name": name, "scalar": dtype, "value": name if value is None else value}


def launch(grid: list[Any], block: list[Any], shared: int = 0) -> dict[str, Any]:
    return {"grid": grid, "block": block, "shared_bytes": shared}


GELU_REF = """
def FN(inputs, sizes):
    x = inputs["inp"].astype(np.float64)
    k = np.sqrt(2.0 / np.pi)
    return {"out": 0.5 * x * (1.0 + np.tanh(k * (x + 0.044715 * x ** 3)))}
"""

SOFTMAX_REF = """
def FN(inputs, sizes):
    n, c = sizes["N"], sizes["C"]
    x = inputs["inp"].astype(np.float64).reshape(n, c)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": (e / e.sum(axis=1, keepdims=True)).ravel()}
"""

SOFTMAX_FUT = ("entry FN [n][c] (x: [n][c]f32) : [n][c]f32 =\n"
               "  map (\\r -> let m = f32.maximum r\n"
               "              let e = map (\\v -> f32.exp (v - m)) r\n"
               "              in map (/ f32.sum e) e) x\n")
SOFTMAX_FUT_CASE = ("[[0f32, 0f32]]", "[[0.5f32, 0.5f32]]")

SPECS: dict[str, dict[str, Any]] = {
    "gelu_forward": {
        "upstream": LLMC + "dev/cuda/gelu_forward.cu",
        "lines": "29, 43-50 (gelu_forward_kernel1)",
        "kind": "elementwise (bf16, tanh)",
        "description": "llm.c GELU forward (tanh approximation), bf16 in and out, f32 arithmetic",
        "formula": "out_i = 0.5 x_i (1 + tanh(sqrt(2/pi) (x_i + 0.044715 x_i^3)))",
        "kernel": {
            "params": [p("out", "bf16", "out", ["N"]), p("inp", "bf16", "in", ["N"]), s("N")],
            "launch": launch(["ceil_div(N, 128)", 1, 1], [128, 1, 1]),
            "size_domain": {"N": {"min": 1, "max": 1048576}},
        },
        "test": {
            "sizes": [{"N": 1}, {"N": 127}, {"N": 129}, {"N": 1000}],
            "inputs": {"low": -5.0, "high": 5.0},
            "tolerance": {"ulp": 1, "abs": 1.0e-6,
                          "why": "f32 tanhf and products, rounded once to bf16: within one "
                                 "bf16 ulp of the float64 value, except where 1 + tanh cancels "
                                 "(x below -3), whose outputs are below 1e-5 in size and within "
                                 "1e-6"},
        },
        "ref": GELU_REF,
        "fut": ("entry FN [n] (x: [n]f32) : [n]f32 =\n"
                "  map (\\v -> 0.5f32 * v * (1f32 + f32.tanh (f32.sqrt (2f32 / f32.pi) * "
                "(v + 0.044715f32 * v * v * v)))) x\n"),
        "fut_case": ("[0f32]", "[0f32]"),
        "statement": "each of the N elements is written once, by thread i under the guard i < N, "
                     "with the GELU of its input",
    },
    "residual_forward": {
        "upstream": LLMC + "dev/cuda/residual_forward.cu",
        "lines": "33-38 (residual_forward_kernel1)",
        "kind": "elementwise (bf16 add)",
        "description": "llm.c residual forward: out = inp1 + inp2, bf16, added in f32",
        "formula": "out_i = bf16(inp1_i + inp2_i)",
        "kernel": {
            "params": [p("out", "bf16", "out", ["N"]), p("inp1", "bf16", "in", ["N"]),
                       p("inp2", "bf16", "in", ["N"]), s("N")],
            "launch": launch(["ceil_div(N, 256)", 1, 1], [256, 1, 1]),
            "size_domain": {"N": {"min": 1, "max": 1048576}},
        },
        "test": {
            "sizes": [{"N": 1}, {"N": 255}, {"N": 257}, {"N": 775}],
            "inputs": {"low": -4.0, "high": 4.0},
            "tolerance": {"ulp": 0},
        },
        "ref": """
def FN(inputs, sizes):
    return {"out": inputs["inp1"].astype(np.float64) + inputs["inp2"]}
""",
        "fut": "entry FN [n] (a: [n]f32) (b: [n]f32) : [n]f32 = map2 (+) a b\n",
        "fut_case": ("[1f32] [2f32]", "[3f32]"),
        "statement": "each element is written once under the guard idx < N: the bf16 sum of two "
                     "bf16 values (exact in f32), rounded once to bf16",
    },
    "encoder_forward": {
        "upstream": LLMC + "dev/cuda/encoder_forward.cu",
        "lines": "69-88 (encoder_forward_kernel2)",
        "kind": "embedding (gather, bf16)",
        "description": "llm.c GPT-2 encoder forward: token embedding plus position embedding, "
                       "one thread per output element, bf16",
        "formula": "out[b,t,c] = wte[inp[b,t], c] + wpe[t, c]",
        "sizes_flag": ["V"],
        "kernel": {
            "params": [p("out", "bf16", "out", ["B", "T", "C"]),
                       p("inp", "s32", "in", ["B", "T"], index_of="V"),
                       p("wte", "bf16", "in", ["V", "C"]), p("wpe", "bf16", "in", ["T", "C"]),
                       s("B"), s("T"), s("C")],
            "launch": launch(["ceil_div(B * T * C, 256)", 1, 1], [256, 1, 1]),
            "size_domain": {"B": {"min": 1, "max": 8}, "T": {"min": 1, "max": 64},
                            "C": {"min": 1, "max": 256}, "V": {"min": 1, "max": 64}},
        },
        "test": {
            "sizes": [{"B": 1, "T": 1, "C": 1, "V": 1}, {"B": 2, "T": 3, "C": 40, "V": 7},
                      {"B": 3, "T": 17, "C": 24, "V": 50}],
            "inputs": {"low": -2.0, "high": 2.0},
            "tolerance": {"ulp": 0},
        },
        "ref": """
def FN(inputs, sizes):
    b, t, c = sizes["B"], sizes["T"], sizes["C"]
    v = sizes["V"]
    ix = inputs["inp"].astype(np.int64).reshape(b, t)
    wte = inputs["wte"].astype(np.float64).reshape(v, c)
    wpe = inputs["wpe"].astype(np.float64).reshape(t, c)
    return {"out": (wte[ix] + wpe[None, :, :]).ravel()}
""",
        "fut": ("entry FN [b][t][v][c] (ix: [b][t]i32) (wte: [v][c]f32) (wpe: [t][c]f32) : "
                "[b][t][c]f32 =\n  map (\\row -> map2 (\\i p -> map2 (+) wte[i] p) row wpe) ix\n"),
        "fut_case": ("[[0]] [[1f32]] [[2f32]]", "[[[3f32]]]"),
        "statement": "thread idx < B*T*C writes out[idx] once, from the row inp[b,t] < V of wte "
                     "and row t of wpe",
    },
    "encoder_backward": {
        "upstream": LLMC + "dev/cuda/encoder_backward.cu",
        "lines": "47-68 (encoder_backward_kernel1)",
        "kind": "scatter-add (f32 atomics)",
        "description": "llm.c GPT-2 encoder backward: dwte[inp[b,t]] += dout[b,t] and "
                       "dwpe[t] += dout[b,t] with float atomicAdd",
        "formula": ("dwte[v,c] += sum_{b,t: inp[b,t]=v} dout[b,t,c];  "
                    "dwpe[t,c] += sum_b dout[b,t,c]"),
        "sizes_flag": ["V"],
        "kernel": {
            "params": [p("dwte", "f32", "inout", ["V", "C"]), p("dwpe", "f32", "inout", ["T", "C"]),
                       p("dout", "f32", "in", ["B", "T", "C"]),
                       p("inp", "s32", "in", ["B", "T"], index_of="V"),
                       s("B"), s("T"), s("C")],
            "launch": launch(["ceil_div(B * T * C, 256)", 1, 1], [256, 1, 1]),
            "size_domain": {"B": {"min": 1, "max": 4}, "T": {"min": 1, "max": 32},
                            "C": {"min": 1, "max": 128}, "V": {"min": 1, "max": 16}},
        },
        "test": {
            "sizes": [{"B": 1, "T": 1, "C": 1, "V": 1}, {"B": 2, "T": 5, "C": 33, "V": 3},
                      {"B": 4, "T": 9, "C": 20, "V": 5}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"abs": 1.0e-5, "rel": 1.0e-6,
                          "why": "float atomicAdd sums in an unspecified order: each of at most "
                                 "B*T + 1 = 129 terms of size at most 1 rounds once in f32, "
                                 "|error| <= 129 * 129 * 2^-24 < 1e-3 in the worst case; the run "
                                 "order's error is far smaller, and the claim is abs 1e-5"},
        },
        "ref": """
def FN(inputs, sizes):
    b, t, c, v = sizes["B"], sizes["T"], sizes["C"], sizes["V"]
    dwte = inputs["dwte"].astype(np.float64).reshape(v, c).copy()
    dwpe = inputs["dwpe"].astype(np.float64).reshape(t, c).copy()
    dout = inputs["dout"].astype(np.float64).reshape(b, t, c)
    ix = inputs["inp"].astype(np.int64).reshape(b, t)
    for bb in range(b):
        for tt in range(t):
            dwte[ix[bb, tt]] += dout[bb, tt]
            dwpe[tt] += dout[bb, tt]
    return {"dwte": dwte.ravel(), "dwpe": dwpe.ravel()}
""",
        "fut": ("entry FN [b][t][c] (dwpe: [t][c]f32) (dout: [b][t][c]f32) : [t][c]f32 =\n"
                "  map2 (\\p i -> map2 (+) p (reduce (map2 (+)) (replicate c 0f32) "
                "(map (\\r -> r[i]) dout))) dwpe (iota t)\n"),
        "fut_case": ("[[1f32]] [[[2f32]]]", "[[3f32]]"),
        "statement": "thread idx < B*T*C adds dout[idx] once to dwte and once to dwpe, each by an "
                     "atomic add, so concurrent adds to one element are not lost",
    },
    "softmax_forward1": {
        "upstream": LLMC + "dev/cuda/softmax_forward.cu",
        "lines": "99-122 (softmax_forward_kernel1)",
        "kind": "row softmax (thread per row, running max)",
        "description": "llm.c softmax forward, kernel 1: one thread per row, max subtracted, "
                       "sum in double",
        "formula": "out[i,j] = exp(x[i,j] - max_j x[i,j]) / sum_j exp(x[i,j] - max_j x[i,j])",
        "kernel": {
            "params": [p("out", "f32", "out", ["N", "C"]), p("inp", "f32", "in", ["N", "C"]),
                       s("N"), s("C")],
            "launch": launch(["ceil_div(N, 128)", 1, 1], [128, 1, 1]),
            "size_domain": {"N": {"min": 1, "max": 4096}, "C": {"min": 1, "max": 1024}},
            "size_constraints": ["N * C <= 1048576"],
        },
        "test": {
            "sizes": [{"N": 1, "C": 1}, {"N": 3, "C": 50}, {"N": 130, "C": 7}],
            "inputs": {"low": -100.0, "high": 100.0},
            "tolerance": {"rel": 2.0e-5, "abs": 1.0e-30,
                          "why": "x - max is rounded in f32 (|x - max| <= 200: an argument error "
                                 "up to 200 * 2^-24, which exp turns into rel 1.2e-5), then expf "
                                 "(<= 2 ulp), the double sum rounded once to f32 and one division; "
                                 "abs 1e-30 covers outputs that are f32 subnormals (exp of -87 and "
                                 "below), whose relative error is not bounded"},
        },
        "ref": SOFTMAX_REF,
        "fut": SOFTMAX_FUT,
        "fut_case": SOFTMAX_FUT_CASE,
        "statement": "thread i < N owns row i and writes each of its C elements; the running max "
                     "starts at -INFINITY, so exp never overflows",
    },
    "softmax_forward2": {
        "upstream": LLMC + "dev/cuda/softmax_forward.cu",
        "lines": "124-173 (softmax_forward_kernel2)",
        "kind": "row softmax (block per row, shared-memory tree reductions)",
        "description": "llm.c softmax forward, kernel 2: one block per row, max and sum by "
                       "shared-memory tree reductions",
        "formula": "out[i,j] = exp(x[i,j] - max_j x[i,j]) / sum_j exp(x[i,j] - max_j x[i,j])",
        "kernel": {
            "params": [p("out", "f32", "out", ["N", "C"]), p("inp", "f32", "in", ["N", "C"]),
                       s("N"), s("C")],
            "launch": launch(["N", 1, 1], [128, 1, 1], 512),
            "resources": {"max_shared_bytes": 512},
            "size_domain": {"N": {"min": 1, "max": 4096}, "C": {"min": 1, "max": 4096}},
            "size_constraints": ["N * C <= 1048576"],
        },
        "test": {
            "sizes": [{"N": 1, "C": 1}, {"N": 3, "C": 50}, {"N": 2, "C": 300}],
            "inputs": {"low": -100.0, "high": 100.0},
            "tolerance": {"rel": 2.0e-5, "abs": 1.0e-30,
                          "why": "x - max is rounded in f32 (|x - max| <= 200: rel 1.2e-5 after "
                                 "exp), expf (<= 2 ulp), an f32 sum of at most 4096 positive terms "
                                 "(32 serial adds per thread and a 7-step tree: rel <= 40 * 2^-24) "
                                 "and one division; abs 1e-30 for f32 subnormal outputs"},
        },
        "ref": SOFTMAX_REF,
        "fut": SOFTMAX_FUT,
        "fut_case": SOFTMAX_FUT_CASE,
        "statement": "block i owns row i; each reduction step is separated by __syncthreads and "
                     "the result in shared[0] is read after a barrier",
    },
    "layernorm_forward3": {
        "upstream": LLMC + "dev/cuda/layernorm_forward.cu",
        "lines": "181-228 (layernorm_forward_kernel3)",
        "kind": "layernorm (warp per row, cooperative-groups reduce, nullable outputs)",
        "description": "llm.c layernorm forward, kernel 3: one warp per row (cooperative groups "
                       "reduce), mean and rstd written when their pointers are not null",
        "formula": "out[i,c] = (x[i,c] - m_i) rstd_i w_c + b_c, m_i = mean_c x, "
                   "rstd_i = 1/sqrt(mean_c (x - m_i)^2 + 1e-5)",
        "kernel": {
            "params": [p("out", "f32", "out", ["N", "C"]),
                       p("mean", "f32", "out", ["N"], nullable=True),
                       p("rstd", "f32", "out", ["N"], nullable=True),
                       p("inp", "f32", "in", ["N", "C"]), p("weight", "f32", "in", ["C"]),
                       p("bias", "f32", "in", ["C"]), s("N"), s("C")],
            "launch": launch(["ceil_div(N, 4)", 1, 1], [128, 1, 1]),
            "size_domain": {"N": {"min": 1, "max": 4096}, "C": {"min": 1, "max": 1024}},
            "size_constraints": ["N * C <= 1048576"],
        },
        "test": {
            "sizes": [{"N": 1, "C": 1}, {"N": 5, "C": 33}, {"N": 3, "C": 100}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"rel": 1.0e-4, "abs": 1.0e-4,
                          "why": "f32 sums of up to 1024 terms for the mean and the variance "
                                 "(32 serial adds per lane, a 5-step butterfly), rsqrtf (2 ulp) "
                                 "and "
                                 "the mean's rounding in x - m magnified by rstd (up to 316 for a "
                                 "row of equal values): measured below 2e-5 absolute"},
        },
        "ref": """
def FN(inputs, sizes):
    n, c = sizes["N"], sizes["C"]
    x = inputs["inp"].astype(np.float64).reshape(n, c)
    m = x.mean(axis=1)
    v = ((x - m[:, None]) ** 2).mean(axis=1)
    s = 1.0 / np.sqrt(v + 1e-5)
    out = (x - m[:, None]) * s[:, None] * inputs["weight"].astype(np.float64) + inputs["bias"]
    return {"out": out.ravel(), "mean": m, "rstd": s}
""",
        "fut": ("entry FN [n][c] (x: [n][c]f32) (w: [c]f32) (b: [c]f32) : [n][c]f32 =\n"
                "  map (\\r -> let m = f32.sum r / f32.i64 c\n"
                "              let v = f32.sum (map (\\e -> (e - m) * (e - m)) r) / f32.i64 c\n"
                "              let s = 1f32 / f32.sqrt (v + 1e-5f32)\n"
                "              in map3 (\\e wi bi -> (e - m) * s * wi + bi) r w b) x\n"),
        "fut_case": ("[[1f32, 1f32]] [1f32, 1f32] [0f32, 0f32]", "[[0f32, 0f32]]"),
        "statement": "warp idx < N owns row idx (the early return is warp-uniform, so every "
                     "shuffle of cg::reduce has 32 lanes); lane 0 alone writes mean and rstd, and "
                     "only when the pointer is not null",
    },
    "crossentropy_forward": {
        "upstream": LLMC + "dev/cuda/crossentropy_forward.cu",
        "lines": "38-49 (crossentropy_forward_kernel1)",
        "kind": "cross-entropy (indexed gather, log)",
        "description": "llm.c cross-entropy forward: losses[b,t] = -log(probs[b,t,targets[b,t]])",
        "formula": "losses[b,t] = -log probs[b, t, targets[b,t]]",
        "sizes_flag": [],
        "kernel": {
            "params": [p("losses", "f32", "out", ["B", "T"]),
                       p("probs", "f32", "in", ["B", "T", "V"], range={"low": 1.0e-6, "high": 1.0}),
                       p("targets", "s32", "in", ["B", "T"], index_of="V"),
                       s("B"), s("T"), s("V")],
            "launch": launch(["ceil_div(B * T, 128)", 1, 1], [128, 1, 1]),
            "size_domain": {"B": {"min": 1, "max": 16}, "T": {"min": 1, "max": 256},
                            "V": {"min": 1, "max": 512}},
            "size_constraints": ["B * T * V <= 1048576"],
        },
        "test": {
            "sizes": [{"B": 1, "T": 1, "V": 1}, {"B": 2, "T": 65, "V": 10},
                      {"B": 4, "T": 7, "V": 33}],
            "inputs": {"low": 1.0e-6, "high": 1.0},
            "tolerance": {"ulp": 2},
        },
        "ref": """
def FN(inputs, sizes):
    b, t, v = sizes["B"], sizes["T"], sizes["V"]
    probs = inputs["probs"].astype(np.float64).reshape(b * t, v)
    ix = inputs["targets"].astype(np.int64)
    return {"losses": -np.log(probs[np.arange(b * t), ix])}
""",
        "fut": ("entry FN [bt][v] (probs: [bt][v]f32) (ix: [bt]i32) : [bt]f32 =\n"
                "  map2 (\\r i -> -(f32.log r[i])) probs ix\n"),
        "fut_case": ("[[1f32]] [0]", "[0f32]"),
        "statement": "thread i < B*T writes losses[i] once, reading row i of probs at its target "
                     "(< V); logf is within 1 ulp",
    },
    "crossentropy_softmax_backward": {
        "upstream": LLMC + "dev/cuda/crossentropy_softmax_backward.cu",
        "lines": "42-58 (crossentropy_softmax_backward_kernel1)",
        "kind": "fused softmax/cross-entropy backward (indexed, accumulate)",
        "description": "llm.c cross-entropy + softmax backward: dlogits[b,t,v] += "
                       "(probs[b,t,v] - [v == target]) dlosses[b,t]",
        "formula": "dlogits[b,t,v] += (probs[b,t,v] - [v = targets[b,t]]) dlosses[b,t]",
        "kernel": {
            "params": [p("dlogits", "f32", "inout", ["B", "T", "V"]),
                       p("dlosses", "f32", "in", ["B", "T"]),
                       p("probs", "f32", "in", ["B", "T", "V"], range={"low": 0.0, "high": 1.0}),
                       p("targets", "s32", "in", ["B", "T"], index_of="V"),
                       s("B"), s("T"), s("V")],
            "launch": launch(["ceil_div(B * T * V, 256)", 1, 1], [256, 1, 1]),
            "size_domain": {"B": {"min": 1, "max": 16}, "T": {"min": 1, "max": 256},
                            "V": {"min": 1, "max": 512}},
            "size_constraints": ["B * T * V <= 1048576"],
        },
        "test": {
            "sizes": [{"B": 1, "T": 1, "V": 1}, {"B": 2, "T": 5, "V": 30},
                      {"B": 3, "T": 4, "V": 77}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"ulp": 2, "abs": 1.0e-6},
        },
        "ref": """
def FN(inputs, sizes):
    b, t, v = sizes["B"], sizes["T"], sizes["V"]
    d = inputs["dlogits"].astype(np.float64).reshape(b * t, v)
    p = inputs["probs"].astype(np.float64).reshape(b * t, v)
    ind = np.zeros((b * t, v))
    ind[np.arange(b * t), inputs["targets"].astype(np.int64)] = 1.0
    dl = inputs["dlosses"].astype(np.float64)[:, None]
    return {"dlogits": (d + (p - ind) * dl).ravel()}
""",
        "fut": ("entry FN [bt][v] (d: [bt][v]f32) (dl: [bt]f32) (p: [bt][v]f32) (ix: [bt]i32) : "
                "[bt][v]f32 =\n  map4 (\\dr l pr i -> map3 (\\x q j -> x + (q - (if j == i64.i32 i "
                "then 1f32 else 0f32)) * l) dr pr (iota v)) d dl p ix\n"),
        "fut_case": ("[[0f32]] [1f32] [[1f32]] [0]", "[[0f32]]"),
        "statement": "thread i < B*T*V updates dlogits[i] once; (p - ind) dloss + d is at most "
                     "three f32 roundings (or an fma), within 2 ulp or 1e-6 of the exact value",
    },
    "matmul_forward1": {
        "upstream": LLMC + "dev/cuda/matmul_forward.cu",
        "lines": "56-73 (matmul_forward_kernel1)",
        "kind": "matmul (naive, 2-D grid, nullable bias)",
        "description": "llm.c matmul forward, kernel 1: out = inp @ weight^T + bias, one thread "
                       "per output, bias may be NULL",
        "formula": "out[bt,oc] = bias[oc] + sum_c inp[bt,c] weight[oc,c]  (bias 0 when NULL)",
        "kernel": {
            "params": [p("out", "f32", "out", ["BT", "OC"]), p("inp", "f32", "in", ["BT", "C"]),
                       p("weight", "f32", "in", ["OC", "C"]),
                       p("bias", "f32", "in", ["OC"], nullable=True),
                       s("BT"), s("C"), s("OC")],
            "launch": launch(["ceil_div(BT, 16)", "ceil_div(OC, 16)", 1], [16, 16, 1]),
            "size_domain": {"BT": {"min": 1, "max": 256}, "C": {"min": 1, "max": 128},
                            "OC": {"min": 1, "max": 256}},
        },
        "test": {
            "sizes": [{"BT": 1, "C": 1, "OC": 1}, {"BT": 17, "C": 9, "OC": 33},
                      {"BT": 20, "C": 40, "OC": 15}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"abs": 1.0e-3,
                          "why": "an f32 dot product of C <= 128 terms plus the bias, each |term| "
                                 "<= 1: |error| <= (C + 1)^2 2^-24 < 1e-3 (Higham's gamma bound)"},
        },
        "ref": """
def FN(inputs, sizes):
    bt, c, oc = sizes["BT"], sizes["C"], sizes["OC"]
    x = inputs["inp"].astype(np.float64).reshape(bt, c)
    w = inputs["weight"].astype(np.float64).reshape(oc, c)
    out = x @ w.T
    if inputs.get("bias") is not None:
        out = out + inputs["bias"].astype(np.float64)[None, :]
    return {"out": out.ravel()}
""",
        "fut": ("entry FN [bt][c][oc] (x: [bt][c]f32) (w: [oc][c]f32) (b: [oc]f32) : "
                "[bt][oc]f32 =\n"
                "  map (\\r -> map2 (\\wr bi -> bi + f32.sum (map2 (*) r wr)) w b) x\n"),
        "fut_case": ("[[2f32]] [[3f32]] [1f32]", "[[7f32]]"),
        "statement": "thread (bt, oc) inside both guards writes out[bt, oc] once; the bias is read "
                     "only when its pointer is not null",
    },
    "permute": {
        "upstream": LLMC + "dev/cuda/permute.cu",
        "lines": "100-116 (permute_kernel)",
        "kind": "4-D permutation (transpose)",
        "description": "llm.c permute: (d1, d2, d3, d4) -> (d4, d3, d1, d2), one thread per "
                       "element",
        "formula": "out[i4, i3, i1, i2] = matrix[i1, i2, i3, i4]",
        "kernel": {
            "params": [p("matrix", "f32", "in", ["dim1", "dim2", "dim3", "dim4"]),
                       p("out_matrix", "f32", "out", ["dim1", "dim2", "dim3", "dim4"]),
                       s("dim1"), s("dim2"), s("dim3"), s("dim4")],
            "launch": launch(["ceil_div(dim1 * dim2 * dim3 * dim4, 256)", 1, 1], [256, 1, 1]),
            "size_domain": {"dim1": {"min": 1, "max": 32}, "dim2": {"min": 1, "max": 32},
                            "dim3": {"min": 1, "max": 32}, "dim4": {"min": 1, "max": 32}},
            "size_constraints": ["dim1 * dim2 * dim3 * dim4 <= 65536"],
        },
        "test": {
            "sizes": [{"dim1": 1, "dim2": 1, "dim3": 1, "dim4": 1},
                      {"dim1": 2, "dim2": 3, "dim3": 5, "dim4": 7},
                      {"dim1": 4, "dim2": 9, "dim3": 2, "dim4": 11}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"ulp": 0},
        },
        "ref": """
def FN(inputs, sizes):
    d = (sizes["dim1"], sizes["dim2"], sizes["dim3"], sizes["dim4"])
    m = inputs["matrix"].reshape(d)
    return {"out_matrix": np.transpose(m, (3, 2, 0, 1)).ravel()}
""",
        "fut": ("entry FN [a][b][c][d] (m: [a][b][c][d]f32) : [d][c][a][b]f32 =\n"
                "  tabulate_4d d c a b (\\i4 i3 i1 i2 -> m[i1, i2, i3, i4])\n"),
        "fut_case": ("[[[[1f32]]]]", "[[[[1f32]]]]"),
        "statement": "the index map is a bijection of [0, d1 d2 d3 d4): each thread under the "
                     "guard "
                     "writes its own output element once",
    },
    "adamw2": {
        "upstream": LLMC + "dev/cuda/adamw.cu",
        "lines": "61-63 (lerp), 82-98 (adamw_kernel2)",
        "kind": "optimizer update (elementwise, inout, scalar hyper-parameters)",
        "description": "llm.c AdamW, kernel 2: moments by lerp, bias-corrected update with weight "
                       "decay, at step t = 1 with llm.c's default hyper-parameters",
        "formula": "m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2; "
                   "p' = p - lr (m'/c1 / (sqrt(v'/c2) + eps) + wd p)",
        "kernel": {
            "params": [p("params_memory", "f32", "inout", ["n"]),
                       p("grads_memory", "f32", "in", ["n"]),
                       p("m_memory", "f32", "inout", ["n"]),
                       p("v_memory", "f32", "inout", ["n"], range={"low": 0.0, "high": 1.0}),
                       s("num_parameters", "s64", "n"),
                       s("learning_rate", "f32", 0.001), s("beta1", "f32", 0.9),
                       s("beta2", "f32", 0.999), s("beta1_correction", "f32", 0.1),
                       s("beta2_correction", "f32", 0.001), s("eps", "f32", 1.0e-8),
                       s("weight_decay", "f32", 0.01)],
            "launch": launch(["ceil_div(n, 512)", 1, 1], [512, 1, 1]),
            "size_domain": {"n": {"min": 1, "max": 1048576}},
        },
        "test": {
            "sizes": [{"n": 1}, {"n": 511}, {"n": 513}, {"n": 2000}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"ulp": 4, "abs": 1.0e-6,
                          "why": "two fmas per moment (each within 1 ulp, but b1 m + (1-b1) g may "
                                 "cancel to near 0, hence abs 1e-6 on values of size 1), then "
                                 "sqrtf, a division and the update: the step lr m^/(sqrt v^ + eps) "
                                 "is at most lr/sqrt(1-b2) = 0.032 in size, so its few-ulp error "
                                 "is "
                                 "below 1e-8"},
        },
        "ref": """
def FN(inputs, sizes):
    f = np.float32
    p = inputs["params_memory"].astype(np.float64)
    g = inputs["grads_memory"].astype(np.float64)
    m = inputs["m_memory"].astype(np.float64)
    v = inputs["v_memory"].astype(np.float64)
    b1, b2 = float(f(0.9)), float(f(0.999))
    m2 = b1 * m + (1.0 - b1) * g
    v2 = b2 * v + (1.0 - b2) * g * g
    step = (m2 / float(f(0.1))) / (np.sqrt(v2 / float(f(0.001))) + float(f(1e-8)))
    p2 = p - float(f(0.001)) * (step + float(f(0.01)) * p)
    return {"params_memory": p2, "m_memory": m2, "v_memory": v2}
""",
        "fut": ("entry FN [n] (p: [n]f32) (g: [n]f32) (m: [n]f32) (v: [n]f32) : [n]f32 =\n"
                "  map4 (\\pi gi mi vi -> let m2 = 0.9f32 * mi + 0.1f32 * gi\n"
                "                         let v2 = 0.999f32 * vi + 0.001f32 * gi * gi\n"
                "                         in pi - 0.001f32 * ((m2 / 0.1f32) / (f32.sqrt (v2 / "
                "0.001f32) + 1e-8f32) + 0.01f32 * pi)) p g m v\n"),
        "fut_case": ("[0f32] [0f32] [0f32] [0f32]", "[0f32]"),
        "statement": "thread i < n reads and writes only element i of params, m and v; the "
                     "moments are the lerps the formula states",
    },
    "matmul_backward_bias1": {
        "upstream": LLMC + "dev/cuda/matmul_backward_bias.cu",
        "lines": "73-97 (matmul_backward_bias_kernel1)",
        "kind": "column reduction (bf16, block per column, shared-memory tree)",
        "description": "llm.c matmul backward bias, kernel 1: dbias[o] += sum over B*T rows of "
                       "dout[.., o], one block per column, bf16",
        "formula": "dbias[o] = bf16(dbias[o] + sum_{b,t} dout[b,t,o])",
        "kernel": {
            "params": [p("dbias", "bf16", "inout", ["OC"]),
                       p("dout", "bf16", "in", ["B", "T", "OC"]),
                       s("B"), s("T"), s("OC")],
            "launch": launch(["OC", 1, 1], [128, 1, 1], 512),
            "resources": {"max_shared_bytes": 512},
            "size_domain": {"B": {"min": 1, "max": 8}, "T": {"min": 1, "max": 256},
                            "OC": {"min": 1, "max": 512}},
            "size_constraints": ["B * T * OC <= 1048576"],
        },
        "test": {
            "sizes": [{"B": 1, "T": 1, "OC": 1}, {"B": 2, "T": 65, "OC": 3},
                      {"B": 3, "T": 50, "OC": 10}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"ulp": 1, "abs": 1.0e-4,
                          "why": "an f32 sum of at most 2048 bf16 terms of size <= 1, in tree "
                                 "order: |error| <= 2048 * 27 * 2^-24 in the worst case, tiny next "
                                 "to a bf16 ulp except where the sum cancels to below 1e-2; the "
                                 "final rounding to bf16 may then land one bf16 ulp away"},
        },
        "ref": """
def FN(inputs, sizes):
    b, t, oc = sizes["B"], sizes["T"], sizes["OC"]
    d = inputs["dout"].astype(np.float64).reshape(b * t, oc)
    return {"dbias": inputs["dbias"].astype(np.float64) + d.sum(axis=0)}
""",
        "fut": ("entry FN [bt][oc] (db: [oc]f32) (d: [bt][oc]f32) : [oc]f32 =\n"
                "  map2 (+) db (reduce (map2 (+)) (replicate oc 0f32) d)\n"),
        "fut_case": ("[1f32] [[2f32]]", "[3f32]"),
        "statement": "block o owns column o; every step of the shared-memory tree is separated by "
                     "__syncthreads; thread 0 alone writes dbias[o]",
    },
    "transpose_coalesced": {
        "upstream": SAMPLES + "Samples/6_Performance/transpose/transpose.cu",
        "lines": "56-57, 139-162 (transposeCoalesced)",
        "kind": "transpose (shared-memory tile, barrier)",
        "description": "CUDA samples transposeCoalesced: 32x32 tiles through shared memory, "
                       "width and height multiples of 32 (the sample's stated requirement)",
        "formula": "odata[x * height + y] = idata[y * width + x]",
        "kernel": {
            "params": [p("odata", "f32", "out", ["width", "height"]),
                       p("idata", "f32", "in", ["height", "width"]),
                       s("width"), s("height")],
            "launch": launch(["width // 32", "height // 32", 1], [32, 16, 1]),
            "size_domain": {"width": {"min": 32, "max": 512, "multiple_of": 32},
                            "height": {"min": 32, "max": 512, "multiple_of": 32}},
            "size_constraints": ["width * height <= 65536"],
        },
        "test": {
            "sizes": [{"width": 32, "height": 32}, {"width": 64, "height": 96}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"ulp": 0},
            "properties": ["reference", "coverage", "bounds", "race_free"],
        },
        "ref": """
def FN(inputs, sizes):
    w, h = sizes["width"], sizes["height"]
    return {"odata": inputs["idata"].reshape(h, w).T.ravel()}
""",
        "fut": "entry FN [h][w] (x: [h][w]f32) : [w][h]f32 = transpose x\n",
        "fut_case": ("[[1f32, 2f32]]", "[[1f32], [2f32]]"),
        "statement": "block (bx, by) reads tile (bx, by) and writes tile (by, bx); the tile is "
                     "written, then cg::sync, then read: no race, each element written once",
    },
    "reduce3": {
        "upstream": SAMPLES + "Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu",
        "lines": "42-57 (SharedMemory), 201-232 (reduce3), instantiated for float",
        "kind": "reduction (block partial sums, shared-memory tree)",
        "description": "CUDA samples reduce3<float>: each block sums 2 * blockDim elements "
                       "(first add during the load) into one partial sum",
        "formula": "g_odata[b] = sum_{i in [2*128*b, 2*128*(b+1)) and i < n} g_idata[i]",
        "kernel": {
            "params": [p("g_idata", "f32", "in", ["n"]),
                       p("g_odata", "f32", "out", ["ceil_div(n, 256)"]),
                       s("n", "u32")],
            "launch": launch(["ceil_div(n, 256)", 1, 1], [128, 1, 1], 512),
            "resources": {"max_shared_bytes": 512},
            "size_domain": {"n": {"min": 1, "max": 1048576}},
        },
        "test": {
            "sizes": [{"n": 1}, {"n": 128}, {"n": 255}, {"n": 257}, {"n": 1000}],
            "inputs": {"low": -1.0, "high": 1.0},
            "tolerance": {"abs": 1.0e-4,
                          "why": "an f32 tree sum of 256 terms of size <= 1 (depth 8 after the "
                                 "first add): |error| <= 9 * 256 * 2^-24 = 1.4e-4 in the worst "
                                 "case; measured far below 1e-4"},
        },
        "ref": """
def FN(inputs, sizes):
    n = sizes["n"]
    x = inputs["g_idata"].astype(np.float64)
    nb = -(-n // 256)
    pad = np.zeros(nb * 256)
    pad[:n] = x[:n]
    return {"g_odata": pad.reshape(nb, 256).sum(axis=1)}
""",
        "fut": ("entry FN [n] (x: [n]f32) : []f32 =\n"
                "  let nb = (n + 255) / 256\n"
                "  in tabulate nb (\\b -> f32.sum (map (\\i -> if i < n then x[i] else 0f32) "
                "(map (+ b * 256) (iota 256))))\n"),
        "fut_case": ("[1f32, 2f32]", "[3f32]"),
        "statement": "each tree step is separated by cg::sync; the reads i and i + blockDim are "
                     "guarded by < n; thread 0 of each block writes its partial sum once",
    },
    "shfl_scan": {
        "upstream": SAMPLES + "Samples/2_Concepts_and_Techniques/shfl_scan/shfl_scan.cu",
        "lines": "55-131 (shfl_scan_test)",
        "kind": "scan (warp shuffles, block-wide inclusive prefix sum, nullable output)",
        "description": "CUDA samples shfl_scan_test: inclusive prefix sum within each block of 256 "
                       "ints by __shfl_up_sync, and the block totals when partial_sums is not null",
        "formula": ("data'[b*256 + j] = sum_{k <= j} data[b*256 + k]; "
                    "partial_sums[b] = data'[b*256 + 255]"),
        "kernel": {
            "params": [p("data", "s32", "inout", ["n"]), s("width", "s32", 32),
                       p("partial_sums", "s32", "out", ["n // 256"], nullable=True),
                       ],
            "launch": launch(["n // 256", 1, 1], [256, 1, 1], 32),
            "resources": {"max_shared_bytes": 32},
            "size_domain": {"n": {"min": 256, "max": 1048576, "multiple_of": 256}},
        },
        "test": {
            "sizes": [{"n": 256}, {"n": 768}],
            "inputs": {"low": -1000, "high": 1000},
            "tolerance": {"abs": 0},
        },
        "ref": """
def FN(inputs, sizes):
    n = sizes["n"]
    x = inputs["data"].astype(np.int64).reshape(n // 256, 256)
    c = np.cumsum(x, axis=1)
    return {"data": c.ravel(), "partial_sums": c[:, -1]}
""",
        "fut": ("entry FN [n] (x: [n]i32) : [n]i32 =\n"
                "  let nb = n / 256\n"
                "  in flatten (map (scan (+) 0) (unflatten (x :> [nb * 256]i32))) :> [n]i32\n"),
        "fut_case": ("[1, 2]", "[1, 3]"),
        "statement": "256 threads a block, n a multiple of 256 (no guard in the sample); every "
                     "shuffle runs with the full mask; the warp sums pass through shared memory "
                     "between two __syncthreads",
    },
}


def _run(*argv: str) -> dict[str, Any]:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ledger"), *argv, "--json"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"ledger {' '.join(argv)}: exit {out.returncode}\n"
                         f"{out.stdout}{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _cu_text(name: str, src: Path | None) -> str:
    path = (src / f"{name}.cu") if src else (CORPUS / name / f"{name}.cu")
    return path.read_text()


def build(name: str, src: Path | None) -> None:
    spec = SPECS[name]
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        cu = tmp / f"{name}.cu"
        cu.write_text(_cu_text(name, src))
        d = tmp / name
        extra: list[str] = []
        for v in spec.get("sizes_flag", []):
            extra += ["--size", v]
        out = _run("new", str(d), "--cu", str(cu), *extra)
        fn = out["function"]
        text = (d / "contract.yaml").read_text()
        c = yaml.safe_load("\n".join(text.splitlines()[2:]))
        c["metadata"]["version"] = "1.0.0"
        c["metadata"]["description"] = spec["description"]
        c["metadata"]["references"] = [
            spec["upstream"] + f" lines {spec['lines']}",
            "licence: " + ("MIT (corpus/real/LICENSES/llm.c-LICENSE)" if "llm.c" in spec["upstream"]
                           else "BSD-3-Clause (corpus/real/LICENSES/cuda-samples-LICENSE)"),
            f"{name}.cu",
        ]
        c["equations"][fn]["formula"] = spec["formula"]
        for po in c["proof_obligations"]:
            po["lean"]["status"] = "proved"
        for claim in c["certificate"]:
            claim["statement"] = spec["statement"]
        c["kernel"]["version"] = "1.0.0"
        kernel = dict(spec["kernel"])
        res = kernel.pop("resources", None)
        if res:
            c["kernel"]["resources"].update(res)
        c["kernel"].update(kernel)
        t = c["falsification_tests"][0]
        t["id"] = f"FALSIFY-REAL-{name.upper().replace('_', '-')}-001"
        t["rule"] = "matches the numpy translation of the upstream CPU reference"
        t["prediction"] = ("every output element within the tolerance of the float64 reference, "
                           "each written once, no access out of bounds, no race")
        t["if_fails"] = "an indexing bug, a missing guard or barrier, a wrong initial value"
        t.update(spec["test"])
        t["properties"] = spec["test"].get("properties", ["reference", "coverage", "bounds"])
        (d / "contract.yaml").write_text(yaml.safe_dump(c, sort_keys=False, allow_unicode=True,
                                                        width=100))
        (d / "reference.py").write_text(
            f'"""Reference of {name}: a numpy translation of the upstream CPU reference\n'
            f'({spec["upstream"]}), in float64."""\n\nimport numpy as np\n\n'
            + spec["ref"].replace("FN", fn).lstrip("\n"))
        for lean in d.glob("*.lean"):
            lines = [ln for ln in lean.read_text().splitlines() if "LEDGER-NEW" not in ln
                     and "Replace every" not in ln]
            lean.write_text("\n".join(lines).replace("sorry", "omega") + "\n")
        for fut in d.glob("*.fut"):
            i, o = spec["fut_case"]
            fut.write_text(f"-- {spec['description']}\n-- ==\n-- entry: {fn}\n-- input {{ {i} }}\n"
                           f"-- output {{ {o} }}\n\n" + spec["fut"].replace("FN", fn))
        target = CORPUS / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(d, target)
    print(f"wrote {target.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="bundles to build (default: all)")
    ap.add_argument("--src", type=Path, help="directory holding <name>.cu (the first import)")
    args = ap.parse_args(argv)
    for name in args.names or list(SPECS):
        build(name, args.src)
    return 0


if __name__ == "__main__":
    sys.exit(main())
