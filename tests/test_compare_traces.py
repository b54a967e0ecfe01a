"""scripts/compare_traces.py: the before/after check of a refactor finds a changed field and
ignores only timings and the fields a newer trace format adds."""
import importlib.util
import json
from pathlib import Path

from wb_traces import all_requests

from oilbird.trace import save_traces

spec = importlib.util.spec_from_file_location("compare_traces", Path(__file__).parents[1] / "scripts" / "compare_traces.py")
compare_traces = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_traces)


def test_equal_traces_pass_and_a_changed_field_fails(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    save_traces(all_requests(), a)
    lines = [json.loads(x) for x in a.read_text().splitlines()]
    lines[1]["timings"] = {"verify": 9.0}          # timings differ run to run: ignored
    b.write_text("\n".join(json.dumps(d) for d in lines))
    assert compare_traces.main([str(a), str(b)]) == 0
    lines[2]["accepted"] = [0]                     # a verdict changed: caught, by record
    b.write_text("\n".join(json.dumps(d) for d in lines))
    assert compare_traces.main([str(a), str(b)]) == 1
    assert "record 3 (cycle r1 oilbird): accepted" in capsys.readouterr().out
    b.write_text("\n".join(json.dumps(d) for d in lines[:2]))
    assert compare_traces.main([str(a), str(b)]) == 1
    lines[2]["accepted"] = json.loads(a.read_text().splitlines()[2])["accepted"]
    b.write_text("\n".join(json.dumps(d) for d in lines[:3]))
    assert compare_traces.main([str(a), str(b), "--prefix"]) == 0
