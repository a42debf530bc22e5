"""Tools as the product knows them: definitions from notebook cells, the registry, the system prompt.

``@tool`` turns a function into a ``ToolDefinition``; ``wrap_tool_definition``
adapts one to the agent's ``AgentTool``; ``ToolRegistry`` holds the notebook's
tools and rebuilds both channels (API ``tools`` array and system prompt) every
turn (``build_system_prompt`` writes the text channel); ``needs_approval`` and
``approval_verdict`` evaluate a tool's own ``approval`` option for a call. The
built-in tools (``read``, ``bash``, ``edit``, ``write``, ``python``) and the
file mutation queue are re-exported from ``pi_kernel.tools.builtin`` /
``file_queue``.
"""

from pi_kernel.tools.approval import ApprovalBroker, ApprovalDecision, ApprovalRequest, approval_verdict, needs_approval
from pi_kernel.tools.builtin import (
    BUILTIN_TOOL_NAMES,
    builtin_tools,
    create_bash_tool,
    create_edit_tool,
    create_python_tool,
    create_read_tool,
    create_write_tool,
)
from pi_kernel.tools.decorator import FunctionTool, tool
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.file_queue import with_file_mutation_queue
from pi_kernel.tools.registry import (
    PromptConfig,
    ToolInfo,
    ToolRegistry,
    build_system_prompt,
    get_default_registry,
    set_default_registry,
)
from pi_kernel.tools.results import to_agent_tool_result
from pi_kernel.tools.wrapper import DefinedTool, ToolRetry, wrap_tool_definition

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "ApprovalBroker",
    "ApprovalDecision",
    "ApprovalRequest",
    "DefinedTool",
    "FunctionTool",
    "PromptConfig",
    "ToolContext",
    "ToolDefinition",
    "ToolInfo",
    "ToolRegistry",
    "ToolRetry",
    "approval_verdict",
    "build_system_prompt",
    "builtin_tools",
    "create_bash_tool",
    "create_edit_tool",
    "create_python_tool",
    "create_read_tool",
    "create_write_tool",
    "get_default_registry",
    "needs_approval",
    "set_default_registry",
    "to_agent_tool_result",
    "tool",
    "with_file_mutation_queue",
    "wrap_tool_definition",
]
