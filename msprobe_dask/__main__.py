from msprobe_dask.cli import console_main

if __name__ == "__main__":  # not when a spawned worker process imports this module as __mp_main__
    console_main()
