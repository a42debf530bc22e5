"""The Jupyter messaging conformance suite (``jupyter_kernel_test``) against the ``pi`` kernelspec."""

from __future__ import annotations

import os
import tempfile
import unittest
from pathlib import Path

import jupyter_kernel_test
import pytest
from kernel_helpers import kernel_env, write_test_kernelspecs

pytestmark = pytest.mark.kernel


class PiKernelConformance(jupyter_kernel_test.KernelTests):
    kernel_name = "pi"
    language_name = "python"
    file_extension = ".py"

    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('oops', file=sys.stderr)"
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]
    code_page_something = "zip?"
    code_generate_error = "raise ValueError('boom')"
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "[n*n for n in range(3)]", "result": "[0, 1, 4]"}]
    code_display_data = [
        {"code": "from IPython.display import HTML, display; display(HTML('<b>pi</b>'))", "mime": "text/html"},
        {"code": "from IPython.display import Math, display; display(Math('\\\\pi'))", "mime": "text/latex"},
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"

    @classmethod
    def setUpClass(cls) -> None:
        cls._saved_env = dict(os.environ)
        cls._tmp = tempfile.TemporaryDirectory()
        os.environ.clear()
        os.environ.update(kernel_env(), JUPYTER_PATH=str(write_test_kernelspecs(Path(cls._tmp.name))))
        try:
            super().setUpClass()
        finally:
            os.environ.clear()
            os.environ.update(cls._saved_env)

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls._tmp.cleanup()

    def test_pi_kernel_identifies_itself(self) -> None:
        self.flush_channels()
        self.kc.kernel_info()
        reply = self.kc.get_shell_msg(timeout=10)
        assert reply["content"]["implementation"] == "pi_kernel"
        assert reply["content"]["language_info"]["name"] == "python"


if __name__ == "__main__":
    unittest.main()
