"""Training: gradient descent, gradient flow, ensembles, losses and what a run records."""
