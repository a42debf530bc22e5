"""Paths a tool is given, and what a tool must keep secret: files that hold keys, variables named like secrets.

**Where a path points.** Port of pi's ``path-utils.ts`` (``expand_path``, ``resolve_read_path``: a
relative path resolves against ``ToolContext.cwd``), plus the optional workspace confinement: with
``ToolContext.workspace_root`` set, a path whose real location is outside the root is refused with
``WorkspaceError``. This guards the file tools; it is not a sandbox for ``bash`` or ``python``, which can
reach anything the process can.

**Files that hold keys** (a process's environment, ``.env``, cloud and tool credentials, private keys,
Jupyter's connection and runtime files, this kernel's own connection file whatever its name): a tool call
touching one never runs unseen (``approval.decide`` asks, or refuses in ``deny`` mode).
``secret_path_reason`` judges a path (symlinks followed); ``secret_mention_reason`` scans a command or code
text for the same files and for reads of the environment, erring on the side of asking (literals joined,
quotes removed, globs and ``cd`` targets tried); the spellings it covers are listed in docs/security.md. It
is a tripwire: the masking of key values in every tool result is the net under it.

**Secrets in the notebook's variables** (``db_password = getpass()``): a string
held under a name ``pi_kernel.ai.secrets.is_secret_name`` calls secret (the one
list every surface uses) is never previewed (``is_secret_value``).
``tool_environment`` is the environment of the processes tools start, without
the secret variables.

This module is also the tools' one door to ``pi_kernel.ai.secrets``; no tool
masks (a tool's result is masked as it enters the transcript,
``agent.tool_execution``). ``cut`` shortens text a tool cuts to a length
never inside a key, so that mask still finds each whole (``clip`` in
``describe`` uses it); ``environment_secrets`` (the values ``mask`` hides,
read once for many calls); ``MaskedStream`` for the full-output file a long
command leaves; ``add_secret_value`` / ``MASK`` for an MCP server's own
secrets.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import sys
import unicodedata
from collections.abc import Mapping
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from jupyter_core.paths import jupyter_runtime_dir

from pi_kernel.ai.secrets import MASK as MASK
from pi_kernel.ai.secrets import MaskedStream as MaskedStream
from pi_kernel.ai.secrets import add_secret_value as add_secret_value
from pi_kernel.ai.secrets import cut as cut
from pi_kernel.ai.secrets import is_secret_name, secret_values, without_secrets
from pi_kernel.ai.secrets import mask as mask

environment_secrets = secret_values

HIDDEN_VALUE = "<hidden: the name looks like a secret>"


def is_secret_value(name: str, value: Any) -> bool:
    """A string (or bytes) held under a secret-like name: shown by type and length only."""
    return issubclass(type(value), (str, bytes, bytearray)) and is_secret_name(name)  # type(): no user code


def tool_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment less every secret variable, plus ``extra`` (a tool's own settings, kept)."""
    return {**without_secrets(os.environ), **(extra or {})}


# -- where a path points ----------------------------------------------------------------------------------------


class PathContext(Protocol):
    """What the path rules read of a tool's context (``definition.ToolContext`` has it)."""

    @property
    def cwd(self) -> Path: ...

    @property
    def workspace_root(self) -> Path | None: ...


_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_AM_PM = re.compile(r" (AM|PM)\.", re.IGNORECASE)
_NARROW_NO_BREAK_SPACE = "\u202f"


class WorkspaceError(PermissionError):
    """A tool was asked to reach a path outside ``ToolContext.workspace_root``."""


def expand_path(path: str) -> str:
    """``@`` prefix dropped, odd spaces normalised, ``~`` expanded (as pi's ``expandPath``)."""
    normalized = _UNICODE_SPACES.sub(" ", path[1:] if path.startswith("@") else path)
    return os.path.expanduser(normalized) if normalized == "~" or normalized.startswith("~/") else normalized


def resolve_to_cwd(path: str, cwd: str | os.PathLike[str]) -> str:
    """The absolute, lexically normalised path (``..`` folded; symlinks kept)."""
    expanded = expand_path(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(os.path.abspath(os.fspath(cwd)), expanded)
    return os.path.normpath(expanded)


def resolve_read_path(path: str, cwd: str | os.PathLike[str]) -> str:
    """``resolve_to_cwd``, then the spellings macOS uses in screenshot names (narrow no-break space before
    AM/PM, NFD letters, a curly apostrophe) when the path as written does not exist."""
    resolved = resolve_to_cwd(path, cwd)
    if os.path.exists(resolved):
        return resolved
    nfd = unicodedata.normalize("NFD", resolved)
    for variant in (
        _AM_PM.sub(lambda match: f"{_NARROW_NO_BREAK_SPACE}{match.group(1)}.", resolved),
        nfd,
        resolved.replace("'", "\u2019"),
        nfd.replace("'", "\u2019"),
    ):
        if variant != resolved and os.path.exists(variant):
            return variant
    return resolved


def check_in_workspace(absolute_path: str, workspace_root: str | os.PathLike[str] | None, shown_as: str) -> None:
    """Raise ``WorkspaceError`` when ``absolute_path`` really lies outside ``workspace_root`` (both resolved
    with ``os.path.realpath``); ``shown_as`` is the path as the model wrote it."""
    if workspace_root is None:
        return
    root = os.path.realpath(os.fspath(workspace_root))
    real = os.path.realpath(absolute_path)
    if real != root and os.path.commonpath([root, real]) != root:
        where = shown_as if real == absolute_path else f"{shown_as} (resolves to {real})"
        raise WorkspaceError(f"Path {where} is outside the workspace root {root}; access refused.")


def resolve_tool_path(path: str, ctx: PathContext, *, for_read: bool = False) -> str:
    """The absolute path a file tool works on, checked against the workspace root."""
    cwd = os.path.abspath(os.fspath(ctx.cwd))
    absolute = resolve_read_path(path, cwd) if for_read else resolve_to_cwd(path, cwd)
    check_in_workspace(absolute, ctx.workspace_root, path)
    return absolute


def resolve_tool_cwd(ctx: PathContext) -> str:
    """The working directory for ``bash``, checked against the workspace root."""
    cwd = os.path.abspath(os.fspath(ctx.cwd))
    check_in_workspace(cwd, ctx.workspace_root, cwd)
    return cwd


# -- files that hold keys ------------------------------------------------------------------------------------

_ENVIRON = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/(?:self|\d+))?/(?:environ|mem)$")
"""A process's environment, and its memory (which holds the environment too)."""
_PROC_ROOT = re.compile(r"^/proc/[^/]+(?:/task/[^/]+)?/(?:root|cwd)(?:/|$)")
"""A path through another process's root or working folder (``/proc/$PPID/root/tmp/...``)."""
_SECRET_NAMES = frozenset(
    {".env", ".netrc", "_netrc", ".pgpass", ".git-credentials", ".pypirc", ".npmrc", ".my.cnf", ".boto", ".s3cfg"}
)
_KEY_FILES = re.compile(r"^(?:id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?|.+\.(?:pem|key|p12|pfx|jks|keystore))$")
_SECRET_DIRS = (
    (".aws",),
    (".ssh",),
    (".gnupg",),
    (".config", "gcloud"),
    (".azure",),
    (".kube",),
    (".docker",),
    ("jupyter", "runtime"),
    ("Jupyter", "runtime"),
)
"""Folders whose files hold credentials (public SSH keys and ``known_hosts`` excepted)."""
_PUBLIC = re.compile(r"(?:\.pub|^known_hosts(?:\.old)?|^authorized_keys|^config)$")
_JUPYTER_SECRETS = re.compile(
    r"^(?:kernel-.+\.json|(?:jp|nb)server-.+\.(?:json|html)|(?:jupyter|jupyterhub)_cookie_secret)$"
)
"""Jupyter's connection files (their HMAC key lets anyone run code in the kernel), a server's
``jpserver-*.json`` / ``-open.html`` (its token) and cookie secrets, wherever they are (``JUPYTER_RUNTIME_DIR``
may be any folder, a connection file may be passed from anywhere with ``-f``)."""


def connection_files() -> list[str]:
    """This kernel's connection file (whatever its name: a plain ``KernelManager``, nbclient and papermill
    name it ``/tmp/tmpXXXX.json``), as given and resolved: from the running kernel application, else from
    the process's command line (``-f PATH``, ``--f=PATH``, ``--IPKernelApp.connection_file=PATH``)."""
    found: list[str] = []
    try:
        from ipykernel.kernelapp import IPKernelApp

        if IPKernelApp.initialized():
            app = IPKernelApp.instance()
            found.append(os.path.join(app.connection_dir, app.connection_file) if app.connection_file else "")
    except Exception:  # noqa: BLE001 - no kernel application here (a test, IPython in a terminal)
        pass
    arguments = list(sys.argv)
    for index, argument in enumerate(arguments):
        if argument == "-f" and index + 1 < len(arguments):
            found.append(arguments[index + 1])
        elif argument.startswith(("--f=", "--IPKernelApp.connection_file=", "--connection-file=")):
            found.append(argument.split("=", 1)[1])
    paths = [path for path in found if path]
    return list(dict.fromkeys([os.path.abspath(path) for path in paths] + [os.path.realpath(path) for path in paths]))


def _runtime_dirs() -> list[str]:
    """Jupyter's runtime folder now (``JUPYTER_RUNTIME_DIR`` or the default), as given and resolved."""
    try:
        runtime = jupyter_runtime_dir()
    except Exception:  # noqa: BLE001 - a broken Jupyter setup must not break the check
        return []
    return list(dict.fromkeys((os.path.abspath(runtime), os.path.realpath(runtime))))


def _real(path: str) -> str:
    """``path`` with symlinks resolved; as written (normalised) when it cannot be (``/proc/1/cwd``: no access)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.normpath(path)


def _name_reason(real: str) -> str | None:
    """Why the file at the resolved path ``real`` holds secrets, or ``None``."""
    if _ENVIRON.match(real):
        return "it is a process's environment, which holds the API keys"
    if _PROC_ROOT.match(real):
        return "it reads through a process's root or working folder under /proc, which reaches any file it can"
    name = os.path.basename(real)
    if name in _SECRET_NAMES or name.startswith(".env."):
        return f"{name} files hold keys and passwords"
    for folder in _SECRET_DIRS:
        if os.sep + os.sep.join(folder) + os.sep in os.sep + real:
            if folder == (".ssh",) and _PUBLIC.search(name):
                return None
            return f"files under {os.sep.join(folder)} hold credentials"
    if _KEY_FILES.match(name):
        return f"{name} looks like a private key"
    if _JUPYTER_SECRETS.match(name):
        return f"{name} is a Jupyter connection or server file, whose key runs code in the kernel"
    if real in connection_files():
        return f"{name} is this kernel's connection file, whose key runs code in the kernel"
    for runtime in _runtime_dirs():
        if real == runtime or real.startswith(runtime.rstrip(os.sep) + os.sep):
            return "files in Jupyter's runtime folder hold the keys of running kernels and servers"
    return None


def secret_path_reason(path: str, cwd: str | None = None) -> str | None:
    """Why ``path`` (as a tool got it, relative to ``cwd``) names a file holding secrets, or ``None``."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    absolute = resolve_to_cwd(path, cwd or os.getcwd())
    for candidate in dict.fromkeys((absolute, _real(absolute))):
        reason = _name_reason(candidate)
        if reason is not None:
            return reason
    return None


_ENV_DUMP = re.compile(
    r"(?:^|[\s;&|(`'\"\[,])(?:env(?:\s+-[-\w]*)*(?=\s*(?:$|[;&|)`>'\"\],]))|set(?=\s*(?:$|[;&|)`>]))"
    r"|printenv\b|export\s+-p\b|(?:declare|typeset)\s+-[a-z]*[xp])"
    r"|(?i:environ(?!ment))|\bgetenv\b|%ENV\b|\$ENV\{|\bENV\[|process\.env\b"
    r"|\bps\s+[A-Za-z]*e",
    re.MULTILINE,
)
"""Printing the whole environment (a bare ``env``, ``set``, ``printenv``, ``export -p``, ``ps e``) or reading it
from code (``os.environ``, ``os.environb``, awk's ``ENVIRON``, ``getenv``, Perl's ``%ENV``, Ruby's ``ENV[``,
``process.env``). Naming a secret variable is ``_VARIABLE``'s."""
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
"""A shell variable (``$NAME``, ``${NAME}``): one named like a secret (``ai.secret_variables.is_secret_name``, the one
list every surface uses: ``$OPENAI_API_KEY``, ``$AWS_SECRET_ACCESS_KEY``, ``$DB_PASSWORD``) reads a key."""
_KERNEL_KEYS = re.compile(r"connection_file|connection_info|session\.key\b|\bconnection-file\b")
"""Code that asks the kernel for its connection file or its key (``get_connection_file()``,
``get_ipython().kernel.session.key``)."""
_PATHISH = re.compile(r"""[^\s'"`;|&<>()=,]+""")
_JOINED_LITERALS = re.compile(r"""['"]\s*(?:(?:%|\.format\()[^'"\n]*?[+,]\s*)?[+,]?\s*['"]""")
"""Where two string literals meet (``'envi' 'ron'``, ``'/proc/self/env' + 'iron'``, ``.e''nv``), also across a
``%`` or ``.format`` between them (``'/proc/%d/env' % os.getppid() + 'iron'``)."""
_QUOTING = re.compile(r"""['"\\]""")
_SHELL_EXPANSION = re.compile(r"\$\{[^}]*\}|\$\([^)]*\)|\$\w+|`[^`]*`|\{[^}]*\}")
"""What a shell replaces before reading a name (a variable, a command's output, a brace list)."""
_GLOB = re.compile(r"[*?\[]")
_BRACE_LIST = re.compile(r"(?<!\$)\{[^{}\s]*\}")
"""A shell brace list (``.{e,}nv``), read as a glob (``.*nv``)."""


def _examples() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Files holding secrets, as full paths and as bare names, that a glob is tried against."""
    home = os.path.expanduser("~")
    full = ["/proc/self/environ", "/proc/1/environ", "/proc/self/task/1/environ"]
    full += [os.path.join(home, *folder, "credentials") for folder in _SECRET_DIRS if folder[0].startswith(".")]
    full += [os.path.join(home, ".local", "share", "jupyter", "runtime", "kernel-1.json")]
    full += [os.path.join(runtime, "kernel-1.json") for runtime in _runtime_dirs()]
    names = [*sorted(_SECRET_NAMES), ".env.local", "id_rsa", "id_ed25519", "server.pem", "server.key"]
    names += ["kernel-1.json", "jpserver-1.json", "environ"]
    own = connection_files()  # this kernel's, whatever its name (``/tmp/tmpq3v9zk1x.json``)
    full += own
    names += [os.path.basename(path) for path in own]
    return tuple(full), tuple(names)


def _glob_reason(word: str) -> str | None:
    """Why a word holding a glob or a shell expansion may name a file holding secrets, or ``None``."""
    home = os.path.expanduser("~")
    pattern = word.replace("${HOME}", home).replace("$HOME", home)
    pattern = os.path.normpath(_SHELL_EXPANSION.sub("*", os.path.expanduser(pattern)))
    literal = re.sub(r"[*?\[\]/]", "", pattern)
    if not _GLOB.search(pattern) or not (literal.strip(".") or pattern.startswith(".")):
        return None  # ``*``, ``*/*``, ``*.*``: everything, so a sign of nothing (``.*`` is every dot file)
    full, names = _examples()
    hits: list[str] = []
    if "/" in pattern:
        target = pattern if pattern.startswith("/") else "*/" + pattern
        hits = [path for path in full if fnmatch.fnmatchcase(path, target)]
    name_pattern = os.path.basename(pattern)
    name_literal = re.sub(r"[*?\[\]]", "", name_pattern)
    if not hits and ((len(name_literal) >= 2 and name_literal.strip(".")) or name_pattern.startswith(".")):
        hidden_ok = not name_pattern.startswith(("*", "?", "["))  # a shell glob matches a dot name only from a dot
        hits = [
            name
            for name in names
            if (hidden_ok or not name.startswith(".")) and fnmatch.fnmatchcase(name, name_pattern)
        ]
    reason = "a process's environment holds the API keys" if hits and hits[0] == "environ" else None
    return f"it may match {hits[0]}: {reason or _name_reason(hits[0]) or 'it holds secrets'}" if hits else None


def _variants(text: str) -> list[str]:
    """The text as written, with adjacent string literals joined, and with quotes and backslashes removed."""
    joined = _JOINED_LITERALS.sub("", text)
    return list(dict.fromkeys((text, joined, _QUOTING.sub("", joined))))


def ipython_transformed(code: str) -> str:
    """``code`` as IPython runs it: its syntax (``!cmd``, ``%magic``, ``x = !cmd``) rewritten into Python by the
    running shell's ``transform_cell`` (the transform ``run_cells`` runs), else by IPython's
    ``TransformerManager``; ``code`` itself when IPython is missing or cannot transform it."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    try:
        if shell is not None and callable(getattr(shell, "transform_cell", None)):
            return str(shell.transform_cell(code))
        from IPython.core.inputtransformer2 import TransformerManager

        return str(TransformerManager().transform_cell(code))
    except Exception:  # noqa: BLE001 - untransformable (or no IPython): it runs as written, and is judged so
        return code


def secret_mention_reason(text: object, cwd: str | os.PathLike[str] | None = None) -> str | None:
    """Why a command or code text (``bash``, ``python``) may read secrets, or ``None`` (see the module doc).
    Its relative words are read in ``cwd``, the folder it runs in (``bash``: ``ToolContext.cwd``; ``None``:
    the process's folder now, where ``python`` code and notebook cells run)."""
    if not isinstance(text, str):
        return None
    for variant in _variants(text):
        reason = _mention_reason(variant, cwd)
        if reason is not None:
            return reason
    return None


_CHANGE_DIR = re.compile(r"(?:^|[\s;&|(`{.])(?:cd|pushd|chdir\(\s*)\s*([^\s;&|)`]*)", re.MULTILINE)
"""A change of folder in a command (``cd X``, ``pushd X``) or code (``os.chdir(X)``): later words are relative
to it."""
_PROC_DIR = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/|$)")
MAX_EXPANDED = 2_000
"""Files a glob of a command is expanded to, at most, when its words are tried against the disk."""


def _folders(text: str, cwd: str | os.PathLike[str] | None) -> list[str]:
    """The folders a command's relative words may be read from: the folder it runs in (``cwd``, else the
    process's), and every folder a ``cd`` in it may change to (each resolved from the folders before it; a
    glob expanded)."""
    folders = [os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()]
    for target in _CHANGE_DIR.findall(_BRACE_LIST.sub("*", text)):
        target = os.path.expanduser(_QUOTING.sub("", target) or "~")
        if "$" in target:
            continue
        found: list[str] = []
        for folder in folders:
            path = os.path.join(folder, target)
            found += list(islice(glob.iglob(path), 16)) if _GLOB.search(target) else [path]
        folders += [os.path.normpath(path) for path in found if os.path.isdir(path)]
        folders = list(dict.fromkeys(folders))[:32]
    return folders


def _disk_reason(word: str, folders: list[str]) -> str | None:
    """Why ``word``, read in one of ``folders`` (a glob expanded against the disk), names a file holding secrets."""
    word = os.path.expanduser(word)
    for folder in folders:
        path = os.path.join(folder, word)
        if _PROC_DIR.match(os.path.normpath(folder) + "/") and not os.path.isabs(word):
            return f"it reads {word} in {folder}, a process's folder, which holds its environment"
        candidates = list(islice(glob.iglob(path), MAX_EXPANDED)) if _GLOB.search(word) else [path]
        for candidate in candidates:
            for form in dict.fromkeys((os.path.normpath(candidate), _real(candidate))):
                reason = _name_reason(form)
                if reason is not None:
                    return f"it names {word}, which may be {form}: {reason}"
    return None


_PROC_ROOT_MENTION = re.compile(r"/proc/[^/\s]+(?:/task/[^/\s]+)?/(?:root|cwd)(?:/|\b)")
_RECURSIVE = re.compile(
    r"(?:^|[\s;&|(`])(?:find|tar|rsync|zip|du|tree|rg|ag|ack|fd|(?:grep|egrep|fgrep|cp|ls|chmod|scp)\s+[^;&|]*"
    r"(?:-[A-Za-z]*[rR][A-Za-z]*\b|--recursive|--dereference-recursive))",
    re.MULTILINE,
)
"""A command that reads a folder's whole tree (``find``, ``grep -r``, ``tar``, ``cp -r``, ``rg``)."""


def _folder_reason(word: str, folders: list[str], *, recursive: bool) -> str | None:
    """Why ``word``, a folder, lists or holds (``recursive``: anywhere below it) this kernel's connection
    file or Jupyter's runtime folder, or ``None``. Only words that look like folders are looked up."""
    if word.startswith("-") or not ("/" in word or word in (".", "..") or word.startswith("~")):
        return None
    word = os.path.expanduser(word)
    secret = [os.path.dirname(path) for path in connection_files()] + _runtime_dirs()
    for folder in folders:
        path = os.path.join(folder, word)
        for form in dict.fromkeys((os.path.normpath(path), _real(path))):
            if not os.path.isdir(form):
                continue
            for inside in secret:
                below = inside == form or inside.startswith(form.rstrip(os.sep) + os.sep)
                if inside == form or (recursive and below):
                    return (
                        f"it reads the folder {word}, which holds this kernel's connection file or Jupyter's "
                        "runtime folder, whose keys run code in the kernel"
                    )
    return None


def _proc_folder_reason(text: str, folders: list[str]) -> str | None:
    """Why a ``cd`` in ``text`` may land under /proc: a folder ``_folders`` resolved is /proc or under it
    (``cd /; cd proc``), or a target holding a shell variable, read from one of the folders, may be
    (``cd /$P/$PPID``, ``cd $X`` after ``cd /``)."""
    for folder in folders:
        if folder == "/proc" or folder.startswith("/proc/"):
            return f"it changes to {folder}, under /proc, where processes keep their environment"
    home = os.path.expanduser("~")
    for target in _CHANGE_DIR.findall(_BRACE_LIST.sub("*", text)):
        target = _QUOTING.sub("", target).replace("${HOME}", home).replace("$HOME", home)
        if "$" not in target:
            continue
        pattern = _SHELL_EXPANSION.sub("*", target)
        for folder in folders:
            joined = os.path.join(folder, pattern)
            if any(fnmatch.fnmatchcase(place, joined) for place in ("/proc", "/proc/1", "/proc/self")):
                return f"it changes to {target} (from {folder}), which may be under /proc"
    return None


def _mention_reason(text: str, cwd: str | os.PathLike[str] | None) -> str | None:
    for target in _CHANGE_DIR.findall(text):
        if re.match(r"/+proc(?:/|$)", _QUOTING.sub("", target)):
            return f"it changes to {target}, under /proc, where processes keep their environment"
    folders = _folders(text, cwd)
    reason = _proc_folder_reason(text, folders)
    if reason is not None:
        return reason
    named = {os.path.basename(path) for path in connection_files()}
    for word in _PATHISH.findall(_BRACE_LIST.sub("*", text)):
        on_disk = "/" in word or _GLOB.search(word) or len(folders) > 1 or word in named  # a plain word: no syscall
        reason = _disk_reason(word, folders) if on_disk and not word.startswith("-") else None
        if reason is not None:
            return reason
        if "/" in word or word.startswith(".") or _KEY_FILES.match(word) or _GLOB.search(word):
            reason = _name_reason(os.path.normpath(os.path.expanduser(word)))
            if reason is None and re.search(r"/proc/\S*(?:environ|/mem$)", word):
                reason = "it is a process's environment, which holds the API keys"
            if reason is not None:
                return f"it names {word}: {reason}"
            glob_reason = _glob_reason(word) if _GLOB.search(word) or "$" in word or "{" in word else None
            if glob_reason is not None:
                return f"{word}: {glob_reason}"
    recursive = bool(_RECURSIVE.search(text))
    for word in _PATHISH.findall(text):
        reason = _folder_reason(word, folders, recursive=recursive)
        if reason is not None:
            return reason
    if _PROC_ROOT_MENTION.search(text):
        return "it reads through a process's root or working folder under /proc, which reaches any file it can"
    if "/proc/" in text and "environ" in text:
        return "it may read a process's environment, which holds the API keys"
    if _KERNEL_KEYS.search(text):
        return "it may read the kernel's connection file or key, which runs code in the kernel"
    if _ENV_DUMP.search(text):
        return "it may read the environment, which holds the API keys"
    for name in _VARIABLE.findall(text):
        if is_secret_name(name):
            return f"it names ${name}, a variable named like a secret"
    return None
