"""Names of the compare result columns, shared by the compare table, the kernel table and the graph's
node rows, and the texts of their cells that hold no number. No dependencies, so that importing them does
not import numpy (graph_visualize start-up)."""

NPU_NAME, BENCH_NAME = "NPU Name", "Bench Name"  # a row's tensor (its dump entry and argument) each side
NPU_DTYPE, BENCH_DTYPE = "NPU Dtype", "Bench Dtype"
NPU_SHAPE, BENCH_SHAPE = "NPU Tensor Shape", "Bench Tensor Shape"
NPU_REQUIRES_GRAD, BENCH_REQUIRES_GRAD = "NPU Requires_grad", "Bench Requires_grad"
NPU_MD5, BENCH_MD5 = "NPU MD5", "BENCH MD5"
NPU_MAX, NPU_MIN, BENCH_MAX, BENCH_MIN = "NPU max", "NPU min", "Bench max", "Bench min"
REQUIRES_GRAD_CONSISTENT = "Requires_grad Consistent"
RESULT, ERR_MESSAGE = "Result", "Err_message"  # the judge's verdict and why
COSINE, ONE_THOUSANDTH_RATIO = "Cosine", "One Thousandth Err Ratio"
EUC_DIST, MAX_ABS_ERR, MAX_RELATIVE_ERR = "EucDist", "MaxAbsErr", "MaxRelativeErr"
MAX_DIFF, NORM_RELATIVE_ERR = "Max diff", "NormRelativeErr"
# the analyzer's records: the P2POps of a batch_isend_irecv row, each side
NPU_P2P_OP, NPU_P2P_PEER = "NPU P2POp op", "NPU P2POp peer"
BENCH_P2P_OP, BENCH_P2P_PEER = "Bench P2POp op", "Bench P2POp peer"

MD5_DIFFERENT = "Different"  # an md5 row's Result where the two md5 differ
NA = "N/A"  # a cell with nothing to show: no Bench side, a metric that cannot be made, no mapping
NAN = "Nan"  # a cell whose value is NaN, or a side that is missing, as the reference writes it

TENSOR_METRIC_COLUMNS = (
    COSINE,
    EUC_DIST,
    MAX_ABS_ERR,
    MAX_RELATIVE_ERR,
    ONE_THOUSANDTH_RATIO,
    "Five Thousandths Err Ratio",
)
BASE_COLUMNS = [
    NPU_NAME,
    BENCH_NAME,
    NPU_DTYPE,
    BENCH_DTYPE,
    NPU_SHAPE,
    BENCH_SHAPE,
    NPU_REQUIRES_GRAD,
    BENCH_REQUIRES_GRAD,
]
DIFF_COLUMNS = [
    MAX_DIFF,
    "Min diff",
    "Mean diff",
    "L2norm diff",
    MAX_RELATIVE_ERR,
    "MinRelativeErr",
    "MeanRelativeErr",
    NORM_RELATIVE_ERR,
]
STAT_COLUMNS = [
    NPU_MAX,
    NPU_MIN,
    "NPU mean",
    "NPU l2norm",
    BENCH_MAX,
    BENCH_MIN,
    "Bench mean",
    "Bench l2norm",
]
TENSOR_COLUMNS = list(TENSOR_METRIC_COLUMNS)
MD5_COLUMNS = [NPU_MD5, BENCH_MD5]
TAIL_COLUMNS = [REQUIRES_GRAD_CONSISTENT, RESULT, ERR_MESSAGE]
STACK_COLUMN = "NPU_Stack_Info"
KERNEL_VERDICT = "Accuracy Reached or Not"  # a kernel table's Result: REACHED or NOT_REACHED
REACHED, NOT_REACHED = "Yes", "No"
DATA_NAME_COLUMN = "Data_name"

# tb_nodes of a vis.db (graph_visualize.md §7.3): each column's name and SQL declaration, in the
# reference's order. The one table of them: the vis.db writer's schema and inserts
# (writers/visdb.py), the rows graph/rows.py makes (in this order) and the API's node views use it.
VISDB_NODE_TABLE = (
    ("id", "TEXT PRIMARY KEY"),
    ("graph_id", "TEXT NOT NULL"),
    ("node_order", "INTEGER NOT NULL"),
    ("node_name", "TEXT NOT NULL"),
    ("node_type", "TEXT NOT NULL"),
    ("up_node", "TEXT"),
    ("sub_nodes", "TEXT"),
    ("precision_index", "INTEGER"),
    ("overflow_level", "TEXT"),
    ("micro_step_id", "INTEGER NOT NULL"),
    ("matched_node_link", "TEXT"),
    ("stack_id", "TEXT"),
    ("parallel_merge_info", "TEXT"),
    ("matched_distributed", "TEXT"),
    ("modified", "INTEGER NOT NULL"),
    ("input_data", "TEXT"),
    ("output_data", "TEXT"),
    ("data_source", "TEXT"),
    ("dump_data_dir", "TEXT"),
    ("step", "INTEGER NOT NULL"),
    ("rank", "INTEGER NOT NULL"),
    ("is_distributed", "INTEGER"),
)
VISDB_NODE_COLUMNS = tuple(name for name, _ in VISDB_NODE_TABLE)
UNLINKED = "{}"  # a row's matched_distributed as it is made: linking across ranks may set it later
UNMODIFIED = 0  # a row's modified as it is made
