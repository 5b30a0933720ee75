"""What a person reads: one module per command document, `render_<what>(doc)` drawing it on the terminal.

Each renderer takes the same document --json prints (cli/output.py `emit`), so the two never say
different things; every string from a checkpoint, server or file goes through cli/textsafe.py.
"""
