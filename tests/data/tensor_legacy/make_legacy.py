"""Regenerate tests/data/tensor_legacy: a PyTorch tensor dump pair whose target files are legacy ``.pt``
(``torch.save(t, f, _use_new_zipfile_serialization=False)``, the format before torch 1.6), with the
reference's csv. Needs torch and the reference tool, so run it with the oracle interpreter, never from the
tests:

    /work/ref/v/bin/python tests/data/tensor_legacy/make_legacy.py

- ``pt/target``: one ``Torch.<case>.0.forward`` entry per case (input.0 only), its file a legacy ``.pt``
  of the case's tensor (float32, float16, bfloat16, int64, bool, 0-d, a Parameter, a view with a storage
  offset and strides, a tensor sharing a bigger storage); ``pt/golden``: the same entries, each file a zip
  ``.pt`` of nearby values (a legacy one for ``legacy_both``), contiguous.
- ``ref/legacy.csv``: the reference's ``msprobe compare`` csv of the pair.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "make_claims", HERE.parent / "tensor_claims" / "make_claims.py"
)
claims = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(claims)  # type: ignore[union-attr]

BASE = torch.linspace(-2.0, 3.0, 24).reshape(2, 3, 4)
CASES = {  # case -> the target's tensor
    "f32": BASE,
    "f16": BASE.half(),
    "bf16": BASE.bfloat16(),
    "int64": torch.arange(24).reshape(2, 3, 4) - 7,
    "bool": (torch.arange(24) % 3 == 0).reshape(2, 3, 4),
    "zerod": torch.tensor(1.5),
    "param": torch.nn.Parameter(BASE.clone()),
    "view": (torch.arange(60.0).reshape(6, 10) / 7)[1:5, 2::3],  # storage offset 12, strides (10, 3)
    "shared": (torch.arange(40.0) / 3)[5:29].view(2, 3, 4),  # 24 of a storage of 40, from the 6th
    "legacy_both": BASE,
}


def _nearby(t: torch.Tensor) -> torch.Tensor:
    """The golden's tensor: values near the target's, contiguous, of its dtype."""
    t = t.detach()
    if t.dtype == torch.bool:
        return (~t if t.dim() == 0 else torch.cat([~t.reshape(-1)[:1], t.reshape(-1)[1:]])).reshape(t.shape)
    if t.dtype == torch.int64:
        return (t + (t.reshape(-1)[:1] * 0 + 1)).contiguous() if t.dim() == 0 else t + (t % 5 == 0)
    return (t.float() * 1.001 + 0.01).to(t.dtype).contiguous()


def _build(root: Path) -> None:
    for side in ("target", "golden"):
        folder = root / side / "dump_tensor_data"
        folder.mkdir(parents=True)
        data = {}
        for name, t in CASES.items():
            entry = f"Torch.{name}.0.forward"
            data_name = f"{entry}.input.0.pt"
            held = t if side == "target" else _nearby(t)
            legacy = side == "target" or name == "legacy_both"
            torch.save(held, folder / data_name, _use_new_zipfile_serialization=not legacy)
            values = held.detach()
            values = values.float().numpy() if values.dtype == torch.bfloat16 else values.numpy()
            leaf = claims._leaf("torch.Tensor", str(held.dtype), values, data_name)
            data[entry] = {"input_args": [leaf], "input_kwargs": {}, "output": []}
        claims._write_dump(root / side, "pytorch", data)


def main() -> None:
    shutil.rmtree(HERE / "pt", ignore_errors=True)
    _build(HERE / "pt")
    claims._reference_csv(HERE / "pt", HERE / "ref" / "legacy.csv", stand_in=False)


if __name__ == "__main__":
    main()
