"""Seam: budget vs manual compaction.

docs/long-sessions.md: "Before every model request (a summary request ... included) the agent compares
what the session spent ... with the budget". Agent.compact() (``%pi compact``) calls compact_context
directly, never before_request/_check_budget, so the summary request is sent (and paid) past the budget.

A compaction summary is known by its structure (``UserMessage.compacted_turns``), in memory and in saved
sessions; a prompt that merely begins with ``[compacted N turns]`` is a prompt (issue 22, point 4).

Saved sessions of format version 1 (which marked a summary only by that text) still load, their summary
as a summary; version 2 keeps the field, so a typed look-alike stays a prompt after save and load.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, text_chunks, usage_dict
from kernel_helpers import KernelDriver, kernel_env, write_test_kernelspecs

from pi_kernel.agent.compaction import compacted_turns_of, find_cut, is_summary
from pi_kernel.ai import AssistantMessage, TextContent, UserMessage, to_dict
from pi_kernel.kernel.persistence import load_conversation, save_conversation


@pytest.fixture()
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KernelDriver, FakeOpenAI]]:
    with FakeOpenAI(models=("fake-model",)) as server:
        path = str(write_test_kernelspecs(tmp_path_factory.mktemp("jupyter")))
        with KernelDriver(env=kernel_env(server.base_url), jupyter_path=path) as driver:
            yield driver, server


def test_pi_compact_respects_an_exhausted_token_budget(kernel: tuple[KernelDriver, FakeOpenAI]) -> None:
    driver, server = kernel
    server.enqueue(text_chunks("One.", usage=usage_dict(2000, 100)))
    assert driver.run("%%pi\nfirst " + "x" * 400, cell_id="a").status == "ok"
    server.enqueue(text_chunks("Two.", usage=usage_dict(2500, 100)))
    assert driver.run("%%pi\nsecond", cell_id="b").status == "ok"
    driver.run("%pi budget --tokens 1000")  # 4,700 tokens already spent: nothing more may be sent
    sent = len(server.bodies)
    server.enqueue(text_chunks("SUMMARY", usage=usage_dict(3000, 50)))
    out = driver.run("%pi compact").text
    assert len(server.bodies) == sent, f"%pi compact sent a paid summary request past the budget: {out!r}"


# --------------------------------------------------------------------------- saved summaries


def prompt(text: str) -> UserMessage:
    return UserMessage([TextContent(text)])


def test_a_summary_is_known_by_its_field_not_its_text() -> None:
    typed = prompt("[compacted 40 turns] my own note")
    summary = UserMessage([TextContent("[compacted 2 turns] ...")], compacted_turns=2)
    assert not is_summary(typed) and compacted_turns_of(typed) == 0
    assert is_summary(summary) and compacted_turns_of(summary) == 2
    answer = AssistantMessage([TextContent("ok")])
    # A typed look-alike in first place is compacted like any prompt (a summary there would be kept).
    assert find_cut([typed, prompt("next"), answer], keep_tokens=0) == 1
    assert find_cut([summary, prompt("next"), answer], keep_tokens=0) == 0  # nothing but the summary to compact


def test_version_2_keeps_the_field_through_save_and_load(tmp_path: Path) -> None:
    messages = [
        UserMessage([TextContent("[compacted 3 turns] the summary")], compacted_turns=3),
        prompt("[compacted 40 turns] typed by a person"),
        AssistantMessage([TextContent("noted")]),
    ]
    path = save_conversation(tmp_path / "s.jsonl", messages)
    assert json.loads(path.read_text().splitlines()[0])["version"] == 2
    loaded = load_conversation(path).messages
    assert [compacted_turns_of(message) for message in loaded] == [3, 0, 0]


def test_a_version_1_file_still_loads_with_its_summary(tmp_path: Path) -> None:
    old = [
        prompt("[compacted 5 turns] The earlier conversation was compacted into this summary"),
        prompt("[compacted 9 turns] a later prompt that only looks like one"),
        AssistantMessage([TextContent("ok")]),
    ]
    rows = [{"format": "pi-kernel-conversation", "version": 1, "count": 3}]
    rows += [{key: value for key, value in to_dict(m).items() if key != "compacted_turns"} for m in old]
    path = tmp_path / "v1.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    loaded = load_conversation(path).messages
    assert [compacted_turns_of(message) for message in loaded] == [5, 0, 0]


def test_an_unknown_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v9.jsonl"
    path.write_text(json.dumps({"format": "pi-kernel-conversation", "version": 9, "count": 0}) + "\n")
    try:
        load_conversation(path)
    except ValueError as error:
        assert "format version 9 is not supported" in str(error)
    else:
        raise AssertionError("version 9 should be refused")
