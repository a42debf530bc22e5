"""Who can answer an approval is a list of answerers registered with the broker: the first that can answer takes it."""

from __future__ import annotations

from typing import Any

from scripted_model import SCRIPTED_MODEL

from pi_kernel.kernel.approval_hook import SessionApprovals
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.turn import FrontendTracker, Turn
from pi_kernel.kernel.views import TurnOptions
from pi_kernel.tools.approval import ApprovalBroker


class Host:
    """What ``SessionApprovals`` reads of a session, with no front-end connected."""

    def __init__(self) -> None:
        self.settings = PiSettings()
        self.view_factory: Any = None
        self.frontend = FrontendTracker(lambda *args: False, list, widgets_override=False)
        self.tool_context = None

    def tool_definition(self, name: str) -> Any:
        return None


def turn(**fields: Any) -> Turn:
    return Turn(TurnOptions(), "cell", SCRIPTED_MODEL, None, **fields)


def ask(reply: str) -> str:
    return reply


def test_the_kernel_registers_widget_comm_stdin_nobody_in_that_order() -> None:
    broker = SessionApprovals(Host()).broker
    assert [answerer.name for answerer in broker.answerers] == ["widget", "comm", "stdin", "nobody"]


def test_the_first_answerer_that_can_answer_takes_the_request() -> None:
    host = Host()
    broker = SessionApprovals(host).broker
    console = turn(allow_stdin=True, raw_input=ask)
    assert broker.answerer_for(turn()).name == "nobody"  # type: ignore[union-attr]
    assert broker.answerer_for(console).name == "stdin"  # type: ignore[union-attr]
    host.view_factory = lambda *args: None  # a widget view: the front-end that sent the cell renders widgets
    assert broker.answerer_for(turn(widgets=True, allow_stdin=True, raw_input=ask)).name == "widget"  # type: ignore[union-attr]
    blocking = turn(widgets=True, blocking=True, allow_stdin=True, raw_input=ask)
    assert broker.answerer_for(blocking).name == "stdin"  # type: ignore[union-attr]  # no click reaches it


def test_a_registered_answerer_replaces_one_of_its_name() -> None:
    class Always:
        name, person = "nobody", True

        def can_answer(self, asking: Any) -> bool:
            return True

    broker = ApprovalBroker()
    broker.register(Always())  # type: ignore[arg-type]
    broker.register(Always())  # type: ignore[arg-type]
    assert len(broker.answerers) == 1 and broker.answerer_for(None) is broker.answerers[0]
