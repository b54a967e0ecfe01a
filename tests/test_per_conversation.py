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
    # a block of ten conversations or more says its 95% interval over them
    many_a = _rows(*[(f"k{i}", 6 + i % 3, 3) for i in range(24)])
    many_b = _rows(*[(f"k{i}", 6 + i % 3, 4) for i in range(24)])
    f.write_text(json.dumps({"methods": {"x": {"tau": 2.0, "per_request": many_a},
                                         "y": {"tau": 1.5, "per_request": many_b}}}))
    assert pc.main(["--blocks", "12", str(f), "x", "y"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.count("(") == 2 and "1-12 1.333x (" in line and "13-24 1.333x (" in line
    assert pc.block_interval(many_a, many_b, 1, 9) == ""                      # nine: too few

def test_runs_that_cannot_be_compared_are_refused(tmp_path, capsys):
    """A run stopped early, a method in two files, runs of other data or tree, or of other
    conversations: refused in one line, not a ratio of different things."""
    def run(name, methods, **doc):
        p = tmp_path / name
        p.write_text(json.dumps({"methods": methods, **doc}))
        return str(p)
    x = {"x": {"tau": 3.0, "per_request": _rows(("c", 6, 2), ("d", 4, 2))}}
    y = {"y": {"tau": 2.0, "per_request": _rows(("c", 4, 2), ("d", 6, 2))}}
    short = {"y": {"tau": 2.0, "per_request": _rows(("c", 4, 2))}}
    cases = [
        ([run("a", x, complete=True), run("b", y, complete=False, n_requests=1, n_requests_planned=2)], "stopped early"),
        ([run("c", x), run("d", {**x, **y})], "method 'x' is in more than one of"),
        ([run("e", x, data="set-1"), run("f", y, data="set-2")], "differ in data"),
        ([run("g", x, tree={"budget": 12}), run("h", y, tree={"budget": 24})], "differ in node budget"),
        ([run("i", x), run("j", short)], "replayed different conversations"),
    ]
    both = f"{run('m', x)},{run('n', {**y, 'x': {'tau': 1.0, 'per_request': _rows(('c', 2, 2), ('d', 2, 2))}})}"
    assert pc.main([both, "x@2", "y"]) == 0
    assert "x@2 / y: 1.000 / 2.000 = 0.500x; higher on 0, lower on 2 of 2" in capsys.readouterr().out
    for paths, said in cases:
        assert pc.main([",".join(paths), "x", "y"]) == 2
        assert said in capsys.readouterr().err
    tie = {"y": {"tau": 2.0, "per_request": _rows(("c", 6, 2), ("d", 6, 2))}}
    # another reserve at the same budget compares: it changes only the methods that draw on it
    assert pc.main([f"{run('k', x, tree={'budget': 60, 'semantic_budget': 2})},"
                    f"{run('l', tie, tree={'budget': 60, 'semantic_budget': 16})}", "x", "y"]) == 0
    assert "higher on 0, lower on 1 of 2 conversations (1 equal)" in capsys.readouterr().out
