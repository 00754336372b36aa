"""The dtype gate of the default match (compare.md §3.1) and framework dtype spellings (D4)."""

from __future__ import annotations

_FLOATS_MS = {"Float16", "Float32", "Float64", "BFloat16"}
_FLOATS_PT = {"torch.float16", "torch.float32", "torch.float64", "torch.bfloat16"}

_FAMILY = {
    **{f"Int{n}": "int" for n in (8, 16, 32, 64)},
    **{f"UInt{n}": "int" for n in (8, 16, 32, 64)},
    **{f"torch.int{n}": "int" for n in (8, 16, 32, 64)},
    **{f"torch.uint{n}": "int" for n in (8, 16, 32, 64)},
    **{name: "float" for name in _FLOATS_MS | _FLOATS_PT},
    "Bool": "bool",
    "torch.bool": "bool",
    "Complex64": "complex",
    "Complex128": "complex",
    "torch.complex64": "complex",
    "torch.complex128": "complex",
}


def dtype_family(dtype: str) -> str:
    return _FAMILY.get(dtype, dtype)


def dtypes_pairable(npu: str, bench: str, cross_framework: bool) -> bool:
    """False when the reference treats the pair as unmatched (int64 vs float32 and the like)."""
    if cross_framework:
        npu, bench = dtype_family(npu), dtype_family(bench)
    if npu == bench:
        return True
    return {npu, bench} <= _FLOATS_MS or {npu, bench} <= _FLOATS_PT


_FRAMEWORK_PREFIXES = ("torch.", "mindspore.", "ms.", "numpy.", "np.")


def normalised_dtype(dtype: str) -> str:
    """One spelling per dtype across frameworks (D4): ``Float32``, ``torch.float32``, ``mindspore.float32``
    and ``float32`` all become ``float32``. Python scalar types (``<class 'int'>``) are left alone."""
    if not isinstance(dtype, str) or dtype.startswith("<"):
        return dtype
    for prefix in _FRAMEWORK_PREFIXES:
        if dtype.startswith(prefix):
            dtype = dtype[len(prefix) :]
            break
    return dtype.lower()


def same_dtype(npu: str, bench: str) -> bool:
    """Whether two dtype cells name the same dtype once framework spellings are normalised (D4)."""
    return npu == bench or normalised_dtype(npu) == normalised_dtype(bench)
