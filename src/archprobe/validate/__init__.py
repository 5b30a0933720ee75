"""Validation: the card -> archprobe.nn, streamed layer by layer, compared with a reference
(load: validate/load.py, build: validate/build.py over plan.py, roles.py and layouts.py, stream:
validate/stream.py, compare: validate/reference.py).

`validate` is imported on first use, so `archprobe.validate.status` (read by the report) needs no torch."""

__all__ = ["validate"]


def __getattr__(name: str):
    if name == "validate":
        from archprobe.validate.pipeline import validate

        return validate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
