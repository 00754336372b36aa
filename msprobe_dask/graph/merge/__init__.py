"""Merging the per-rank graphs of a tensor/pipeline/virtual-pipeline parallel run into one graph per
data-parallel replica (graph_visualize.md §6)."""

# the ranks' layout when --order is not given (first = fastest varying); here, not in strategy.py, so
# that graph_visualize's --help reads it without importing the merge
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
