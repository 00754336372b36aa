"""msprobe_dask: msProbe's compare and graph_visualize, same answers, as a lazy Dask graph."""

__version__ = "0.1.0"
