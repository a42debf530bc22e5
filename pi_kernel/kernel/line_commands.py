"""The ``%pi`` line commands: each takes the session and its words and returns text to print.

Words are split like a shell's, except free text typed while a call waits (``split_line``): the REASON
of ``deny ID REASON`` and the JSON after ``allow ID --args`` are kept as typed. A command that cannot be
done raises ``CommandError``: a usage error without a traceback, shown as the cell's error (masked on its
way out, ``outgoing``: a pi cell's error message and reply, or the terminal's masked streams). Logic
beyond words and reply lives in its concept's module.

**MCP** (``%pi mcp``). A server added here starts at once, so the answer shows its tools or why it did
not start. The servers live on the kernel's loop: ``mcp_async`` is awaited where the line is a cell of
its own (``extension.AWAITED_LINES``); elsewhere ``mcp`` runs it when no loop runs and otherwise says to run
the line as a cell of its own. ``pi_kernel.tools.mcp`` is imported lazily: it needs the optional ``mcp``
SDK, whose absence ``session.mcp`` reports as ``McpUnavailable``.

Long: one small function per command and the one table that dispatches them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pi_kernel.ai.providers.local_engine import LOCAL_MODEL_ID
from pi_kernel.kernel import session as long_session
from pi_kernel.kernel.config import thinking_level
from pi_kernel.kernel.model_resolution import (
    NO_MODEL_HELP,
    PROVIDER_MODELS,
    allowed_specs,
    concrete_entries,
    describe_model,
    list_server_models,
    local_model_installed,
    model_from_spec,
    refusal,
)
from pi_kernel.kernel.persistence import load_conversation, save_conversation
from pi_kernel.kernel.session import McpUnavailable, PiSession
from pi_kernel.kernel.text_view import render_messages
from pi_kernel.kernel.turn import request_session
from pi_kernel.kernel.undo import undo_turn
from pi_kernel.tools.approval import MODE_VERDICTS, decide


class CommandError(Exception):
    """A ``%pi`` command that cannot be done; printed as a usage error."""

    def _render_traceback_(self) -> list[str]:
        return [f"UsageError: {self}"]


HELP = """%pi                         status: model, tools, approval, conversation
%pi model [NAME] [--context TOKENS]   show or set the model (provider:model allowed) and its window
%pi models                  models you can pick
%pi tools [NAME | enable|disable NAME ...]   list tools (on/off, approval), describe one, or turn them on/off
%pi approve [ask|auto|deny|read-only] [TOOL=ask|auto|deny ...]   the approval policy
                            (read-only: only the built-in read and tools declaring read_only run;
                            TOOL may be a pattern: time__*=auto for every tool of the MCP server time)
                            (a stricter mode set later wins over an earlier "always allow", TOOL=auto or TOOL=ask)
%pi allow ID|all [--always] [--args JSON]   approve a waiting tool call (from a console or subshell)
%pi deny ID|all [REASON]    deny a waiting tool call
%pi reset                   forget the conversation
%pi undo [N|list]           undo the newest turn's changes (variables, files, cells); when none is
                            left: bring back the conversation a re-run, reset, load or undo replaced
%pi history                 the conversation so far
%pi usage                   tokens, cost and context use so far, per model
%pi compact                 summarise the older turns now (long sessions)
%pi price [MODEL IN OUT [CACHE_READ [CACHE_WRITE]]]   list or set prices (USD per million tokens)
%pi budget [USD] [--tokens N] | off   stop before a request that would cross it
%pi save PATH / %pi load PATH   the conversation as JSON lines (no keys)
%pi system                  the system prompt the model gets
%pi mcp                     MCP servers: their state and tools (docs/mcp.md)
%pi mcp add NAME [--trust-read-only] -- COMMAND ARGS... | URL   add a stdio or streamable HTTP server
%pi mcp remove NAME / %pi mcp restart NAME   drop a server and its tools / start it again
%pi context [on|off|local]  tell the model what changed in the notebook at each turn (default on;
                            local: the local model too, which by default is not told)
%pi cells [on|off]          every turn's python code becomes a new cell below (as %%pi --cells)
%pi thinking [off|low|medium|high]   how hard the model thinks (as %%pi --thinking; docs/providers.md)
%%pi [--model NAME] [--no-tools] [--max-turns N] [--approve MODE] [--cells] [--thinking LEVEL] [--tool NAME|any]
                            then a prompt: one agent turn (--tool: call that tool, or any, first)"""


def status(session: PiSession, words: list[str]) -> str:
    model = session.model
    tools = [info.name for info in session.registry.list() if info.enabled]
    frontend = "widgets" if session.frontend.renders_widgets(request_session(session.kernel)) else "text"
    if session.frontend.approval_clients:
        frontend += f" + {session.frontend.approval_clients} approval client(s)"
    lines = [
        f"model:     {describe_model(model) if model else '(none) - see %pi model'}",
        f"tools:     {', '.join(tools) or '(none)'}",
        f"approval:  {session.policy.describe()}",
        f"messages:  {len(session.agent.state.messages)}",
        f"front-end: {frontend}",
        *long_session.status_lines(session),
        f"notebook:  context {context_state(session)}, code cells {'on' if session.code_cells else 'off'}",
    ]
    return "\n".join(lines)


def model(session: PiSession, words: list[str]) -> str:
    words, window = long_session.context_flag(words)
    if len(words) > 1:  # a model name has no spaces: "fake-model extra words" is a slip, not a name
        raise CommandError(f"%pi model takes one model name (extra words: {' '.join(words[1:])})")
    if words:
        chosen = model_from_spec(words[0], session.settings)
        refused = refusal(chosen, session.settings.allowed_models)
        if refused:
            raise CommandError(refused)
        session.set_model(chosen)
    if words or window is not None:
        # the window given, else the one set for the session (PI_CONTEXT_WINDOW, c.PiKernel.context_window)
        chosen_window = window if window is not None else session.settings.context_window
        session.set_model(long_session.with_context_window(session.model, chosen_window))
    current = session.model
    return f"model: {describe_model(current)}" if current else NO_MODEL_HELP


def models(session: PiSession, words: list[str]) -> str:
    current = session.model
    choices: list[str] = []
    if current is not None and current.base_url:
        choices += [
            f"{current.provider}:{name}" for name in list_server_models(current.base_url, current.resolved_api_key_env)
        ]
    for provider, (key, names) in PROVIDER_MODELS.items():  # OpenAI's not when the model is on a base URL
        if os.environ.get(key) and not (current and current.base_url and provider == "openai"):
            choices += [f"{provider}:{name}" for name in names]
    if local_model_installed():
        choices.append(f"local:{LOCAL_MODEL_ID}")
    allowed = session.settings.allowed_models
    if allowed:  # only what may be chosen, and every model the site names
        named = [model_from_spec(entry, session.settings) for entry in concrete_entries(allowed)]
        choices = allowed_specs(choices + [f"{site.provider}:{site.id}" for site in named], allowed)
    chosen = f"{current.provider}:{current.id}" if current else None
    rows = [("* " if choice == chosen else "  ") + choice for choice in dict.fromkeys(choices)]
    return "\n".join(rows) if rows else "No models found.\n" + NO_MODEL_HELP


def tools(session: PiSession, words: list[str]) -> str:
    registry = session.registry
    if len(words) == 1 and words[0] in registry:
        return tool_details(session, words[0])
    if words:
        action, names = words[0], words[1:]
        if action not in ("enable", "disable") or not names:
            raise CommandError("%pi tools [NAME | enable|disable NAME ...]")
        for name in names:
            if name not in registry:
                raise CommandError(f"no tool named {name!r} (known: {', '.join(registry.names()) or 'none'})")
        for name in names:
            registry.enable(name) if action == "enable" else registry.disable(name)
    infos = registry.list()
    if not infos:
        return "(no tools)"
    width = max(len("tool"), *(len(info.name) for info in infos))
    rows = [f"{'tool':<{width}}  on   approval (mode: {session.policy.mode})"]
    rows += [
        f"{info.name:<{width}}  {'on ' if info.enabled else 'off'}  {approval_of(session, info.name)}" for info in infos
    ]
    return "\n".join([*rows, "(%pi tools NAME: what a tool does)"])


_APPROVAL_WORDS = {"run": "runs", "ask": "asks", "deny": "denied"}
_RULE_NOTES = {
    **dict.fromkeys(("tool-deny", "tool-auto", "tool-ask"), "%pi approve"),
    "always-allowed": "always allowed",
    "read-only": "read-only mode",
    "deny-mode": "deny mode",
    "auto-mode": "auto mode",
}


def approval_of(session: PiSession, name: str) -> str:
    """A tool's approval in a word or two: the gate's decision (``approval.decide``) for a call without
    arguments (one that may read secrets still asks, decided per call)."""
    definition = session.registry.get(name)
    own = getattr(definition, "approval", "ask")
    judged = definition
    if definition is not None and not isinstance(own, str):  # a user's callable (it may hang or have effects)
        judged = copy.copy(definition)  # is not called to draw a table: it reads as ``ask``, as the gate reads
        judged.approval = "ask"  # a callable that cannot decide
    decision = decide(judged, name, {}, session.policy.state(None))
    if decision.rule in ("own-rule", "own-deny", "deny-mode") and not isinstance(own, str):
        return "its own rule"  # a callable decides per call, and these rules follow its answer
    word = _APPROVAL_WORDS[decision.verdict]
    note = _RULE_NOTES.get(decision.rule)
    if note is None or (note.endswith(" mode") and decision.verdict == MODE_VERDICTS.get(own, "ask")):
        return word  # the tool's own setting decided, or the mode agrees with it
    return f"{word} ({note})"


def tool_details(session: PiSession, name: str) -> str:
    """``%pi tools NAME``: the tool's description, arguments, state and approval."""
    definition = session.registry.get(name)
    assert definition is not None
    state = "on" if session.registry.is_enabled(name) else "off"
    lines = [f"{name} ({state}, approval: {approval_of(session, name)})", (definition.description or "").strip()]
    try:
        properties = session.registry.wrapped(name).json_schema().get("properties", {})
    except Exception:  # noqa: BLE001 - the description still shows when the schema cannot be built
        properties = {}
    for argument, schema in properties.items():
        kind = schema.get("type", "any") if isinstance(schema, dict) else "any"
        about = schema.get("description", "") if isinstance(schema, dict) else ""
        lines.append(f"  {argument} ({kind}){': ' + about if about else ''}")
    return "\n".join(line for line in lines if line)


def approve(session: PiSession, words: list[str]) -> str:
    if words:
        try:
            session.policy.apply_spec(words)
        except ValueError as error:
            raise CommandError(str(error)) from None
    return f"approval: {session.policy.describe()}"


def _decide(session: PiSession, target: str, fields: dict[str, object]) -> str:
    pending = session.approvals.pending()
    ids = [request["tool_call_id"] for request in pending] if target == "all" else [target]
    done = [tool_call_id for tool_call_id in ids if session.approvals.resolve_fields(tool_call_id, fields)]
    if not done:
        waiting = ", ".join(f"{r['tool_call_id']} ({r['tool_name']})" for r in pending) or "none"
        raise CommandError(f"nothing waits for approval under {target!r} (waiting: {waiting})")
    return f"{fields['decision']}: {', '.join(done)}"


def allow(session: PiSession, words: list[str]) -> str:
    if not words:
        raise CommandError("%pi allow ID|all [--always] [--args JSON]")
    fields: dict[str, object] = {"decision": "always" if "--always" in words else "approve"}
    if "--args" in words:
        given = words[words.index("--args") + 1 : words.index("--args") + 2]
        try:
            args = json.loads(given[0]) if given else None
        except ValueError as error:
            raise CommandError(f"--args needs a JSON object ({error})") from None
        except RecursionError:
            raise CommandError("--args needs a JSON object (nested too deeply)") from None
        if not isinstance(args, dict):
            raise CommandError('--args needs a JSON object, e.g. --args {"path": "notes.txt"}')
        fields["args"] = args
    return _decide(session, words[0], fields)


def deny(session: PiSession, words: list[str]) -> str:
    if not words:
        raise CommandError("%pi deny ID|all [REASON]")
    return _decide(session, words[0], {"decision": "deny", "reason": " ".join(words[1:]) or None})


def reset(session: PiSession, words: list[str]) -> str:
    if words:  # "%pi reset --keep" is not a reset: a command with words it does not know changes nothing
        raise CommandError(f"%pi reset takes no words (got {' '.join(words)!r}); nothing was changed")
    session.reset()
    return "The conversation was reset."


def undo(session: PiSession, words: list[str]) -> str:
    if words == ["list"]:
        turns = session.turn_journals.describe()
        return session.conversation.versions.describe() + (
            f"\nTurns whose effects %pi undo reverts, newest first:\n{turns}" if turns else ""
        )
    if len(words) > 1 or (words and not words[0].isdigit()):
        raise CommandError("%pi undo [N|list]")
    if not words:
        done = undo_turn(session, None, show_later)
        if done is not None:
            return done
    try:
        version = session.undo(int(words[0]) if words else 1)
    except IndexError as error:
        raise CommandError(str(error)) from None
    return f"Restored the conversation of {version.describe()} (%pi undo again goes back)."


def show_later(text: str) -> Callable[[str], None]:
    """Show ``text`` now under a display id; returns how to replace it (the report of an undo that waits)."""
    from IPython.display import display

    handle = display({"text/plain": text}, raw=True, display_id=True)  # outgoing masks it

    def update(final: str) -> None:
        if handle is not None:
            handle.update({"text/plain": final}, raw=True)

    return update


def save(session: PiSession, words: list[str]) -> str:
    if len(words) != 1:
        raise CommandError("%pi save PATH")
    current = session.model
    path = save_conversation(
        words[0],
        session.agent.state.messages,
        f"{current.provider}:{current.id}" if current else None,
        cells=session.conversation.cell_turns.starts,
    )
    return f"Saved {len(session.agent.state.messages)} messages to {path}"


def load(session: PiSession, words: list[str]) -> str:
    if len(words) != 1:
        raise CommandError("%pi load PATH")
    try:
        saved = load_conversation(words[0])  # an OSError is said in one line by run_line_command
    except ValueError as error:
        raise CommandError(str(error)) from None
    session.replace_conversation(saved.messages, cells=saved.cells)
    return f"Loaded {len(saved.messages)} messages from {words[0]} (saved with {saved.model or 'an unknown model'})"


def _on_off(words: list[str], usage: str) -> bool | None:
    if not words:
        return None
    if len(words) != 1 or words[0] not in ("on", "off"):
        raise CommandError(usage)
    return words[0] == "on"


def context_state(session: PiSession) -> str:
    if not session.context_enabled:
        return "off"
    return "on, the local model too" if session.context_for_local else "on (not for the local model)"


def context(session: PiSession, words: list[str]) -> str:
    local = words == ["local"]
    switch = True if local else _on_off(words, "%pi context [on|off|local]")
    if switch is not None:
        session.context_enabled = switch
        session.context_for_local = local
    return f"notebook context: {context_state(session)} (each %%pi turn starts with what changed in the notebook)"


def cells(session: PiSession, words: list[str]) -> str:
    switch = _on_off(words, "%pi cells [on|off]")
    if switch is not None:
        session.code_cells = switch
    state = "on" if session.code_cells else "off (%%pi --cells for one turn)"
    return f"code cells: {state}"


def thinking(session: PiSession, words: list[str]) -> str:
    if len(words) > 1:
        raise CommandError("%pi thinking [off|low|medium|high]")
    if words:
        try:
            session.settings.thinking = thinking_level(words[0])
        except ValueError as error:
            raise CommandError(f"%pi thinking: {error}") from None
    level = session.settings.thinking or "the model's default"
    return f"thinking: {level} (%%pi --thinking LEVEL for one turn)"


MCP_USAGE = (
    "%pi mcp | %pi mcp add NAME [--trust-read-only] -- COMMAND ARGS... | %pi mcp add NAME [--trust-read-only] URL"
    " | %pi mcp remove NAME | %pi mcp restart NAME"
)


MCP_WAITS = (
    "%pi mcp {action} waits for the server on the kernel's event loop, which is busy running this cell: "
    "run `%pi mcp {action} ...` as a cell of its own (with %autoawait on)."
)


def mcp(session: PiSession, words: list[str]) -> str:
    """``%pi mcp ...`` from the synchronous magic (see the module docstring)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return get_asyncio_loop().run_until_complete(mcp_async(session, words))
    if words:
        raise CommandError(MCP_WAITS.format(action=words[0]) if words[0] in ("add", "remove", "restart") else MCP_USAGE)
    try:
        return session.mcp.describe()
    except McpUnavailable as error:
        raise CommandError(str(error)) from None


async def mcp_async(session: PiSession, words: list[str]) -> str:
    """``%pi mcp ...`` awaited on the servers' loop."""
    action, rest = (words[0], words[1:]) if words else ("", [])
    try:
        if action == "add":
            return await _mcp_add(session, rest)
        if action in ("remove", "restart") and len(rest) == 1:
            name = rest[0]
            if name not in session.mcp.servers:
                known = ", ".join(session.mcp.names()) or "none"
                raise CommandError(f"no MCP server named {name!r} (known: {known})")
            if action == "remove":
                await session.mcp.remove(name)
                return f"MCP server {name} removed."
            await session.mcp.restart(name)
            return _mcp_report(session, name)
        if words:
            raise CommandError(MCP_USAGE)
        return session.mcp.describe()
    except McpUnavailable as error:
        raise CommandError(str(error)) from None


async def _mcp_add(session: PiSession, words: list[str]) -> str:
    manager = session.mcp  # McpUnavailable without the SDK
    from pi_kernel.tools.mcp import server_config

    if not words:
        raise CommandError(MCP_USAGE)
    name, rest = words[0], words[1:]
    trust = "--trust-read-only" in rest[: rest.index("--")] if "--" in rest else "--trust-read-only" in rest
    if trust:
        rest.remove("--trust-read-only")
    entry: dict[str, object]
    if rest[:1] == ["--"] and len(rest) > 1:
        entry = {"command": rest[1], "args": rest[2:]}
    elif len(rest) == 1 and rest[0] != "--":
        entry = {"url": rest[0]}
    else:
        raise CommandError(MCP_USAGE)
    entry["trustReadOnlyHint"] = trust
    try:
        config = server_config(name, entry)
    except ValueError as error:
        raise CommandError(str(error)) from None
    manager.add(config)
    await manager.start_server(name)
    return _mcp_report(session, name)


def _mcp_report(session: PiSession, name: str) -> str:
    """The state of one server after a start, and its tools (or why it did not start)."""
    session.mcp.drop_notices(name)  # shown right here, not again at the next turn
    lines = session.mcp.describe().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return "\n".join(lines[start:end])


COMMANDS: dict[str, Callable[[PiSession, list[str]], str]] = {
    "": status,
    "status": status,
    "help": lambda session, words: HELP,
    "model": model,
    "models": models,
    "tools": tools,
    "approve": approve,
    "allow": allow,
    "deny": deny,
    "reset": reset,
    "undo": undo,
    "history": lambda session, words: render_messages(session.agent.state.messages),
    "usage": long_session.usage,
    "save": save,
    "load": load,
    "system": lambda session, words: session.registry.system_prompt(),
    "compact": long_session.compact,
    "price": long_session.price,
    "budget": long_session.budget,
    "mcp": mcp,
    "context": context,
    "cells": cells,
    "thinking": thinking,
}


ARGS_FLAG = re.compile(r"(?:^|\s)--args(?:\s+|$)")


def _unquoted(text: str) -> str:
    """``text`` without one pair of surrounding quotes (``%pi deny ID "a reason"``)."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def split_line(line: str) -> list[str]:
    """The words of a ``%pi`` line (see the module doc): shell-style, free text kept as typed."""
    head = line.split(None, 2)
    if head[:1] == ["deny"] and len(head) == 3:
        return [*head[:2], _unquoted(head[2].strip())]
    found = ARGS_FLAG.search(line) if head[:1] == ["allow"] else None
    if found is None:
        return shlex.split(line)
    before, rest = shlex.split(line[: found.start()]), line[found.end() :]
    try:
        _, end = json.JSONDecoder().raw_decode(rest)
    except ValueError:  # not JSON as typed: maybe quoted like a shell word (--args '{"a": 1}')
        return [*before, "--args", *shlex.split(rest)]
    return [*before, "--args", rest[:end], *shlex.split(rest[end:])]


ASYNC_COMMANDS = {"mcp": mcp_async, "compact": long_session.compact_async}
"""Commands that wait on the event loop, awaited where the line is a cell of its own (``run_line_command_async``)."""


def _words(line: str) -> tuple[str, list[str]]:
    try:
        words = split_line(line)
    except ValueError as error:
        raise CommandError(f"%pi: {error}") from None
    except RecursionError as error:  # JSON after --args nested thousands deep
        raise CommandError(f"%pi: {failure_text(error)}") from None
    return (words[0], words[1:]) if words else ("", [])


CHANGES_DURING_TURN = {
    "approve": "the approval policy",
    "model": "the model",
    "budget": "the budget",
    "thinking": "the thinking level",
    "reset": "the conversation",
    "undo": "the conversation",
    "load": "the conversation",
}
"""Commands that, given words, change what governs a turn or the conversation it works on."""


def refuse_during_turn(session: PiSession, name: str, args: list[str]) -> None:
    """A command that changes the policy or the conversation is refused while a turn runs: the turn (the
    agent itself, through code it runs) must not widen its own approvals or rewrite its history."""
    changes = name in CHANGES_DURING_TURN and (bool(args) or name in ("reset", "undo"))
    if not changes or (name == "undo" and args == ["list"]) or not session.busy:
        return
    raise CommandError(
        f"%pi {name} changes {CHANGES_DURING_TURN[name]}, and a turn is running: interrupt it (or let it "
        "end) first; nothing was changed"
    )


def run_line_command(session: PiSession, line: str) -> str:
    name, args = _words(line)
    command = COMMANDS.get(name)
    if command is None:
        raise CommandError(f"unknown command %pi {name} (see %pi help)")
    refuse_during_turn(session, name, args)
    with _one_line(name):
        return command(session, args)


async def run_line_command_async(session: PiSession, line: str) -> str:
    """``run_line_command`` for a ``%pi`` line awaited on the shell's loop (``extension.AWAITED_LINES``)."""
    name, args = _words(line)
    command = ASYNC_COMMANDS.get(name)
    if command is None:
        return run_line_command(session, line)
    with _one_line(name):
        return await command(session, args)


@contextmanager
def _one_line(name: str) -> Iterator[None]:
    """Every failure of a command is one clear line, never a traceback."""
    try:
        yield
    except CommandError:
        raise
    except Exception as error:  # noqa: BLE001
        raise CommandError(f"%pi {name}: {failure_text(error)}") from None


def failure_text(error: BaseException) -> str:
    """One line saying what went wrong (``OSError``: what the system said, and the path)."""
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        text = f"{error.strerror}{where}"
    elif isinstance(error, RecursionError):
        text = "the input is nested too deeply"
    else:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return " ".join(text.split())
