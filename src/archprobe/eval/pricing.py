"""Dollars per attempt from a price table the user gives (`--price input=3/M,output=15/M` or a YAML file).

Why the user's table: list prices change and self-hosted models have none; a relayed "Y dollars" is
only comparable when the table that produced it is written down, so the run stores it in its params.
A price is dollars per token, written as `3/M` (per million), `0.5/K` (per thousand) or a plain number
per token. The YAML form is either the same keys (`input: 3/M`) or one mapping per model name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from archprobe.errors import ArchprobeError

UNITS = {"": 1.0, "K": 1e3, "M": 1e6}


@dataclass(frozen=True)
class Price:
    input: float      # dollars per input (prompt) token
    output: float     # dollars per output (completion) token
    source: str = ""

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """Dollars for one call; None when the server did not report a count (unknown is not zero)."""
        if tokens_in is None or tokens_out is None:
            return None
        return tokens_in * self.input + tokens_out * self.output

    def to_dict(self) -> dict:
        return {"input_per_token": self.input, "output_per_token": self.output, "source": self.source}


def parse_amount(text, where: str) -> float:
    """'3/M' -> 3e-6 dollars per token; '0.5/K' -> 5e-4; '2e-6' -> 2e-6."""
    s = str(text).strip().replace("$", "")
    amount, _, unit = s.partition("/")
    unit = unit.strip().upper().removeprefix("1")
    if unit not in UNITS:
        raise ArchprobeError(f"{where}: unknown price unit {unit!r} in {text!r}", hint="write e.g. 3/M or 0.5/K")
    try:
        value = float(amount)
    except ValueError:
        raise ArchprobeError(f"{where}: {text!r} is not a price", hint="write e.g. input=3/M,output=15/M") from None
    if not value >= 0 or value == float("inf"):
        raise ArchprobeError(f"{where}: a price must be a non-negative number, not {text!r}")
    return value / UNITS[unit]


def parse_price(spec: str | None, model: str | None = None) -> Price | None:
    """`input=3/M,output=15/M`, or a path to a YAML file (flat, or keyed by model name)."""
    if not spec:
        return None
    if "=" not in spec and Path(spec).exists():   # a FIFO or folder is refused by the reader, not parsed
        return _from_yaml(Path(spec), model)
    fields = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ArchprobeError(f"--price: {part!r} is not key=value", hint="e.g. --price input=3/M,output=15/M")
        fields[key.strip().lower()] = value
    return _from_fields(fields, "--price", spec)


def _from_fields(fields: dict, where: str, source: str) -> Price:
    unknown = set(fields) - {"input", "output"}
    if unknown or not {"input", "output"} <= set(fields):
        raise ArchprobeError(f"{where}: a price table needs exactly `input` and `output`, got {sorted(fields)}")
    return Price(parse_amount(fields["input"], where), parse_amount(fields["output"], where), source)


def _from_yaml(path: Path, model: str | None) -> Price:
    from archprobe.formats import structured

    doc = structured.load_yaml(str(path), "the price file")
    if not isinstance(doc, dict):
        raise ArchprobeError(f"{path}: a price file is a mapping")
    if "input" not in doc and model is not None:
        if model not in doc or not isinstance(doc[model], dict):
            raise ArchprobeError(f"{path}: no prices for model {model!r}", hint="models listed: "
                                 + ", ".join(map(str, list(doc)[:10])))
        doc = doc[model]
    return _from_fields({str(k).lower(): v for k, v in doc.items()}, str(path), str(path))
