"""msprobe compare's ``-m/--mode`` and its flags for other inputs than accuracy dumps (offline models,
torchair and ATB dumps, fusion rules, onnx, train-vs-infer consistency), so that a script written for
msprobe is read: ``-m auto`` (the accuracy dumps) runs; every other mode and flag is refused in one line
(exit 2) that names it and points to ``msprobe compare``, rather than argparse's "unrecognized arguments".

The reference on an accuracy dump (26.2.0): ``-m offline_data`` runs CANN's msaccucmp on op data files
(none in a dump.json folder: exit 0, no result), ``torchair``, ``offline_model`` and ``atb`` need the CANN
toolkit, ``--consistent_check`` needs ``proc*`` folders; the fusion-rule, onnx and model-input flags are
"Invalid argument ... for mode 'auto'", ``--backend`` and ``--config`` are ignored in that mode (README D36).
"""

from __future__ import annotations

import argparse
from typing import Any

from msprobe_dask.errors import ConfigError

ACCURACY_MODE = "auto"
MODES = (ACCURACY_MODE, "offline_data", "torchair", "offline_model", "atb")

OTHER_INPUT_FLAGS: tuple[tuple[tuple[str, ...], dict[str, Any], str], ...] = (
    # (msprobe's spellings, argparse's keywords as msprobe takes the value, what it is for)
    (("-fr", "--fusion_rule_file"), {"metavar": "FILE"}, "offline model's fusion rule file"),
    (("-qfr", "--quant_fusion_rule_file"), {"metavar": "FILE"}, "offline model's quant fusion rule file"),
    (("-cfr", "--close_fusion_rule_file"), {"metavar": "FILE"}, "offline model's close fusion rule file"),
    (("--input_data",), {"metavar": "NAME"}, "offline model's input data"),
    (("--input_shape",), {"metavar": "NAME"}, "offline model's input shapes"),
    (("--output_size",), {"metavar": "N"}, "offline model's output sizes"),
    (("--dym_shape_range",), {"metavar": "NAME"}, "offline model's dynamic shape range"),
    (("-ofs", "--onnx_fusion_switch"), {"choices": ("True", "False")}, "onnxruntime fusion switch"),
    (("--consistent_check",), {"nargs": 0}, "train vs infer data"),
    (("--backend",), {"choices": ("fsdp", "megatron")}, "train vs infer data's backend"),
    (("--config",), {"metavar": "FILE"}, "train vs infer data's tensor postprocess config"),
)
REFUSED = "msprobe_dask compares msProbe accuracy dumps only (-m auto)"


def refusal(given: str) -> str:
    """The line that refuses ``given``: a flag, with its value if it is one of msprobe's choices."""
    return f"{given}: {REFUSED}; for this use msprobe compare {given}"


class _Refused(argparse.Action):
    """Raises the refusal when the flag is given (a value in ``accepted`` is stored)."""

    def __init__(self, *args: Any, accepted: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.accepted = accepted

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        if values not in self.accepted:
            flag = option_string or self.dest
            raise ConfigError(None, refusal(f"{flag} {values}" if self.choices else flag))
        setattr(namespace, self.dest, values)


def add_mode_options(p: argparse.ArgumentParser) -> None:
    """``-m/--mode`` and msprobe compare's flags for other inputs, each refused but ``-m auto``."""
    p.add_argument(
        "-m",
        "--mode",
        choices=MODES,
        default=ACCURACY_MODE,
        action=_Refused,
        accepted=(ACCURACY_MODE,),
        metavar="MODE",
        help=f"msprobe's comparison mode, one of {', '.join(MODES)}: {ACCURACY_MODE} (the default: "
        "accuracy dumps) runs, the others are refused",
    )
    group = p.add_argument_group(
        "msprobe compare's flags for other inputs",
        f"refused in one line (exit 2): {REFUSED};\nuse msprobe compare for these inputs",
    )
    for flags, kwargs, purpose in OTHER_INPUT_FLAGS:
        group.add_argument(*flags, action=_Refused, help=purpose, **kwargs)
