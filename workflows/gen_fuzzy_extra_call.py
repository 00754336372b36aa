"""tests/data/fuzzy_extra_call: two tensor-mode msProbe dumps of a small CNN, where the target makes one
extra F.conv2d with other arguments between block1 and block2 (D24).

Run with the reference's Python (mindstudio-probe and torch installed), once per side:

    python workflows/gen_fuzzy_extra_call.py target OUT/target
    python workflows/gen_fuzzy_extra_call.py golden OUT/golden

Each writes OUT/<side>/dump/step0/proc<PID>/{dump.json,construct.json,stack.json,dump_tensor_data/}.
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from msprobe.pytorch import PrecisionDebugger

side, out = sys.argv[1], Path(sys.argv[2])


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))


class Net(nn.Module):
    def __init__(self, extra):
        super().__init__()
        self.stem = nn.Conv2d(1, 2, 3, padding=1)
        self.block1 = Block(2)
        self.block2 = Block(2)
        self.extra = extra
        self.probe_w = nn.Parameter(torch.ones(1, 2, 1, 1) * 0.5, requires_grad=False)

    def forward(self, x):
        x = self.stem(x)
        x = self.block1(x)
        if self.extra:
            F.conv2d(x, self.probe_w, None, 2)  # the extra call: other arguments, result unused
        x = self.block2(x)
        return x.mean()


torch.manual_seed(0)
net = Net(side == "target")
x = torch.randn(1, 1, 4, 4)
config = out / "config.json"
out.mkdir(parents=True, exist_ok=True)
config.write_text(
    json.dumps(
        {
            "task": "tensor",
            "dump_path": str(out / "dump"),
            "rank": [],
            "step": [],
            "level": "mix",
            "tensor": {"scope": [], "list": [], "data_mode": ["all"]},
        }
    )
)
debugger = PrecisionDebugger(config_path=str(config))
debugger.start(model=net)
loss = net(x)
loss.backward()
debugger.stop()
debugger.step()
