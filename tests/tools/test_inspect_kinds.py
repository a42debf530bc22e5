"""Ordinary data inspect describes (the issue: DataFrame columns/dtypes/nulls).

- A DataFrame with duplicate column names (common after pd.concat(axis=1) or a CSV with repeated
  headers) still gets its dtypes, nulls and numeric summary (columns are read by position).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pi_kernel.tools.builtin.inspect_tool import run_inspect


def test_duplicate_column_names_still_get_dtypes_and_nulls() -> None:
    df = pd.DataFrame(np.arange(6.0).reshape(2, 3), columns=["a", "a", "b"])
    text = run_inspect("df", {"df": df}, limit=4000, hidden=set())
    assert "summary failed" not in text
    assert "2 rows x 3 columns" in text and "float64" in text
    assert "numeric summary" in text and "  b: 2, 3.5, 2, 5" in text
