"""scripts/per_conversation.py: pooled tau ratios and per-conversation higher / lower counts."""
import importlib.util
import json
from pathlib import Path

spec = importlib.util.spec_from_file_location("per_conversation",
                                              Path(__file__).parents[1] / "scripts" / "per_conversation.py")
pc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pc)


def _rows(*turns):
    return [{"request": f"{c}#{i}", "tokens": t, "forwards": f} for i, (c, t, f) in enumerate(turns)]


def test_turns_pool_into_their_conversation():
    rows = _rows(("c#a", 10, 5), ("c#a", 2, 2), ("d", 9, 3))       # "#" inside a name: the last one splits
    assert pc.per_conversation(rows) == {"c#a": 12 / 7, "d": 3.0}


def test_counts_and_refusals(tmp_path, capsys):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    a.write_text(json.dumps({"methods": {"x": {"tau": 3.0, "per_request": _rows(("c", 6, 2), ("d", 4, 2))}}}))
    b.write_text(json.dumps({"methods": {"y": {"tau": 2.0, "per_request": _rows(("c", 4, 2), ("d", 6, 2))}}}))
    assert pc.main([f"{a},{b}", "x", "y"]) == 0
    assert "x / y: 3.000 / 2.000 = 1.500x; higher on 1, lower on 1 of 2 conversations" in capsys.readouterr().out
    assert pc.main([str(a), "x", "y"]) == 2 and "has no method 'y'" in capsys.readouterr().err
    assert pc.main([str(a), "x"]) == 2


def test_blocks_pool_conversations_in_replay_order(tmp_path, capsys):
    a = _rows(("c", 6, 3), ("c", 6, 3), ("d", 8, 2), ("e", 9, 3))
    b = _rows(("c", 6, 6), ("c", 6, 6), ("d", 8, 4), ("e", 9, 9))
    assert pc.pooled_blocks(a, b, 2) == [(1, 2, (20 / 8) / (20 / 16)), (3, 3, 3.0)]
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"methods": {"x": {"tau": 2.0, "per_request": a}, "y": {"tau": 1.0, "per_request": b}}}))
    assert pc.main(["--blocks", "2", str(f), "x", "y"]) == 0
    assert "by replay order: 1-2 2.000x, 3-3 3.000x" in capsys.readouterr().out
    assert pc.main(["--blocks", "0", str(f), "x", "y"]) == 2 and "--blocks" in capsys.readouterr().err
