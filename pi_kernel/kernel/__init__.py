"""The Jupyter side: the Pi kernel, the ``%pi``/``%%pi`` magics, the session, the kernelspec.

Names are resolved lazily so that importing ``pi_kernel.kernel`` costs nothing:

- ``PiKernel``: the kernel class (``python -m pi_kernel``);
- ``PiSession`` / ``get_session()``: the session of the running IPython (``pi_kernel.session()``);
- ``Turn``: one ``%%pi`` cell's run, passed to what acts for it;
- ``install_kernel_spec(user=False, prefix=None)``: register the ``pi`` kernelspec;
- ``make_turn_view`` / ``TurnView`` / ``TurnOptions`` / ``TurnOutcome``: how a turn is shown.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "PiKernel": ("pi_kernel.kernel.kernel", "PiKernel"),
    "PiSession": ("pi_kernel.kernel.session", "PiSession"),
    "Turn": ("pi_kernel.kernel.turn", "Turn"),
    "get_session": ("pi_kernel.kernel.extension", "get_session"),
    "install_kernel_spec": ("pi_kernel.kernel.kernelspec", "install"),
    "make_turn_view": ("pi_kernel.kernel.text_view", "make_turn_view"),
    "TurnView": ("pi_kernel.kernel.turn", "TurnView"),
    "TurnOptions": ("pi_kernel.kernel.turn", "TurnOptions"),
    "TurnOutcome": ("pi_kernel.kernel.turn", "TurnOutcome"),
    "PiSettings": ("pi_kernel.kernel.config", "PiSettings"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'pi_kernel.kernel' has no attribute {name!r}")
