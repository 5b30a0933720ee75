"""`archprobe report`: one self-contained page (HTML or Markdown) with structure, layer plan,
parameters, memory, adaptation and validation, built from the same documents the commands print."""
