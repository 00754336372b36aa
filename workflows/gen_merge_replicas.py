"""A bigger TP/PP merge input: a tp x pp dump (one data-parallel replica, e.g. the corpus's
tp_pp_merge) copied into DP data-parallel replicas, the ranks renumbered in Megatron's order
tp-cp-ep-dp-pp (tp fastest, pp slowest), and what names a rank inside dump.json rewritten with
them (a process group's ``group_ranks`` and ``group_id``, a P2POp's ``peer``, a send's ``dst`` and a
receive's ``src``).

    python workflows/gen_merge_replicas.py SRC --tp 2 --pp 2 --dp 16 -o OUT
    msprobe-dask graph_visualize -tp OUT --rank_size 64 --tp 2 --pp 2 -o VIS

SRC holds rank0..rank{tp*pp-1}; OUT gets rank0..rank{tp*pp*dp-1}. The replicas are the same data,
so each merged graph is the same; the point is the number of rank graphs the merge moves.
``--group RANK=A,B`` (repeatable) makes rank RANK's process groups name ranks A,B instead, e.g.
overlapping tensor-parallel groups (``--group 1=1,2 --group 2=1,2``: ranks 1 and 2 each in two groups).
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

GROUP = re.compile(r'("group_ranks": )\[([0-9,\s]*)\]')
GROUP_ID = re.compile(r'("group_id": ")([^"]*)"')
PEER = re.compile(r'("peer": |"(?:dst|src)": \{\s*"type": "int",\s*"value": )([0-9]+)')  # (P2POp, send/recv)


def new_rank(old: int, tp: int, dp: int, replica: int) -> int:
    """The rank of ``old`` (tp index + tp * pp index in the source) in data-parallel replica ``replica``."""
    tp_index, pp_index = old % tp, old // tp
    return tp_index + tp * replica + tp * dp * pp_index


def rewrite(text: str, tp: int, dp: int, replica: int) -> str:
    def group(m: re.Match[str]) -> str:
        ranks = [new_rank(int(r), tp, dp, replica) for r in m.group(2).split(",") if r.strip()]
        return f"{m.group(1)}[{', '.join(map(str, ranks))}]"

    text = GROUP.sub(group, text)
    if replica:  # another replica's groups are other groups
        text = GROUP_ID.sub(lambda m: f'{m.group(1)}{m.group(2)}.{replica}"', text)
    return PEER.sub(lambda m: f"{m.group(1)}{new_rank(int(m.group(2)), tp, dp, replica)}", text)


def write_replicas(src: Path, out: Path, tp: int, pp: int, dp: int) -> None:
    for old in range(tp * pp):
        text = (src / f"rank{old}" / "dump.json").read_text()
        for replica in range(dp):
            dst = out / f"rank{new_rank(old, tp, dp, replica)}"
            dst.mkdir(parents=True)
            (dst / "dump.json").write_text(rewrite(text, tp, dp, replica))
            for name in ("construct.json", "stack.json"):
                shutil.copyfile(src / f"rank{old}" / name, dst / name)


def regroup(out: Path, rank: int, ranks: list[int]) -> None:
    """Make every process group of ``rank``'s dump.json in ``out`` name ``ranks``."""
    path = out / f"rank{rank}" / "dump.json"
    path.write_text(GROUP.sub(lambda m: f"{m.group(1)}[{', '.join(map(str, ranks))}]", path.read_text()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="a folder of rank0..rank{tp*pp-1}")
    ap.add_argument("--tp", type=int, required=True)
    ap.add_argument("--pp", type=int, required=True)
    ap.add_argument("--dp", type=int, required=True, help="data-parallel replicas to write")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--group", action="append", default=[], metavar="RANK=A,B", help="regroup a rank")
    args = ap.parse_args()
    write_replicas(args.src, args.output, args.tp, args.pp, args.dp)
    for spec in args.group:
        rank, ranks = spec.split("=")
        regroup(args.output, int(rank), [int(r) for r in ranks.split(",")])
    print(f"{args.output}: {args.tp * args.pp * args.dp} ranks")


if __name__ == "__main__":
    main()
