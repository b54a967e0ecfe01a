"""scripts/interval_coverage.py: how often a pooled ratio's interval holds the whole run's ratio,
for runs of fewer units (the reason intervals.MIN_UNITS exists)."""
import importlib.util
import json
from pathlib import Path

import numpy as np

spec = importlib.util.spec_from_file_location("interval_coverage",
                                              Path(__file__).parents[1] / "scripts" / "interval_coverage.py")
ic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ic)


def _run(n_conv: int = 40, seed: int = 3) -> dict:
    """A replay of ``n_conv`` conversations of three turns whose ratio a / b varies by conversation."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"a": [], "b": []}
    for c in range(n_conv):
        gain = rng.uniform(0.8, 1.8)
        for t in range(3):
            forwards = int(rng.integers(5, 40))
            rows["b"].append({"request": f"c{c}#{t}", "tokens": 2 * forwards, "forwards": forwards})
            rows["a"].append({"request": f"c{c}#{t}", "tokens": 2 * forwards,
                              "forwards": max(1, round(forwards / gain))})
    return {"replay": {"mode": "fast"}, "methods": {m: {"per_request": r} for m, r in rows.items()}}


def test_small_runs_hold_the_whole_runs_ratio_less_often():
    res = _run()
    big, small = ic.coverage(res, "a", "b", 40, trials=60), ic.coverage(res, "a", "b", 3, trials=60)
    assert 0.8 <= big <= 1.0 and small < big


def test_the_command_prints_one_line_per_size(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_run(12)))
    assert ic.main([str(path), "a", "b", "--sizes", "12,3", "--trials", "20"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [x.split(" units")[0].strip() for x in out] == ["12", "3"] and all("of 20 drawn runs" in x for x in out)
