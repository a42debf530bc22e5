"""``PiKernel``: ipykernel's Python kernel with a Pi session attached.

Ordinary cells run as Python; ``%%pi`` cells go to the session's agent (see
``cell_runner``). Configuration (``jupyter_config.py`` / command line)::

    c.PiKernel.model = "deepseek:deepseek-chat"
    c.PiKernel.approval = "ask"            # ask | auto | deny | read-only
    c.PiKernel.approval_timeout = 600      # seconds, above 0 (nothing waits forever)
    c.PiKernel.base_url = "http://127.0.0.1:11434/v1"
    c.PiKernel.builtin_tools = ["read", "bash", "python"]
    c.PiKernel.mcp_servers = {"time": {"command": "uvx", "args": ["mcp-server-time"]}}

Traitlets win over the environment (``PI_MODEL``, ``PI_APPROVAL``, ...), which
wins over a ``.env`` file. Every setting is an untyped trait checked by
``config.apply_config`` rather than by traitlets: a ``TraitError`` in
``__init__`` would kill the kernel (JupyterLab restarts it forever), while a
bad value there (``c.PiKernel.max_turns = "many"``) only falls back to the
default, with a warning in the session's first ``%pi`` output.

Busy status while a ``%%pi`` cell waits: ipykernel wraps every control request
and every request handled on a subshell in ``status: busy`` / ``status: idle``
messages parented by that request (ipykernel issue #799, jupyter_client issue
#838). JupyterLab's status bar takes any ``status`` as the kernel's state
(except for message types listed in the server's
``MappingKernelManager.untracked_message_types``), and it sends such requests
while a cell runs: a ``create_subshell_request`` on the control channel when
the first comm of a target opens (``commsOverSubshells``; once per cell, as the
view closes its widgets at the end), and any request of a console attached to
a subshell (``%pi allow ID`` typed there, say). Each ends with an ``idle`` that
made the status bar read "Idle" while the cell waited for an approval (its
``[*]`` still busy). (The widgets' own ``comm_msg`` clicks do not: ipykernel
7.4 routes them back to the shell the comm last sent from, the cell's, and
dispatches them concurrently with no status.) So after each control request
and each shell request not dispatched concurrently, ``PiKernel`` sends
``status: busy`` again with the running turn's ``execute_request`` as parent:
the state is true, clients that track a request by its ``idle`` are not
affected, and the lock in ``PiSession.reassert_busy`` orders it before the
cell's own final ``idle``. Only public pieces are used: ``dispatch_control`` /
``dispatch_shell`` are overridden without depending on their arguments (only
an optional ``concurrent`` keyword is read), and the status goes out through
``session.send`` on ``iopub_socket``. Outside ``%%pi`` turns (a long Python
cell) ipykernel's behaviour is unchanged.
"""

from __future__ import annotations

from typing import Any

import traitlets
from ipykernel.ipkernel import IPythonKernel

from pi_kernel import __version__
from pi_kernel.kernel.config import APPROVAL_MODES, CONFIG_NAMES, TOOL_APPROVAL_MODES


def Setting(help: str) -> Any:
    """A ``c.PiKernel.<name>`` setting: any value, checked by ``config.apply_config`` (see above)."""
    return traitlets.Any(None, allow_none=True, help=help).tag(config=True)


class PiKernel(IPythonKernel):
    implementation = "pi_kernel"
    implementation_version = __version__
    banner = f"Pi Agent kernel {__version__} (Python): %%pi cells talk to the agent; %pi help"

    model = Setting(help="Model id, 'provider:model' allowed (else from PI_MODEL / keys).")
    provider = Setting(help="Provider when the model id alone is ambiguous.")
    base_url = Setting(help="An OpenAI-compatible server URL.")
    approval = Setting(help=f"Approval mode for tool calls: {' | '.join(APPROVAL_MODES)}.")
    approval_overrides = Setting(
        help=f"Per-tool approval ({' | '.join(TOOL_APPROVAL_MODES)}), a dict or JSON: {{'bash': 'ask'}}."
    )
    approval_timeout = Setting(help="Seconds (above 0) before a pending approval is denied.")
    workspace_root = Setting(help="File tools refuse paths outside it.")
    builtin_tools = Setting(help="Built-in tools enabled at start: a list of names, or one string of them.")
    widgets = Setting(help="Force widget views on/off (default: detect).")
    max_turns = Setting(help="Default limit of model requests per %%pi cell (a whole number above 0).")
    system_prompt = Setting(help="Text added to the system prompt.")
    allowed_models = Setting(help="Models %pi model may choose: ids or provider:id, wildcards allowed (default: any).")
    tool_result_limit = Setting(help="Characters of each tool result sent to the model (a whole number above 0).")
    context_window = Setting(help="The model's context window in tokens (else known table, server, default).")
    budget = Setting(help="US dollars the session may spend on model requests.")
    token_budget = Setting(help="Tokens (in + out) the session may spend on model requests.")
    prices = Setting(help="Extra prices: {'model-id': [USD per million input, per million output]}.")
    mcp_servers = Setting(
        help='MCP servers in the mcpServers shape: {"time": {"command": "uvx", "args": ["mcp-server-time"]}}.'
    )
    notebook_context = Setting(help="Tell the model what changed in the notebook at each %%pi turn (default true).")
    describe_limit = Setting(help="Characters of one inspect / cells answer (default 4000).")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from pi_kernel.kernel.extension import attach

        overrides = {name: getattr(self, name) for name in CONFIG_NAMES}
        self.pi_session = attach(self.shell, overrides, kernel=self)

    def do_shutdown(self, restart: bool) -> Any:
        """Stop the session's MCP servers (and what they started) before the kernel exits."""
        session = getattr(self, "pi_session", None)
        if session is not None:
            session.close()
        return super().do_shutdown(restart)

    async def dispatch_control(self, *args: Any, **kwargs: Any) -> None:
        await super().dispatch_control(*args, **kwargs)
        self._reassert_busy()

    async def dispatch_shell(self, *args: Any, **kwargs: Any) -> None:
        await super().dispatch_shell(*args, **kwargs)
        if not kwargs.get("concurrent", False):  # a concurrent comm message publishes no status
            self._reassert_busy()

    def _reassert_busy(self) -> None:
        """``status: busy`` for the running ``%%pi`` cell, after another request's ``idle`` (see above)."""
        session, wire = getattr(self, "pi_session", None), self.session
        if session is None or wire is None:
            return

        def publish(parent: dict[str, Any]) -> None:
            wire.send(
                self.iopub_socket,
                "status",
                {"execution_state": "busy"},
                parent=parent,
                ident=f"kernel.{self.ident}.status".encode(),
            )

        try:
            session.reassert_busy(publish)
        except Exception:  # a status message must never break request handling
            self.log.debug("pi_kernel: could not re-send busy", exc_info=True)
