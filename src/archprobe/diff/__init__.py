"""Two checkpoints side by side (issue 28): `headers` compares what inspect reads, from headers only."""
