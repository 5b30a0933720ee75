"""The fused C kernels must be there where a C compiler is: one check the ops tests share."""

from __future__ import annotations

import os
import shutil

import pytest

from archprobe.ops import native


def require_native(name: str = "recurrences"):
    """The kernel must build where a C compiler is found (as on CI); without one the fused form cannot be
    tested at all, and the test says so instead of passing on the fallback."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler on this machine: the ops run their torch forms")
    assert native.library(name) is not None, native.unavailable_reason(name)
