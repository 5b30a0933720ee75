"""The ops' two forms at their defaults: the fused C recurrence (where a C compiler works) and the
chunked torch form (ARCHPROBE_NATIVE=0)."""

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


@pytest.fixture(params=["fused", "chunked"])
def default_form(request, monkeypatch):
    """Run the test once with the op's defaults taking the fused kernel and once with it off."""
    if request.param == "chunked":
        monkeypatch.setenv("ARCHPROBE_NATIVE", "0")
    else:
        monkeypatch.delenv("ARCHPROBE_NATIVE", raising=False)
        require_native()
    return request.param
