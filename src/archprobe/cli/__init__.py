"""The `archprobe` command line: one file per command group, `main.py` only wires them."""
