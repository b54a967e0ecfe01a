"""The identifiability-gap diagnosis: exact labels on a constructed example, shape on real data."""
import json
import random

import numpy as np
import pytest

from oilbird.evaluation.diagnose import (LABELS, ContinuationTable, Pool, copy_oracle_tau, diagnose_sequences,
                                        summarise)
from oilbird.evaluation.labels import attach_labels
from oilbird.store import SEP, SuffixIndex

# Two requests of the same "frame A value close" call. Tokens: 1 bos, 5/6 prompt words,
# 10 11 12 = the call frame "[TravelStatus(member_name='", 21 = 'John', 22 = 'Mary' (new),
# 30 31 = the closing "')]", 2 = eos.
P1, O1 = [1, 5], [10, 11, 12, 21, 30, 31, 2]
P2, O2 = [1, 6], [10, 11, 12, 22, 30, 31, 2]
DIM = 9


def _e(i):
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def _states():
    # one row per input position of prompt + output; row i is the state AT token i (it
    # predicts token i + 1). Request 1: orthogonal states, row i = e_i.
    s1 = np.stack([_e(i) for i in range(len(P1) + len(O1))])
    # Request 2, same layout. Its query for output[t] is row len(P2) - 1 + t = 1 + t.
    s2 = np.stack([_e(0), _e(8),            # bos, '6': the t=0 query (no record precedes 10)
                   _e(2),                   # at 10 (t=1 query): same situation as r1's 10
                   _e(3), _e(4),            # at 11, 12 (t=2, t=3 queries)
                   _e(5),                   # at 'Mary' (t=4 query): same place as r1's 'John'
                   (_e(2) + _e(3)) / np.sqrt(2),  # at 30 (t=5 query): looks like the frame, not 30
                   _e(7), _e(0)])           # at 31 (t=6 query), at eos
    return s1, s2


def _static_table(vocab=50):
    return np.eye(vocab, dtype=np.float32)   # one-hot: a token is only like itself


def _run(k=2, mode="generated"):
    s1, s2 = _states()
    return diagnose_sequences([("r1", P1, O1, s1), ("r2", P2, O2, s2)], DIM,
                              static_table=_static_table(), mode=mode, k=k)


def test_constructed_gap_labels_exact():
    d1, d2 = _run()
    assert d1.labels == ["absent"] * len(O1)            # empty pool: nothing is present
    assert not any(d1.oracle_hit) and not any(d1.semantic_hit)
    assert d2.present_2 == [True, True, False, False, True, True, True]   # (12,22),(22,30) never seen
    assert d2.present_4 == [False, False, False, False, True, True, True]  # tail windows truncated
    assert d2.match_len == [0, 1, 2, 3, 0, 1, 2]
    # the oracle hits only with a >= 2-token key: 12 after [10, 11] and eos after [30, 31];
    # after 'Mary' every key ends in 'Mary' (t=4) or [Mary, 30] (t=5), and dies
    assert d2.oracle_hit == [False, False, True, False, False, False, True]
    assert d2.semantic_hit == [False, True, True, False, True, False, True]
    assert d2.labels == ["gap_missed", "gap_recovered", "absent", "absent",
                         "gap_recovered", "gap_missed", "lexical_hit"]
    assert d2.gap == [True, True, False, False, True, True, False]
    assert d2.gap_4 == [False, False, False, False, True, True, False]
    # static key (one-hot, ties most recent first): reaches only where the token itself recurs
    assert d2.static_hit == [False, True, None, None, False, True, None]
    # recovered at t=1 via r1's 10: [11, 12] match then 21 != 22; at t=4 via 'John': [30, 31, eos]
    assert d2.run_behind == [None, 2, None, None, 3, None, None]
    assert d2.run_available == [3, 2, None, None, 3, 2, None]


def test_constructed_summary():
    s = summarise(_run())
    assert s["n_positions"] == 14 and s["n_requests"] == 2
    assert s["present_2"] == pytest.approx(5 / 14)
    assert s["present_4"] == pytest.approx(3 / 14)
    assert s["oracle_miss"] == pytest.approx(12 / 14)
    assert s["gap"] == pytest.approx(4 / 14) and s["gap_4"] == pytest.approx(2 / 14)
    assert s["semantic_reach"] == pytest.approx(0.5) and s["semantic_reach_4"] == pytest.approx(0.5)
    assert s["static_reach"] == pytest.approx(0.5)
    assert s["run_behind"] == pytest.approx(2.5) and s["run_available"] == pytest.approx(2.5)
    assert s["match_len_gap_median"] == 0.5


def test_with_k8_the_whole_tiny_pool_is_in_reach():
    # 7 records <= 8: every record is a neighbour, so reach is limited only by what follows them
    d2 = _run(k=8)[1]
    assert d2.semantic_hit == [False, True, True, False, True, True, True]
    assert d2.labels[5] == "gap_recovered"


def test_off_by_one_alignment():
    # pool document [A, B, C]; current output [X, B, C]. At t=2 (true next C) the query is the
    # state at B (row len(prompt)-1+2); the neighbour is B's record (stream position 1), and the
    # token after it, C, is the hit. Querying with row len(prompt)+t instead (the state AT the
    # true token) would give [False, False, False] here.
    A, B, C, X = 3, 4, 5, 9
    pool = Pool(3, k=1)
    pool.add_document([A, B, C], np.eye(3, dtype=np.float32))   # state at A=e0, B=e1, C=e2
    prompt, out = [7], [X, B, C]
    st = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    # rows: at 7 (query t=0) ~ C, at X (query t=1) ~ A, at B (query t=2) ~ B, at C
    d = pool.label("q", prompt, out, st)
    assert d.semantic_hit == [False, True, True]   # t=1: A's record is followed by B = out[1]


def test_the_drafters_key_asks_one_position_earlier_and_checks_the_root():
    # pool document [A, B, C]; prompt [7, 8], output [B, C]. The drafter drafting output[1]
    # (root B) has the state at 8 (~ A's), keeps A's record (followed by B, the root) and is
    # right when the token after that is C; the diagnosis' own key asks with B's state instead
    A, B, C = 3, 4, 5
    pool = Pool(3, k=1)
    pool.add_document([A, B, C], np.eye(3, dtype=np.float32))
    e0, e1, e2 = np.eye(3, dtype=np.float32)
    d = pool.label("q", [7, 8], [B, C], np.stack([e2, e0, e2, e1]))
    assert d.semantic_hit == [True, False]     # t=0: the state at 8 ~ A, followed by B = out[0]
    assert d.drafter_hit == [None, True]       # t=0 is not asked: the prefill gives output[0]


def test_the_drafters_key_ranks_every_record_followed_by_the_root():
    # ten records nearer the query than the one followed by the root B: the drafter's root check
    # is exact (the store scores only records followed by the root), so the far one still counts
    A, B, C = 3, 4, 5
    pool = Pool(3, k=1)
    for _ in range(10):
        pool.add_document([9, 8], np.eye(3, dtype=np.float32)[[0, 0]])
    pool.add_document([A, B, C], np.array([[0.6, 0.8, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32))
    e0, e1, e2 = np.eye(3, dtype=np.float32)
    d = pool.label("q", [7, 8], [B, C], np.stack([e2, e0, e2, e1]))
    assert d.drafter_hit == [None, True]


def test_the_drafters_key_never_reaches_the_first_token_which_the_prefill_gives():
    # pool [9, A, B, C]; prompt [7, A], output [B, C]: the state at 7 (before the root A) is 9's,
    # and 9 is followed by A, then B = output[0]: the key would reach it, were output[0] drafted
    A, B, C = 3, 4, 5
    pool = Pool(3, k=1)
    pool.add_document([9, A, B, C], np.eye(4, 3, dtype=np.float32)[[0, 0, 1, 2]])
    e0, e1, e2 = np.eye(3, dtype=np.float32)
    d = pool.label("q", [7, A], [B, C], np.stack([e0, e0, e1, e2]))
    assert d.drafter_hit[0] is None           # no drafter drafts output[0]: the prefill gives it


def test_the_report_carries_the_drafters_reach_and_traces_get_it_beside_the_labels():
    from oilbird.evaluation.diagnose import build_report
    from oilbird.evaluation.labels import attach_report
    from oilbird.trace import RequestTrace, TraceError, load_traces, save_traces
    A, B, C = 3, 4, 5
    pool = Pool(3, k=1)
    pool.add_document([A, B, C], np.eye(3, dtype=np.float32))
    e0, e1, e2 = np.eye(3, dtype=np.float32)
    d = pool.label("q", [7, 8], [B, C], np.stack([e2, e0, e2, e1]))      # as in the test above
    report = build_report({"diags": {"generated": [d]}, "teacher_forced_agreement": 1.0,
                           "texts": {"q": ["B", "C"]}}, {})
    assert report["detail"]["q"]["drafter_hit"] == [None, True]
    from oilbird.trace import CycleTrace
    one = CycleTrace(request_id="q", method="oilbird", cycle=0, prefix_len=0, generated_before=0, bonus=C,
                     committed=[B, C], committed_sources=[["bonus"], ["bonus"]])
    same = RequestTrace("q", "oilbird", "m", [7, 8], "", output_ids=[B, C], cycles=[one])
    other = RequestTrace("q", "goose", "m", [7, 8], "", output_ids=[B])      # not the diagnosed output
    attach_report([same, other], report)
    assert same.gap_labels == d.labels and same.drafter_reach == [None, True]
    assert other.gap_labels is None and other.drafter_reach is None
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        save_traces([same], Path(tmp) / "t.jsonl")
        assert load_traces(Path(tmp) / "t.jsonl")[0].drafter_reach == [None, True]
        same.drafter_reach = [True]
        save_traces([same], Path(tmp) / "u.jsonl")
        with pytest.raises(TraceError, match="drafter_reach is not one entry per output token"):
            load_traces(Path(tmp) / "u.jsonl")


def test_full_pool_includes_earlier_prompts():
    # with the earlier prompt in the pool, r2's first token follows a recurring prompt tail
    s1, s2 = _states()
    d1, d2 = diagnose_sequences([("r1", P1, O1, s1), ("r2", P1, O2, s2)], DIM, mode="full", k=2)
    assert d2.match_len[0] == 2 and d2.oracle_hit[0] and d2.labels[0] == "lexical_hit"
    d2g = diagnose_sequences([("r1", P1, O1, s1), ("r2", P1, O2, s2)], DIM, k=2)[1]
    assert d2g.labels[0] == "gap_missed"


def test_oracle_backs_off_to_eight_by_count():
    t = ContinuationTable()
    t.add([1, 2, 3, 7, 9, 1, 2, 3, 7, 8, 5, 3, 4])
    assert t.longest_match([0, 1, 2, 3]) == 3
    # L=3 [1,2,3] -> 7 (twice); L=2 [2,3] -> 7 only; then [3] is below min_len=2
    assert t.candidates([0, 1, 2, 3], k=8) == [7]
    assert t.candidates([0, 1, 2, 3], k=8, min_len=1) == [7, 4]
    assert t.candidates([3, 7], k=1) == [8]
    assert t.candidates([3, 7], k=8) == [8, 9]   # tie on count: most recent first


def test_longest_match_agrees_with_suffix_index():
    rng = random.Random(0)
    docs = [[rng.randrange(6) for _ in range(rng.randint(1, 30))] for _ in range(8)]
    table, idx = ContinuationTable(16), SuffixIndex(gram=16, max_positions=10**9)
    for d in docs:
        table.add(d)
        idx.extend(d + [SEP])
    for _ in range(300):
        ctx = [rng.randrange(7) for _ in range(rng.randint(1, 20))]
        hits = idx.match(ctx, max_len=16, limit=10**9)
        assert table.longest_match(ctx) == (hits[0][1] if hits else 0)


def test_copy_oracle_tau_by_construction():
    # the docstring's toy: prefill emits 2, one cycle drafts [3, 4] from the prompt, bonus 9
    assert copy_oracle_tau([([1, 2, 3, 4], [2, 3, 4, 9])]) == {11: 2.0, 23: 2.0, 63: 2.0}
    # the two tool calls above: request 1 has nothing to copy (7 forwards: prefill + 6);
    # request 2 copies the frame [11, 12] (cycle 1, bonus 22 = the new value) and then
    # [30, 31, 2] from request 1's output (cycle 2): 3 forwards. 14 tokens / 10 forwards.
    assert copy_oracle_tau([(P1, O1), (P2, O2)], max_chains=(11,)) == {11: 14 / 10}
    # a cap of one draft token: request 2 takes prefill (10), [11]+12, 22, [30]+31, [2]+end: 5
    assert copy_oracle_tau([(P1, O1), (P2, O2)], max_chains=(1,)) == {1: 14 / (7 + 5)}
    # the request's own earlier output counts, its future does not, at any cap: at t=2 only
    # [1, 2] of [1, 2, 1, 2] is in [9, 1, 2] (a pool that leaked the whole output, e.g. from
    # the cap before, would copy all four and give 6 / 3)
    assert copy_oracle_tau([([9], [1, 2, 1, 2, 1, 2])], max_chains=(1, 63)) == {1: 6 / 4, 63: 6 / 4}
    # earlier requests' prompts are not in the pool (the store keeps generated tokens only)
    assert copy_oracle_tau([([1, 7, 8, 9], [5]), ([2], [3, 7, 8, 9])], max_chains=(11,)) == {11: 1.0}
    # no match across a document boundary: [7, 8] and [9, 4] are two earlier outputs, so the
    # third request copies [7, 8] (+ bonus 9), then [4]: prefill + 2 cycles, not prefill + 1
    assert copy_oracle_tau([([1], [7, 8]), ([1], [9, 4]), ([2], [0, 7, 8, 9, 4])],
                           max_chains=(11,)) == {11: 9 / 7}


def test_attach_labels_on_traces(tiny_lm, tmp_path):
    from oilbird.evaluation.bench import run_bench
    from oilbird.data.requests import Request
    from oilbird.trace import load_traces
    from oilbird.verifier import Verifier
    reqs = [Request(f"r{i}", [{"role": "user", "content": f"call f(x={v})"}]) for i, v in enumerate("ab")]
    path = tmp_path / "t.jsonl"
    run_bench(reqs, ["goose", "oilbird"], Verifier(tiny_lm), 8, trace_out=path, progress=False)
    attach_labels(path, reqs, tiny_lm, max_new_tokens=8)
    traces = load_traces(path)
    assert len(traces) == 4
    for tr in traces:
        assert tr.lossless and len(tr.gap_labels) == len(tr.output_ids)
        assert set(tr.gap_labels) <= set(LABELS)
    by = {}
    for tr in traces:
        by.setdefault(tr.request_id, []).append(tr.gap_labels)
    assert all(a == b for a, b in by.values())      # one labelling per request, every method
    assert set(by["r0"][0]) == {"absent"}           # the first request has an empty pool



def test_a_trace_file_and_a_live_run_get_their_labels_by_one_rule(tiny_lm, tmp_path, monkeypatch):
    """attach_labels (the CLI's --diagnose) and workbench.lesson.decode_live (the notebooks)
    both go through label_traces: the same outputs get the same labels, and an output that a
    trace settles is reused, not decoded again; unaudited (a live run's lossless=None) too,
    since the teacher-forced check catches any that is not the greedy output."""
    from dataclasses import replace

    import oilbird.decoding
    from oilbird.data.requests import Request
    from oilbird.trace import load_traces, save_traces
    from workbench import lesson as L
    reqs = [Request(f"r{i}", [{"role": "user", "content": f"call f(x={v})"}]) for i, v in enumerate("abc")]
    live, _ = L.decode_live(tiny_lm, reqs, ["goose", "oilbird"], 8)
    assert all(t.lossless is None and t.gap_labels is not None for t in live)
    path = save_traces([replace(t, gap_labels=None) for t in live], tmp_path / "t.jsonl")

    def no_decoding(*a, **k):
        raise AssertionError("decoded a request that a trace settles")
    monkeypatch.setattr(oilbird.decoding, "autoregressive", no_decoding)
    attach_labels(path, reqs, tiny_lm, max_new_tokens=8)
    assert [(t.request_id, t.method, t.gap_labels) for t in load_traces(path)] == \
        [(t.request_id, t.method, t.gap_labels) for t in live]

def test_a_notebook_decodes_with_the_apps_tree_size(tiny_lm, monkeypatch):
    """Notebooks decode live where no trace file is there: with the app's tree size (the shipped
    traces'), not the library's CPU default, so the two paths draw trees of one size."""
    import oilbird.presets as P
    from oilbird.data.requests import Request
    from workbench import lesson as L
    from workbench.session import LIVE_BUDGET
    seen, real = [], P.make_decoder

    def spy(method, verifier, *a, tree=None, **k):
        seen.append(tree.budget)
        return real(method, verifier, *a, tree=tree, **k)
    monkeypatch.setattr(P, "make_decoder", spy)
    req = Request("r0", [{"role": "user", "content": "call f(x=1)"}])
    L.decode_live(tiny_lm, [req], ["goose"], 2, diagnose=False)
    L.decode_live(tiny_lm, [req], ["goose"], 2, diagnose=False, budget=5)
    assert seen == [LIVE_BUDGET, 5]


def _check_report(path, n_requests):
    rep = json.loads(path.read_text())
    for key in ("present_2", "present_4", "oracle_miss", "gap", "gap_4", "semantic_reach",
                "static_reach", "run_behind", "n_positions", "n_requests", "labels", "detail"):
        assert key in rep
    assert rep["n_requests"] == n_requests and len(rep["labels"]) == n_requests
    assert sum(len(v) for v in rep["labels"].values()) == rep["n_positions"] > 0
    for key in ("present_2", "present_4", "oracle_miss", "gap", "gap_4"):
        assert 0.0 <= rep[key] <= 1.0
    assert rep["gap_4"] <= rep["gap"] <= rep["oracle_miss"]
    for rid, labels in rep["labels"].items():
        assert set(labels) <= set(LABELS)
        assert len(labels) == len(rep["output_text"][rid]) == len(rep["detail"][rid]["present_2"])
    assert set(rep["labels"][rep["requests"][0]]) == {"absent"}
    assert rep["teacher_forced_agreement"] > 0.95     # states are aligned with the outputs
    assert rep["pool_full"]["n_positions"] == rep["n_positions"]
    oracle = rep["copy_oracle_tau"]                   # by tree budget; more nodes never hurt
    assert set(oracle) == {"12", "24", "64"} and 1.0 <= oracle["12"] <= oracle["24"] <= oracle["64"]
    return rep


def _cli(monkeypatch, lm, argv):
    import oilbird.model
    from oilbird.__main__ import main
    monkeypatch.setattr(oilbird.model, "load_model", lambda *a, **k: lm)
    assert main(argv) == 0


@pytest.mark.model
def test_diagnose_builtin_shape(real_lm, tmp_path, monkeypatch, capsys):
    _cli(monkeypatch, real_lm, ["diagnose", "--data", "builtin", "--limit", "2",
                                "--max-new-tokens", "24", "--out", str(tmp_path)])
    _check_report(tmp_path / "diagnosis.json", 2)
    assert "paper (API-Bank)" in capsys.readouterr().out


@pytest.mark.model
def test_diagnose_api_bank_shape(real_lm, api_bank_path, tmp_path, monkeypatch):
    _cli(monkeypatch, real_lm, ["diagnose", "--data", str(api_bank_path), "--limit", "2",
                                "--max-new-tokens", "8", "--out", str(tmp_path)])
    _check_report(tmp_path / "diagnosis.json", 2)


def test_supplied_outputs_used_only_when_they_are_greedy(tiny_lm):
    from oilbird.decoding import autoregressive
    from oilbird.evaluation.diagnose import diagnose_requests
    from oilbird.data.requests import Request, encode
    from oilbird.verifier import Verifier
    reqs = [Request(f"r{i}", [{"role": "user", "content": f"call g(y={v})"}]) for i, v in enumerate("xy")]
    greedy = {r.id: autoregressive(Verifier(tiny_lm), encode(tiny_lm.tokenizer, r), 8).output_ids for r in reqs}
    bogus = {"r0": [5, 6, 7, 8, 9, 10, 11, 12], "r1": greedy["r1"][:3]}   # wrong; cut short
    res = diagnose_requests(reqs, tiny_lm, 8, outputs=bogus, progress=False)
    assert [d.output for d in res["diags"]["generated"]] == [greedy["r0"], greedy["r1"]]
    assert res["teacher_forced_agreement"] == 1.0


def test_a_table_too_short_for_present_4_is_refused():
    """present_4 reads the oracle's table of <= max_suffix-grams: below 4 it would miss
    4-token runs that are there."""
    from oilbird.evaluation.diagnose import Pool
    with pytest.raises(ValueError, match="max_suffix must be >= 4"):
        Pool(3, max_suffix=3)
    assert Pool(3, max_suffix=4).max_suffix == 4


def test_agreement_is_a_share_of_positions_not_of_requests():
    """A 1-token output that disagrees and a 99-token one that agrees: 99% of positions (the mean
    of the two requests' rates would say 50%)."""
    from oilbird.evaluation.diagnose import agreement
    assert agreement([(0, 1), (99, 99)]) == 0.99
    assert agreement([]) is None
