"""``CommandError``: a ``%pi`` command (``line_commands``, ``mcp_commands``) that cannot be done.

IPython prints it as a usage error, without a traceback (keys in it are masked on their way out: ``outgoing``).
"""

from __future__ import annotations


class CommandError(Exception):
    """A ``%pi`` command that cannot be done; printed as a usage error."""

    def _render_traceback_(self) -> list[str]:
        return [f"UsageError: {self}"]
