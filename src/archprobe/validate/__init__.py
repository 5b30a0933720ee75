"""Validation: map a checkpoint onto archprobe.nn, stream it layer by layer, compare with a reference."""

from archprobe.validate.stream import validate

__all__ = ["validate"]
