"""The optional C part of the package (graph/csrc/, the module msprobe_dask.graph._speedups): built
where a C compiler is, skipped with a warning where none is (the package then runs its Python path,
same answers, slower)."""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "msprobe_dask.graph._speedups",
            sorted(glob("msprobe_dask/graph/csrc/*.c")),
            depends=["msprobe_dask/graph/csrc/speedups.h"],
            optional=True,
        )
    ]
)
