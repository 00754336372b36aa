"""Tensor-mode cells of a compare row, from the tensor files (uses ``metrics.tensor.measure_pair``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from msprobe_dask.dump.markers import LEAF_KEYS, NO_DATA_NAME
from msprobe_dask.graph.compare import TENSOR_INDEX, UNREADABLE
from msprobe_dask.msprobe_log import log_tensor_compare

UNSUPPORTED = "unsupported"


def make_measure(
    npu_dir: str | None, bench_dir: str | None, tensor_log: bool = False
) -> Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]:
    from msprobe_dask.dump.tensor_file import resolve_data_file
    from msprobe_dask.metrics.claims import claim_of
    from msprobe_dask.metrics.tensor import measure_pair

    def measure(n: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
        nd, bd = n.get(LEAF_KEYS.data_name, NO_DATA_NAME), b.get(LEAF_KEYS.data_name, NO_DATA_NAME)
        name = n.get(LEAF_KEYS.full_op_name)
        if nd == NO_DATA_NAME or bd == NO_DATA_NAME or not npu_dir or not bench_dir:
            cells: dict[str, Any] = {k: UNSUPPORTED for k in TENSOR_INDEX}
            message = "No bench data matched."
        else:
            # resolve_data_file refuses a data_name that escapes dump_tensor_data (raises UnsafePathError)
            metrics = measure_pair(
                resolve_data_file(Path(npu_dir), nd),
                resolve_data_file(Path(bench_dir), bd),
                claims=(
                    claim_of(n.get(LEAF_KEYS.dtype), n.get(LEAF_KEYS.shape)),
                    claim_of(b.get(LEAF_KEYS.dtype), b.get(LEAF_KEYS.shape)),
                ),
            )
            cells = metrics.as_dict()
            message = metrics.message
            if metrics.unreadable:
                cells[UNREADABLE] = message  # the row becomes an error after the checkers (compare_pair)
        if tensor_log:
            log_tensor_compare(name, ((k, cells[k]) for k in TENSOR_INDEX), message)
        return cells

    return measure
