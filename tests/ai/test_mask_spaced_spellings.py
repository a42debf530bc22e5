"""The mask catches a key's hex with any separator and grouping, and a key with anything between its letters.

Found by an adversary: after approval, ``xxd /proc/self/environ`` (the default dump), ``od -An -tx1`` and
``key.encode().hex(' ')`` gave the key as spaced hex, unmasked (contiguous hex was masked). Each spelling
here is produced by the real tool (``xxd``, ``od``, ``hexdump``) or by Python, from a file holding the key.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pi_kernel.ai.secrets import MaskedStream, is_secret_name, mask, secret_values

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"
RAW = KEY.encode()


def _no_run(text: str) -> None:
    """No 12-character run of the key, in clear or as hex (any case, any separator), in ``text``."""
    digits = re.sub(r"[^0-9a-f]", "", text.lower())
    letters = re.sub(r"[^0-9A-Za-z]", "", text)
    for start in range(len(KEY) - 11):
        piece = KEY[start : start + 12]
        assert piece not in text and piece.encode().hex() not in digits, (piece, text)
    alnum = re.sub(r"[^0-9A-Za-z]", "", KEY)
    assert not [alnum[i : i + 12] for i in range(len(alnum) - 11) if alnum[i : i + 12] in letters], text


@pytest.mark.parametrize(
    "command",
    [
        ["xxd"],
        ["xxd", "-g1"],
        ["xxd", "-i"],
        ["xxd", "-u"],
        ["od", "-An", "-tx1"],
        ["od", "-tx1"],
        ["od", "-x"],
        ["od", "-tx4"],
        ["od", "-tx8"],
        ["hexdump", "-C"],
        ["hexdump"],
    ],
)
def test_dumps_of_a_file_holding_the_key_are_masked(tmp_path: Path, command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    path = tmp_path / "environ"
    path.write_bytes(b"HOME=/root\0OPENAI_API_KEY=" + RAW + b"\0PATH=/usr/bin\0")
    dump = subprocess.run([*command, str(path)], capture_output=True, text=True, check=True).stdout
    masked = mask(dump, [KEY])
    assert "***" in masked
    middle = masked.lower()
    for start in range(0, len(RAW) - 12, 4):  # the bytes of the key's middle are gone in every grouping
        assert RAW[start : start + 12].hex() not in re.sub(r"[^0-9a-f]", "", middle), (command, masked)
    if command[:2] != ["od", "-tx8"] and command != ["hexdump"] and command[:2] != ["od", "-x"]:
        _no_run(masked)


@pytest.mark.parametrize(
    "spelled",
    [
        RAW.hex(" "),
        RAW.hex(":", 2),
        RAW.hex("-", 4),
        RAW.hex().upper(),
        ", ".join(f"0x{byte:02x}" for byte in RAW),
        "".join(f"\\x{byte:02x}" for byte in RAW),
        "".join(f"%{byte:02X}" for byte in RAW),
        " ".join(KEY),
        str(list(KEY)),
        "<b></b>".join(KEY[i : i + 10] for i in range(0, len(KEY), 10)),
        "<span class='x'>".join(KEY[i : i + 5] for i in range(0, len(KEY), 5)),
    ],
)
def test_spaced_spellings_are_masked(spelled: str) -> None:
    masked = mask(f"before {spelled} after", [KEY])
    assert masked.startswith("before ") and masked.endswith(" after") and "***" in masked
    _no_run(masked)


def test_ordinary_text_and_other_hex_are_left_alone() -> None:
    text = "sha256 3f 2a 9b 00 11, colours #ff00aa, <b>bold</b> and a-b-c; 0x10 0x20\n00000000: 4865 6c6c 6f"
    assert mask(text, [KEY]) == text


def test_a_stream_of_ten_character_pieces_split_by_tags_is_masked_whole() -> None:
    for between in ("", "<b></b>", "<i></i><b></b>"):
        stream = MaskedStream([KEY])
        shown = "".join(stream.feed(KEY[i : i + 10] + between) for i in range(0, len(KEY), 10)) + stream.flush()
        assert "***" in shown
        _no_run(shown)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("AWS_SECRET_ACCESS_KEY", True),
        ("DB_PASSWORD", True),
        ("PGPASSWORD", True),
        ("GITHUB_PAT", True),
        ("SENTRY_DSN", True),
        ("HF_TOKEN", True),
        ("MY_API_KEY", True),
        ("client_secret", True),
        ("PWD", False),
        ("OLDPWD", False),
        ("PATH", False),
        ("GIT_ASKPASS", False),
        ("PI_TOKEN_BUDGET", False),
        ("GOOGLE_APPLICATION_CREDENTIALS_FILE", False),
    ],
)
def test_one_list_of_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
    value = "value-" + name.lower() + "-0123456789"
    assert (value in secret_values({name: value})) is secret


def test_credentials_in_a_url_variable_are_secret() -> None:
    environ = {"DATABASE_URL": "postgres://app:Sup3r-Secret-pw@db.example/app", "HOME": "/root"}
    assert secret_values(environ) == ["Sup3r-Secret-pw"]
    assert "Sup3r-Secret-pw" not in mask("password was Sup3r-Secret-pw", secret_values(environ))


@pytest.mark.parametrize(
    "spelled",
    [
        str(list(RAW)),  # list(key.encode())
        " ".join(str(byte) for byte in RAW),
        "".join(f"&#{byte};" for byte in RAW),
        "".join(f"&#x{byte:X};" for byte in RAW),
        "".join(f"\\u{byte:04x}" for byte in RAW),  # JSON's and ascii()'s escapes
        "".join(f"\\u{byte:04X}" for byte in RAW),
    ],
)
def test_decimal_bytes_and_escapes_of_the_key_are_masked(spelled: str) -> None:
    """Once shown as they were: decimal byte lists, HTML character references and ``\\u00XX`` escapes."""
    masked = mask(f"value: {spelled} end", [KEY])
    assert "***" in masked and masked.startswith("value: ") and masked.endswith(" end"), masked
    digits = "".join(str(byte) for byte in RAW)
    assert not [i for i in range(len(digits) - 29) if digits[i : i + 30] in re.sub(r"\D", "", masked)], masked
    assert spelled[len(spelled) // 3 : 2 * len(spelled) // 3] not in masked, masked


def test_long_numbers_that_are_not_the_key_stay() -> None:
    text = "ids: 1234567890123456789012345678901234567890, [1, 2, 3, 115, 107]"
    assert mask(text, [KEY]) == text


@pytest.mark.parametrize("columns", ["-c4", "-c2", "-c8"])
def test_a_narrow_xxd_dump_is_masked_in_its_text_and_hex_columns(tmp_path: Path, columns: str) -> None:
    """``xxd -c4`` puts 4 bytes a line: the key showed whole, read down its text column."""
    if shutil.which("xxd") is None:
        pytest.skip("xxd is not installed")
    path = tmp_path / "environ"
    path.write_bytes(b"HOME=/root\0OPENAI_API_KEY=" + RAW + b"\0PATH=/usr/bin\0")
    dump = subprocess.run(["xxd", columns, str(path)], capture_output=True, text=True, check=True).stdout
    masked = mask(dump, [KEY])
    assert "***" in masked and masked.startswith("00000000: "), masked
    column = "".join(re.findall(r"  +(\S*)$", masked, re.MULTILINE))
    hex_column = "".join(re.findall(r"^[0-9a-f]+: ([0-9a-f ]+?)  ", masked, re.MULTILINE)).replace(" ", "")
    for start in range(len(KEY) - 11):
        assert KEY[start : start + 12] not in column, (KEY[start : start + 12], masked)
        assert RAW[start : start + 12].hex() not in hex_column, masked
