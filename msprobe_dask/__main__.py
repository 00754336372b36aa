from msprobe_dask.cli import main

raise SystemExit(main())
