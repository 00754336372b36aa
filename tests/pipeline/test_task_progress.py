"""RunOptions.on_progress: the share of finished tasks, reported as it grows, ending at 100."""

from __future__ import annotations

import dask

from msprobe_dask.pipeline.scheduler import RunOptions, computing


def test_local_progress_grows_to_100() -> None:
    seen: list[float] = []
    parts = [dask.delayed(pow)(i, 2) for i in range(20)]
    with computing(RunOptions(on_progress=seen.append)) as compute:
        (total,) = compute([dask.delayed(sum)(parts)])
    assert total == sum(i * i for i in range(20))
    assert seen == sorted(set(seen)) and seen[-1] == 100.0
    assert len(seen) > 5  # reported as tasks finish, not only at the end


def test_no_callback_no_reports() -> None:
    with computing(RunOptions()) as compute:
        assert compute([dask.delayed(len)("abc")]) == [3]
