"""How a ``%%pi`` turn is shown: the ``TurnView`` protocol, a cell's ``TurnOptions`` and its ``TurnOutcome``.

The cell runner calls a view from the event loop's thread only:
``handle_event`` for every agent event (it must be quick: the agent awaits
its listeners), ``handle_approval`` when a tool call starts or stops waiting
for a person, and ``finish`` once with the outcome.

``text_view.make_turn_view`` picks the widget view when widgets render in the
front-end that sent the cell (``widgets``, decided per request by
``FrontendTracker.renders_widgets``) and ``pi_kernel.widgets`` provides
``make_turn_view``; otherwise the plain-text view (``text_view``), which ends
in the same static output and is what consoles and headless runs get. A
session may set ``session.view_factory`` (a ``TurnViewFactory``) to use another view.
A view reads of its session only what ``ViewHost`` names (``PiSession`` has it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:  # the agent and tools layers load with the first turn, not at kernel start
    from pi_kernel.agent.types import AgentEvent
    from pi_kernel.ai import Message, Model
    from pi_kernel.tools.approval import ApprovalBroker, ApprovalRequest
    from pi_kernel.tools.definition import ToolDefinition
    from pi_kernel.widgets.factory import Steerable

TurnStatus = Literal["done", "interrupted", "error"]


@dataclass
class TurnOptions:
    """The options of one ``%%pi`` cell."""

    model: str | None = None
    """``--model NAME`` for this cell only."""
    no_tools: bool = False
    """``--no-tools``: no tools offered to the model in this cell."""
    max_turns: int | None = None
    """``--max-turns N``: stop after N model requests."""
    approve: str | None = None
    """``--approve MODE``: the approval mode for this cell only."""
    cells: bool = False
    """``--cells``: the ``python`` code of this turn comes back as a new cell below."""
    thinking: str | None = None
    """``--thinking off|low|medium|high``: the thinking effort for this cell only."""
    tool: str | None = None
    """``--tool NAME``: the model's first request must call tool NAME (``any``: some tool)."""


@dataclass
class TurnOutcome:
    status: TurnStatus
    messages: list[Message] = field(default_factory=list)
    """The messages this cell added (its prompt, answers, tool results)."""
    error: str | None = None
    """For ``error``: what went wrong (keys masked)."""


class TurnView(Protocol):
    def handle_event(self, event: AgentEvent) -> None:
        """Every agent event of the turn."""

    def handle_approval(self, kind: str, request: ApprovalRequest) -> None:
        """``kind`` is ``requested`` or ``resolved``."""

    def finish(self, outcome: TurnOutcome) -> object:
        """The turn ended; replace live parts with static output (what it returns is not used)."""


class ViewHost(Protocol):
    """What a turn's view reads of its session (the widget view's ``ViewSession`` is a part of it)."""

    @property
    def kernel(self) -> Any:
        """The running ipykernel kernel (untyped), or ``None`` outside one."""

    @property
    def shell(self) -> Any: ...

    @property
    def model(self) -> Model | None: ...

    @property
    def broker(self) -> ApprovalBroker: ...

    def tool_definition(self, name: str) -> ToolDefinition | None: ...

    @property
    def agent(self) -> Steerable:
        """The session's agent: a view's message box steers the running turn through it."""


TurnViewFactory = Callable[[ViewHost, str, TurnOptions], TurnView | None]
"""Makes the view of one turn (session, prompt, options); ``None`` where it cannot work."""
