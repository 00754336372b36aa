"""pandas, imported only here (the optional extra ``msprobe-dask[pandas]``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def data_frame(columns: Mapping[str, Sequence[Any]]) -> Any:
    """A DataFrame of these columns: lists of floats become float64 columns."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas() needs pandas: pip install 'msprobe-dask[pandas]'") from None
    return pd.DataFrame({name: list(values) for name, values in columns.items()})
