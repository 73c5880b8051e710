"""The application: command line, report page and Dask sweeps."""
