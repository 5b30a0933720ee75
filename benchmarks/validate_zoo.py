"""The zoo table for issue 14: every member through validate's card path with the transformers
reference, and every renamed twin against its original's saved logits.

    PYTHONPATH=src python benchmarks/validate_zoo.py [ZOO_DIR] [names...]

ZOO_DIR (default $ARCHPROBE_ZOO_DIR or ./zoo) is built on first use by tests/support/zoo.py. Prints
family -> pass (rel max |diff|, KL) / unsupported (reason) / needs (card field) / fail (why), and the
pass rate over families and twins.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def main(argv: list[str]) -> int:
    from safetensors.torch import load_file
    from tests.support import zoo

    from archprobe.validate import validate
    from archprobe.validate.plan import NeedsField

    root = argv[0] if argv else os.environ.get("ARCHPROBE_ZOO_DIR", "zoo")
    names = argv[1:] or sorted(zoo.MEMBERS) + [zoo.twin_name(t) for t in sorted(zoo.TWINS)]
    rows, t0 = [], time.perf_counter()
    for name in names:
        twin = name.endswith(".twin")
        base = name[: -len(".twin")] if twin else name
        folder = zoo.build_twin(base, root) if twin else zoo.build(name, root)
        out = os.path.join(root, f"{name}.validate-logits.safetensors")
        try:
            doc = validate(str(folder), prompt_ids=list(zoo.PROMPT_IDS), reference="none" if twin else "transformers",
                           save_logits=out)
        except NeedsField as exc:
            rows.append((name, "needs", exc.path))
            continue
        if doc["status"] == "unsupported":
            rows.append((name, "unsupported", doc["reasons"][0][:110]))
        elif twin and doc["status"] == "ran":
            got = load_file(out)["logits"][0]
            want = zoo.load_reference_logits(zoo.build(base, root))
            rel = ((got - want).abs().max() / want.abs().max()).item()
            rows.append((name, "pass" if rel <= 1e-4 else "fail", f"rel max |diff| {rel:.1e} vs the original"))
        elif doc["status"] == "pass":
            ref = doc["reference"]
            rows.append((name, "pass", f"rel {ref['max_abs_diff'] / ref['logit_scale']:.1e}, KL {ref['kl']:.1e}"))
        else:
            ref = doc.get("reference") or {}
            why = (doc["missing_tensors"] or [""])[0][:110] or (
                f"rel {ref.get('max_abs_diff', 0) / max(ref.get('logit_scale', 1), 1e-30):.1e}, KL {ref.get('kl')}"
                if "kl" in ref else str(ref.get("error", ""))[:110])
            rows.append((name, "fail", why))
    width = max(len(r[0]) for r in rows)
    for name, status, why in rows:
        print(f"{name:{width}}  {status:11}  {why}")
    fam = Counter(s for n, s, _ in rows if not n.endswith(".twin"))
    tw = Counter(s for n, s, _ in rows if n.endswith(".twin"))
    nf, nt = sum(fam.values()), sum(tw.values())
    print(f"\nfamilies: {dict(fam)}  pass {fam['pass']}/{nf} = {fam['pass'] / max(nf, 1):.0%}")
    print(f"twins:    {dict(tw)}  pass {tw['pass']}/{nt}")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
