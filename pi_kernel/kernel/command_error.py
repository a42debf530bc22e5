"""``CommandError``: a ``%pi`` command (``line_commands``, ``mcp_commands``) that cannot be done.

IPython prints it as a usage error, without a traceback, keys masked (it may be captured before ``outgoing``).
"""

from __future__ import annotations

from pi_kernel.kernel.outgoing import masked


class CommandError(Exception):
    """A ``%pi`` command that cannot be done; printed as a usage error."""

    def _render_traceback_(self) -> list[str]:
        return [masked(f"UsageError: {self}")]
