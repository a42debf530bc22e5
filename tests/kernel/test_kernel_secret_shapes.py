"""Secrets the names list missed stay out of the model's reach (real kernel, scripted model, ``auto`` mode).

Found by an adversary: ``STRIPE_SK=sk_live_...``, ``AZURE_STORAGE_CONNECTION_STRING=...AccountKey=...`` and
a token in a variable named like a path (``SECRETS_DIR=ghp_...``) reached the model through ``echo``. A
variable is now a secret by its name or by its value's shape (``pi_kernel.ai.secrets.is_secret_variable``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

STRIPE = "sk_live_51HqZx8Kp2Lm4Nq7Rt9Vw3Yz"
AZURE_KEY = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg=="
AZURE = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net"
GITHUB = "ghp_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(
        server.base_url, PI_APPROVAL="auto", STRIPE_SK=STRIPE, AZURE_STORAGE_CONNECTION_STRING=AZURE, SECRETS_DIR=GITHUB
    )
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("bash", {"command": "echo $STRIPE_SK; echo $AZURE_STORAGE_CONNECTION_STRING; echo $SECRETS_DIR"}),
        ("python", {"code": "import os\nprint(os.getenv('STRIPE_SK'), os.getenv('AZURE_STORAGE_CONNECTION_STRING'))"}),
    ],
)
def test_shaped_secrets_never_reach_the_model(
    kernel: KernelDriver, server: FakeOpenAI, tool: str, args: dict[str, str]
) -> None:
    server.enqueue(tool_call_chunks([(tool, args)]), text_chunks("Done."))
    result = kernel.run("%%pi\nshow them", allow_stdin=True, on_input=lambda _prompt: "y", timeout=120)
    assert result.status == "ok", result.text
    body = str(server.last_body)
    assert "tool" in body
    for secret in (STRIPE, AZURE_KEY, GITHUB):
        assert secret not in body
        assert secret not in result.text
