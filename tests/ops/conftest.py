"""The ops' two forms at their defaults: the fused C recurrence (where a C compiler works) and the
chunked torch form (ARCHPROBE_NATIVE=0)."""

from __future__ import annotations

import pytest

from tests.support.native import require_native


@pytest.fixture(params=["fused", "chunked"])
def default_form(request, monkeypatch):
    """Run the test once with the op's defaults taking the fused kernel and once with it off."""
    if request.param == "chunked":
        monkeypatch.setenv("ARCHPROBE_NATIVE", "0")
    else:
        monkeypatch.delenv("ARCHPROBE_NATIVE", raising=False)
        require_native()
    return request.param
