"""Replay (oilbird.evaluation.replay): the live cycle with one rule changed, checked against live runs."""
import pytest

from oilbird.decoding import Replay, autoregressive, recorded_targets
from oilbird.methods import PRESETS
from oilbird.presets import make_decoder
from oilbird.evaluation.replay import RecordedTurn, make_replay_decoder, replay, teacher_forced
from oilbird.methods import parse_method
from oilbird.tree import DraftTree, greedy_accept
from oilbird.verifier import Verifier
from test_decoding import _prompts

MAX_NEW = 24


def _cycle_record(tr):
    return [(c.tokens, c.parents, c.sources, c.accepted, c.committed, c.committed_sources, c.argmax,
             c.lexical_match_len, c.adjacency_row, c.retrieval, [n.record for n in c.neighbours])
            for c in tr.cycles]


def test_recorded_targets_accept_the_longest_recorded_path():
    tree = DraftTree([5, 6, 9, 7, 8], [-1, 0, 0, 1, 1])
    rec = [4, 5, 6, 8, 3]                       # root 5 is generated token 1
    targets = recorded_targets(tree, rec, 2)
    assert targets == [6, 8, 8, 3, 3]
    assert greedy_accept(tree.tokens, tree.parents, targets) == ([0, 1, 4], 3)
    # past the recording's end nothing matches
    assert recorded_targets(tree, [4, 5], 2) == [-1, -1, -1, -1, -1]


@pytest.mark.parametrize("method", [*PRESETS, "ar"])
def test_exact_replay_of_greedy_output_is_the_live_run(tiny_lm, method):
    """Exact-mode replay of the model's own greedy output gives the live run's trees, verdicts,
    neighbours and tau, request after request (store and tables carry over alike)."""
    v = Verifier(tiny_lm)
    prompts = _prompts(4)
    m = parse_method(method)
    if m.kind == "baseline":
        live = [autoregressive(v, ids, MAX_NEW) for ids in prompts]
        rep = make_replay_decoder(m, v, None, trace=True)
        for i, (ids, ref) in enumerate(zip(prompts, live)):
            tr = rep.run(f"r{i}", ids, MAX_NEW, judge=Replay(ref.output_ids))
            assert tr.output_ids == ref.output_ids and tr.forwards == ref.forwards
        return
    live_dec = make_decoder(m, v)
    rep = make_replay_decoder(m, v, None, trace=True)
    for i, ids in enumerate(prompts):
        live = live_dec.run(f"r{i}", ids, MAX_NEW)
        # the greedy output goes on past the cut at MAX_NEW: a last cycle may accept drafts there
        greedy = autoregressive(v, ids, MAX_NEW + 16).output_ids
        tr = rep.run(f"r{i}", ids, MAX_NEW, judge=Replay(greedy))
        assert tr.output_ids == live.output_ids
        assert _cycle_record(tr) == _cycle_record(live), (method, i)
        assert tr.tau == live.tau


def test_a_recording_the_model_would_not_write_is_followed_exactly(tiny_lm):
    """The verdict is the recording's: the output is the recording whatever the model predicts,
    and drafts the recording holds are accepted."""
    v = Verifier(tiny_lm)
    ids = _prompts(1)[0]
    rec = ids[1:13] + [2]                      # copies the prompt, then EOS: a copy drafter's dream
    dec = make_replay_decoder(parse_method("pld"), v, None, trace=True)
    tr = dec.run("r", ids, 64, judge=Replay(rec))
    assert tr.output_ids == rec and tr.forwards < len(rec)
    assert tr.meta["replay"] == {"mode": "exact"}           # the trace says whose verdict it is, whoever ran it

    class Mine:                                            # a judge of one's own, without meta()
        def __init__(self):
            self.inner = Replay(rec)

        def __getattr__(self, name):
            if name == "meta":
                raise AttributeError(name)
            return getattr(self.inner, name)
    assert dec.run("r2", ids, 64, judge=Mine()).output_ids == rec


def test_fast_replay_follows_the_recording_and_matches_exact_for_copying_sources(tiny_lm):
    """Fast mode runs no forward per cycle; for sources that learn only from committed text
    (prompt lookup, suffix, the semantic key) its trees and tau equal exact mode's."""
    v = Verifier(tiny_lm)
    turns = [RecordedTurn(f"c/{i}", "c", i, ids, autoregressive(v, ids, MAX_NEW).output_ids)
             for i, ids in enumerate(_prompts(4))]
    convs = [[t] for t in turns]
    methods = ["ar", "pld", "suffix", "pld+sem", "oilbird"]
    traces = {"fast": [], "exact": []}
    fast, exact = (replay(convs, methods, v, mode=mode, on_request=lambda trs, _, m=mode: traces[m].extend(trs))
                   for mode in ("fast", "exact"))
    by = {mode: {(t.method, t.request_id): t for t in trs} for mode, trs in traces.items()}
    assert by["fast"].keys() == by["exact"].keys() and len(by["fast"]) == 4 * len(methods)
    for m in ("pld", "suffix", "pld+sem"):
        assert fast["methods"][m]["tau"] == pytest.approx(exact["methods"][m]["tau"]), m
        for t in turns:        # the same trees, verdicts and neighbours, cycle by cycle
            f, e = by["fast"][m, t.id], by["exact"][m, t.id]
            assert f.output_ids == e.output_ids == t.recording_ids
            # fast mode knows the verifier's argmax only where the recording says it (-1 elsewhere)
            assert [r[:6] + r[7:] for r in _cycle_record(f)] == [r[:6] + r[7:] for r in _cycle_record(e)], (m, t.id)
            for cf, ce in zip(f.cycles, e.cycles):
                assert all(a in (-1, b) for a, b in zip(cf.argmax, ce.argmax))
                assert [cf.argmax[i] for i in cf.accepted] == [ce.argmax[i] for i in ce.accepted]
    assert all(r["lossless"] for r in fast["methods"].values())
    assert fast["methods"]["oilbird"]["speedup"] is None and exact["methods"]["oilbird"]["speedup"]


def test_a_drafter_of_ones_own_replays_beside_the_methods(tiny_lm):
    """docs/replay.md's recipe: a decoder the caller built (here goose's tree with a source of
    one's own) replays under its name, its trees following the recording, beside a method."""
    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter, TreeConfig
    from oilbird.presets import make_sources
    from oilbird.sources.base import Chain, DraftSource, Proposal
    from oilbird.store import Store

    class Sevens(DraftSource):
        name = "sevens"

        def propose(self, ctx, budget):
            return Proposal([Chain([7, 7], 0.5)])

    v = Verifier(tiny_lm)
    turns = [RecordedTurn(f"c/{i}", "c", i, ids, autoregressive(v, ids, MAX_NEW).output_ids)
             for i, ids in enumerate(_prompts(2))]
    cfg = tiny_lm.model.config
    store = Store(dim=cfg.hidden_size, state_key=tiny_lm.state_key)
    sources = make_sources(["suffix", "pld", "recycling"], store, cfg.hidden_size, cfg.vocab_size) + [Sevens()]
    mine = SpeculativeDecoder(v, Drafter(sources, TreeConfig()))          # goose's sources, and one's own
    traces = []
    res = replay([turns], ["goose"], v, own={"mine": mine}, on_request=lambda trs, _: traces.extend(trs))
    assert list(res["methods"]) == ["goose", "mine"] and res["methods"]["mine"]["lossless"]
    assert res["methods"]["mine"]["fill"] == "reserved" and len(res["methods"]["mine"]["per_request"]) == 2
    assert {row["unit"] for row in res["methods"]["mine"]["per_request"]} == {"c"}     # the turns' conversation
    drafted = {s for t in traces if t.method == "mine" for c in t.cycles for node in c.sources for s in node}
    assert "sevens" in drafted and all(t.output_ids == turns[i // 2].recording_ids for i, t in enumerate(traces))
    for name in ("goose", "ar"):      # a view would read it as that method; 'ar' is exact mode's baseline
        with pytest.raises(ValueError, match=f"'{name}' is a method's name"):
            replay([turns], ["goose"], v, own={name: mine})


def test_teacher_forcing_reuses_the_conversation_cache(tiny_lm):
    """Turn 2's prompt extends turn 1's prompt + recording: its teacher rows equal a fresh
    forward's, though only the new tokens were fed."""
    v = Verifier(tiny_lm)
    p1 = _prompts(1)[0]
    r1 = autoregressive(v, p1, 8).output_ids
    p2 = p1 + r1 + [40, 41, 42]
    r2 = autoregressive(v, p2, 8).output_ids
    t1, t2 = RecordedTurn("c#0", "c", 0, p1, r1), RecordedTurn("c#1", "c", 1, p2, r2)
    rows = list(teacher_forced(v, [t1, t2]))
    fresh = list(teacher_forced(v, [t2]))[0]
    assert rows[1].argmax.tolist() == fresh.argmax.tolist()
    # r2 is greedy: row p + 1 (the outputs at generated token p) predicts token p + 1
    assert rows[1].argmax.tolist()[:len(r2)] == r2


def test_hf_pld_cannot_replay(tiny_lm):
    with pytest.raises(ValueError, match="'hf-pld' cannot replay"):
        replay([], ["hf-pld"], Verifier(tiny_lm))
    with pytest.raises(ValueError, match="named twice"):
        replay([], ["goose", "goose"], Verifier(tiny_lm))
