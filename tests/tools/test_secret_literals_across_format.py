"""String literals joined across a ``%`` or ``.format`` still name a process's environment.

Found by an adversary: ``python3 -c "open('/proc/%d/env'%os.getppid()+'iron')"`` ran without a question in
``auto`` mode: the literals were joined only when nothing but ``+`` or spaces stood between them.
"""

from __future__ import annotations

import pytest

from pi_kernel.tools.paths import secret_mention_reason


@pytest.mark.parametrize(
    "text",
    [
        "python3 -c \"open('/proc/%d/env'%os.getppid()+'iron')\"",
        "open('/proc/%d/env' % os.getppid() + 'iron').read()",
        "open('/proc/%s/env' % (os.getppid(),) + 'iron').read()",
        "open('/proc/{}/env'.format(os.getppid()) + 'iron').read()",
    ],
)
def test_a_format_between_literals_still_asks(text: str) -> None:
    assert secret_mention_reason(text) is not None


def test_ordinary_formatting_is_not_a_secret_read() -> None:
    assert secret_mention_reason("print('total %d' % n, 'items')") is None
