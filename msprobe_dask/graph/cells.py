"""The compare rows of a pair of node items (graph_visualize.md §3.3): one row per NPU item, a dict
keyed by the reference's column names, by mode (summary statistics, md5, tensor metrics); the cells of
the statistics are graph/stat_cells.py's.

Summary rows, the common case, carry two keys of their own (NORM_RATIO, QUIET) and leave out the cells
no checker will read (graph/checks.py reads them; graph/compare.py writes a few back into the items).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from msprobe_dask.columns import (
    BENCH_DTYPE,
    BENCH_MD5,
    BENCH_NAME,
    BENCH_REQUIRES_GRAD,
    BENCH_SHAPE,
    DIFF_COLUMNS,
    ERR_MESSAGE,
    MD5_DIFFERENT,
    NA,
    NAN,
    NPU_DTYPE,
    NPU_MD5,
    NPU_NAME,
    NPU_REQUIRES_GRAD,
    NPU_SHAPE,
    REQUIRES_GRAD_CONSISTENT,
    RESULT,
    STAT_COLUMNS,
    TENSOR_METRIC_COLUMNS,
)
from msprobe_dask.dump.markers import LEAF_KEYS, PARAMETERS_GRAD, STATS
from msprobe_dask.graph import speedups
from msprobe_dask.graph.item_text import ExportedText
from msprobe_dask.graph.jsontext import dumps
from msprobe_dask.graph.model import Node
from msprobe_dask.graph.stat_cells import (
    NO_VALUE,
    NULL_STAT,
    POSITIONAL,
    ZERO_REL,
    cells_of,
    rel_text,
    special_cell,
    stat_diff,
    stat_diffs,
    stats_of,
    stored_stat,
)
from msprobe_dask.judge import rules

SUMMARY, MD5, TENSOR, STRUCTURE = "summary", "md5", "tensor", "structure"

STAT_DIFFS = tuple(DIFF_COLUMNS[:4])
STAT_RELS = tuple(DIFF_COLUMNS[4:])
MAX_DIFF, MIN_DIFF, MEAN_DIFF, NORM_DIFF = STAT_DIFFS
MAX_REL, MIN_REL, MEAN_REL, NORM_REL = STAT_RELS
NPU_STATS = tuple(STAT_COLUMNS[:4])
BENCH_STATS = tuple(STAT_COLUMNS[4:])
TENSOR_INDEX = tuple(TENSOR_METRIC_COLUMNS)
STATE_GROUPS = (("input", "kwargs"), ("parameters",), ("output",), (PARAMETERS_GRAD,))
# the cells compare_pair writes back into the NPU items, by mode (§3.6)
WRITE_BACK = {
    SUMMARY: STAT_DIFFS + STAT_RELS + (REQUIRES_GRAD_CONSISTENT, RESULT, ERR_MESSAGE),
    MD5: (RESULT, REQUIRES_GRAD_CONSISTENT, ERR_MESSAGE),
    TENSOR: TENSOR_INDEX + (REQUIRES_GRAD_CONSISTENT, RESULT, ERR_MESSAGE),
}
# a Bench name that stands for no partner, an NPU name for no item (the checkers skip such rows)
NO_BENCH = ("", NA, None)
NO_NPU = NA
# summary rows also hold the exact NormRelativeErr as a ratio (None where it is not a number): the
# checkers use it, while the NormRelativeErr cell holds the exported text (see rel_text)
NORM_RATIO = "norm_ratio"
# ... and whether a per-row checker could flag the row at all (see summary_row)
QUIET = "quiet"
UNREADABLE = "unreadable"  # a tensor row's key: why its tensor files could not be read
PASSED = rules.PASS  # a row's Result as it is made (the checkers may change it)


def _basic(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    if b is None:
        return {
            NPU_NAME: n[LEAF_KEYS.full_op_name],
            BENCH_NAME: NAN,
            NPU_DTYPE: n.get(LEAF_KEYS.dtype),
            BENCH_DTYPE: NAN,
            NPU_SHAPE: n.get(LEAF_KEYS.shape),
            BENCH_SHAPE: NAN,
            NPU_REQUIRES_GRAD: n.get(LEAF_KEYS.requires_grad),
            BENCH_REQUIRES_GRAD: NAN,
        }
    return {
        NPU_NAME: n[LEAF_KEYS.full_op_name],
        BENCH_NAME: b[LEAF_KEYS.full_op_name],
        NPU_DTYPE: n.get(LEAF_KEYS.dtype),
        BENCH_DTYPE: b.get(LEAF_KEYS.dtype),
        NPU_SHAPE: n.get(LEAF_KEYS.shape),
        BENCH_SHAPE: b.get(LEAF_KEYS.shape),
        NPU_REQUIRES_GRAD: n.get(LEAF_KEYS.requires_grad),
        BENCH_REQUIRES_GRAD: b.get(LEAF_KEYS.requires_grad),
    }


def summary_row(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    """The summary row of an NPU item and its Bench partner (None: missing).

    The relative-error cells hold their exported text (rel_text) and NORM_RATIO the exact
    NormRelativeErr. A QUIET row is one no per-row checker can flag (see _row_messages): it only
    holds the cells written back, the NPU name and the ratio, all the node-wide checkers read."""
    ns = stats_of(n)
    nc = cells_of(ns)
    if b is None:
        row = _basic(n, None)
        row.update(zip(STAT_DIFFS, (" ",) * 4))
        row.update(zip(STAT_RELS, (" ",) * 4))
        row.update(zip(NPU_STATS, nc))
        row.update(zip(BENCH_STATS, (NAN,) * 4))
        row[REQUIRES_GRAD_CONSISTENT] = False
        row[RESULT] = PASSED
        row[ERR_MESSAGE] = ""
        row[NORM_RATIO] = None
        row[QUIET] = False
        return row
    bs = stats_of(b)
    bc = cells_of(bs)
    native = speedups.native
    diffs, rels, ratio = native.stat_diffs(ns, bs) if native is not None else stat_diffs(ns, bs)
    rg, brg = n.get(LEAF_KEYS.requires_grad), b.get(LEAF_KEYS.requires_grad)
    dtype, bdtype = n.get(LEAF_KEYS.dtype), b.get(LEAF_KEYS.dtype)
    shape, bshape = n.get(LEAF_KEYS.shape), b.get(LEAF_KEYS.shape)
    # InfNan, RequiresGrad, DType and Shape need a difference; Parameters a different max
    quiet = (
        nc is ns
        and rg == brg
        and dtype == bdtype
        and shape == bshape
        and (nc[0] == bc[0] or (dtype.__class__ is str and rules.NOT_A_TENSOR not in dtype))
    )
    row = {
        NPU_NAME: n[LEAF_KEYS.full_op_name],
        MAX_DIFF: diffs[0],
        MIN_DIFF: diffs[1],
        MEAN_DIFF: diffs[2],
        NORM_DIFF: diffs[3],
        MAX_REL: rels[0],
        MIN_REL: rels[1],
        MEAN_REL: rels[2],
        NORM_REL: rels[3],
        REQUIRES_GRAD_CONSISTENT: rg == brg,
        RESULT: PASSED,
        ERR_MESSAGE: "",
        NORM_RATIO: ratio,
        QUIET: quiet,
    }
    if not quiet:
        row[BENCH_NAME] = b[LEAF_KEYS.full_op_name]
        row[NPU_DTYPE], row[BENCH_DTYPE] = dtype, bdtype
        row[NPU_SHAPE], row[BENCH_SHAPE] = shape, bshape
        row[NPU_REQUIRES_GRAD], row[BENCH_REQUIRES_GRAD] = rg, brg
        row.update(zip(NPU_STATS, nc))
        row.update(zip(BENCH_STATS, bc))
    return row


def md5_row(n: Mapping[str, Any], b: Mapping[str, Any] | None) -> dict[str, Any]:
    row = _basic(n, b)
    row[NPU_MD5] = n.get(LEAF_KEYS.md5)
    if b is None:
        row[BENCH_MD5] = NAN
        row[REQUIRES_GRAD_CONSISTENT] = False
        row[RESULT] = NAN
    else:
        row[BENCH_MD5] = b.get(LEAF_KEYS.md5)
        row[REQUIRES_GRAD_CONSISTENT] = n.get(LEAF_KEYS.requires_grad) == b.get(LEAF_KEYS.requires_grad)
        row[RESULT] = PASSED if n.get(LEAF_KEYS.md5) == b.get(LEAF_KEYS.md5) else MD5_DIFFERENT
    row[ERR_MESSAGE] = ""
    return row


TensorMeasure = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]


def tensor_row(
    n: Mapping[str, Any], b: Mapping[str, Any] | None, measure: TensorMeasure | None
) -> dict[str, Any]:
    row = _basic(n, b)
    for k in TENSOR_INDEX:
        row[k] = " "
    for k, v in zip(NPU_STATS, stats_of(n)):
        row[k] = stored_stat(v)
    if b is None:
        for k in BENCH_STATS:
            row[k] = NAN
        row[REQUIRES_GRAD_CONSISTENT] = False
    else:
        for k, v in zip(BENCH_STATS, stats_of(b)):
            row[k] = stored_stat(v)
        row[REQUIRES_GRAD_CONSISTENT] = n.get(LEAF_KEYS.requires_grad) == b.get(LEAF_KEYS.requires_grad)
        if measure is not None:
            row.update(measure(n, b))
    row[RESULT] = PASSED
    row[ERR_MESSAGE] = ""
    return row


_GROUP_OF_STATE = {state: i for i, states in enumerate(STATE_GROUPS) for state in states}


def _grouped(node: Node) -> tuple[list[dict[str, Any]], ...]:
    """The node's items by STATE_GROUPS, inputs before outputs within a group."""
    groups: tuple[list[dict[str, Any]], ...] = ([], [], [], [])
    group_of = _GROUP_OF_STATE.get
    for data in (node.input_data, node.output_data):
        for it in data.values():
            g = group_of(it.get(LEAF_KEYS.state) or "")
            if g is not None:
                groups[g].append(it)
    return groups


_ROW_MAKERS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None], dict[str, Any]]] = {
    SUMMARY: summary_row,
    MD5: md5_row,
}


def pair_rows(
    npu: Node, bench: Node, mode: str, measure: TensorMeasure | None = None
) -> list[dict[str, Any]]:
    rows = []
    make = _ROW_MAKERS.get(mode)
    for ng, bg in zip(_grouped(npu), _grouped(bench)):
        if not ng:
            continue
        nb = len(bg)
        for i, n in enumerate(ng):
            b = bg[i] if i < nb else None
            rows.append(make(n, b) if make is not None else tensor_row(n, b, measure))
    return rows


class SummaryRules(NamedTuple):
    """What the C summary compare (csrc/compare.c: stat_diffs, summary_pair) takes of the rules, by
    name, handed to it once when this module is imported: the definitions stay the Python ones. It
    makes the cells of items whose statistics are plain numbers itself, and asks stats_of, cells_of
    and special for the others'."""

    stat_diff: Callable[[Any, Any], tuple[Any, str, float | None]]  # one statistic's cells, in general
    no_value: str  # NO_VALUE: stat_diff's cells of a Bench 0 or of statistics that are not numbers
    rel_text: Callable[[float], str]  # the relative-error cell of a finite r (made once per r in C)
    zero_rel: str  # ZERO_REL
    null_stat: str  # NULL_STAT
    stats_of: Callable[[Mapping[str, Any]], tuple[Any, ...]]  # an item's statistics ...
    cells_of: Callable[[tuple[Any, ...]], tuple[Any, ...]]  # ... and their cells
    special: Callable[[Any], bool]  # a max or min cell the NaN/Inf checker reads as nan or inf
    exported_text: type  # the class of texts already in their exported form
    positional: tuple[float, float]  # POSITIONAL
    stats: tuple[str, ...]  # STATS
    state_groups: tuple[tuple[str, ...], ...]  # STATE_GROUPS
    written: tuple[str, ...]  # WRITE_BACK[SUMMARY]
    checkers: rules.CheckerRules  # rules.CHECKERS, also the statistics csv's (csrc/checker_rules.h)
    err_message: Callable[[list[str]], str]  # the Err_message cell of a row's messages
    results: tuple[str, str, str]  # the Result of pass, warning, error
    no_bench: tuple[str | None, ...]  # NO_BENCH
    no_npu: str  # NO_NPU


SUMMARY_RULES = SummaryRules(
    stat_diff=stat_diff,
    no_value=NO_VALUE,
    rel_text=rel_text,
    zero_rel=ZERO_REL,
    null_stat=NULL_STAT,
    stats_of=stats_of,
    cells_of=cells_of,
    special=special_cell,
    exported_text=ExportedText,
    positional=POSITIONAL,
    stats=STATS,
    state_groups=STATE_GROUPS,
    written=WRITE_BACK[SUMMARY],
    checkers=rules.CHECKERS,
    err_message=dumps,
    results=(rules.PASS, rules.WARNING, rules.ERROR),
    no_bench=NO_BENCH,
    no_npu=NO_NPU,
)
if speedups.native is not None:
    speedups.native.configure_summary(SUMMARY_RULES)
