"""The ``edit`` tool: pi's multi-edit semantics and texts, fuzzy matching, line endings, the queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_helpers import call_tool, make_ctx, preview_edit, text_of
from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, tool_results, user

from pi_kernel.ai import Tool
from pi_kernel.tools import wrap_tool_definition
from pi_kernel.tools.builtin import create_edit_tool, create_write_tool, prepare_edit_arguments
from pi_kernel.tools.builtin.edit_diff import EditError, generate_diff_string
from pi_kernel.tools.paths import WorkspaceError

EDIT = create_edit_tool()


def edits(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"old_text": old, "new_text": new} for old, new in pairs]


async def run_edit(tmp_path: Path, *pairs: tuple[str, str], path: str = "f.txt"):  # type: ignore[no-untyped-def]
    return await call_tool(EDIT, {"path": path, "edits": edits(*pairs)}, make_ctx(tmp_path))


# --------------------------------------------------------------------------- success


async def test_single_edit_replaces_and_reports_a_diff(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("one\ntwo\nthree\n")
    result = await run_edit(tmp_path, ("two", "TWO"))
    assert text_of(result) == "Successfully replaced 1 block(s) in f.txt."
    assert (tmp_path / "f.txt").read_text() == "one\nTWO\nthree\n"
    assert result.details == {
        "path": str(tmp_path / "f.txt"),
        "diff": " 1 one\n-2 two\n+2 TWO\n 3 three",
        "first_changed_line": 2,
    }


async def test_multi_edit_matches_every_edit_against_the_original(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a = foo\nb = bar\n")
    # Applied one after the other, "bar" would be found twice; against the original it is unique.
    result = await run_edit(tmp_path, ("foo", "bar"), ("bar", "baz"))
    assert text_of(result) == "Successfully replaced 2 block(s) in f.txt."
    assert (tmp_path / "f.txt").read_text() == "a = bar\nb = baz\n"


async def test_replacement_text_is_literal(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("price: X\n")
    await run_edit(tmp_path, ("X", r"$1 \1 \g<0>"))
    assert (tmp_path / "f.txt").read_text() == "price: $1 \\1 \\g<0>\n"


# --------------------------------------------------------------------------- pi's error texts


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (
            [("missing", "x")],
            "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and "
            "newlines.",
        ),
        (
            [("alpha", "A"), ("missing", "x")],
            "Could not find edits[1] in f.txt. The old_text must match exactly including all whitespace and newlines.",
        ),
        (
            [("dup", "x")],
            "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make "
            "it unique.",
        ),
        (
            [("alpha", "A"), ("dup", "x")],
            "Found 2 occurrences of edits[1] in f.txt. Each old_text must be unique. Please provide more context to "
            "make it unique.",
        ),
        (
            [("alpha beta", "x"), ("beta", "y")],
            "edits[0] and edits[1] overlap in f.txt. Merge them into one edit or target disjoint regions.",
        ),
        ([("", "x")], "old_text must not be empty in f.txt."),
        ([("alpha", "A"), ("", "x")], "edits[1].old_text must not be empty in f.txt."),
        (
            [("alpha", "alpha")],
            "No changes made to f.txt. The replacement produced identical content. This might indicate an issue with "
            "special characters or the text not existing as expected.",
        ),
        (
            [("alpha", "alpha"), ("gamma", "gamma")],
            "No changes made to f.txt. The replacements produced identical content.",
        ),
    ],
)
async def test_errors_use_pi_texts_and_leave_the_file_alone(
    tmp_path: Path, pairs: list[tuple[str, str]], message: str
) -> None:
    original = "alpha beta\ngamma\ndup dup\n"
    (tmp_path / "f.txt").write_text(original)
    with pytest.raises(EditError) as failed:
        await run_edit(tmp_path, *pairs)
    assert str(failed.value) == message
    assert (tmp_path / "f.txt").read_text() == original


async def test_missing_file_and_empty_edit_list(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"^File not found: nope\.txt$"):
        await run_edit(tmp_path, ("a", "b"), path="nope.txt")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(EditError, match="edits must contain at least one replacement"):
        await call_tool(EDIT, {"path": "f.txt", "edits": []}, make_ctx(tmp_path))


# --------------------------------------------------------------------------- fuzzy matching


async def test_fuzzy_match_ignores_trailing_whitespace_and_keeps_the_rest_exact(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("keep   \ndef f():   \n    return 1\t\nkeep too  \n")
    await run_edit(tmp_path, ("def f():\n    return 1", "def f():\n    return 2"))
    # Only the matched span changed: other lines keep their trailing whitespace (pi would strip it everywhere).
    assert (tmp_path / "f.txt").read_text() == "keep   \ndef f():\n    return 2\t\nkeep too  \n"


async def test_fuzzy_match_of_smart_quotes_dashes_and_odd_spaces(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("say \u201chello\u201d \u2014 it\u2019s\u00a0fine\nother \u2018quote\u2019\n")
    await run_edit(tmp_path, ('say "hello" - it\'s fine', "said hi"))
    assert (tmp_path / "f.txt").read_text() == "said hi\nother \u2018quote\u2019\n"


async def test_exact_match_wins_over_fuzzy(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x = 'a'\n")
    await run_edit(tmp_path, ("'a'", "'b'"))
    assert (tmp_path / "f.txt").read_text() == "x = 'b'\n"


# --------------------------------------------------------------------------- bytes on disk


async def test_crlf_line_endings_are_kept(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await run_edit(tmp_path, ("one\ntwo", "ONE\nTWO\nmore"))
    assert (tmp_path / "f.txt").read_bytes() == b"ONE\r\nTWO\r\nmore\r\nthree\r\n"


async def test_utf8_bom_is_kept(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"\xef\xbb\xbfname,value\n1,2\n")
    await run_edit(tmp_path, ("1,2", "3,4"))
    assert (tmp_path / "f.txt").read_bytes() == b"\xef\xbb\xbfname,value\n3,4\n"


async def test_invalid_utf8_bytes_elsewhere_survive(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"latin1: caf\xe9\nvalue = 1\n")
    await run_edit(tmp_path, ("value = 1", "value = 2"))
    assert (tmp_path / "f.txt").read_bytes() == b"latin1: caf\xe9\nvalue = 2\n"


# --------------------------------------------------------------------------- diff


def test_diff_shows_context_and_skips_far_lines() -> None:
    old = "\n".join(f"l{i}" for i in range(1, 21)) + "\n"
    new = old.replace("l3\n", "L3\n").replace("l18\n", "L18\n")
    diff, first = generate_diff_string(old, new)
    assert first == 3
    assert diff.splitlines() == [
        "  1 l1", "  2 l2", "- 3 l3", "+ 3 L3",
        "  4 l4", "  5 l5", "  6 l6", "  7 l7", "    ...", " 14 l14", " 15 l15", " 16 l16", " 17 l17",
        "-18 l18", "+18 L18",
        " 19 l19", " 20 l20",
    ]  # fmt: skip


async def test_preview_computes_the_diff_without_writing(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\n")
    preview = preview_edit({"path": "f.txt", "oldText": "b", "newText": "B"}, make_ctx(tmp_path))
    assert preview == {"diff": " 1 a\n-2 b\n+2 B", "first_changed_line": 2}
    assert (tmp_path / "f.txt").read_text() == "a\nb\n"
    assert preview_edit({"path": "f.txt", "edits": edits(("zzz", "y"))}, make_ctx(tmp_path))["error"].startswith(
        "Could not find the exact text"
    )


# --------------------------------------------------------------------------- argument shapes


def test_schema_is_the_multi_edit_shape_without_legacy_fields() -> None:
    schema = Tool("edit", "", EDIT.parameters).json_schema()
    assert set(schema["properties"]) == {"path", "edits"}
    assert schema["additionalProperties"] is False
    item = schema["properties"]["edits"]["items"]
    item = schema.get("$defs", {}).get(item["$ref"].rsplit("/", 1)[-1], item) if "$ref" in item else item
    assert set(item["properties"]) == {"old_text", "new_text"}


@pytest.mark.parametrize("keys", [("old_text", "new_text"), ("oldText", "newText")])
def test_prepare_arguments_folds_the_legacy_single_edit(keys: tuple[str, str]) -> None:
    old_key, new_key = keys
    assert prepare_edit_arguments({"path": "f.txt", old_key: "before", new_key: "after"}) == {
        "path": "f.txt",
        "edits": [{"old_text": "before", "new_text": "after"}],
    }
    assert prepare_edit_arguments(
        {"path": "f.txt", "edits": [{"oldText": "a", "newText": "b"}], old_key: "c", new_key: "d"}
    ) == {"path": "f.txt", "edits": [{"old_text": "a", "new_text": "b"}, {"old_text": "c", "new_text": "d"}]}


def test_prepare_arguments_accepts_edits_sent_as_json_text_and_passes_the_rest_through() -> None:
    assert prepare_edit_arguments({"path": "p", "edits": '[{"old_text": "a", "new_text": "b"}]'}) == {
        "path": "p",
        "edits": [{"old_text": "a", "new_text": "b"}],
    }
    current = {"path": "p", "edits": [{"old_text": "a", "new_text": "b"}]}
    assert prepare_edit_arguments(current) is current
    for value in (None, "garbage", 3):
        assert prepare_edit_arguments(value) is value


async def test_legacy_shape_executes(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("before\n")
    result = await call_tool(EDIT, {"path": "f.txt", "oldText": "before", "newText": "after"}, make_ctx(tmp_path))
    assert text_of(result) == "Successfully replaced 1 block(s) in f.txt."
    assert (tmp_path / "f.txt").read_text() == "after\n"


# --------------------------------------------------------------------------- workspace


async def test_edit_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    for path in ("../secret.txt", "link.txt", str(tmp_path / "secret.txt")):
        with pytest.raises(WorkspaceError, match="outside the workspace root"):
            await call_tool(EDIT, {"path": path, "edits": edits(("secret", "x"))}, make_ctx(root, root))
    assert (tmp_path / "secret.txt").read_text() == "secret"


# --------------------------------------------------------------------------- through the agent loop


async def test_100_parallel_edit_calls_on_one_file_lose_no_update(tmp_path: Path) -> None:
    lines = [f"value {i} = old" for i in range(100)]
    (tmp_path / "shared.txt").write_text("\n".join(lines) + "\n")
    ctx = make_ctx(tmp_path)
    calls = [
        tool_call("edit", {"path": "shared.txt", "edits": edits((f"value {i} = old", f"value {i} = new"))})
        for i in range(100)
    ]
    model = ScriptedModel([tool_call_message(*calls), text_message("done")])
    _events, messages = await run_loop(model, [user("edit")], tools=[wrap_tool_definition(create_edit_tool(), ctx)])
    results = tool_results(messages)
    assert len(results) == 100
    assert [result.is_error for result in results] == [False] * 100
    assert (tmp_path / "shared.txt").read_text() == "".join(f"value {i} = new\n" for i in range(100))


async def test_edit_and_write_on_one_file_share_the_queue_through_the_loop(tmp_path: Path) -> None:
    (tmp_path / "mixed.txt").write_text("original\n")
    ctx = make_ctx(tmp_path)
    tools = [wrap_tool_definition(create_edit_tool(), ctx), wrap_tool_definition(create_write_tool(), ctx)]
    calls = [tool_call("edit", {"path": "mixed.txt", "edits": edits(("original", "edited"))})]
    calls += [tool_call("write", {"path": "mixed.txt", "content": "replacement\n"})]
    model = ScriptedModel([tool_call_message(*calls), text_message("done")])
    _events, messages = await run_loop(model, [user("go")], tools=tools)
    assert [result.is_error for result in tool_results(messages)] == [False, False]
    # The edit ran first (its turn was taken first), then the write replaced everything.
    assert (tmp_path / "mixed.txt").read_text() == "replacement\n"


async def test_failed_edit_reaches_the_model_as_an_error_result(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x\n")
    ctx = make_ctx(tmp_path)
    call = tool_call("edit", {"path": "f.txt", "old_text": "nope", "new_text": "y"})
    model = ScriptedModel([tool_call_message(call), text_message("ok")])
    _events, messages = await run_loop(model, [user("go")], tools=[wrap_tool_definition(create_edit_tool(), ctx)])
    (result,) = tool_results(messages)
    assert result.is_error
    assert result.content[0].text.startswith("Could not find the exact text in f.txt.")  # type: ignore[union-attr]
