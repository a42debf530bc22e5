"""pi-kernel: a Jupyter-native agent kernel and widgets.

``from pi_kernel import tool`` gives the ``@tool`` decorator anywhere.

``pi_kernel.session()`` is the session of the running IPython (the Pi kernel's,
or the one ``%load_ext pi_kernel`` attached; attached on first use if IPython
runs, else ``RuntimeError``), and ``pi_kernel.session().agent`` its agent:
one name, one meaning, while ``pi_kernel.agent`` is the agent package.

The older spelling ``from pi_kernel import agent`` keeps working for notebooks
already written (the contract promises it): in a session the package's
``agent`` attribute stands for the session's agent (see
``pi_kernel.kernel.extension``). Elsewhere the name is the
``pi_kernel.agent`` subpackage once anything has imported it (``from
pi_kernel import tool`` does): Python sets an imported subpackage as an
attribute of its parent, and the module ``__getattr__`` below is only asked
for names that are missing. Before that, ``__getattr__`` attaches a session if
IPython runs, else raises ``RuntimeError``.

Attributes are resolved lazily, and ``pi_kernel.kernel.extension`` is
imported lazily (inside the functions below), so that importing the package
costs nothing until something is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pi_kernel.kernel.session import PiSession

__version__ = "0.1.0"

_LAZY = {
    "tool": ("pi_kernel.tools", "tool"),
    "Agent": ("pi_kernel.agent", "Agent"),
}


def session() -> PiSession:
    """The session of the running IPython: ``pi_kernel.session().agent`` is its agent."""
    from pi_kernel.kernel.extension import get_session

    return get_session()


def __getattr__(name: str) -> Any:
    if name == "agent":  # the older spelling of ``session().agent`` (see the module docstring)
        return session().agent
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'pi_kernel' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext pi_kernel``: the ``%pi`` / ``%%pi`` magics in any IPython."""
    from pi_kernel.kernel.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from pi_kernel.kernel.extension import unload_ipython_extension as unload

    unload(ipython)
