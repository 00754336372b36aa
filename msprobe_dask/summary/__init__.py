"""What a compare or graph_visualize found, in a few lines: counts, message kinds, where it diverges.

``model`` holds the records (one ``GroupSummary`` per (step, rank)), ``table`` makes them from a written
compare table, ``visdb`` from a vis.db's nodes, ``text`` prints them. No numpy, no dask: the CLI imports
this after a run, and graph_visualize starts without numpy.
"""
