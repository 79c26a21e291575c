"""bench.py_spy.shares: inclusive and self shares from py-spy's collapsed stacks."""

from __future__ import annotations

import pytest

from bench.py_spy import shares


def test_shares_count_each_frame_once_per_stack() -> None:
    raw = ("main (a.py:1);loop (a.py:5);decode (b.py:9) 6\n"
           "main (a.py:1);loop (a.py:5);loop (a.py:5);write (c.py:3) 3\n"
           "main (a.py:1) 1\n")
    total, inclusive, on_top = shares(raw)
    assert total == 10
    assert inclusive == pytest.approx({"main (a.py:1)": 1.0, "loop (a.py:5)": 0.9,
                                       "decode (b.py:9)": 0.6, "write (c.py:3)": 0.3})
    assert on_top == pytest.approx({"decode (b.py:9)": 0.6, "write (c.py:3)": 0.3,
                                    "main (a.py:1)": 0.1})


def test_shares_of_an_empty_profile() -> None:
    assert shares("") == (0, {}, {})
