"""pytest imports test files by basename (the default ``prepend`` import mode, no packages
under tests/ and e2e/): two test files of one name anywhere in the suite stop the whole run at
collection (``import file mismatch``). Every test file's name is unique."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_file_name_is_unique() -> None:
    files = [p for folder in ("tests", "e2e") for p in (ROOT / folder).rglob("test_*.py")]
    names = Counter(p.name for p in files)
    assert sorted(name for name, count in names.items() if count > 1) == []
