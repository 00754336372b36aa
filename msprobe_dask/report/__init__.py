"""``msprobe-dask report OUT`` and ``--report``: one self-contained HTML file about a compare run.

``results`` reads the written result tables back, ``model`` makes the report's data from tables, their
summary and the first-divergence analysis, ``html`` writes it, ``cli`` is the command.
"""
