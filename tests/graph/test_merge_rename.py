"""The ``_rank{r}`` suffix of a merged API node (graph/merge/rename.py, defined once): what the merge
writes, the fuzzy match's key, the checkers' ignore class and the TP rank mapping all read it alike."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from msprobe_dask.graph.merge.rename import (
    rank_suffixed,
    ranks_mapped,
    without_rank_suffixes,
    without_trailing_rank,
)

_APIS = st.sampled_from(["__mul__", "linear", "all_reduce", "empty", "_reduce_scatter_base", "a_rank"])
_PREFIXES = st.sampled_from(["Tensor", "Functional", "Distributed", "Torch"])


@given(_PREFIXES, _APIS, st.integers(0, 99), st.integers(0, 64), st.integers(0, 64))
def test_a_rank_suffix_written_is_read_back(prefix: str, api: str, call: int, rank: int, other: int) -> None:
    node_id = f"{prefix}.{api}.{call}.forward"
    suffixed = rank_suffixed(node_id, rank)
    assert suffixed == f"{prefix}.{api}_rank{rank}.{call}.forward"
    assert without_rank_suffixes(suffixed) == node_id
    assert without_trailing_rank(suffixed.split(".")[1]) == api
    assert ranks_mapped(suffixed, {rank: other}) == rank_suffixed(node_id, other)
    assert ranks_mapped(suffixed, {rank + 1: other}) == suffixed


def test_only_a_trailing_suffix_leaves_an_api_name() -> None:
    assert without_trailing_rank("all_reduce_rank3") == "all_reduce"
    assert without_trailing_rank("a_rank3b") == "a_rank3b"
    assert without_rank_suffixes("Tensor.a_rank3b_rank1.0.forward") == "Tensor.ab.0.forward"
