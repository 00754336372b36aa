"""Texts msProbe writes into a dump that rules of both commands test for, each defined once here.

The C kernels get them through the rules handed to them (graph/item_text.py's ``TEXT_RULES``,
graph/rows.py's ``ROW_RULES``; ``LEAF_KEYS`` and ``STATS`` as graph/speedups.py loads them)."""

from typing import NamedTuple

NO_DATA_NAME = "-1"  # the data_name of a leaf without a data file
# what joins the parts of a dump's names: an entry's (``Functional.conv2d.0.forward``), a leaf's path below it
# (``....forward.input.0``) and a data file's (``....input.0.pt``)
NAME_SEP = "."
PROCESS_GROUP = "torch.ProcessGroup"  # the type of a process-group argument
# a process group's member whose text (str of its value) is its row's and its items' statistics and md5
GROUP_RANKS = "group_ranks"
GROUP_ID = "group_id"  # a process group's id (a member of its dict), and a P2P op argument's group
P2P_CLASS = "torch.distributed.P2POp"  # the class_type of a point-to-point op argument
BATCH_P2P = "batch_isend_irecv"  # the API that runs a batch of P2POps
# torch.distributed's non-blocking send and receive: the APIs, and the ops of a P2P op argument (its
# P2P_KEYS.op)
ISEND, IRECV = "isend", "irecv"
# the part of an entry name that holds a module's parameter gradients (``Module.fc.Linear.parameters_grad``,
# ``....parameters_grad.0``), and the state of its rows and items
PARAMETERS_GRAD = "parameters_grad"
# a communication op's arguments that name a rank (a peer): a scalar argument of these names keeps its
# text as its statistics and md5
PEER_ARGUMENTS = ("src", "dst", "group_src", "group_dst")
# the types of the leaves that are not tensors yet have a shape (their rows' and items' rules differ)
TORCH_SIZE, SLICE, ELLIPSIS = "torch.Size", "slice", "ellipsis"
SHAPED_KINDS = (TORCH_SIZE, SLICE, ELLIPSIS)
# what the name of an output's row or item holds, and an input's: a name that holds the first and not
# the second is an output's
OUTPUT_PART, INPUT_PART = ".output.", ".input."
MAX, MIN, MEAN, NORM = "Max", "Min", "Mean", "Norm"  # the keys of a leaf's statistics
STATS = (MAX, MIN, MEAN, NORM)  # a leaf's statistics, in the order of the compare's columns
SCALAR_SHAPE = "[]"  # the shape of an argument that is not a tensor (the checkers' Scalar rule reads it)


class LeafKeys(NamedTuple):
    """The keys of a dump.json leaf (an argument's or output's dict) that rules read by name, and those
    graph_visualize's items add to it; the C kernels take them in this order (graph/csrc/speedups.h's
    roles K_TYPE ... K_SHAPE first)."""

    type: str
    class_type: str  # a P2P op argument's class (P2P_CLASS)
    data_name: str  # its tensor's file (NO_DATA_NAME: none)
    dtype: str
    value: str  # a scalar argument's
    requires_grad: str
    shape: str
    md5: str
    full_op_name: str  # an item's: the op its leaf belongs to
    state: str  # an item's: input, output, parameters ...


class P2PKeys(NamedTuple):
    """The keys of a P2P op argument (a dict of class_type P2P_CLASS) that rules read by name, besides
    its class_type and its tensor (P2P_TENSOR): its item keeps them, a batch_isend_irecv node's exported
    items leave them out."""

    op: str  # ISEND, IRECV ...
    peer: str  # the other rank
    tag: str
    group_id: str  # GROUP_ID


P2P_KEYS = P2PKeys("op", "peer", "tag", GROUP_ID)
P2P_TENSOR = "tensor"  # the key of a P2P op argument's tensor leaf

LEAF_KEYS = LeafKeys(
    "type",
    "class_type",
    "data_name",
    "dtype",
    "value",
    "requires_grad",
    "shape",
    "md5",
    "full_op_name",
    "state",
)
