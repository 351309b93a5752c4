"""Build of the optional C accelerator only; all package metadata lives in pyproject.toml.

``dyno.trace_analysis._native`` (trace_analysis/_native.c) decodes batches of trace events into columns. It is
optional: without a C compiler the install still succeeds and the loader uses its Python decoders.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dyno.trace_analysis._native",
            sources=["trace_analysis/_native.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        )
    ]
)
