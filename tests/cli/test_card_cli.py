"""`archprobe card` and `--card`: write the card, correct a guess once, every command uses it; a card that
contradicts the shapes is one line naming the field and the tensor (exit 2)."""

from __future__ import annotations

import json

import yaml

from tests.support.cli import run


def _card(tmp_path, tiny_k3) -> dict:
    out = tmp_path / "card.yaml"
    r = run("card", tiny_k3, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "0 unexplained" in r.stdout
    return yaml.safe_load(out.read_text())


def _write(tmp_path, card: dict, name: str = "edited.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(card))
    return str(p)


def test_card_round_trip_and_a_corrected_guess_reaches_every_command(tmp_path, tiny_k3):
    card = _card(tmp_path, tiny_k3)
    assert card["schema"] == "archprobe.card/1"
    moe = next(i for i, layer in enumerate(card["layers"]) if layer["ffn"]["kind"] == "latent_moe")
    assert card["layers"][moe]["ffn"]["router"]["scoring"] == "sigmoid"
    assert card["origins"][f"layers.{moe}.ffn.router.scoring"].startswith("config:")
    assert card["tensors"][f"layers.{moe}.ffn.router"].endswith("gate.weight")
    for layer in card["layers"]:
        if layer["ffn"]["kind"] == "latent_moe":
            layer["ffn"]["router"]["scoring"] = "softmax"
    edited = _write(tmp_path, card)
    r = run("inspect", tiny_k3, "--card", edited, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    routed = next(f for f in doc["features"] if f["id"] == "moe.routed")
    assert routed["attrs"]["router"] == "softmax" and routed["attrs"]["router_source"] == "user"
    r = run("card", tiny_k3, "--card", edited, "--json")
    assert json.loads(r.stdout)["origins"][f"layers.{moe}.ffn.router.scoring"] == "user"
    for cmd in (["adapt", "--framework", "archprobe"], ["report", "-o", str(tmp_path / "r.html")]):
        r = run(*cmd[:1], tiny_k3, *cmd[1:], "--card", edited, "--json")
        assert r.returncode == 0, r.stderr
    # memory reads the card: a field the user blanks is unknown, and memory refuses naming it
    mla = next(i for i, layer in enumerate(card["layers"]) if layer["mixer"]["kind"] == "mla")
    card["layers"][mla]["mixer"]["cache_width_per_token"] = None
    r = run("memory", tiny_k3, "--card", _write(tmp_path, card, "blank.yaml"))
    assert r.returncode == 2 and f"layers.{mla}.mixer.cache_width_per_token" in r.stderr, r.stderr


def test_contradicting_cards_are_one_line_errors_naming_field_and_tensor(tmp_path, tiny_k3):
    card = _card(tmp_path, tiny_k3)
    mla = next(i for i, layer in enumerate(card["layers"]) if layer["mixer"]["kind"] == "mla")
    cases = {
        "num_heads": (mla, "num_heads", 3, "kv_b_proj"),
        "kv_lora_rank": (mla, "kv_lora_rank", 7, "kv_b_proj"),
        "q_lora_rank": (mla, "q_lora_rank", 5, "q_b_proj"),
    }
    for field, (i, key, value, tensor) in cases.items():
        bad = json.loads(json.dumps(card))
        bad["layers"][i]["mixer"][key] = value
        r = run("memory", tiny_k3, "--card", _write(tmp_path, bad, f"{field}.yaml"))
        assert r.returncode == 2, (field, r.stdout, r.stderr)
        line = r.stderr.strip()
        assert "\n" not in line and f"layers.{i}.mixer.{key}" in line and tensor in line, line
    bad = json.loads(json.dumps(card))
    bad["layers"][0]["mixer"]["heads"] = 4
    r = run("inspect", tiny_k3, "--card", _write(tmp_path, bad, "typo.yaml"))
    assert r.returncode == 2 and "layers.0.mixer.heads" in r.stderr and "\n" not in r.stderr.strip()
    bad = json.loads(json.dumps(card))
    bad["layers"] = bad["layers"][:-1]
    r = run("inspect", tiny_k3, "--card", _write(tmp_path, bad, "short.yaml"))
    assert r.returncode == 2 and "layers" in r.stderr
