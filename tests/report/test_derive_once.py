"""`report --card X --validate`: the checkpoint is opened once and its card derived once, and the user's
field reaches every view (the page's structure, memory's card, adapt's own probe and validate)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")   # validate runs archprobe.nn

import archprobe.formats.sources as sources  # noqa: E402
import archprobe.structure.checkpoint as checkpoint  # noqa: E402
from archprobe.structure.card import load_card  # noqa: E402
from tests.support.cli import invoke  # noqa: E402

ACT = "made_up_act"   # an activation archprobe.nn lacks: each view that reads the user's card says so


@pytest.fixture
def counted(monkeypatch):
    """How often a source is opened and a card derived, counted on the functions that do it."""
    calls = {"open_source": 0, "derive": 0}

    def counting(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(sources, "open_source", counting("open_source", sources.open_source))
    monkeypatch.setattr(checkpoint, "derive", counting("derive", checkpoint.derive))
    return calls


def _user_card(folder, path) -> str:
    card = checkpoint.open_checkpoint(str(folder)).card
    assert card.layers[0].ffn.activation != ACT
    card.set("layers.0.ffn.activation", ACT)
    path.write_text(card.to_json())
    return str(path)


def test_report_with_card_and_validate_derives_once_and_every_view_has_the_users_field(tiny_k3, tmp_path,
                                                                                        counted):
    card = _user_card(tiny_k3, tmp_path / "card.json")
    counted.update(open_source=0, derive=0)
    r = invoke("report", str(tiny_k3), "--card", card, "--validate", "--json", "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert counted == {"open_source": 1, "derive": 1}
    assert data["inspect"]["card"]["layers"][0]["ffn"]["activation"] == ACT
    assert data["validate"]["status"] == "unsupported" and ACT in data["validate"]["reasons"][0]
    ours = next(f for f in data["adapt"]["frameworks"] if f["framework"] == "archprobe")
    assert ours["status"] == "unknown" and ACT in " ".join(ours["notes"])


def test_validate_and_observe_take_a_card_not_a_path(tiny_k3, tmp_path, counted):
    from archprobe.validate import validate

    card = load_card(_user_card(tiny_k3, tmp_path / "card.json"))
    counted.update(open_source=0, derive=0)
    doc = validate(str(tiny_k3), card=card)
    assert doc["status"] == "unsupported" and ACT in doc["reasons"][0]
    assert counted == {"open_source": 1, "derive": 1}

    from archprobe.observe import observe

    counted.update(open_source=0, derive=0)
    doc = observe(str(tiny_k3), card=card)     # the weights scan and the forward share one opening
    assert doc["forward"]["status"] == "unsupported" and ACT in doc["forward"]["reason"]
    assert doc["weights"] is not None
    assert counted == {"open_source": 1, "derive": 1}


def test_an_opened_checkpoint_keeps_its_card(tiny_k3, tmp_path):
    ck = checkpoint.open_checkpoint(str(tiny_k3))
    assert checkpoint.as_checkpoint(ck) is ck
    with pytest.raises(ValueError, match="already opened"):
        checkpoint.as_checkpoint(ck, load_card(_user_card(tiny_k3, tmp_path / "card.json")))


def test_no_source_means_the_demo_decided_once(counted):
    from archprobe.demo import DEMO_NAME

    ck = checkpoint.open_checkpoint(None)
    assert ck.source.endswith(DEMO_NAME) and ck.raw.kind == "local"
    assert counted == {"open_source": 1, "derive": 1}
