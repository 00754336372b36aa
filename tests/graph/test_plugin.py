"""End to end: our vis.db files opened by the real tb-graph-ascend plugin, through its HTTP API, the
way its front end uses it (list files, load, config, root, expand two levels, node info, search,
precision and overflow filters, rank/step switch).

TensorBoard runs in the environment that has tensorboard and tb-graph-ascend: the Python named by
``MSPROBE_DASK_TB_PYTHON``, else the Python next to ``tensorboard`` on PATH, else this Python. The
test is skipped only when none of them can import both.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from msprobe_dask.graph.api import graph_visualize
from msprobe_dask.graph.merge.strategy import ParallelParams

DATA = Path(__file__).resolve().parents[1] / "data"
API = "/data/plugin/graph_ascend/"
PROBE = "import tensorboard, importlib.metadata as m; m.distribution('tb-graph-ascend')"


def _plugin_python() -> str | None:
    candidates = [os.environ.get("MSPROBE_DASK_TB_PYTHON")]
    tb = shutil.which("tensorboard")
    if tb:
        candidates += [
            os.path.join(os.path.dirname(tb), "python"),
            os.path.join(os.path.dirname(tb), "python3"),
        ]
    candidates.append(sys.executable)
    for py in candidates:
        if py and os.path.exists(py):
            ok = subprocess.run([py, "-c", PROBE], capture_output=True, timeout=60).returncode == 0
            if ok:
                return py
    return None


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Plugin:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def raw(self, method: str, path: str, body: Any = None, timeout: float = 60) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with self.opener.open(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get(self, route: str, params: dict[str, Any] | None = None) -> tuple[int, bytes]:
        q = "?" + urllib.parse.urlencode(params) if params else ""
        return self.raw("GET", API + route + q)

    def post(self, route: str, payload: dict[str, Any], timeout: float = 60) -> Any:
        status, body = self.raw("POST", API + route, payload, timeout)
        assert status == 200, f"{route}: HTTP {status} {body[:300]!r}"
        answer = json.loads(body)
        assert isinstance(answer, dict) and answer.get("success") is True, f"{route}: {str(answer)[:500]}"
        return answer.get("data")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    py = _plugin_python()
    if py is None:
        pytest.skip(
            "tensorboard and tb-graph-ascend are not importable (set MSPROBE_DASK_TB_PYTHON to the "
            "Python of an environment that has them)"
        )
    logdir = tmp_path_factory.mktemp("tb_logdir")
    runs = {
        "build": dict(target=DATA / "stat_mix" / "target"),
        "build_oc": dict(target=DATA / "stat_mix" / "target", overflow_check=True),
        "compare": dict(target=DATA / "stat_mix" / "target", golden=DATA / "stat_mix" / "golden"),
        "multirank": dict(target=DATA / "multirank" / "target", golden=DATA / "multirank" / "golden"),
        "merge": dict(  # a 2-rank tensor-parallel run merged into one graph, compared with 1 rank
            target=DATA / "tp_merge" / "target",
            golden=DATA / "tp_merge" / "golden",
            parallel=[ParallelParams(2, 2, 1), ParallelParams(1, 1, 1, side="Bench")],
        ),
    }
    for run, kw in runs.items():  # the plugin shows one vis.db per folder
        graph_visualize(kw.pop("target"), kw.pop("golden", None), output_path=logdir / run, **kw)
    port = _free_port()
    env = dict(os.environ, NO_PROXY="127.0.0.1,localhost", TMPDIR=str(logdir.parent))
    log = open(logdir.parent / "tensorboard.log", "wb")
    proc = subprocess.Popen(
        [py, str(Path(__file__).with_name("tb_serve.py")), str(logdir), str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    client = Plugin(port)
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, (
                "tensorboard exited: " + (logdir.parent / "tensorboard.log").read_text()[-2000:]
            )
            try:
                if client.raw("GET", "/data/plugins_listing", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, "tensorboard did not start within 120 s"
            time.sleep(0.5)
        yield client, logdir
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _open(client: Plugin, logdir: Path, run: str) -> tuple[dict[str, Any], dict[str, Any]]:
    assert client.get("load_meta_dir")[0] == 200  # the front end lists the files before loading one
    tag = next((logdir / run).glob("*.vis.db")).name[: -len(".vis.db")]
    md = {"run": run, "tag": tag, "microStep": -1, "type": "db", "lang": "en"}
    status, _ = client.get(
        "loadGraphData", {"run": run, "tag": tag, "microStep": -1, "type": "db", "lang": "en"}
    )
    assert status == 200
    cfg = client.post("loadGraphConfigInfo", {"metaData": md})
    return md, cfg


def _expand(client: Plugin, md: dict[str, Any], side: str, name: str) -> dict[str, Any]:
    return client.post(
        "changeNodeExpandState",
        {"nodeInfo": {"nodeName": name, "nodeType": side}, "metaData": md},
        timeout=30,
    )


def _switch(client: Plugin, md: dict[str, Any], rank: int, step: int) -> dict[str, Any]:
    """What the Rank/Step selectors do: rebuild the view from the root for that rank and step."""
    m = dict(md, rank=rank, step=step)
    assert any(v.get("isRoot") for v in _expand(client, m, "NPU", "root").values())
    return m


def _two_levels(client: Plugin, md: dict[str, Any], side: str) -> dict[str, Any]:
    data = _expand(client, md, side, "root")
    roots = [k for k, v in data.items() if v.get("isRoot")]
    assert len(roots) == 1
    kids = [k for k, v in data.items() if v.get("parentNode") == roots[0]]
    assert kids, "root shows no children"
    first = next(k for k in kids if data[k].get("nodeType") != 1)
    data = _expand(client, md, side, first)
    assert data[first].get("expand"), f"{first} not expanded"
    grandkids = [k for k, v in data.items() if v.get("parentNode") == first]
    assert grandkids, f"{first} shows no children"
    return data


def test_files_are_offered(served) -> None:
    client, _ = served
    status, body = client.get("load_meta_dir")
    assert status == 200
    meta = json.loads(body)
    assert not meta.get("error"), meta.get("error")
    runs = meta["data"]
    assert set(runs) == {"build", "build_oc", "compare", "multirank", "merge"}
    assert all(v["type"] == "db" and len(v["tags"]) == 1 for v in runs.values())


def test_build_graph(served) -> None:
    client, logdir = served
    md, cfg = _open(client, logdir, "build")
    assert cfg["isSingleGraph"] is True and cfg["ranks"] == [0] and cfg["steps"] == [0]
    md = dict(md, rank=0, step=0)
    data = _two_levels(client, md, "Single")
    names = client.post("loadGraphAllNodeList", {"metaData": md})["npuNodeList"]
    assert len(names) == 280
    # search: select a deep node; the plugin opens all of its ancestors
    deep = "Functional.linear.4.forward"
    assert deep in names
    data = _expand(client, md, "Single", deep)
    assert deep in data
    info = client.post("getNodeInfo", {"nodeInfo": {"nodeName": deep, "nodeType": "Single"}, "metaData": md})
    node = info["npu"]
    assert node and node.get("input_data") and node.get("stack_info")


def test_compare_graph_and_precision_filter(served) -> None:
    client, logdir = served
    md, cfg = _open(client, logdir, "compare")
    assert cfg["isSingleGraph"] is False and cfg["task"] == "summary" and "#C7C7C7" in cfg["colors"]
    md = dict(md, rank=0, step=0)
    for side in ("NPU", "Bench"):
        _two_levels(client, md, side)
    lists = client.post("loadGraphAllNodeList", {"metaData": md})
    assert lists["npuMatchNodes"] and lists["benchMatchNodes"]
    info = client.post(
        "getNodeInfo",
        {"nodeInfo": {"nodeName": "Functional.linear.0.forward", "nodeType": "NPU"}, "metaData": md},
    )
    assert info["npu"]["input_data"] and info["bench"]["input_data"]
    errors = client.post("screen", {"metaData": md, "type": "precision", "values": [[0.6, 1]]})
    assert "Functional.linear.0.forward" in errors
    passed = client.post("screen", {"metaData": md, "type": "precision", "values": [[0, 0.3]]})
    assert passed and not set(passed) & set(errors)


def test_overflow_filter(served) -> None:
    client, logdir = served
    md, cfg = _open(client, logdir, "build_oc")
    assert cfg["overflowCheck"] in (1, True)
    md = dict(md, rank=0, step=0)
    _two_levels(client, md, "Single")
    found = client.post(
        "screen", {"metaData": md, "type": "overflow", "values": ["medium", "high", "critical"]}
    )
    assert "Torch.div.0.forward" in found


def test_multirank_switch_and_links(served) -> None:
    client, logdir = served
    md, cfg = _open(client, logdir, "multirank")
    assert cfg["ranks"] == [0, 1, 2, 3] and cfg["steps"] == [0, 1]
    for step in cfg["steps"]:
        for rank in cfg["ranks"]:
            m = dict(md, rank=rank, step=step)
            data = _expand(client, m, "NPU", "root")
            assert any(v.get("isRoot") for v in data.values())
    m = _switch(client, md, 0, 0)
    data = _expand(client, m, "NPU", "Distributed.send.0.forward")
    link = data["Distributed.send.0.forward"]["matchedDistributed"]
    link = json.loads(link) if isinstance(link, str) else link
    assert link["communications_type"] == "send"
    ((peer, (_, target)),) = link["nodes_info"].items()
    m = _switch(client, md, int(peer), 0)
    data = _expand(client, m, "NPU", target)  # jump to the linked node on the other rank
    assert target in data


def test_batch_isend_irecv_links_jump_to_each_peer(served) -> None:
    """D14: the links we add to batch_isend_irecv nodes are usable in the plugin's front end."""
    client, logdir = served
    md, _ = _open(client, logdir, "multirank")
    batch = "Distributed.batch_isend_irecv.0.forward"
    data = _expand(client, _switch(client, md, 0, 0), "NPU", batch)
    link = data[batch]["matchedDistributed"]
    link = json.loads(link) if isinstance(link, str) else link
    assert link["communications_type"] == "send_receive"
    assert set(link["nodes_info"]) == {"1", "3"}  # the ring: rank 0 sends to 1, receives from 3
    for peer, (_, target) in link["nodes_info"].items():
        data = _expand(client, _switch(client, md, int(peer), 0), "NPU", target)
        back = data[target]["matchedDistributed"]
        back = json.loads(back) if isinstance(back, str) else back
        assert back["nodes_info"]["0"][1] == batch  # and the peer links back to rank 0


def test_merged_tensor_parallel_graph(served) -> None:
    client, logdir = served
    md, cfg = _open(client, logdir, "merge")
    assert cfg["isSingleGraph"] is False and cfg["ranks"] == [0]
    md = dict(md, rank=0, step=0)
    for side in ("NPU", "Bench"):
        _two_levels(client, md, side)
    collection = "Apis_Between_Modules_All_Ranks.0"
    data = _expand(client, md, "NPU", collection)
    shown = {k for k, v in data.items() if v.get("parentNode") == collection}
    assert shown == {"Apis_Between_Modules_Rank0.0", "Apis_Between_Modules_Rank1.0"}
    node = "Functional.embedding.0.forward"
    info = client.post("getNodeInfo", {"nodeInfo": {"nodeName": node, "nodeType": "NPU"}, "metaData": md})
    merged = info["npu"]["parallel_merge_info"]
    merged = json.loads(merged) if isinstance(merged, str) else merged
    assert merged[0].startswith("This data is the merged data after tensor parallelism(TP)")
    assert info["bench"]["input_data"]  # matched (fuzzy matching is forced on in a merge compare)
