"""Merging the per-rank graphs of a tensor/pipeline/virtual-pipeline parallel run into one graph per
data-parallel replica (graph_visualize.md §6)."""
