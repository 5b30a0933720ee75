"""Validation: the card -> archprobe.nn, streamed layer by layer, compared with a reference
(load: validate/load.py, build: validate/build.py, stream: validate/stream.py, compare: validate/reference.py)."""

from archprobe.validate.pipeline import validate

__all__ = ["validate"]
