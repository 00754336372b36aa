"""Names of the compare result columns, shared by the compare table, the kernel table and the graph's
node rows. No dependencies, so that importing them does not import numpy (graph_visualize start-up)."""

TENSOR_METRIC_COLUMNS = (
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
)
BASE_COLUMNS = [
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "NPU Requires_grad",
    "Bench Requires_grad",
]
DIFF_COLUMNS = [
    "Max diff",
    "Min diff",
    "Mean diff",
    "L2norm diff",
    "MaxRelativeErr",
    "MinRelativeErr",
    "MeanRelativeErr",
    "NormRelativeErr",
]
STAT_COLUMNS = [
    "NPU max",
    "NPU min",
    "NPU mean",
    "NPU l2norm",
    "Bench max",
    "Bench min",
    "Bench mean",
    "Bench l2norm",
]
TENSOR_COLUMNS = list(TENSOR_METRIC_COLUMNS)
MD5_COLUMNS = ["NPU MD5", "BENCH MD5"]
TAIL_COLUMNS = ["Requires_grad Consistent", "Result", "Err_message"]
STACK_COLUMN = "NPU_Stack_Info"
DATA_NAME_COLUMN = "Data_name"
