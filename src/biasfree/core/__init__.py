"""Networks, data and their symmetry: what every other part computes on."""
