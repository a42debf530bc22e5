"""JupyterLab in headless Chromium for the browser tests (recipe: the field notes).

``JupyterLabServer`` runs a real ``jupyter lab`` on 127.0.0.1 in a temporary
root with its own JUPYTER config/runtime/data dirs, the ``pi`` kernelspec
installed there (this interpreter, the working tree on ``PYTHONPATH``, the
fake OpenAI server as the model) and the working tree's prebuilt notebook
bridge extension, under ``timeout`` so it can never outlive a test run.
``NotebookPage`` drives one notebook with Playwright: open with
``?reset``, wait for the kernel to be idle before the first Shift+Enter,
run cells, wait for text, interrupt, save and reload. Chromium is Debian's
``/usr/bin/chromium`` (never ``playwright install``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "test-artifacts"
LABEXTENSION_NAME = "pi-kernel-notebook-bridge"
SERVER_LIFETIME = 600
"""Seconds ``timeout`` gives the server: it never outlives a stuck run."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def notebook_json(cells: list[str]) -> dict[str, Any]:
    """A Pi Agent notebook with these code cells (nbformat 4.5, cell ids)."""
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "pi", "display_name": "Pi Agent (Python 3)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {
                "cell_type": "code",
                "id": f"cell-{index}",
                "metadata": {},
                "source": source,
                "outputs": [],
                "execution_count": None,
            }
            for index, source in enumerate(cells)
        ],
    }


def wait_until_serving(process: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
    """Poll ``url`` until it answers 200; raise with the log's tail if ``process`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer in {timeout} s:\n{log.read_text()[-3000:]}")


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group (it was started with ``start_new_session``), SIGKILL after 15 s."""
    if process.poll() is not None:
        return
    group = os.getpgid(process.pid)
    os.killpg(group, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(group, signal.SIGKILL)
        process.wait(timeout=5)


class JupyterLabServer:
    """``jupyter lab`` (``app="lab"``) or Notebook 7 (``app="notebook"``) in a temporary root."""

    def __init__(
        self,
        kernel_env: dict[str, str],
        app: str = "lab",
        extra_args: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        """``extra_args``/``extra_env``: more for the server (``--gateway-url``, ``KERNEL_USERNAME``)."""
        self.app = app
        self._extra_args = list(extra_args or [])
        self._extra_env = dict(extra_env or {})
        self.root = Path(tempfile.mkdtemp(prefix="pi-lab-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._kernel_env = kernel_env
        self._process: subprocess.Popen[bytes] | None = None
        self.log = self.root / "jupyter.log"

    def start(self, timeout: float = 90) -> JupyterLabServer:
        from pi_kernel.kernel.kernelspec import write_kernel_spec

        dirs = {name: self.root / name for name in ("config", "runtime", "data", "notebooks", "settings", "workspaces")}
        for directory in dirs.values():
            directory.mkdir()
        write_kernel_spec(dirs["data"] / "kernels" / "pi", sys.executable, self._kernel_env)
        # The working tree's notebook bridge, ahead of any installed copy (the first one found wins).
        (dirs["data"] / "labextensions").mkdir()
        (dirs["data"] / "labextensions" / LABEXTENSION_NAME).symlink_to(REPO / "pi_kernel" / "labextension")
        # No "Would you like to get notified about official Jupyter news?" toast over the outputs.
        notification = dirs["settings"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True)
        notification.write_text(json.dumps({"fetchNews": "false"}))
        env = {
            **{key: value for key, value in os.environ.items() if not key.startswith(("PI_", "OPENAI_", "JUPYTER"))},
            "JUPYTER_CONFIG_DIR": str(dirs["config"]),
            "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
            "JUPYTER_DATA_DIR": str(dirs["data"]),
            # First on the kernelspec search path: in a virtualenv jupyter_core prefers the env's own
            # share/jupyter over JUPYTER_DATA_DIR, where ``make setup`` installed the user-facing ``pi`` spec.
            "JUPYTER_PATH": str(dirs["data"]),
            "JUPYTER_PLATFORM_DIRS": "1",
            "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]),
            "JUPYTERLAB_WORKSPACES_DIR": str(dirs["workspaces"]),
            "HOME": str(self.root),
            **self._extra_env,
        }
        command = [
            "timeout", str(SERVER_LIFETIME), sys.executable, "-m", "jupyterlab" if self.app == "lab" else "notebook",
            "--no-browser",
            "--ip", "127.0.0.1", f"--port={self.port}", "--ServerApp.token=", "--ServerApp.password=",
            "--allow-root",
            *(["--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
              if self.app == "lab" else []),
            f"--ServerApp.root_dir={dirs['notebooks']}",
            *self._extra_args,
        ]  # fmt: skip
        with self.log.open("wb") as log:
            # Its own process group: ``stop`` can end jupyter and its kernels, not just ``timeout``.
            self._process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.notebooks = dirs["notebooks"]
        wait_until_serving(self._process, f"{self.url}/api/status", self.log, timeout)
        return self

    def write_notebook(self, name: str, cells: list[str]) -> Path:
        path = self.notebooks / name
        path.write_text(json.dumps(notebook_json(cells), indent=1))
        return path

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after 15 s (killing only ``timeout`` would orphan it)."""
        if self._process is not None:
            stop_process_group(self._process)
        shutil.rmtree(self.root, ignore_errors=True)


class NotebookPage:
    """One notebook open in JupyterLab."""

    def __init__(self, page: Any, server: JupyterLabServer, name: str) -> None:
        self.page = page
        self.server = server
        self.name = name

    def open(self, timeout: float = 90) -> NotebookPage:
        path = f"lab/tree/{self.name}?reset" if self.server.app == "lab" else f"notebooks/{self.name}"
        self.page.goto(f"{self.server.url}/{path}", timeout=timeout * 1000)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout * 1000)
        self.wait_idle(timeout)
        return self

    def wait_idle(self, timeout: float = 60) -> None:
        """The kernel is idle (a Shift+Enter sent earlier is silently dropped): JupyterLab's status bar
        says "… | Idle"; Notebook 7 has no status bar, its execution indicator says ``idle``."""
        if self.server.app == "lab":
            self.page.get_by_text(re.compile(r"\|\s*Idle")).first.wait_for(timeout=timeout * 1000)
        else:
            self.page.get_by_text("Pi Agent (Python 3)").first.wait_for(timeout=timeout * 1000)
            indicator = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
            self.page.wait_for_selector(indicator, timeout=timeout * 1000)

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def output(self, index: int) -> Any:
        return self.cell(index).locator(".jp-Cell-outputArea")

    def run(self, index: int) -> None:
        """Select cell ``index`` and Shift+Enter it (again if the first one did not start it)."""
        cell = self.cell(index)
        prompt = cell.locator(".jp-InputPrompt")
        before = str(prompt.inner_text()).strip()
        for _attempt in range(2):
            cell.scroll_into_view_if_needed()
            cell.locator(".jp-InputArea-editor").click()
            self.page.keyboard.press("Shift+Enter")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if str(prompt.inner_text()).strip() != before:
                    return
                time.sleep(0.05)
        raise TimeoutError(f"cell {index} did not start")

    def wait_text(self, index: int, pattern: str | re.Pattern[str], timeout: float = 30) -> Any:
        """Wait until cell ``index``'s output shows ``pattern``; returns the matching locator."""
        locator = self.output(index).get_by_text(
            pattern if isinstance(pattern, re.Pattern) else re.compile(re.escape(pattern))
        )
        locator.first.wait_for(timeout=timeout * 1000)
        return locator.first

    def output_text(self, index: int) -> str:
        return str(self.output(index).inner_text())

    def wait_prompt(self, index: int, timeout: float = 60) -> str:
        """Wait until cell ``index`` has finished (its prompt shows a number); returns the prompt."""
        prompt = self.cell(index).locator(".jp-InputPrompt")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = str(prompt.inner_text()).strip()
            if re.fullmatch(r"\[\d+\]:", text):
                return text
            time.sleep(0.1)
        raise TimeoutError(f"cell {index} did not finish: prompt {prompt.inner_text()!r}")

    def prompt(self, index: int) -> str:
        """Cell ``index``'s execution prompt: ``[*]:`` while it runs, ``[3]:`` once done."""
        return str(self.cell(index).locator(".jp-InputPrompt").inner_text()).strip()

    def status_bar_kernel_state(self, timeout: float = 10) -> str:
        """JupyterLab's status bar: the kernel state after "… | " (``Idle``, ``Busy``, ...)."""
        item = self.page.get_by_text(re.compile(r"\|\s*(Idle|Busy)")).first
        item.wait_for(timeout=timeout * 1000)
        return item.inner_text().rsplit("|", 1)[-1].strip()

    def execution_indicator(self) -> str | None:
        """The notebook toolbar's execution indicator: ``busy`` while any of its cells runs, else ``idle``."""
        indicator = self.page.locator(".jp-Notebook-ExecutionIndicator").first
        return None if indicator.count() == 0 else indicator.get_attribute("data-status")

    def interrupt(self) -> None:
        self.page.keyboard.press("Escape")
        self.page.locator("[data-command='notebook:interrupt-kernel']").first.click()

    def save(self, timeout: float = 15) -> dict[str, Any]:
        """Ctrl+S; returns the notebook as written on disk."""
        path = self.server.notebooks / self.name
        before = path.stat().st_mtime_ns
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Control+s")
        deadline = time.monotonic() + timeout
        while path.stat().st_mtime_ns == before:
            if time.monotonic() > deadline:
                raise TimeoutError("the notebook was not saved")
            time.sleep(0.1)
        time.sleep(0.3)  # the write may still be in progress
        return dict(json.loads(path.read_text()))

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path
