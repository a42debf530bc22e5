"""``from pi_kernel import agent`` in a session: the session's agent, the older spelling of
``pi_kernel.session().agent``, kept for notebooks already written.

``pi_kernel.agent`` is also the name of a subpackage, and importing a
subpackage sets it as an attribute of its parent, which a module
``__getattr__`` never overrides: without help, ``from pi_kernel import agent``
gives the package. When a session is attached, the ``pi_kernel`` module gets a
class whose ``agent`` property returns ``SessionAgent``: a proxy that reads
and writes the session's ``Agent``, and falls back to the package's names
(``pi_kernel.agent.Agent``, ``pi_kernel.agent.loop``) for what the agent does
not have. Outside a session nothing changes.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

_get_session: Callable[[], Any] | None = None
"""Set by ``install_agent_proxy``: the session's getter (``extension.get_session``)."""


def _session_agent() -> Any:
    if _get_session is None:
        raise RuntimeError("pi_kernel: no session is attached")
    return _get_session().agent


class SessionAgent:
    """Stands for the session's ``Agent`` (``await agent.prompt(...)``, ``agent.state.messages``)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        agent = _session_agent()
        try:
            return getattr(agent, name)
        except AttributeError:
            return getattr(importlib.import_module("pi_kernel.agent"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(_session_agent(), name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(_session_agent())) | set(dir(importlib.import_module("pi_kernel.agent"))))

    def __repr__(self) -> str:
        return f"<session agent: {_session_agent().state!r}>"


class _PiPackage(types.ModuleType):
    @property
    def agent(self) -> SessionAgent:
        return SessionAgent()

    @agent.setter
    def agent(self, package: Any) -> None:
        # importlib sets the subpackage here when ``pi_kernel.agent`` is imported.
        self.__dict__["agent"] = package


def install_agent_proxy(get_session: Callable[[], Any]) -> None:
    """Make ``pi_kernel.agent`` the agent of ``get_session()`` for the rest of this process."""
    global _get_session
    _get_session = get_session
    module = sys.modules["pi_kernel"]
    if not isinstance(module, _PiPackage):
        module.__class__ = _PiPackage
