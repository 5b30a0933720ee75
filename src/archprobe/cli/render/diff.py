"""Terminal rendering of the diff document; every checkpoint string goes through SafeConsole."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from archprobe.cli.render.inspect import human_count
from archprobe.cli.textsafe import SafeConsole, line
from archprobe.units import human_bytes


def _v(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _signed(n: int, human) -> str:
    return ("+" if n > 0 else "-" if n < 0 else "") + human(abs(n))


def _more(c: Console, block: dict, what: str) -> None:
    if block.get("left_out"):
        c.print(f"  ... {block['left_out']:,} more {what} left out (--limit, or --json)")


def render_diff(doc: dict, console: Console | None = None) -> None:
    c = console or SafeConsole()
    a, b = doc["a"], doc["b"]
    c.print(line(("A ", "bold"), a.get("location") or "-", f"  ({a.get('model_type') or '-'})"))
    c.print(line(("B ", "bold"), b.get("location") or "-", f"  ({b.get('model_type') or '-'})"))
    if "files" in doc:
        _files(c, doc["files"])
    if "card" not in doc:     # --files-only
        return
    if doc["identical"]:
        c.print(line(("no differences", "green")))
        _sizes(c, doc["sizes"])
        _weights(c, doc)
        return
    card = doc["card"]
    if card["total"]:
        t = Table(title=f"Card: {card['total']:,} field(s) differ")
        for col in ("field", "A", "B"):
            t.add_column(col)
        for row in card["items"]:
            t.add_row(row["path"], _v(row["a"]), _v(row["b"]))
        c.print(t)
        _more(c, card, "fields")
    cfg = doc["config"]
    if cfg["total"]:
        t = Table(title=f"config.json: {cfg['total']:,} key(s) differ")
        for col in ("", "key", "A", "B"):
            t.add_column(col)
        for kind, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
            for row in cfg[kind]["items"]:
                t.add_row(mark, row["key"], _v(row["a"]) if kind != "added" else "",
                          _v(row["b"]) if kind != "removed" else "")
        c.print(t)
        for kind in ("added", "removed", "changed"):
            _more(c, cfg[kind], f"{kind} keys")
    _tensors(c, doc["tensors"])
    _sizes(c, doc["sizes"])
    _weights(c, doc)


def _files(c: Console, f: dict) -> None:
    n = f"{f['same']:,} of {f['files_a']:,} / {f['files_b']:,} files hold the same bytes"
    if f["identical"]:
        c.print(line(("files: byte-identical", "green"), f" ({n}, by the hub's digests)"))
        return
    c.print(line(("files: ", "bold"), n, "; weights ",
                 ("byte-identical", "green") if f["weights_identical"] else ("differ", "red"),
                 "; the model's files (all but docs) ",
                 ("the same", "green") if f.get("model_identical") else ("differ", "red")))
    t = Table(title="Files that differ (by the hub's sha256 / git digests)")
    for col in ("", "A", "B", "what"):
        t.add_column(col)
    for row in f["changed"]["items"]:
        t.add_row("~", row["path"], "", ("shard " if row["weights"] else "") + "bytes changed "
                  f"({human_bytes(row['a']['size'] or 0)} → {human_bytes(row['b']['size'] or 0)})")
    for row in f["removed"]["items"]:
        t.add_row("-", row["path"], "", "")
    for row in f["added"]["items"]:
        t.add_row("+", "", row["path"], "")
    for row in f["moved"]["items"]:
        t.add_row("→", row["a"], row["b"], "same bytes, another path")
    for row in f["unverified"]["items"]:
        t.add_row("?", row["path"], row["path"], "unverified: " + _v(row["why"]))
    c.print(t)
    for kind in ("changed", "removed", "added", "moved", "unverified"):
        _more(c, f[kind], f"{kind} files")


def _tensors(c: Console, tens: dict) -> None:
    if not tens["total"]:
        return
    t = Table(title=f"Tensors: {tens['added']['total']:,} added, {tens['removed']['total']:,} removed, "
                    f"{tens['renamed']['total']:,} renamed, {tens['changed']['total']:,} changed")
    for col in ("", "A", "B", "what"):
        t.add_column(col)
    for row in tens["removed"]["items"]:
        t.add_row("-", row["name"], "", f"{row['dtype']} {row['shape']}")
    for row in tens["added"]["items"]:
        t.add_row("+", "", row["name"], f"{row['dtype']} {row['shape']}")
    for row in tens["renamed"]["items"]:
        t.add_row("→", row["a"], row["b"], f"by {row['by']}" + (f" ({row['role']})" if row.get("role") else ""))
    for row in tens["changed"]["items"]:
        what = "; ".join(f"{k} {_v(row[k]['a'])} → {_v(row[k]['b'])}" for k in ("dtype", "shape", "count")
                         if k in row)
        t.add_row("~", row["a"], row["b"] if row["b"] != row["a"] else "", what)
    c.print(t)
    for kind in ("removed", "added", "renamed", "changed"):
        _more(c, tens[kind], f"{kind} tensors")
    if tens["renamed"].get("by_shape_fallback"):
        c.print(f"  {tens['renamed']['by_shape_fallback']} rename(s) matched by shape and dtype within the same "
                "layer (no card role on one side)")
    if tens["dtype_families"]:
        ft = Table(title="dtype / quantization changes per tensor family")
        for col in ("family", "A", "B", "tensors", "bytes A", "bytes B"):
            ft.add_column(col)
        for row in tens["dtype_families"]:
            ft.add_row(row["family"], row["a"], row["b"], f"{row['tensors']:,}", human_bytes(row["bytes_a"]),
                       human_bytes(row["bytes_b"]))
        c.print(ft)


def _sizes(c: Console, sizes: dict) -> None:
    p, by = sizes["params"], sizes["bytes"]
    c.print(f"parameters: {human_count(p['a'])} → {human_count(p['b'])} ({_signed(p['delta'], human_count)}); "
            f"stored bytes: {human_bytes(by['a'])} → {human_bytes(by['b'])} ({_signed(by['delta'], human_bytes)})")
    if p["by_component"] or by["by_component"]:
        t = Table(title="Deltas per component")
        for col in ("component", "params A", "params B", "Δ params", "bytes A", "bytes B", "Δ bytes"):
            t.add_column(col)
        pc = {r["component"]: r for r in p["by_component"]}
        bc = {r["component"]: r for r in by["by_component"]}
        for comp in list(pc) + [k for k in bc if k not in pc]:
            x, y = pc.get(comp), bc.get(comp)
            t.add_row(comp, *((human_count(x["a"]), human_count(x["b"]), _signed(x["delta"], human_count)) if x
                              else ("", "", "0")),
                      *((human_bytes(y["a"]), human_bytes(y["b"]), _signed(y["delta"], human_bytes)) if y
                        else ("", "", "0")))
        c.print(t)


def _weights(c: Console, doc: dict) -> None:
    if "data" in doc:
        _data(c, doc["data"])
    if "forward" in doc:
        _forward(c, doc["forward"])


def _data(c: Console, data: dict) -> None:
    c.print(f"weights (--data): {data['compared']:,} tensor(s) compared by role, {data['identical']:,} identical, "
            f"{data['differing']:,} differ" + (f"; {len(data['skipped'])} skipped" if data["skipped"] else ""))
    if data["differing"]:
        t = Table(title="Per layer (A is the reference)")
        for col in ("layer", "rel error", "max error", "cosine", "outliers", ""):
            t.add_column(col)
        for row in data["layers"]:
            t.add_row(row["layer"], f"{row['rel_error']:.3e}", f"{row['max_error']:.3e}", f"{row['cosine']:.6f}",
                      f"{row['outlier_share']:.2%}", "flagged" if row["flagged"] else "")
        c.print(t)
        t = Table(title="Tensors that differ (largest relative error first)")
        for col in ("role", "A", "B", "rel error", "max error", "cosine", "outliers"):
            t.add_column(col)
        for row in data["tensors"]["items"]:
            t.add_row(row["role"], row["a"] or "", row["b"] if row["b"] != row["a"] else "",
                      f"{row['rel_error']:.3e}", f"{row['max_error']:.3e}", f"{row['cosine']:.6f}",
                      f"{row['outlier_share']:.2%}")
        c.print(t)
        _more(c, data["tensors"], "tensors")
    for row in data["skipped"]:
        c.print(f"  not compared: {row['role']}: {row['why']}")


def _forward(c: Console, fwd: dict) -> None:
    c.print(f"forward (--forward): {fwd['tokens']} token(s), {fwd['dtype']}")
    for side, why in fwd["errors"].items():
        c.print(f"  {side.upper()}: {why}")
    rows = [r for r in fwd["layers"] if r["compared"]]
    if rows:
        t = Table(title="Hidden states per layer (B against A)")
        for col in ("layer", "rel RMS", "max |diff|", "cosine"):
            t.add_column(col)
        for row in rows:
            t.add_row(str(row["layer"]), f"{row['rel_rms']:.3e}", f"{row['max_abs']:.3e}", f"{row['cosine']:.6f}")
        c.print(t)
    lg = fwd["logits"]
    if "error" in lg:
        c.print(f"  logits not compared: {lg['error']}")
        return
    c.print(f"  Mean KLD: {lg['mean_kld']:.6f} ± {lg['mean_kld_uncertainty']:.6f}   99.0% KLD: {lg['kld_99']:.6f}   "
            f"99.9% KLD: {lg['kld_99_9']:.6f}   Maximum KLD: {lg['max_kld']:.6f}")
    c.print(f"  RMS Δp: {lg['rms_delta_p']:.3%}   Same top p: {lg['same_top_p']:.3%}   "
            f"({lg['positions']} position(s), as llama-perplexity --kl-divergence)")
