"""``PiKernel``: ipykernel's Python kernel with a Pi session attached.

Ordinary cells run as Python; ``%%pi`` cells go to the session's agent (see
``cell_runner``). Configuration (``jupyter_config.py`` / command line)::

    c.PiKernel.model = "deepseek:deepseek-chat"
    c.PiKernel.approval = "ask"            # ask | auto | deny | read-only
    c.PiKernel.approval_timeout = 600      # seconds; 0: wait forever
    c.PiKernel.base_url = "http://127.0.0.1:11434/v1"
    c.PiKernel.builtin_tools = ["read", "bash", "python"]

Traitlets win over the environment (``PI_MODEL``, ``PI_APPROVAL``, ...), which
wins over a ``.env`` file.
"""

from __future__ import annotations

from typing import Any

from ipykernel.ipkernel import IPythonKernel
from traitlets import Bool, CFloat, Dict, Enum, Integer, List, Unicode

from pi_kernel import __version__
from pi_kernel.kernel.config import APPROVAL_MODES, CONFIG_NAMES


class PiKernel(IPythonKernel):
    implementation = "pi_kernel"
    implementation_version = __version__
    banner = f"Pi Agent kernel {__version__} (Python): %%pi cells talk to the agent; %pi help"

    model = Unicode(None, allow_none=True, help="Model id, 'provider:model' allowed (else from PI_MODEL / keys).").tag(
        config=True
    )
    provider = Unicode(None, allow_none=True, help="Provider when the model id alone is ambiguous.").tag(config=True)
    base_url = Unicode(None, allow_none=True, help="An OpenAI-compatible server URL.").tag(config=True)
    approval = Enum(list(APPROVAL_MODES), None, allow_none=True, help="Approval mode for tool calls.").tag(config=True)
    approval_overrides = Dict(None, allow_none=True, help="Per-tool approval: {'bash': 'ask'}.").tag(config=True)
    approval_timeout = CFloat(None, allow_none=True, help="Seconds before a pending approval is denied.").tag(
        config=True
    )
    workspace_root = Unicode(None, allow_none=True, help="File tools refuse paths outside it.").tag(config=True)
    builtin_tools = List(Unicode(), None, allow_none=True, help="Built-in tools enabled at start.").tag(config=True)
    widgets = Bool(None, allow_none=True, help="Force widget views on/off (default: detect).").tag(config=True)
    max_turns = Integer(None, allow_none=True, help="Default limit of model requests per %%pi cell.").tag(config=True)
    system_prompt = Unicode(None, allow_none=True, help="Text added to the system prompt.").tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from pi_kernel.kernel.extension import attach

        overrides = {name: getattr(self, name) for name in CONFIG_NAMES}
        self.pi_session = attach(self.shell, overrides, kernel=self)
