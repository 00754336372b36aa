"""API mapping ``-am`` (compare.md §3.5, D3): MindSpore API rows keyed by their PyTorch names.

Two tables, both data: the built-in name table (``ms_to_pt_api.yaml`` in this package, plus the
``Mint`` -> ``Torch`` and ``MintFunctional`` -> ``Functional`` prefix rules) and the user's yaml, a list
of ``{ms_api, pt_api, ms_args, pt_args, ms_outputs, pt_outputs, ...}`` items that also choose which
argument of one API pairs with which argument of the other. Both spellings of the output keys are
accepted (``ms_outputs`` as documented, ``ms_output`` as the reference reads it: D3), and a single
item written as a mapping (as the documentation shows it) is a list of one.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_dask.dump.markers import PARAMETERS_GRAD
from msprobe_dask.errors import ConfigError
from msprobe_dask.match.mapfile import warn, warn_unused

BUILTIN_TABLE = Path(__file__).with_name("ms_to_pt_api.yaml")
PREFIX_RULES = {"Mint": ("Mint", "Torch"), "MintFunctional": ("MintFunctional", "Functional")}
ABANDONED = "abandoned"

# state of a row -> (yaml key of the MindSpore index list, of the PyTorch one, alternative spellings)
_STATE_KEYS = {
    "input": ("ms_args", "pt_args"),
    "output": ("ms_output", "pt_output"),
    "parameters": ("ms_parameters", "pt_parameters"),
    PARAMETERS_GRAD: ("ms_parameters_grad", "pt_parameters_grad"),
}
_PLURAL = {"ms_output": "ms_outputs", "pt_output": "pt_outputs"}


@functools.lru_cache(maxsize=1)
def builtin_table() -> dict[str, str]:
    import yaml

    with open(BUILTIN_TABLE, encoding="utf-8") as f:
        return dict(yaml.safe_load(f))


def api_of(entry: str) -> str:
    """``MintFunctional.linear.0.forward`` -> ``MintFunctional.linear``."""
    return ".".join(entry.split(".")[:2])


def builtin_key(name: str, table: Mapping[str, str]) -> str:
    """The PyTorch spelling of a MindSpore row name by the built-in rules (unchanged when none applies)."""
    prefix = name.split(".", 1)[0]
    if prefix in PREFIX_RULES:
        old, new = PREFIX_RULES[prefix]
        return name.replace(old, new)
    api = api_of(name)
    mapped = table.get(api)
    if mapped is not None:
        return mapped + name[len(api) :]
    return name


@dataclass(frozen=True, slots=True)
class ApiPair:
    """One item of the user's yaml: which arguments of ``ms_api`` pair with which of ``pt_api``."""

    ms_api: str
    pt_api: str
    indices: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]  # (state, ms indices, pt indices)

    def lookup(self, state: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        for name, ms, pt in self.indices:
            if name == state:
                return ms, pt
        return None


def _index_list(path: Path, item: int, key: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ConfigError(path, f"item {item}: {key} must be a list of argument numbers, found {value!r}")
    if any(v < 0 for v in value):
        raise ConfigError(path, f"item {item}: {key} has a negative argument number: {value}")
    if len(set(value)) != len(value):
        raise ConfigError(path, f"item {item}: {key} lists an argument number twice: {value}")
    return tuple(value)


def _spelled(path: Path, item: int, doc: Mapping[str, Any], key: str) -> Any:
    plural = _PLURAL.get(key)
    if plural is None or plural not in doc:
        return doc.get(key)
    if key in doc and doc[key] != doc[plural]:
        raise ConfigError(path, f"item {item}: {key} {doc[key]} and {plural} {doc[plural]} disagree")
    return doc[plural]


def parse_api_pairs(path: str | Path, doc: Any) -> tuple[ApiPair, ...]:
    """Validate a parsed user api-mapping yaml; every mistake is a ConfigError naming the file."""
    path = Path(path)
    if doc is None:  # (api_keys says so, once the dumps may take -am)
        return ()
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list):
        raise ConfigError(path, f"an api mapping file must be a list of ms_api/pt_api items, found {doc!r}")
    pairs = []
    for n, raw in enumerate(doc, 1):
        if not isinstance(raw, dict):
            raise ConfigError(path, f"item {n} must be a mapping with ms_api and pt_api, found {raw!r}")
        ms_api, pt_api = raw.get("ms_api"), raw.get("pt_api")
        if not isinstance(ms_api, str) or not isinstance(pt_api, str):
            raise ConfigError(path, f"item {n} needs ms_api and pt_api names")
        indices = []
        for state, (ms_key, pt_key) in _STATE_KEYS.items():
            ms_raw, pt_raw = _spelled(path, n, raw, ms_key), _spelled(path, n, raw, pt_key)
            if ms_raw is None and pt_raw is None:
                continue
            if ms_raw is None or pt_raw is None:
                missing = ms_key if ms_raw is None else pt_key
                raise ConfigError(path, f"item {n} ({ms_api}): {missing} is missing")
            ms, pt = _index_list(path, n, ms_key, ms_raw), _index_list(path, n, pt_key, pt_raw)
            if len(ms) != len(pt):
                raise ConfigError(
                    path, f"item {n} ({ms_api}): {ms_key} has {len(ms)} numbers but {pt_key} has {len(pt)}"
                )
            indices.append((state, ms, pt))
        pairs.append(ApiPair(ms_api, pt_api, tuple(indices)))
    return tuple(pairs)


def _positions(rows: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str], int]:
    """(api, state) -> number of positional arguments seen in the dump (highest index + 1)."""
    seen: dict[tuple[str, str], int] = {}
    for name, entry, state in rows:
        rest = name[len(entry) + 1 :].split(".")
        if len(rest) >= 2 and rest[1].isdigit():
            key = (api_of(entry), state)
            seen[key] = max(seen.get(key, 0), int(rest[1]) + 1)
    return seen


def check_ranges(
    path: str | Path | None,
    pairs: Iterable[ApiPair],
    npu_positions: Mapping[tuple[str, str], int],
    bench_positions: Mapping[tuple[str, str], int],
) -> None:
    for pair in pairs:
        for state, ms, pt in pair.indices:
            for api, numbers, seen, key in (
                (pair.ms_api, ms, npu_positions, _STATE_KEYS[state][0]),
                (pair.pt_api, pt, bench_positions, _STATE_KEYS[state][1]),
            ):
                count = seen.get((api, state))
                if count is not None and numbers and max(numbers) >= count:
                    raise ConfigError(
                        path,
                        f"{pair.ms_api}: {key} {list(numbers)} is out of range: {api} has "
                        f"{count} {state} argument(s) in the dump",
                    )


def api_keys(
    npu_rows: list[tuple[str, str, str]],
    bench_entries: Collection[str],
    bench_rows: list[tuple[str, str, str]],
    pairs: tuple[ApiPair, ...],
    path: str | Path | None = None,
) -> list[str]:
    """Join key of each target row (name, entry, state) under ``-am``; the golden side keeps its
    renumbered names. Rows of a yaml API whose argument is not listed never match."""
    if path is not None and not pairs:
        warn(f"{path}: empty api mapping file; only the built-in table is used")
    table = builtin_table()
    npu_apis = {api_of(entry) for _, entry, _ in npu_rows}
    bench_apis = {api_of(entry) for entry in bench_entries}
    active = {p.ms_api: p for p in pairs if p.ms_api in npu_apis and p.pt_api in bench_apis}
    warn_unused(
        path,
        "api mapping",
        [p.ms_api if p.ms_api not in npu_apis else p.pt_api for p in pairs if p.ms_api not in active],
        "the dumps",
    )
    if active:
        check_ranges(path, active.values(), _positions(npu_rows), _positions(bench_rows))
    keys = []
    for name, entry, state in npu_rows:
        pair = active.get(api_of(entry))
        lists = pair.lookup(state) if pair is not None else None
        if pair is None or lists is None:
            keys.append(builtin_key(name, table))
            continue
        token = f"{entry}.{state}."
        rest = name[len(token) :] if name.startswith(token) else None
        ms, pt = lists
        if rest is not None and rest.isdigit() and int(rest) in ms:
            mapped_entry = pair.pt_api + entry[len(pair.ms_api) :]
            keys.append(f"{mapped_entry}.{state}.{pt[ms.index(int(rest))]}")
        else:
            keys.append(name + ABANDONED)
    return keys
