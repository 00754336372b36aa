"""Typed results of the Python API (``msprobe_dask.compare``, ``msprobe_dask.graph``): numbers as floats,
messages as lists, a summary, a first divergence, pandas frames and notebook displays."""
