"""``inspect``, ``cells`` and the notebook context, in-process: bounded, masked, and safe with hostile objects.

Hostile objects in the namespace: the describer and the notebook context stay bounded and never break.

- an object whose attribute access raises (werkzeug's LocalProxy outside a request) is listed and does
  not break the notebook context of a turn;
- a slow __len__ of a list subclass (user code) is not run outside the time limit, so it stalls neither
  the listing nor the notebook context of every %%pi turn;
- a dotted path runs no user code (a property getter or __getattr__ with side effects);
- the preview of a big built-in container is bounded (a C-level repr cannot be stopped by the time limit);

Ordinary data inspect describes (the issue: DataFrame columns/dtypes/nulls).

- A DataFrame with duplicate column names (common after pd.concat(axis=1) or a CSV with repeated
  headers) still gets its dtypes, nulls and numeric summary (columns are read by position).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
import pytest
from builtin_helpers import entered

from pi_kernel.kernel.notebook_context import CellError, CellHistory, CellRecord, NotebookContext
from pi_kernel.tools.builtin.cells import format_cells
from pi_kernel.tools.builtin.inspect_tool import run_inspect

SECRET = "sk-test-SECRET-notebook-tools-0123456789"


class Hangs:
    def __repr__(self) -> str:
        while True:
            pass


class Raises:
    def __repr__(self) -> str:
        raise RuntimeError("broken repr")


class Huge:
    def __repr__(self) -> str:
        return "x" * 5_000_000


def inspect(name: str | None, namespace: dict[str, Any], limit: int = 4000) -> str:
    return run_inspect(name, namespace, limit=limit, hidden={"hidden_by_ipython"})


def test_hostile_reprs_give_a_short_note() -> None:
    namespace = {"hangs": Hangs(), "raises": Raises(), "huge": Huge()}
    started = time.monotonic()
    listing = inspect(None, namespace)
    assert time.monotonic() - started < 10
    here = f"{__name__.split('.')[-1]}."  # the classes' module, as type names show it
    assert f"hangs: {here}Hangs = <repr of {here}Hangs took longer than 1 s>" in listing
    assert f"raises: {here}Raises = <repr of {here}Raises failed: RuntimeError: broken repr>" in listing
    assert len(listing) <= 4000
    assert "took longer than" in inspect("hangs", namespace)
    assert "RuntimeError: broken repr" in inspect("raises", namespace)
    assert len(inspect("huge", namespace)) <= 4000


def test_listing_leaves_out_private_names_modules_ipython_and_pi_kernel_objects() -> None:
    from pi_kernel.tools.builtin.describe import SafeCaller

    namespace = {
        "_private": 1,
        "np": np,
        "In": [],
        "hidden_by_ipython": 2,
        "caller": SafeCaller(),
        "prices": [1, 2, 3],
        "grid": np.zeros((2, 3)),
    }
    listing = inspect(None, namespace)
    assert listing.splitlines() == [
        "2 user variable(s):",
        "- prices: list len 3 = [1, 2, 3]",
        "- grid: numpy.ndarray shape (2, 3) = array([[0., 0., 0.], [0., 0., 0.]])",
    ]


def test_ten_thousand_names_stay_within_the_limit_and_are_counted() -> None:
    namespace = {f"v{index}": index for index in range(10_000)}
    listing = inspect(None, namespace)
    assert len(listing) <= 4000
    assert listing.startswith("10,000 user variable(s):")
    assert listing.endswith("not named; inspect NAME shows one)")  # the list of the rest ends whole


def test_dataframe_description_has_columns_dtypes_nulls_head_and_summary() -> None:
    df = pd.DataFrame({"price": [1.0, None, 3.0], "fruit": ["a", "b", "c"]})
    text = inspect("df", {"df": df})
    assert "3 rows x 2 columns" in text
    assert "price: float64, 1 null" in text
    assert "head():" in text and "numeric summary" in text and "price: 2, 2, 1, 3" in text
    assert inspect("df.columns", {"df": df}).startswith("df.columns: pandas.Index")


def test_unknown_names_list_close_matches_and_calls_are_refused() -> None:
    with pytest.raises(ValueError, match=r"No variable named 'dff'.*Close matches: df"):
        inspect("dff", {"df": 1})
    with pytest.raises(ValueError, match="no calls, no indexing"):
        inspect("df.head()", {"df": 1})
    with pytest.raises(ValueError, match="has no attribute 'nope'"):
        inspect("df.nope", {"df": 1})


def test_descriptions_mask_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    namespace = {"config": {"key": SECRET}}
    assert SECRET not in entered(inspect(None, namespace)) and SECRET not in entered(inspect("config", namespace))
    record = CellRecord(1, f"key = {SECRET!r}", "")
    assert SECRET not in entered(format_cells([record], 4000))


def test_keys_are_masked_before_a_view_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut across a key would leave its first characters (fewer than the mask finds as a run of a key): so
    each view cuts never inside a key (``paths.cut``), and the mask where the result enters the transcript
    finds it whole. Every padding below puts some cut inside the key."""
    key = "hunter2-notebook-tools-0123456789abcdef"  # not shaped like a provider key: only its value masks it
    monkeypatch.setenv("OPENAI_API_KEY", key)
    piece = key[:6]
    for pad in range(20):
        assert piece not in entered(format_cells([CellRecord(1, "x = 1", "o" * (460 + pad) + key)], 4000))  # output
        assert piece not in entered(format_cells([CellRecord(1, "s" * (40 + pad) + key, "")], 80))  # the whole cut
        assert piece not in entered(inspect(None, {"url": "u" * (50 + pad) + key}))  # a preview cut
        assert piece not in entered(inspect("text", {"text": "t" * 300 + key}, limit=370 + pad))  # a description


def test_a_cut_never_ends_inside_a_key_known_by_its_shape() -> None:
    """Not only the environment's keys: an ``sk-`` key and credentials in a URL (which the mask finds by their
    shape) are never cut in two either, so no piece of one is left where the result enters the transcript."""
    from pi_kernel.tools.builtin.describe import clip, one_line

    key, url = "sk-live-Zq8Lm2Np4Rt6Vx8Bq0WcAbCdEf", "postgres://admin:hunter2-password-long@db.example.com/x"
    for pad in range(60):
        for secret, piece in ((key, "Zq8"), (url, "hunt")):
            assert piece not in entered(clip("a " * pad + secret + " tail" * 20, 60))
            assert piece not in entered(one_line("b " * pad + secret + " tail" * 20, 50))


def test_cells_show_the_error_and_the_last_frames() -> None:
    record = CellRecord(4, "1 / 0", "", CellError("ZeroDivisionError", "division by zero", ['  File "x", line 1\n']))
    text = format_cells([record], 4000)
    assert "In [4]:\n1 / 0" in text and "Error: ZeroDivisionError: division by zero" in text
    assert 'File "x", line 1' in text


def test_context_names_cells_errors_and_changed_variables_once_and_stays_bounded() -> None:
    history = CellHistory()
    context = NotebookContext(history)
    namespace: dict[str, Any] = {"df": pd.DataFrame({"a": [1], "b": [2]})}
    history.add(CellRecord(1, "df = make()", ""))
    history.add(CellRecord(2, "df.c.sum()", "", CellError("AttributeError", "no attribute 'c'")))
    first = context.take(namespace)
    assert first is not None
    assert "In [2]: df.c.sum()\n  raised AttributeError: no attribute 'c'" in first
    assert "- df: pandas.DataFrame shape (1, 2) columns: a, b" in first
    context.after_turn(namespace)
    assert context.take(namespace) is None  # nothing new since
    namespace.update({f"v{index}": "x" * 100 for index in range(500)})
    history.add(CellRecord(3, "y = 1\n" * 1000, ""))
    bounded = context.take(namespace)
    assert bounded is not None and len(bounded) <= 2000 and "In [3]:" in bounded
    context.enabled = False
    history.add(CellRecord(4, "z = 1", ""))
    assert context.take(namespace) is None
    context.enabled = True
    context.forget()  # %pi reset: the next turn hears everything again
    again = context.take(namespace)
    assert again is not None and "In [1]: df = make()" in again and "- df: pandas.DataFrame" in again


def test_context_and_describe_limit_settings_from_env_and_config() -> None:
    from pi_kernel.kernel.config import PiSettings, apply_config, settings_from_env
    from pi_kernel.kernel.session import PiSession

    assert settings_from_env({}).notebook_context is True
    assert settings_from_env({"PI_NOTEBOOK_CONTEXT": "0"}).notebook_context is False
    problems: list[str] = []
    assert settings_from_env({"PI_NOTEBOOK_CONTEXT": "maybe"}, problems=problems).notebook_context is True
    assert problems and problems[0].startswith("PI_NOTEBOOK_CONTEXT:")
    configured = apply_config(PiSettings(), {"notebook_context": "off", "describe_limit": "2000"})
    assert (configured.notebook_context, configured.describe_limit) == (False, 2000)
    session = PiSession(None, configured)
    assert session.context_enabled is False and session.notebook_context.enabled is False
    assert session.tool_context.describe_limit == 2000


# --------------------------------------------------------------------------- inspect hostile


class SlowList(list):  # e.g. a lazily fetched result set
    def __len__(self) -> int:
        time.sleep(3)
        return 0


class Account:
    def __init__(self) -> None:
        self.withdrawals = 0
        self.owner = "Ada"

    @property
    def withdraw(self) -> int:  # a getter with a side effect
        self.withdrawals += 1
        return 100

    def __getattr__(self, name: str) -> Any:  # e.g. an RPC proxy that sends a request per attribute
        self.withdrawals += 10
        return name

    def deposit(self, amount: int) -> None:
        """Put money in."""


class OutsideContext:  # like werkzeug.local.LocalProxy for flask.request outside a request
    def __call__(self) -> None:
        pass

    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError("Working outside of request context.")


def test_an_object_whose_attributes_raise_does_not_break_every_turn() -> None:
    context = NotebookContext(CellHistory())
    namespace = {"request": OutsideContext(), "x": 1}
    text = context.take(namespace)
    assert text is not None and "x" in text
    assert "x: int" in run_inspect(None, namespace, limit=4000, hidden=set())


def test_a_slow_len_does_not_stall_the_listing() -> None:
    started = time.monotonic()
    run_inspect(None, {"rows": SlowList()}, limit=4000, hidden=set())
    assert time.monotonic() - started < 2


def test_a_slow_len_does_not_stall_the_notebook_context_of_a_turn() -> None:
    context = NotebookContext(CellHistory())
    started = time.monotonic()
    context.take({"rows": SlowList()})
    assert time.monotonic() - started < 2


def test_the_listing_preview_of_a_big_plain_list_is_bounded_in_time() -> None:
    """SafeCaller's 1 s limit cannot stop a C-level repr (list/dict/tuple repr holds the GIL and is not
    interrupted by PyThreadState_SetAsyncExc): the preview of a built-in container is bounded instead."""
    big = [(i, i) for i in range(4_000_000)]
    started = time.monotonic()
    text = run_inspect(None, {"big": big}, limit=4000, hidden=set())
    assert time.monotonic() - started < 1.5
    assert "big: list len 4,000,000 = [(0, 0), (1, 1)" in text


@pytest.mark.parametrize("path", ["account.withdraw", "account.transfer"])
def test_a_dotted_path_runs_no_user_code(path: str) -> None:
    account = Account()
    try:
        text = run_inspect(path, {"account": account}, limit=4000, hidden=set())
    except ValueError as refused:  # the tool's error result
        text = str(refused)
    assert account.__dict__["withdrawals"] == 0
    assert "100" not in text


def test_a_dotted_path_still_reads_plain_attributes_and_methods() -> None:
    account = Account()
    namespace = {"account": account}
    assert "Ada" in run_inspect("account.owner", namespace, limit=4000, hidden=set())
    assert "Put money in." in run_inspect("account.deposit", namespace, limit=4000, hidden=set())
    assert account.__dict__["withdrawals"] == 0


# --------------------------------------------------------------------------- inspect kinds


def test_duplicate_column_names_still_get_dtypes_and_nulls() -> None:
    df = pd.DataFrame(np.arange(6.0).reshape(2, 3), columns=["a", "a", "b"])
    text = run_inspect("df", {"df": df}, limit=4000, hidden=set())
    assert "summary failed" not in text
    assert "2 rows x 3 columns" in text and "float64" in text
    assert "numeric summary" in text and "  b: 2, 3.5, 2, 5" in text
