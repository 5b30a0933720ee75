"""The report's observation section: drawn from an observe document, escaped, and a malformed or
foreign document never breaks the page."""

import json

import pytest

from archprobe.errors import ArchprobeError
from archprobe.report.collect import _read_json
from archprobe.report.html import _observe


def test_section_from_a_document(tmp_path):
    doc = {"schema": "archprobe.observe/1", "tokens": 12,
           "findings": [{"severity": "warning", "message": "NaN/Inf in <script>x</script>"}],
           "depth": [{"layer": 0, "cosine_in_out": 0.5}, {"layer": 1, "cosine_in_out": 0.9}],
           "routing": [{"layer": 0, "load": [3, 1]}], "attnres": [], "horizons": []}
    path = tmp_path / "o.json"
    path.write_text(json.dumps(doc))
    html = _observe(_read_json(str(path), "archprobe.observe/1", "the observe document"))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert html.count("<svg") == 2


def test_malformed_document_keeps_the_page():
    html = _observe({"tokens": "many", "depth": [{"layer": "x", "cosine_in_out": "y"}],
                     "routing": [{"layer": 0, "load": "abc"}], "findings": "no"})
    assert "Observation" in html


def test_foreign_schema_refused(tmp_path):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"schema": "archprobe.validate/1"}))
    with pytest.raises(ArchprobeError):
        _read_json(str(path), "archprobe.observe/1", "the observe document")
