"""archprobe: read the weights, not the rumors.

The reading side (`formats`, `structure`) imports without torch; `ops`/`nn` need the `torch` extra.
"""

from archprobe.errors import ArchprobeError, CheckpointError

__version__ = "0.1.0"
__all__ = ["ArchprobeError", "CheckpointError", "inspect_checkpoint", "__version__"]


def inspect_checkpoint(source=None, **kwargs):
    """Inspect a checkpoint (local folder, file or hub repo id); see `archprobe.structure.inspect`."""
    from archprobe.structure.inspect import inspect_checkpoint as _inspect

    return _inspect(source, **kwargs)
