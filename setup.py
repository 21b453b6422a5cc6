"""The compiled part of the package: ``ledger._native`` (ledger/_native.c, see ledger/native.py).

Everything else is declared in pyproject.toml. The extension is optional: where no C compiler is
found the install goes on without it and the pure-Python twins in ledger/native.py run instead.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ledger._native",
            sources=["ledger/_native.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra"],
        )
    ]
)
