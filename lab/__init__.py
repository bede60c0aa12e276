"""lab: experiments over attncore: the run store, sweeps, bundles, and the tables and comparisons built on them.

Its layers, each importing only those below: factors (group runs by any factor), and jobs (the dashboard's job
runtime: worker pool, progress files, slots, the operator's limits, the Dask client, a page's sweep loop) over
compare, tables, sweep (joblib on local cores or Dask) and bundle (runs in one .zip), over store (lab.store:
joblib.Memory on cache/), over presets (named sets of RunConfigs), over formats (one text format per quantity, for
pages and CLI) and limits (the operator's values: ATTNLAB_* or [limits] in the secrets files).
It may import attncore, NumPy, pandas, joblib, threadpoolctl and Dask;
nothing of ui, cli or app_pages, and no UI library.
"""
