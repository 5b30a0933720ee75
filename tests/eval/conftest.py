import pytest

from archprobe.eval.ledger import Ledger
from archprobe.eval.standin import Behaviour, StandinServer
from archprobe.eval.tasks import load_task_set


@pytest.fixture
def builtin():
    return load_task_set("builtin")


@pytest.fixture
def ledger(tmp_path):
    book = Ledger(tmp_path / "ledger.sqlite")
    yield book
    book.close()


@pytest.fixture
def flaky_server(builtin):
    """Answers right with p=0.6; 10% 500s, 10% 429s, 8% stalls past the client's timeout."""
    behaviour = Behaviour(seed=7, p_correct=0.6, p_error=0.10, p_rate_limit=0.10, p_stall=0.08, stall_s=1.5)
    with StandinServer(builtin, behaviour) as srv:
        yield srv


