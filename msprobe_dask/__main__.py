from msprobe_dask.cli import console_main

console_main()
