"""Where two PTX texts first differ, as one line of a check's detail (``rebuild.ptx`` for nvcc
and Triton builds alike: ``verify.rebuild``, ``verify.rebuild_triton``)."""

from __future__ import annotations


def first_difference(sealed: bytes, rebuilt: bytes) -> str:
    """Where two PTX texts first differ, as one line of detail."""
    a, b = sealed.split(b"\n"), rebuilt.split(b"\n")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            xs = x.decode("utf-8", "replace").strip()[:120]
            ys = y.decode("utf-8", "replace").strip()[:120]
            hint = ""
            if b"compilation tools" in x or b"Compiler Build ID" in x:
                hint = " (the sealed PTX was written by a different nvcc)"
            return f"first difference at line {i + 1}: sealed {xs!r}, rebuilt {ys!r}{hint}"
    return f"one is a prefix of the other: sealed {len(sealed)} bytes, rebuilt {len(rebuilt)}"
