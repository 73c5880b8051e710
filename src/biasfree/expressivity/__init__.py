"""What bias-free nets can represent: odd/even decomposition, floors, the depth-3 example."""
