"""Bad input gives one clear error before any model loads; corrupt trace records are refused
with the line that broke them. No model here: every case fails before one would load."""
from __future__ import annotations

import json
import re
import zlib

import numpy as np
import pytest
from wb_traces import all_requests

from oilbird.__main__ import main
from oilbird.data.requests import PromptError, Request, encode
from oilbird.trace import TraceError, load_traces, save_traces


def _fails(argv, capsys, message):
    """``python -m oilbird ARGV`` exits 2 (argparse or our handler) and says ``message``."""
    try:
        rc = main(argv)
    except SystemExit as exc:          # argparse's own errors
        rc = exc.code
    assert rc == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["trace", "--methods", "ar", "--out", "x.jsonl"], "'ar' drafts no tree"),
    (["trace", "--methods", "goose,hf-pld", "--out", "x.jsonl"], "'hf-pld' drafts no tree"),
    (["trace", "--methods", " , ", "--out", "x.jsonl"], "no method given"),
    (["bench", "--methods", ""], "no method given"),
    (["bench", "--methods", "goose,nope"], "unknown method 'nope'"),
    (["bench", "--methods", "oilbird:bogus"], "after the colon comes one fill"),
    (["bench", "--methods", "ar,goose,goose"], "method 'goose' is named twice"),
    (["trace", "--methods", "goose,goose", "--out", "x.jsonl"], "method 'goose' is named twice"),
    (["bench", "--methods", "oilbird,oilbird:expected"], "'oilbird:expected' is 'oilbird' again (the same sources and fill)"),
    (["replay", "--methods", "goose,goose:reserved"], "'goose:reserved' is 'goose' again"),
    (["bench", "--max-new-tokens", "0"], "must be at least 1, not 0"),
    (["bench", "--out", ""], "--out: is empty: give a folder or file to write"),
    (["bench", "--data", ""], "--data: is empty: name a data set or give a file or folder to read"),
    (["replay", "--data", " "], "--data: is empty"),
    (["bench", "--data", "caf\udce9.jsonl"], "--data: names a path in bytes that are not UTF-8: rename it"),
    (["serve-bench", "--data", ""], "--data: is empty"),
    (["decode", "hi \udcff there"], "the prompt holds bytes that are not UTF-8 text"),  # argv's surrogateescape
    (["trace", "--methods", "goose", "--out", " "], "--out: is empty"),
    (["bench", "--skip", "-1"], "must be at least 0, not -1"),
    (["replay", "--state-layer", "-1"], "must be at least 0, not -1"),
    (["serve-bench", "--state-layer", "3"], "unrecognized arguments: --state-layer"),   # its proposer's config says
    (["serve-bench", "--batch-sizes", "1,x"], "--batch-sizes: 'x' is not a whole number"),
    (["serve-bench", "--batch-sizes", "0"], "--batch-sizes: must be at least 1, not 0"),
    (["serve-bench", "--batch-sizes", ","], "--batch-sizes: name at least one value"),
    (["serve-bench", "--batch-sizes", "1,1"], "--batch-sizes: '1' is named twice"),
    (["serve-bench", "--methods", "ngram,ngram"], "--methods: 'ngram' is named twice"),
    (["bench", "--store-capacity", "0"], "must be at least 1, not 0"),
    (["bench", "--budget", "ten"], "'ten' is not a whole number"),
    (["bench", "--methods", "goose", "--semantic-budget", "12"], "semantic_budget must be 0 to budget - 1 = 11"),
    (["decode", "", "--max-new-tokens", "4"], "the prompt is empty"),
    (["decode", "   "], "the prompt is empty"),
    (["decode", "hi", "--method", "ar"], "'ar' is not a preset"),
    (["decode", "hi", "--method", "oilbird:bogus"], "after the colon comes one fill"),
    (["decode", "hi", "--max-new-tokens", "-3"], "must be at least 1, not -3"),
    (["replay", "--methods", "goose,hf-pld"], "'hf-pld' cannot replay"),
    (["replay", "--methods", "bogus"], "unknown method 'bogus'; replay takes ar, pld,"),
    (["replay", "--methods", ""], "no method given; replay takes ar, pld,"),        # (not hf-greedy, hf-pld)
    (["replay", "--methods", "oilbird,oilbird"], "method 'oilbird' is named twice"),
    (["replay", "--data", "no/such/conversations.jsonl"], "conversations.jsonl"),
    (["replay", "--cache-max-gb", "inf"], "must be a finite number >= 0, not inf"),
    (["replay", "--cache-max-gb", "-1"], "must be a finite number >= 0, not -1"),
    (["replay", "--cache-max-gb", "lots"], "'lots' is not a number"),
])
def test_bad_arguments_fail_before_the_model_loads(argv, message, capsys, monkeypatch):
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    _fails(argv, capsys, message)


def test_a_template_that_cannot_spell_tool_calls_is_refused_before_the_weights_load(tmp_path, capsys, monkeypatch):
    """replay --tool-calls template probes the chat template with the tokenizer alone
    (oilbird.model.load_tokenizer): SmolLM2's writes no tool calls, and a large model's weights
    would only load to be refused."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    _fails(["replay", "--data", "agent-builtin", "--limit", "1", "--tool-calls", "template", "--out", str(tmp_path / "r")],
           capsys, "does not write tool calls")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("methods, said", [("goose,oilbird", True), ("oilbird:expected", True),
                                           ("goose,oilbird:reserved", False), ("pld+sem", False)])
def test_a_semantic_budget_no_method_reserves_is_said(methods, said, tmp_path, capsys, monkeypatch):
    """--semantic-budget reserves nodes under the reserved fill only: asked for with none of
    those methods, one line says it changes nothing (the run goes on)."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    assert main(["replay", "--methods", methods, "--semantic-budget", "4", "--data", str(tmp_path / "none.jsonl"),
                 "--out", str(tmp_path / "r")]) == 2          # then refused for its data, as always
    err = capsys.readouterr().err
    assert "none.jsonl" in err and ("--semantic-budget changes none of these methods" in err) is said


GREEDY_NOTE = "--top-p and --seed apply only with --temperature > 0: this run decodes greedily"


@pytest.mark.parametrize("argv, said", [
    (["bench", "--methods", "ar", "--budget", "5"], "--budget changes none of these methods (ar draft no tree)"),
    (["bench", "--methods", "ar,goose", "--budget", "5"], None),
    (["bench", "--methods", "ar", "--top-p", "0.5"], GREEDY_NOTE),
    (["bench", "--methods", "ar", "--seed", "3"], GREEDY_NOTE),
    (["bench", "--methods", "ar", "--seed", "3", "--temperature", "0.7"], None),
])
def test_an_option_that_changes_nothing_is_said(argv, said, tmp_path, capsys, monkeypatch):
    """An option the run's methods or its greedy decoding ignore is said in one note (the run
    goes on: here it is then refused for its data, before the model loads)."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    assert main([*argv, "--data", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "r")]) == 2
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert (notes == [f"note: {said}"]) if said else not notes, notes


def test_different_seeds_seed_differently():
    """A seed is not cut to 32 bits (2**32 seeded as 0, -1 as 2**32 - 1, 1 as -1's cut); a seed
    in 0..2**32-1 seeds as it always did."""
    from oilbird.sampling import SamplingParams, request_rng
    seeds = (0, 2 ** 32, -1, 2 ** 32 - 1, 1, 7)
    draws = [request_rng(SamplingParams(1.0, 1.0, s), "r").random() for s in seeds]
    assert len(set(draws)) == len(seeds)
    assert draws[-1] == np.random.default_rng([7, zlib.crc32(b"r")]).random()


def test_a_cache_that_names_a_file_is_said_so(tmp_path):
    from oilbird.evaluation.teacher import TeacherCache
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="notes.txt' is a file; it names a folder"):
        TeacherCache(tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_replay_refused_for_its_data_leaves_no_cache_folder(tmp_path, capsys, monkeypatch):
    """--cache's folder is made once the run's inputs are known good: a replay refused for its
    data leaves nothing behind."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    _fails(["replay", "--data", str(tmp_path / "none.jsonl"), "--cache", str(tmp_path / "tc"),
            "--out", str(tmp_path / "r")], capsys, "none.jsonl")
    assert not (tmp_path / "tc").exists()


def test_out_of_the_wrong_kind(tmp_path, capsys, monkeypatch):
    """trace writes a file, bench a folder: the other kind is refused up front, not after decoding."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    _fails(["trace", "--methods", "goose", "--out", str(tmp_path)], capsys, "is a folder")
    f = tmp_path / "results.jsonl"
    f.write_text("x")
    _fails(["bench", "--methods", "goose", "--out", str(f)], capsys, "is a file")
    assert f.read_text() == "x"                           # nothing already stored is lost


@pytest.mark.parametrize("cmd, stored", [
    (["bench", "--methods", "goose"], "results.json"),
    (["bench", "--methods", "goose"], "traces.jsonl"),
    (["diagnose"], "diagnosis.json"),
    (["trace", "--methods", "goose"], ""),
])
def test_earlier_results_are_not_replaced_without_force(tmp_path, capsys, monkeypatch, cmd, stored):
    """A second run into the same --out is refused before the model loads, and the earlier
    run's file is left as it was; --force gets past the check (to the model, here)."""
    import oilbird.model

    class Loaded(Exception):
        pass

    def load(*_a, **_k):
        raise Loaded
    monkeypatch.setattr(oilbird.model, "load_model", load)
    out = tmp_path / "run" if stored else tmp_path / "t.jsonl"
    kept = out / stored if stored else out
    kept.parent.mkdir(exist_ok=True)
    earlier = "earlier" if stored else '{"kind": "request", "request_id": "earlier"}\n'   # a trace file's start
    kept.write_text(earlier)
    argv = cmd + ["--data", "builtin", "--limit", "1", "--out", str(out)]
    _fails(argv, capsys, "pass --force to replace it")
    assert kept.read_text() == earlier
    with pytest.raises(Loaded):
        main(argv + ["--force"])


@pytest.mark.parametrize("cmd", [["bench", "--methods", "goose"], ["replay", "--data", "agent-builtin"],
                                 ["decode", "hi"], ["diagnose"]])
def test_state_layer_reaches_the_model_loader(cmd, tmp_path, monkeypatch):
    import oilbird.model
    seen = {}

    class Loaded(Exception):
        pass

    def load(*_a, **k):
        seen.update(k)
        raise Loaded
    monkeypatch.setattr(oilbird.model, "load_model", load)
    rest = [] if cmd[0] == "decode" else ["--limit", "1", "--out", str(tmp_path / "run")]
    with pytest.raises(Loaded):
        main(cmd + ["--state-layer", "7"] + rest)
    assert seen["state_layer"] == 7


def test_default_out_is_a_new_folder_per_run():
    from oilbird.__main__ import fresh_out
    assert re.fullmatch(r"runs/bench-builtin-\d{8}-\d{6}-\d+", fresh_out("bench", "builtin"))
    assert re.fullmatch(r"runs/diagnose-own-\d{8}-\d{6}-\d+", fresh_out("diagnose", "data/own.jsonl"))


def test_a_request_refused_after_the_model_loaded_leaves_no_empty_out_folder(tmp_path, capsys, monkeypatch):
    """Too long for the model's context is known only once the model is there: the run stops
    before decoding, names the request, and --out is not created."""
    import oilbird.model
    from conftest import make_tiny_lm                     # a 512-token context
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: make_tiny_lm())
    data = tmp_path / "reqs.jsonl"
    data.write_text(json.dumps({"id": "short", "prompt": "hi"}) + "\n" + json.dumps({"id": "long", "prompt": "x" * 600}))
    for cmd in (["bench", "--methods", "goose"], ["diagnose"]):
        out = tmp_path / "out"
        _fails(cmd + ["--data", str(data), "--max-new-tokens", "4", "--out", str(out)], capsys,
               "request 'long': The prompt has")
        assert not out.exists()


def test_an_empty_request_is_refused_before_tokenizing():
    for content in ("", "  \n", None):
        with pytest.raises(PromptError, match="'r': the prompt is empty"):
            encode(None, Request("r", [{"role": "system", "content": "  "}, {"role": "user", "content": content}]))


def _corrupt(tmp_path, line_no: int, change) -> str:
    """The hand-built traces with line ``line_no`` (1-based) changed; the loader's message."""
    path = save_traces(all_requests(), tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    d = json.loads(lines[line_no - 1])
    change(d)
    lines[line_no - 1] = json.dumps(d)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as exc:
        load_traces(path)
    return str(exc.value)


# line 1: request r1 (oilbird); line 3: its cycle 1, the 5-node tree of tests/wb_traces.py
@pytest.mark.parametrize("line, change, message", [
    (1, lambda d: d.update(gap_labels=[None] * 5), ":1: field 'gap_labels'"),
    (1, lambda d: d.update(output_text=["Hi"]), ":1: output_text is not one piece per output token"),
    (1, lambda d: d.update(output_ids=[10, 11, 12, 99], output_text=["Hi", " there", "\n", "!!"], gap_labels=None),
     "its cycles commit 5 tokens, not its 4"),
    (3, lambda d: d.update(tokens="abc"), ":3: field 'tokens' is \"abc\", not a list of whole numbers"),
    (3, lambda d: d.update(accepted=None), ":3: field 'accepted'"),
    (3, lambda d: d["parents"].__setitem__(4, 15), ":3: cycle 1: node 4 has parent 15"),
    (3, lambda d: d["parents"].__setitem__(3, -1), ":3: cycle 1: node 3 has parent -1"),
    (3, lambda d: d.update(depths=[0, 1]), ":3: cycle 1: depths not one entry per tree node (5)"),
    (3, lambda d: d.update(prices=[1.0, 0.5]), ":3: cycle 1: prices not one entry per tree node (5)"),
    (3, lambda d: d.update(fill_bar="high"), ":3: field 'fill_bar' is \"high\", not a number or null"),
    (3, lambda d: d.update(prices=[1.0, 0.5, 2, 0.1, 0.1], fill_from=1), ":3: cycle 1: prices are not chances"),
    (3, lambda d: d.update(prices=[1.0, 0.5, 0.2, 0.1, 0.1]), ":3: cycle 1: prices are not chances (0 to 1) with the"),
    (3, lambda d: d.update(fill_bar=0.5), ":3: cycle 1: fill_bar 0.5 without the prices of a tree it ends"),
    (3, lambda d: d["neighbours"][0].update(left_out=0.5), ":3: cycle 1: a neighbour's left_out is not a chance at"),
    (3, lambda d: (d.update(_PRICED), d["neighbours"][0].update(left_out=0.2)), ":3: cycle 1: a neighbour's left_out"),
    (3, lambda d: d.update(accepted=[0, 1, 7]), ":3: cycle 1: accepted nodes [0, 1, 7] outside"),
    (3, lambda d: d["neighbours"][0].update(similarity="high"), ":3: field 'similarity'"),
    (3, lambda d: d.update(neighbours=[3]), ":3: field 'neighbours' is not a list of objects"),
])
def test_trace_records_of_the_wrong_shape_are_refused(tmp_path, line, change, message):
    assert message in _corrupt(tmp_path, line, change)


_PRICED = {"prices": [1.0, 0.5, 0.25, 0.2, 0.1], "fill_from": 1, "fill_bar": 0.1}


def test_a_left_out_price_at_the_fills_bar_loads(tmp_path):
    """A chain's first token left out may tie the last node the fill took (the fill breaks ties by
    order), not pass it: the rows above refuse 0.2 against a bar of 0.1, and one without a bar."""
    path = save_traces(all_requests(), tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    d = json.loads(lines[2])
    d.update(_PRICED)
    d["neighbours"][0]["left_out"] = 0.1
    lines[2] = json.dumps(d)
    path.write_text("\n".join(lines) + "\n")
    assert load_traces(path)[0].cycles[1].neighbours[0].left_out == 0.1


def test_hand_built_traces_load_unchanged(tmp_path):
    assert load_traces(save_traces(all_requests(), tmp_path / "t.jsonl")) == all_requests()


def test_replay_refuses_a_bad_conversation_by_line_before_the_model_loads(tmp_path, capsys, monkeypatch):
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    good = json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": "hello"}]})
    bad = json.dumps({"id": "b", "messages": [{"role": "user", "content": "hi"},
                                              {"role": "assistant", "content": "", "tool_calls": [
                                                  {"arguments": "{}"}]}]})          # a call with no name
    data = tmp_path / "convs.jsonl"
    data.write_text(good + "\n" + bad + "\n")
    out = tmp_path / "out"
    _fails(["replay", "--data", str(data), "--out", str(out)], capsys, "convs.jsonl:2: ")
    assert not out.exists()
    _fails(["replay", "--data", str(data), "--out", str(out)], capsys, "(--skip-bad replays the other lines)")


def test_replay_folds_a_log_with_a_line_per_call_and_says_so(tmp_path, capsys, monkeypatch, tiny_lm):
    """A gateway's log (a line per call, each with the history so far) replays each turn once:
    the earlier lines are left out, named on stderr and in the summary, listed in results.json."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: tiny_lm)
    talk = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "and?"}, {"role": "assistant", "content": "bye"}]
    data = tmp_path / "calls.jsonl"
    data.write_text(json.dumps({"id": "c1", "messages": talk[:2]}) + "\n" + json.dumps({"id": "c2", "messages": talk}) + "\n")
    assert main(["replay", "--data", str(data), "--methods", "goose", "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "left out 1 conversation: each one's messages are the start of another's" in err and "c1" in err
    assert "1 conversation left out (held whole by another)" in out
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["replay"]["turns"] == 2
    assert [(f["id"], f["into"]) for f in res["folded_conversations"]] == [("c1", "c2")]


def test_replay_skip_bad_leaves_the_bad_lines_out_and_says_so(tmp_path, capsys, monkeypatch, tiny_lm):
    """--skip-bad: the good conversation is replayed (on the tiny model), the bad line is named
    on stderr and listed in results.json by file and line."""
    import oilbird.model
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: tiny_lm)
    good = json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": "hello"}]})
    data = tmp_path / "convs.jsonl"
    data.write_text(good + "\n{not json\n")
    assert main(["replay", "--data", str(data), "--skip-bad", "--methods", "goose", "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "--skip-bad: left out 1 bad line of the recording" in err and "convs.jsonl:2" in err
    assert "1 bad line of the recording left out (--skip-bad)" in out
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["replay"]["turns"] == 1
    assert [(b["file"], b["line"]) for b in res["skipped_bad_lines"]] == [(str(data), 2)]
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text("{not json\n")
    _fails(["replay", "--data", str(only_bad), "--out", str(tmp_path / "o2")], capsys, "not valid JSON")
    main(["replay", "--data", str(only_bad), "--out", str(tmp_path / "o2")])
    assert "--skip-bad" not in capsys.readouterr().err          # no hint where nothing else would load


def test_diagnose_labels_traces_with_the_limit_they_were_decoded_with(tmp_path, capsys, monkeypatch):
    """Gap labels attach only to a trace of the diagnosis' own length: without --max-new-tokens
    the traces' limit is taken; another one is refused before the model loads."""
    from dataclasses import replace
    from wb_traces import request_oilbird
    from oilbird.__main__ import traces_cap
    import oilbird.model
    capped = replace(request_oilbird(), stop="limit")            # 5 tokens, stopped at its limit
    ended = replace(request_oilbird(), request_id="e", stop="eos", output_ids=[1, 2], cycles=[])
    assert traces_cap([capped, ended], None, "t") == 5 and traces_cap([ended], None, "t") == 128
    assert traces_cap([capped], 5, "t") == 5
    with pytest.raises(ValueError, match="decoded with different token limits"):
        traces_cap([capped, replace(capped, output_ids=[1, 2, 3])], None, "t")
    path = save_traces([capped], tmp_path / "t.jsonl")
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: pytest.fail("model loaded"))
    data = tmp_path / "reqs.jsonl"                               # the requests the traces are of
    data.write_text(json.dumps({"id": capped.request_id, "prompt": "hi"}) + "\n")
    _fails(["diagnose", "--data", str(data), "--traces", str(path), "--max-new-tokens", "24",
            "--out", str(tmp_path / "d")], capsys, "need --max-new-tokens 5 (or leave it out), not 24")
    assert not (tmp_path / "d").exists()


def test_a_reader_that_leaves_early_ends_the_output_quietly(tmp_path):
    """``python -m oilbird report ... | head -1`` (or any command into a closed pipe): the
    first line arrives, the rest goes nowhere, and no BrokenPipeError traceback is printed."""
    import subprocess
    import sys
    script = tmp_path / "long.py"
    script.write_text("import sys\nfrom oilbird.errors import run_cli\n"
                      "def main():\n    for _ in range(100_000):\n        print('x' * 60)\n    return 0\n"
                      "sys.exit(run_cli(main))\n")
    import os
    from pathlib import Path
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))   # installed or not
    reader = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = reader.stdout.readline()
    reader.stdout.close()                       # the reader leaves, as `head -1` does
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=60) == 141
    assert first == b"x" * 60 + b"\n"
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_conversation_file_given_as_traces_says_what_it_is(tmp_path):
    """``report my-logs.jsonl`` (replay's input by mistake): the message says it is a
    conversation, not a trace, and which commands write traces."""
    p = tmp_path / "mine.jsonl"
    p.write_text(json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(TraceError, match=r"mine\.jsonl:1: a conversation \(replay's input"):
        load_traces(p)


def test_replay_on_a_sliding_window_model_fast_and_exact_agree(tmp_path, capsys, monkeypatch):
    """Replay on a model with sliding-window layers: exact mode verifies every tree (a mask per
    layer kind, the conversation's cache reused), fast mode teacher-forces each turn on the
    cropped cache; for the copying sources the two give the same tau (docs/replay.md, "Two
    modes"), and every method follows the recording."""
    import oilbird.model
    from conftest import make_windowed_lm
    lm = make_windowed_lm()
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: lm)
    talk = [{"role": "user", "content": "book the flight to Boston"}, {"role": "assistant", "content": "Booked: Boston."},
            {"role": "user", "content": "and back"}, {"role": "assistant", "content": "Booked: back from Boston."}]
    data = tmp_path / "c.jsonl"
    data.write_text(json.dumps({"id": "c1", "messages": talk}) + "\n")
    taus = {}
    for mode in ("fast", "exact"):
        out = tmp_path / mode
        assert main(["replay", "--data", str(data), "--methods", "pld,suffix,oilbird", "--out", str(out)]
                    + (["--exact"] if mode == "exact" else [])) == 0
        res = json.loads((out / "results.json").read_text())
        assert res["replay"]["turns"] == 2 and all(m["lossless"] for m in res["methods"].values())
        taus[mode] = {m: res["methods"][m]["tau"] for m in ("pld", "suffix")}
    assert taus["fast"] == taus["exact"]
