"""The compiled part of the package: ``ledger.core._native`` (ledger/core/_native.c, see ledger/core/native.py).

Everything else is declared in pyproject.toml. The extension is optional: where no C compiler is
found the install goes on without it and the pure-Python twins in ledger/core/native.py run instead.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ledger.core._native",
            sources=["ledger/core/_native.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra"],
        )
    ]
)
