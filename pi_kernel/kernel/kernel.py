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
``config.apply_config``, not by traitlets: a ``TraitError`` in ``__init__``
would kill the kernel (JupyterLab restarts it forever), while a bad value
there only falls back to the default, with a warning in the first ``%pi``
output.

Busy status while a ``%%pi`` cell waits: ipykernel wraps every control request
and every request handled on a subshell in ``status: busy`` / ``idle``
messages parented by that request (ipykernel #799, jupyter_client #838), and
JupyterLab's status bar takes any ``status`` as the kernel's state. JupyterLab
sends such requests while a cell runs (a ``create_subshell_request`` when the
first comm of a target opens; any request of a console attached to a
subshell, ``%pi allow ID`` typed there), and their ``idle`` made the status bar
read "Idle" while the cell waited for an approval. (Widget clicks do not:
ipykernel 7.4 dispatches those ``comm_msg`` concurrently, with no status.) So
after each control request and each shell request not dispatched
concurrently, ``PiKernel`` sends ``status: busy`` again, parented by the
running turn's ``execute_request``; the lock in ``PiSession.reassert_busy``
orders it before the cell's own final ``idle``. Only public pieces are used
(``dispatch_control`` / ``dispatch_shell`` are overridden without depending on
their arguments, except an optional ``concurrent`` keyword; the status goes
out through ``session.send`` on ``iopub_socket``). Outside ``%%pi`` turns
ipykernel's behaviour is unchanged.
"""

from __future__ import annotations

from typing import Any

import traitlets
from ipykernel.ipkernel import IPythonKernel

from pi_kernel import __version__
from pi_kernel.kernel.config import SETTINGS
from pi_kernel.kernel.extension import attach


class PiKernel(IPythonKernel):
    implementation = "pi_kernel"
    implementation_version = __version__
    banner = f"Pi Agent kernel {__version__} (Python): %%pi cells talk to the agent; %pi help"

    # One trait per setting of ``config.SETTINGS`` (``c.PiKernel.<name>``); the class namespace is a dict here.
    for _setting in SETTINGS:
        locals()[_setting.name] = traitlets.Any(None, allow_none=True, help=_setting.help).tag(config=True)
    del _setting

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        overrides = {row.name: getattr(self, row.name) for row in SETTINGS}
        self.pi_session = attach(self.shell, overrides, kernel=self)

    def do_shutdown(self, restart: bool) -> Any:
        """Stop the session's MCP servers (and what they started) before the kernel exits."""
        self.pi_session.close()
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
