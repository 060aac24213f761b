"""Studies over many scenarios: batch runs (process pool or Dask) and trade-off curves."""
