"""Peers (hf-pld, suffix-arctic) and the bench report (CSV + figures).

The arctic tests skip when the optional ``arctic-inference`` is not installed
(``requirements-peers.txt``); the ``model`` tests decode 2 built-in requests, 32 new tokens.
"""
from __future__ import annotations

import csv
import shutil
import sys
from dataclasses import replace

import pytest

from oilbird.evaluation import peers
from oilbird.audit import compare, hf_greedy
from oilbird.drafter import Drafter, TreeConfig
from oilbird.presets import make_decoder
from oilbird.data.requests import Request, encode, load_requests
from oilbird.sources.arctic import ArcticUnavailable, arctic_available, draft_to_chains
from oilbird.sources.base import DraftContext
from oilbird.verifier import Verifier

needs_arctic = pytest.mark.skipif(not arctic_available(),
                                  reason="arctic-inference not installed (requirements-peers.txt)")
MAX_NEW = 32


# -- arctic draft -> our tree ------------------------------------------------------------------
def test_draft_to_chains_keeps_arctic_tree():
    # arctic: 5 (root child) -> 6 ; 9 (root child); 7 below 6
    chains = draft_to_chains([5, 6, 9, 7], [-1, 0, -1, 1], [1.0, 0.8, 0.2, 0.5])
    assert [c.tokens for c in chains] == [[5], [5, 6], [9], [5, 6, 7]]
    assert [c.score for c in chains] == [1.0, 0.8, 0.2, 0.5]
    assert all(c.attach == 0 for c in chains) and [c.meta["node"] for c in chains] == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        draft_to_chains([5, 6], [-1, 1], [1.0, 1.0])


@needs_arctic
def test_arctic_source_history_and_tree():
    from oilbird.sources.arctic import ArcticConfig, ArcticSuffixSource
    src = ArcticSuffixSource(ArcticConfig(max_spec_tokens=8))
    # request a: prompt [1, 2, 3, 4, 5, 1, 2, 3]; the local tree sees [1, 2, 3] -> 4
    src.start_request([1, 2, 3, 4, 5, 1, 2, 3], "a")
    ctx = DraftContext(tokens=[1, 2, 3, 4, 5, 1, 2, 3], request_id="a")
    p = src.propose(ctx, 8)
    assert p.chains and p.chains[0].tokens[0] == 4 and p.match_len >= 1
    src.end_request("a")   # a "responded" nothing: the global tree has no response tokens
    # request b generates [7, 8, 9, 7, 8, 6]; those tokens reach the global tree
    src.start_request([40, 41], "b")
    ctx = DraftContext(tokens=[40, 41, 7, 8, 9, 7, 8, 6], request_id="b")
    src.propose(ctx, 8)
    src.end_request("b")
    # request c never saw 7 8 9 in its prompt: the draft comes from b's response
    src.start_request([20, 21, 7, 8], "c")
    drafter = Drafter([src], TreeConfig(budget=9, semantic_budget=0))   # a "spine" source, by default
    raw = src.speculate([20, 21, 7, 8], "c")
    tree, info = drafter.draft([20, 21, 7, 8], "c", None)
    assert sorted(raw.token_ids) == [6, 9]          # after "7 8": 9 once, 6 once
    # the merged tree is arctic's tree, node for node, with arctic's probabilities
    assert tree.tokens[1:] == list(raw.token_ids)
    assert tree.parents[1:] == [p + 1 for p in raw.parents]
    assert [s["suffix-arctic"] for s in tree.scores[1:]] == pytest.approx(list(raw.probs))
    assert all(s == {"suffix-arctic"} for s in tree.sources[1:])
    assert info.lexical_match_len == raw.match_len
    # a request id decoded again (or left open by a crash) starts cleanly
    src.start_request([20, 21, 7, 8], "c")
    src.end_request("c")


@needs_arctic
def test_arctic_node_budget_is_respected(tiny_lm):
    """The preset asks arctic for budget - 1 nodes; and where arctic offers more (a source asked
    for 12), the tree still holds at most the budget, and holds that many where arctic offered
    them (so a budget that cut nothing, or a source that drafted nothing, would fail)."""
    dec = make_decoder("suffix-arctic", Verifier(tiny_lm), tree=TreeConfig(budget=5), trace=True)
    assert dec.drafter.sources[0].cfg.max_spec_tokens == 4
    src = dec.drafter.sources[0]
    src.cfg = replace(src.cfg, max_spec_tokens=12)
    ids = tiny_lm.tokenizer("abcabcabcabcabcabc abcabcabc")["input_ids"]
    for rid in ("r0", "r1"):
        tr = dec.run(rid, ids, 24)
        assert compare(hf_greedy(tiny_lm, ids, 24), tr.output_ids).lossless
        assert all(len(c.tokens) <= 5 for c in tr.cycles)
    assert max(len(c.tokens) for c in tr.cycles) == 5          # the second request: arctic's store is warm


def test_missing_arctic_gives_one_clear_error(tiny_lm, monkeypatch):
    monkeypatch.setitem(sys.modules, "arctic_inference.suffix_decoding", None)   # import fails
    with pytest.raises(ArcticUnavailable, match="requirements-peers.txt"):
        make_decoder("suffix-arctic", Verifier(tiny_lm))


def test_forward_counter_counts_target_forwards(tiny_lm):
    ids = tiny_lm.tokenizer("abcabc")["input_ids"]
    with peers.ForwardCounter(tiny_lm.model) as fc:
        toks = hf_greedy(tiny_lm, ids, 12)
    assert fc.calls == len(toks) == 12   # plain greedy: prefill + one forward per further token
    assert fc.first_seconds > 0
    with peers.ForwardCounter(tiny_lm.model) as fc:
        pass
    assert fc.calls == 0 and not tiny_lm.model._forward_pre_hooks and not tiny_lm.model._forward_hooks


# -- real model: lossless on 2 built-in requests ----------------------------------------------
@pytest.fixture(scope="module")
def two_requests(real_lm):
    reqs = load_requests("builtin", limit=2)
    out = []
    for r in reqs:
        ids = encode(real_lm.tokenizer, r)
        out.append((r, ids, hf_greedy(real_lm, ids, MAX_NEW)))
    return out


def _check_lossless(runner, two_requests):
    for req, ids, ref in two_requests:
        r = runner(req, ids)
        res = compare(ref, r.output_ids)
        assert res.lossless, f"{req.id}: {res.message()}"
        assert 1 <= r.forwards <= len(r.output_ids) and r.seconds > 0 and 0 < r.prefill_seconds < r.seconds
    return r.trace


@pytest.mark.model
def test_hf_pld_lossless(real_lm, two_requests):
    _check_lossless(peers.hf_pld_runner(Verifier(real_lm), MAX_NEW), two_requests)


@pytest.mark.model
@needs_arctic
def test_suffix_arctic_lossless(real_lm, two_requests):
    from oilbird.evaluation.bench import decoder_runner
    tr = _check_lossless(decoder_runner(make_decoder("suffix-arctic", Verifier(real_lm)), MAX_NEW), two_requests)
    assert tr is not None and tr.method == "suffix-arctic" and tr.forwards == len(tr.cycles)
    drafted = {s for c in tr.cycles for srcs in c.committed_sources for s in srcs}
    assert drafted <= {"suffix-arctic", "bonus"}


# -- report ------------------------------------------------------------------------------------
RESULTS = {
    "model": "tiny", "data": "builtin", "n_requests": 2, "max_new_tokens": 32,
    "methods": {
        "ar": {"tau": 1.0, "tokens_per_s": 10.0, "decode_tokens_per_s": 11.0, "lossless": True,
               "n_requests": 2, "tokens": 64, "forwards": 64, "seconds": 6.4, "speedup": 1.0,
               "decode_speedup": 1.0},
        "oilbird": {"tau": 3.2, "tokens_per_s": 25.0, "decode_tokens_per_s": 30.0, "lossless": True,
                    "n_requests": 2, "tokens": 64, "forwards": 20, "seconds": 2.56, "speedup": 2.5,
                    "decode_speedup": 2.73, "overhead_share": 0.04,
                    "accepted_by_source": {"bonus": 20.0, "suffix": 30.5, "semantic": 13.5}},
        "hf-pld": {"tau": 2.0, "tokens_per_s": 15.0, "decode_tokens_per_s": 16.0, "lossless": False,
                   "n_requests": 2, "tokens": 64, "forwards": 32, "seconds": 4.3, "speedup": 1.5,
                   "decode_speedup": 1.45, "first_failure": "x"},
    },
}


def test_report_csv_and_html(tmp_path):
    from oilbird.evaluation.report import write_report
    paths = write_report(RESULTS, tmp_path, png=False)
    assert {p.name for p in paths} == {"results.csv", "tau.html", "speedup.html"}
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert [r["method"] for r in rows] == ["ar", "oilbird", "hf-pld"]
    assert list(rows[0])[:8] == ["method", "tau", "tokens_per_s", "speedup", "decode_speedup", "lossless",
                                 "n_requests", "overhead_share"]
    oil = rows[1]
    assert float(oil["tau"]) == 3.2 and float(oil["overhead_share"]) == 0.04
    shares = {k: float(v) for k, v in oil.items() if k.startswith("share_")}
    assert shares == pytest.approx({"share_semantic": 13.5 / 64, "share_suffix": 30.5 / 64,
                                    "share_bonus": 20 / 64})
    assert sum(shares.values()) == pytest.approx(1.0)
    assert rows[0]["share_suffix"] == "" and rows[2]["lossless"] == "False"
    html = (tmp_path / "tau.html").read_text()
    # plotly.js is embedded, not loaded from a CDN (plain asserts: pytest would diff 4 MB)
    assert '<script src="http' not in html and "Plotly.newPlot" in html
    assert len(html) > 1_000_000 and '"oilbird"' in html and '"hf-pld"' in html


def test_report_draws_no_speedup_without_ar():
    from oilbird.evaluation.report import figures
    res = {"methods": {m: {k: v for k, v in r.items() if k != "speedup"} for m, r in RESULTS["methods"].items()
                       if m != "ar"}}
    assert set(figures(res)) == {"tau"} and set(figures(RESULTS)) == {"tau", "speedup"}


def test_report_png_failure_keeps_html(tmp_path, monkeypatch, capsys):
    import plotly.io as pio

    from oilbird.evaluation.report import write_figures

    def broken(*a, **k):
        raise RuntimeError("no browser")
    monkeypatch.setattr(pio, "write_images", broken)
    paths = write_figures(RESULTS, tmp_path)
    assert [p.name for p in paths] == ["tau.html", "speedup.html"]
    err = capsys.readouterr().err
    assert "warning" in err and "chromium" in err and "no browser" in err


@pytest.mark.skipif(shutil.which("chromium") is None, reason="PNG export needs Chromium")
def test_report_png(tmp_path):
    from oilbird.evaluation.report import write_figures
    paths = write_figures(RESULTS, tmp_path)
    pngs = [p for p in paths if p.suffix == ".png"]
    assert [p.name for p in pngs] == ["tau.png", "speedup.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_a_pooled_ratio_comes_with_its_interval_over_whole_conversations():
    """Whether 1.202 clears 1.20 depends on how far the pooled ratio moves with the traffic: a
    bootstrap over the run's units. A replay draws whole conversations (its turns share a history),
    as does a bench whose rows say their dialogue; others draw requests. Ten conversations, five
    where a is twice b and five where they tie, give a wider interval than their forty turns
    drawn apart give; below ten units no interval; no shared rows, no
    ratio."""
    from oilbird.evaluation.intervals import pooled_ratio, ratio_words
    from oilbird.evaluation.report import paired_table
    rows = lambda taus: [{"request": f"c{k // 4}#{k % 4}", "tokens": int(10 * t), "forwards": 10}  # noqa: E731
                         for k, t in enumerate(taus)]
    # ten conversations of four turns: five where a is twice b, five where they tie
    res = {"replay": {"mode": "fast"}, "methods": {"a": {"per_request": rows(([4] * 4 + [2] * 4) * 5)},
                                                   "b": {"per_request": rows([2] * 40)}}}
    r = pooled_ratio(res, "a", "b")
    assert (r["ratio"], r["units"], r["unit"]) == (1.5, 10, "conversation")
    assert 1.0 < r["low"] < 1.5 < r["high"] < 2.0
    turns = pooled_ratio({**res, "replay": None}, "a", "b")        # as requests: 40 units, a narrower interval
    assert (turns["units"], turns["unit"]) == (40, "request")
    assert r["low"] < turns["low"] < 1.5 < turns["high"] < r["high"]
    assert pooled_ratio(res, "a", "b") == r                          # a fixed seed: the same run, the same interval
    assert f"| a vs b | 1.500 ({r['low']:.3f}-{r['high']:.3f}, 10 conversations) |" in paired_table(res, (("a", "b"),))
    # a bench's rows that say their dialogue (the built-in workload's turns) are drawn by it too
    bench = {"methods": {m: {"per_request": [dict(x, unit=x["request"].split("#")[0]) for x in rows(v)]}
                         for m, v in (("a", [4] * 20 + [2] * 20), ("b", [2] * 40))}}
    assert pooled_ratio(bench, "a", "b") == r
    # too few units for the bootstrap to hold its level: the ratio alone, and says so
    two = {m: {"per_request": rows(v)} for m, v in (("a", [4] * 4 + [2] * 4), ("b", [2] * 8))}
    few = pooled_ratio({"replay": {"mode": "fast"}, "methods": two}, "a", "b")
    assert (few["ratio"], few["low"], few["high"], few["units"]) == (1.5, None, None, 2)
    assert ratio_words(few) == "1.500 (no interval: 2 conversations)"
    none = {"methods": {"a": {"per_request": rows([1])}, "b": {"per_request": []}}}
    assert pooled_ratio(none, "a", "b") is None


def test_paired_tau_counts_requests():
    from oilbird.evaluation.report import paired_tau
    rows = lambda *tf: [{"request": f"r{i}", "tokens": t, "forwards": f} for i, (t, f) in enumerate(tf)]  # noqa: E731
    res = {"methods": {"a": {"per_request": rows((10, 5), (8, 4), (6, 6))},
                       "b": {"per_request": rows((10, 10), (8, 4), (9, 3))}}}
    p = paired_tau(res, "a", "b")
    assert (p["n"], p["wins"], p["ties"], p["losses"]) == (3, 1, 1, 1)
    assert p["faster"] is None                    # the rows carry no seconds
    for m, secs in (("a", (1.0, 2.0, 3.0)), ("b", (2.0, 1.0, 3.0))):
        for row, t in zip(res["methods"][m]["per_request"], secs):
            row["seconds"] = t
    assert paired_tau(res, "a", "b")["faster"] == 1   # r0 only: r2 is a tie
    assert p["mean_diff"] == pytest.approx((1.0 + 0.0 - 2.0) / 3)
    assert p["forwards"] == (15, 17)


def test_report_cli_extra_pairs(tmp_path, capsys):
    import json

    from oilbird.evaluation.report import main
    rows = lambda *tf: [{"request": f"r{i}", "tokens": t, "forwards": f} for i, (t, f) in enumerate(tf)]  # noqa: E731
    res = {"methods": {m: {"tau": 2.0, "tokens_per_s": 1.0, "lossless": True, "per_request": rows(*r)}
                       for m, r in (("x", ((10, 5),)), ("y", ((10, 10),)), ("x:expected", ((9, 3),)))}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(res))
    assert main([str(path), "--pair", "y,x"]) == 0
    out = capsys.readouterr().out
    assert "| y vs x | 0.500 (no interval: 1 request) | 0 / 0 / 1 | -1.000 | - | 10 vs 5 |" in out
    assert out.count("| y vs x |") == 1
    assert "| x:expected vs x | 1.500 (no interval: 1 request) | 1 / 0 / 0 | +1.000 |" in out
    path.write_text(json.dumps({**res, "model": "m"}))      # a file that says whose numbers it holds
    with pytest.raises(SystemExit):
        main([str(path), "--pair", "x,nope"])
    path.write_text(json.dumps(res))
    out, err = capsys.readouterr()
    assert "give two methods of this run" in err and out == ""      # the usage error alone, nothing before it
    for r in res["methods"].values():           # a run from before per-request rows
        del r["per_request"]
    path.write_text(json.dumps(res))
    assert main([str(path), "--pair", "y,x"]) == 0
    out, err = capsys.readouterr()
    assert "| y vs x |" not in out and "no per-request rows" in out


def test_report_cli_reads_the_folders_bench_and_diagnose_write(tmp_path, capsys):
    """A bench folder is its results.json; a diagnose folder (or its diagnosis.json) prints the
    gap table; any other JSON is refused by name."""
    import json

    from oilbird.evaluation.report import main
    bench, diag = tmp_path / "bench", tmp_path / "diag"
    bench.mkdir()
    diag.mkdir()
    (bench / "results.json").write_text(json.dumps({"methods": {"x": {"tau": 2.0, "tokens_per_s": 1.0,
                                                                      "lossless": True}}}))
    assert main([str(bench)]) == 0 and "| x | 2.00 |" in capsys.readouterr().out
    (diag / "diagnosis.json").write_text(json.dumps({"present_2": 0.5, "gap": 0.25, "n_positions": 8,
                                                     "n_requests": 2, "n_gap": 2, "n_recovered": 1}))
    assert main([str(diag)]) == 0
    out = capsys.readouterr().out
    assert "present (next 2)                    50.0%" in out and "gap positions 2, recovered 1" in out
    (tmp_path / "other.json").write_text(json.dumps({"a": 1}))
    assert main([str(tmp_path / "other.json")]) == 2
    assert "not a bench results.json (no 'methods' object in it)" in capsys.readouterr().err


def test_report_cli_on_a_trace_file(tmp_path, capsys):
    """A trace file gives tau and tokens by source per method (hand-built traces: wb_traces.py),
    without a wall-clock column it cannot know; a corrupt file gives one clear error."""
    from wb_traces import all_requests

    from oilbird.evaluation.report import main
    from oilbird.trace import save_traces
    path = save_traces(all_requests(), tmp_path / "t.jsonl")
    assert main([str(path), "--pair", "oilbird,goose"]) == 0
    out = capsys.readouterr().out
    # oilbird: 6 tokens in 4 forwards; 7 nodes over its 2 drafting cycles; " there" proposed by
    # pld and semantic (half each), "\n" by pld alone, 4 bonus tokens
    assert "| oilbird | 2 | 1.50 | 3.5 | pld 1.5, semantic 0.5, bonus 4 | pld 1 | yes |" in out
    assert "| goose | 1 | 1.00 | 1.0 | bonus 5 | - | yes |" in out
    assert "| oilbird vs goose | 1.667 (no interval: 1 request) | 1 / 0 / 0 | +0.667 | - | 3 vs 5 |" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main([str(bad)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
    # a replay's traces: whose outputs they are, and the check column says they follow the recording
    from dataclasses import replace
    rp = {"recorded_by": "gpt-4o", "mode": "fast"}
    replayed = save_traces([replace(t, meta={**t.meta, "replay": rp}) for t in all_requests()], tmp_path / "r.jsonl.gz")
    assert main([str(replayed)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("(a replay of gpt-4o's recorded outputs") and "| follows recording |" in out
    assert "| lossless |" not in out
    # a sampled run's traces: never called greedy; the check is against plain sampling
    sp = {"temperature": 0.7, "top_p": 1.0, "seed": 0}
    sampled = save_traces([replace(t, meta={**t.meta, "sampling": sp}) for t in all_requests()], tmp_path / "s.jsonl")
    assert main([str(sampled)]) == 0
    out = capsys.readouterr().out
    assert "own sampled outputs" in out and "greedy" not in out and "| lossless (sampled) |" in out


@needs_arctic
def test_suffix_arctic_in_bench_with_a_fill(tiny_lm):
    """bench builds suffix-arctic itself, so a fill suffix reaches its tree and its traces."""
    from oilbird.evaluation.bench import run_bench
    reqs = [Request(f"r{i}", [{"role": "user", "content": "call f(x=1) then f(x=1)"}]) for i in range(2)]
    res = run_bench(reqs, ["suffix-arctic", "suffix-arctic:expected"], Verifier(tiny_lm), 8, progress=False)
    assert all(r["lossless"] for r in res["methods"].values())
    assert res["methods"]["suffix-arctic:expected"]["fill"] == "expected"


def test_report_says_whose_numbers_a_file_holds():
    """A replay's results say they are the recording's; a live run's are the local model's."""
    from oilbird.evaluation.report import whose
    rep = {"model": "m", "replay": {"mode": "exact", "recorded_by": "gpt-4o"}}
    assert whose(rep).startswith("a replay of gpt-4o's recorded outputs on m (exact mode)")
    assert "tokens/s is the local model's cost" in whose(rep)
    assert whose({"model": "m", "replay": True, "recorded_by": "gpt-4o"}).startswith("labels on gpt-4o's")
    assert whose({"model": "m"}) == "m's own greedy outputs"
    assert whose({"replay": 3}) == "" and whose({}) == ""


def test_report_on_a_replay_prints_what_the_replay_said_besides_its_numbers(tmp_path, capsys):
    """Turns left out and the note on what replay under-states travel with the numbers: a
    report of the folder prints them, and points at a diagnosis.json beside it."""
    from oilbird.evaluation.report import main, replay_caveats
    rp = {"mode": "fast", "recorded_by": "gpt-4o", "windowed_turns": 3, "note": "replay under-states X",
          "skipped_over_context": {"conversations": 2, "turns": 9}}
    res = {"model": "m", "replay": rp, "skipped_bad_lines": [{"file": "f", "line": 2, "error": "e"}],
           "folded_conversations": [{"id": "a", "into": "b", "source": "f:1"}] * 2}
    lines = replay_caveats(res)
    assert lines == ["2 conversations (9 turns) skipped, a recorded turn in each longer than the model's context",
                     "1 bad lines (or files) of the recording left out (--skip-bad); listed under skipped_bad_lines",
                     "2 conversations left out: another one holds each whole; listed under folded_conversations",
                     "3 turns past the model's context read windowed states", "replay under-states X"]
    assert replay_caveats({"model": "m"}) == [] and replay_caveats({"replay": True}) == []
    assert replay_caveats({"replay": {}, "tool_calls": "text"}) == []
    assert replay_caveats({"replay": {}, "tool_calls": "template"}) == [
        "tool calls as the model's chat template spells them (--tool-calls template), not the one text form: "
        "other tokens than a text-form replay of the same recording"]
    import json
    r = {"model": "m", "replay": rp, "methods": {"goose": {"tau": 2.0, "tokens_per_s": None, "lossless": True}}}
    (tmp_path / "results.json").write_text(json.dumps(r))
    (tmp_path / "diagnosis.json").write_text("{}")
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "note: 2 conversations (9 turns) skipped, a recorded turn in each longer than the model's context" in out
    assert "note: replay under-states X" in out and "diagnosis.json is beside it" in out
    assert main([str(tmp_path / "results.json")]) == 0                  # the file itself, not its folder
    assert "diagnosis.json is beside it" in capsys.readouterr().out
    # a run with --traces and no --diagnose: its traces are pointed to (their funnel), not left unsaid
    (tmp_path / "diagnosis.json").unlink()
    (tmp_path / "traces.jsonl").write_text("")
    assert main([str(tmp_path)]) == 0
    assert f"note: {tmp_path / 'traces.jsonl'} is beside it" in capsys.readouterr().out
