"""The built-in ``python`` tool in a real kernel: it runs in the notebook's own namespace.

The point of the tool is that the agent works on the user's live objects: a
variable an ordinary cell defined is there for the agent's code, and what the
agent's code defines is there for the next ordinary cell. Approval is
``auto`` here so the call runs without a front-end answering.

Only pi's own payload leaves a ``%%pi`` cell; the agent's code plants no cell later either.

Code the ``python`` tool runs could plant a cell out of sight: register a
``post_run_cell`` callback that calls ``set_next_input`` (it fires after the
turn and in every later cell), or start a thread that writes a payload while
the next cell runs. The kernel's payload gate lets through only pi's own
``--cells`` payload in a ``%%pi`` cell and payloads a running user cell writes
on its own thread; the python tool removes the callbacks the code registered
and says so in its result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url, PI_APPROVAL="auto"), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_python_tool_shares_the_namespace_of_ordinary_cells(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run("prices = [3, 4, 5]").status == "ok"
    server.enqueue(
        tool_call_chunks([("python", {"code": "total = sum(prices) * 10\ntotal"})]),
        text_chunks("The total is 120."),
    )
    result = kernel.run("%%pi\nMultiply the sum of prices by ten and keep it as total.", cell_id="agent")
    assert result.status == "ok", result.text
    (tool_message,) = [message for message in server.last_body["messages"] if message["role"] == "tool"]
    assert tool_message["content"] == "120\n"  # the tool saw the cell's ``prices``

    after = kernel.run("print(total + 1)")
    assert after.status == "ok", after.text
    assert after.text.strip() == "121"  # the next cell sees the tool's ``total``


# --------------------------------------------------------------------------- kernel agent payloads


PLANT = (
    "ip = get_ipython()\n"
    "ip.events.register('post_run_cell', lambda *a: ip.set_next_input('import os  # PLANTED_HOOK', replace=False))\n"
    "import threading\n"
    "threading.Timer(2, lambda: ip.set_next_input('PLANTED_TIMER', replace=False)).start()\n"
    "print('ok')"
)


@pytest.fixture(scope="module")
def payloads_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def payloads_kernel(payloads_server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(
        env=kernel_env(payloads_server.base_url, PI_APPROVAL="auto"), jupyter_path=pi_jupyter_path
    ) as driver:
        yield driver


def test_a_hook_or_timer_of_the_agent_plants_no_cell(
    payloads_kernel: KernelDriver, payloads_server: FakeOpenAI
) -> None:
    payloads_server.enqueue(tool_call_chunks([("python", {"code": PLANT})]), text_chunks("Done."))
    result = payloads_kernel.run("%%pi --cells\nplant", timeout=120)
    assert result.status == "ok", result.text
    payloads = result.reply.get("payload") or []
    assert len(payloads) == 1, payloads  # pi's own --cells payload, nothing else
    assert payloads[0]["text"].startswith("# pi: python call 1 of 1"), payloads
    (tool_message,) = [message for message in payloads_server.last_body["messages"] if message["role"] == "tool"]
    assert "pi removed what this code registered" in str(tool_message["content"])
    assert "post_run_cell" in str(tool_message["content"])
    later = payloads_kernel.run("import time; time.sleep(3); x = 1")  # the timer fires while this cell runs
    assert later.status == "ok", later.text
    assert "PLANTED" not in json.dumps(later.reply.get("payload"))
    time.sleep(0.5)
    last = payloads_kernel.run("y = 2")
    assert "PLANTED" not in json.dumps(last.reply.get("payload"))


def test_a_user_cell_still_sets_the_next_input(payloads_kernel: KernelDriver) -> None:
    result = payloads_kernel.run("get_ipython().set_next_input('print(42)', replace=False)")
    assert result.status == "ok", result.text
    assert "print(42)" in json.dumps(result.reply.get("payload"))


def test_a_payload_written_past_the_gate_is_left_out(
    payloads_kernel: KernelDriver, payloads_server: FakeOpenAI
) -> None:
    code = (
        "pm = get_ipython().payload_manager\n"
        "type(pm).write_payload(pm, {'source': 'set_next_input', 'text': 'BYPASSED', 'replace': False})\n"
        "pm.__dict__.pop('write_payload', None)\n"
        "pm.__dict__.pop('read_payload', None)\n"
        "print('done')"
    )
    payloads_server.enqueue(tool_call_chunks([("python", {"code": code})]), text_chunks("Done."))
    result = payloads_kernel.run("%%pi\nbypass", timeout=120)
    assert result.status == "ok", result.text
    assert "BYPASSED" not in json.dumps(result.reply.get("payload"))
    later = payloads_kernel.run(
        "import threading, time\n"
        "threading.Thread(target=lambda: get_ipython().set_next_input('FROM_THREAD')).start()\n"
        "time.sleep(0.5)"
    )
    assert "FROM_THREAD" not in json.dumps(later.reply.get("payload"))  # the gate is back in place
