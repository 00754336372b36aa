"""``msprobe-dask convert`` and compare / graph_visualize on the zarr store: the same outputs as on the
dump (csv bytes, xlsx cells, vis.db rows) for every tensor case; resume, refusal to overwrite; a damaged
store (an array or a chunk file missing, metadata unreadable) or an unreachable URL is one line, exit 2,
nothing written; a chunk file that cannot be read makes its tensor's rows errors naming it (exit 1)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openpyxl
import pytest
from conftest import case_dir, read_csv

from msprobe_dask.cli import main
from msprobe_dask.dump.convert import partial_path, store_bytes
from msprobe_dask.metrics.tensor import measure_pair

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
from visdb_diff import diff_visdb, path_normalizer  # noqa: E402

DATA = case_dir("tensor_mix").parent
CASES = ("tensor_mix", "fuzzy_tensor", "ms_vs_pt_tensor")
EDGE = DATA / "tensors" / "edge"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every side of every tensor case (and the edge-case tensors) converted below one folder."""
    root = tmp_path_factory.mktemp("stores")
    for case in CASES:
        for side in ("target", "golden"):
            assert main(["convert", "-q", str(DATA / case / side), "-o", str(root / case / side)]) == 0
    for kind in ("npy", "pt"):
        for side in ("target", "golden"):
            source = root / "edge_dumps" / kind / side
            shutil.copytree(EDGE / kind / side, source)
            (source / "dump.json").write_text(json.dumps({"task": "tensor", "data": {}}))
            assert main(["convert", "-q", str(source), "-o", str(root / "edge" / kind / side)]) == 0
    return root


def _commands() -> list[tuple[str, str, list[str]]]:
    runs = []
    for case in CASES:
        for cmd in json.loads((DATA / case / "ref" / "commands.json").read_text()):
            if cmd["argv"][1] in ("compare", "graph_visualize") and cmd["rc"] == 0:
                runs.append((case, cmd["name"], cmd["argv"][1:]))
    return runs


def _run(argv: list[str], root: Path, out: Path) -> Path:
    """Run a reference command line with its paths below ``root`` (tests/data or the stores)."""
    args = [a if not a.startswith(tuple(f"{c}/" for c in CASES)) else str(root / a) for a in argv]
    for flag in ("-lm", "--layer_mapping"):
        if flag in args and args[args.index(flag) + 1].endswith(".yaml"):
            args[args.index(flag) + 1] = str(DATA / argv[args.index(flag) + 1])
    args[args.index("-o") + 1] = str(out)
    assert main([args[0], "-q", *args[1:]]) == 0
    (written,) = [p for p in out.iterdir() if p.suffix in (".csv", ".xlsx", ".db")]
    return written


def _xlsx_cells(path: Path) -> list[list[object]]:
    book = openpyxl.load_workbook(path)
    return [[c.value for c in row] for sheet in book for row in sheet.iter_rows()]


@pytest.mark.parametrize(("case", "name", "argv"), _commands(), ids=[f"{c}-{n}" for c, n, _ in _commands()])
def test_store_gives_the_dumps_outputs(
    case: str, name: str, argv: list[str], stores: Path, tmp_path: Path
) -> None:
    ours = _run(argv, DATA, tmp_path / "dump")
    from_store = _run(argv, stores, tmp_path / "store")
    if ours.suffix == ".csv":
        assert from_store.read_bytes() == ours.read_bytes()
    elif ours.suffix == ".xlsx":
        assert _xlsx_cells(from_store) == _xlsx_cells(ours)
    else:
        fix = path_normalizer(str(stores), str(DATA))
        normalize = {("tb_nodes", "dump_data_dir"): fix}  # the dump's path: the store's here
        assert diff_visdb(str(from_store), str(ours), normalize=normalize) == []


@pytest.mark.parametrize("key", sorted(json.loads((EDGE / "expected.json").read_text())))
def test_edge_case_tensors_read_back_from_the_store(key: str, stores: Path) -> None:
    """bfloat16, float8, raw |V2, big-endian, Fortran and non-contiguous tensors keep their cells."""
    kind, npu = key.split("/", 1)
    bench = json.loads((EDGE / "expected.json").read_text())[key][-1]
    original = measure_pair(
        EDGE / kind / "target/dump_tensor_data" / npu, EDGE / kind / "golden/dump_tensor_data" / bench
    )
    converted = measure_pair(
        stores / "edge" / kind / "target/dump_tensor_data" / npu,
        stores / "edge" / kind / "golden/dump_tensor_data" / bench,
    )
    assert converted.cells == original.cells


def test_zarr_reads_the_arrays_convert_writes(stores: Path) -> None:
    """convert writes its arrays itself (zarr_store.write_array): zarr opens each one, with the same
    elements as read without it."""
    import zarr

    from msprobe_dask.dump import zarr_store

    arrays = [p.parent for p in sorted(stores.rglob("dump_tensor_data/*/zarr.json"))]
    assert len(arrays) > 20
    for path in arrays:
        _, shape, complete = zarr_store.array_header(path)
        stored = zarr.open_array(str(path), mode="r")
        assert complete and stored.shape == (int(np.prod(shape)),)
        assert zarr_store.array_nbytes(path) == stored.nbytes  # (what a compare sizes its batches by)
        itemsize = stored.dtype.itemsize
        assert np.array_equal(
            np.asarray(stored[:]).view(np.uint8), zarr_store.read_bytes(path, itemsize, 0, stored.shape[0])
        )


def test_file_url(stores: Path, tmp_path: Path) -> None:
    case = DATA / "tensor_mix"
    argv = [
        "compare",
        "-tp",
        f"file://{stores}/tensor_mix/target",
        "-gp",
        f"file://{stores}/tensor_mix/golden",
    ]
    assert main([*argv, "-q", "-o", str(tmp_path / "url")]) == 0
    ours = _run(
        ["compare", "-tp", "tensor_mix/target", "-gp", "tensor_mix/golden", "-o", "x"], DATA, tmp_path / "d"
    )
    (from_url,) = (tmp_path / "url").iterdir()
    assert from_url.read_bytes() == ours.read_bytes()
    assert case.exists()


@pytest.fixture
def memory_stores(stores: Path) -> Iterator[str]:
    """The tensor_mix stores copied into fsspec's memory filesystem (it lives in this process)."""
    import fsspec

    memory = fsspec.filesystem("memory")
    for side in ("target", "golden"):
        memory.put(str(stores / "tensor_mix" / side), f"/tensor_mix_{side}.zarr", recursive=True)
    yield "memory://tensor_mix_{}.zarr"
    memory.rm("/", recursive=True)


@pytest.mark.parametrize("name", ["compare_csv", "compare_xlsx", "vis"])
def test_memory_url(
    name: str, memory_stores: str, stores: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store named by a memory:// URL: the local store's outputs, its tensors read from the URL; the
    json mirror's temporary folder removed after the run."""
    temporary = tmp_path / "tmp"  # this test's own: other runs on the machine make theirs in /tmp
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    (argv,) = [a for c, n, a in _commands() if c == "tensor_mix" and n == name]
    ours = _run(argv, stores, tmp_path / "local")
    at_urls = [
        memory_stores.format(a.split("/")[1]) + a[len("tensor_mix/target") :]
        if a.startswith("tensor_mix/")
        else a
        for a in argv
    ]
    from_url = _run(at_urls, stores, tmp_path / "url")
    if ours.suffix == ".csv":
        assert from_url.read_bytes() == ours.read_bytes()
    elif ours.suffix == ".xlsx":
        assert _xlsx_cells(from_url) == _xlsx_cells(ours)
    else:

        def last_folder(value: object) -> object:  # the store's path: the mirror's temporary folder here
            return value.rsplit("/", 1)[-1] if isinstance(value, str) else value

        normalize = {("tb_nodes", "dump_data_dir"): last_folder}
        assert diff_visdb(str(from_url), str(ours), normalize=normalize) == []
    assert not list(temporary.iterdir())


def _many_tensor_dump(folder: Path) -> Path:
    rng = np.random.default_rng(1)
    (folder / "dump_tensor_data").mkdir(parents=True)
    for i in range(12):
        values = rng.standard_normal(50_000).astype(np.float16 if i % 2 else np.float32)
        np.save(folder / "dump_tensor_data" / f"Tensor.op.{i}.forward.output.0.npy", values)
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "framework": "mindspore", "data": {}}))
    return folder


def test_store_is_smaller_resumes_and_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    dump = _many_tensor_dump(tmp_path / "dump")
    store = tmp_path / "run.zarr"
    assert main(["convert", "-q", str(dump), "-o", str(store)]) == 0
    assert capsys.readouterr().out == f"The zarr store is: {store}\n"  # -q: the path line only
    original = sum(p.stat().st_size for p in dump.rglob("*") if p.is_file())
    assert store_bytes(store) < original
    # refuses to overwrite: one line, exit 2, the store untouched
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    capsys.readouterr()
    assert main(["convert", "-q", str(dump), "-o", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists" in err
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
    # an interrupted run (one array incomplete, one missing) is resumed
    shutil.move(store, partial_path(store))
    arrays = sorted((partial_path(store) / "dump_tensor_data").glob("*.npy"))
    shutil.rmtree(arrays[0])
    meta = json.loads((arrays[1] / "zarr.json").read_text())
    meta["attributes"]["msprobe_dask"]["complete"] = False
    (arrays[1] / "zarr.json").write_text(json.dumps(meta))
    assert main(["convert", str(dump), "-o", str(store)]) == 0
    assert (
        "2 tensors as zarr arrays, 0 files copied, 11 kept from the interrupted run"
        in capsys.readouterr().out
    )
    assert not partial_path(store).exists()
    for path in sorted((dump / "dump_tensor_data").iterdir()):
        assert measure_pair(path, store / "dump_tensor_data" / path.name).cells == (
            1.0,
            0.0,
            0.0,
            0.0,
            1.0,
            1.0,
        )


def _bad_input(argv: list[str], out: Path, capsys: pytest.CaptureFixture) -> str:
    capsys.readouterr()
    assert main([*argv, "-q", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert not out.exists() or not any(out.iterdir())
    return err


def test_damaged_stores_and_unreachable_urls(
    stores: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(stores / "tensor_mix" / "target", broken)
    golden = str(stores / "tensor_mix" / "golden")
    (chunk,) = [p for p in (broken / "dump_tensor_data").glob("*.pt/c/0") if p.stat().st_size > 100][:1]
    shutil.rmtree(chunk.parent.parent)
    err = _bad_input(["compare", "-tp", str(broken), "-gp", golden], tmp_path / "o2", capsys)
    assert "no such array" in err and chunk.parent.parent.name in err
    err = _bad_input(["graph_visualize", "-tp", str(broken), "-gp", golden], tmp_path / "o3", capsys)
    assert "no such array" in err
    for url in ("s3://no-such-bucket/run.zarr", f"file://{tmp_path}/nowhere.zarr", "memory://nowhere.zarr"):
        err = _bad_input(["compare", "-tp", url, "-gp", golden], tmp_path / "o4", capsys)
        assert url.split("://")[1] in err and ("cannot be reached" in err or "does not exist" in err)
    assert "install the remote extra" in _bad_input(
        ["graph_visualize", "-tp", "s3://no-such-bucket/run.zarr", "-gp", golden], tmp_path / "o5", capsys
    )


def test_a_corrupt_or_unreadable_chunk_makes_its_rows_errors(
    stores: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """As a damaged ``.npy`` (D27): the tensor's rows are errors naming the chunk file, never ``pass``,
    the run goes on (the intact store's rows) and its last line counts them (exit 1)."""
    golden = str(stores / "tensor_mix" / "golden")
    intact = _run(["compare", "-tp", str(stores / "tensor_mix" / "target"), "-gp", golden, "-o", ""],
                  stores, tmp_path / "intact")  # fmt: skip
    for damage in ("garbage", "unreadable", "meta"):
        broken = tmp_path / damage
        shutil.copytree(stores / "tensor_mix" / "target", broken)
        (chunk,) = [p for p in (broken / "dump_tensor_data").glob("*.pt/c/0") if p.stat().st_size > 100][:1]
        if damage == "garbage":
            chunk.write_bytes(b"\x00garbage" * 20)
        elif damage == "unreadable":  # (chmod 0 would not keep root from reading it)
            chunk.unlink()
            chunk.mkdir()
        else:  # a damaged store: its array's metadata unreadable
            (chunk.parent.parent / "zarr.json").write_text("{")
            _bad_input(["compare", "-tp", str(broken), "-gp", golden], tmp_path / "o-meta", capsys)
            continue
        capsys.readouterr()
        out = tmp_path / f"o-{damage}"
        assert main(["compare", "-q", "-tp", str(broken), "-gp", golden, "-o", str(out)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "could not be read" in err[0] and str(chunk) in err[0], err
        (csv,) = out.glob("*.csv")
        rows, theirs = read_csv(csv), read_csv(intact)
        assert len(rows) == len(theirs) and rows[0] == theirs[0]
        result, message = rows[0].index("Result"), rows[0].index("Err_message")
        bad = [row for row in rows[1:] if str(chunk) in row[message]]
        assert bad and all(row[result] == "error" for row in bad)
        assert [row[:2] for row in rows] == [row[:2] for row in theirs]  # (the names: the same rows)
        expected = "corrupt zarr chunk" if damage == "garbage" else "cannot read the chunk"
        assert all(expected in row[message] for row in bad), bad


def _codecs() -> dict[str, dict[str, object]]:
    from zarr.codecs import BloscCodec, ZstdCodec

    return {
        "blosc-zstd": {"compressors": BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=4)},
        "blosc-lz4-bitshuffle": {"compressors": BloscCodec(cname="lz4", shuffle="bitshuffle", typesize=4)},
        "zstd": {"compressors": ZstdCodec()},
        "uncompressed": {"compressors": None},
    }


@pytest.mark.parametrize("codec", sorted(_codecs()))
def test_arrays_compressed_otherwise_read_the_same(codec: str, tmp_path: Path) -> None:
    """Stores written with another codec (blosc's, read straight from the chunk files; any other, read by
    zarr): the same elements, for any slice, an edge chunk padded, a chunk of zeros that zarr leaves
    unwritten."""
    import zarr

    from msprobe_dask.dump import zarr_store
    from msprobe_dask.dump.tensor_file import open_tensor, read_array, read_flat

    values = np.random.default_rng(3).standard_normal(10_000).astype(np.float32)
    values[3000:6000] = 0
    path = tmp_path / "Tensor.op.0.forward.output.0.npy"
    attrs = {"dtype": "<f4", "shape": [100, 100], "complete": True}
    array = zarr.create_array(
        str(path), shape=(10_000,), chunks=(3000,), dtype="u4", fill_value=0,
        attributes={zarr_store.ATTRIBUTE: attrs}, **_codecs()[codec],  # type: ignore[arg-type]
    )  # fmt: skip
    array[:] = values.view("u4")
    assert not (path / "c" / "1").exists()
    direct = zarr_store._chunk_elems(json.loads((path / "zarr.json").read_text()), 4)
    assert direct == (3000 if codec.startswith("blosc") else None)  # read without zarr, or by zarr
    assert zarr_store.array_nbytes(path) == values.nbytes
    handle = open_tensor(path)
    assert np.array_equal(read_array(handle), values.reshape(100, 100))
    for start, stop in ((0, 10_000), (2500, 7100), (9000, 10_000), (9999, 10_000), (4000, 4001)):
        assert np.array_equal(read_flat(handle, start, stop), values[start:stop])


def test_an_array_of_many_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_array's chunks (the edge one padded, one of zeros) read back by zarr and without it."""
    import zarr

    from msprobe_dask.dump import zarr_store
    from msprobe_dask.dump.tensor_file import open_tensor, read_flat

    monkeypatch.setattr(zarr_store, "CHUNK_BYTES", 6000)
    values = np.random.default_rng(4).standard_normal(10_000).astype(np.float16)
    values[3000:6000] = 0
    path = tmp_path / "Tensor.op.0.forward.output.0.pt"
    zarr_store.write_array(path, values.dtype, (100, 100), lambda start, stop: values[start:stop])
    assert sorted(p.name for p in (path / "c").iterdir()) == ["0", "1", "2", "3"]
    assert np.array_equal(np.asarray(zarr.open_array(str(path), mode="r")[:]).view(np.float16), values)
    handle = open_tensor(path)
    for start, stop in ((0, 10_000), (2500, 7100), (9000, 10_000), (9999, 10_000)):
        assert np.array_equal(read_flat(handle, start, stop), values[start:stop])
