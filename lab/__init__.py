"""lab: the experiment store and sweeps over attncore (joblib, pandas, dask)."""
