"""Tools as the product knows them: definitions from notebook cells (``@tool``), the registry and the
system prompt, approvals, the built-in tools; the names a notebook uses, re-exported from their modules."""

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
from pi_kernel.tools.definition import DefinedTool, ToolContext, ToolDefinition, ToolRetry, wrap_tool_definition
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
