"""ResyncRound: each inventory once per interval, in even shares of the round."""

from __future__ import annotations

from kubedra.controller.resync import ResyncRound


def test_a_round_is_spread_evenly_and_each_name_comes_once() -> None:
    names = [f"inv-{i:02d}" for i in range(10)]
    resync = ResyncRound(interval_s=100.0)
    given = [resync.due(lambda: names, 5.0) for _ in range(20)]  # 20 ticks of 5 s: a round
    assert [len(g) for g in given] == [0, 1] * 10  # 0.5 a tick
    assert [n for g in given for n in g] == names
    # the next round starts with the names there are then
    later = [*names, "inv-10"]
    assert resync.due(lambda: later, 50.0) == later[:5]  # 5.5 due: 5, half a name owed
    assert resync.due(lambda: later, 50.0) == later[5:]  # 5.5 more and the half: 6


def test_no_inventories_no_work() -> None:
    resync = ResyncRound(interval_s=60.0)
    assert resync.due(list, 5.0) == []
    assert resync.due(lambda: ["a"], 60.0) == ["a"]
