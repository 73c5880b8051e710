"""Your own model and data: interop, the analysis, its graded verdict and figure."""
