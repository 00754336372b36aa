"""The optional C parts of the package: graph/csrc/ (msprobe_dask.graph._speedups), metrics/csrc/
(msprobe_dask.metrics._pair_pass) and writers/csrc/ (msprobe_dask.writers._csv_text, and
msprobe_dask.writers._rowdb, which also needs SQLite's header and library). Each is built where a C
compiler (and SQLite's header) is, and skipped with a warning where not: the package then runs its
Python path, same answers, slower. The README's "C kernels" section says what each buys."""

from glob import glob

from setuptools import Extension, setup

SHARED_HEADERS = sorted(glob("msprobe_dask/csrc/*.h"))  # what the kernels of more than one module read

setup(
    ext_modules=[
        Extension(
            "msprobe_dask.graph._speedups",
            sorted(glob("msprobe_dask/graph/csrc/*.c")),
            depends=[
                "msprobe_dask/graph/csrc/speedups.h",
                *SHARED_HEADERS,
            ],
            # (only PyInit exported: the calls between its files direct, those within a file inlined)
            extra_compile_args=["-fvisibility=hidden"],
            optional=True,
        ),
        Extension(
            "msprobe_dask.metrics._pair_pass",
            ["msprobe_dask/metrics/csrc/pair_pass.c"],
            depends=[
                "msprobe_dask/metrics/csrc/pair_pass_loops.h",
                "msprobe_dask/metrics/csrc/pair_pass_avx512.h",
                "msprobe_dask/metrics/csrc/no_contraction.h",
                "msprobe_dask/metrics/csrc/dot_orders.h",
            ],
            optional=True,
        ),
        Extension(
            "msprobe_dask.metrics._dot_lanes",
            ["msprobe_dask/metrics/csrc/dot_lanes.c"],
            depends=["msprobe_dask/metrics/csrc/no_contraction.h", "msprobe_dask/metrics/csrc/dot_orders.h"],
            optional=True,
        ),
        Extension(
            "msprobe_dask.writers._csv_text",
            ["msprobe_dask/writers/csrc/csv_text.c", "msprobe_dask/writers/csrc/stat_lines.c"],
            depends=[
                "msprobe_dask/writers/csrc/buffer.h",
                "msprobe_dask/writers/csrc/csv_cells.h",
                *SHARED_HEADERS,
            ],
            optional=True,
        ),
        Extension(
            "msprobe_dask.writers._rowdb",
            ["msprobe_dask/writers/csrc/rowdb.c"],
            depends=["msprobe_dask/writers/csrc/buffer.h"],
            libraries=["sqlite3"],
            optional=True,
        ),
    ]
)
