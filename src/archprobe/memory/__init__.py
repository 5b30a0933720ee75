"""Peak memory at a target context length and batch, per layer type (standard library only)."""

from archprobe.memory.plan import MemoryPlanError, plan_memory, sweep

__all__ = ["MemoryPlanError", "plan_memory", "sweep"]
