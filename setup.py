"""The optional C part of the package (graph/_speedups.c): built where a C compiler is, skipped with a
warning where none is (the package then runs its Python path, same answers, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[Extension("msprobe_dask.graph._speedups", ["msprobe_dask/graph/_speedups.c"], optional=True)]
)
