"""The decoder on the tiny mock model: every preset equals plain greedy, counters add up."""
import random
import re

import numpy as np
import pytest
import torch

from conftest import greedy_without_cache
from oilbird.audit import compare
from oilbird.evaluation.results import MethodStats
from oilbird.decoding import autoregressive
from oilbird.errors import PromptError
from oilbird.drafter import TreeConfig
from oilbird.presets import PRESETS, make_decoder
from oilbird.trace import BONUS, load_traces, save_traces
from oilbird.tree import DraftTree
from oilbird.verifier import Verifier


def _prompts(n, seed=0):
    rng = random.Random(seed)
    base = [rng.randrange(3, 259) for _ in range(12)]
    out = []
    for i in range(n):
        # repeated frames with a fresh value: the structure the drafters exploit
        out.append([1] + base + [rng.randrange(3, 259)] + base[:6] + [rng.randrange(3, 259)])
    return out


def test_ar_equals_cacheless_greedy(tiny_lm):
    v = Verifier(tiny_lm)
    for ids in _prompts(3):
        assert autoregressive(v, ids, 24).output_ids == greedy_without_cache(tiny_lm.model, ids, 24)


@pytest.mark.parametrize("method", list(PRESETS))
def test_every_preset_is_lossless_and_counters_add_up(tiny_lm, method):
    v = Verifier(tiny_lm)
    dec = make_decoder(method, v, tree=TreeConfig(budget=12, semantic_budget=4))
    stats = MethodStats()
    for i, ids in enumerate(_prompts(3)):
        ref = autoregressive(v, ids, 32).output_ids
        tr = dec.run(f"r{i}", ids, 32)
        assert compare(ref, tr.output_ids).lossless, (method, i, compare(ref, tr.output_ids).message())
        # one committed-source entry per committed token; the bonus closes every cycle
        assert sum(len(c.committed) for c in tr.cycles) == len(tr.output_ids)
        for c in tr.cycles:
            assert len(c.committed_sources) == len(c.committed)
            if c.cycle > 0 and len(c.committed) == len(c.accepted):
                assert c.committed_sources[-1] == [BONUS]
            assert len(c.tokens) <= 12
        stats.add_trace(tr)
        stats.add_request(f"r{i}", len(tr.output_ids), tr.forwards, 0.0, 0.0)
    assert sum(stats.accepted_by_source.values()) == pytest.approx(stats.tokens)


def test_max_new_tokens_truncates_mid_tree(tiny_lm):
    v = Verifier(tiny_lm)
    dec = make_decoder("goose", v)
    for n in (1, 2, 3, 7):
        for ids in _prompts(2, seed=n):
            assert dec.run("t", ids, n).output_ids == autoregressive(v, ids, n).output_ids


def test_the_fills_prices_keep_four_significant_figures():
    """A deep path's price is small, not 0 (four decimal places stored 2.4e-05 as 0.0)."""
    from oilbird.decoding import _rounded
    assert _rounded(2.4e-05) == 2.4e-05 and _rounded(0.123456) == 0.1235 and _rounded(None) is None


def test_trace_jsonl_round_trip(tiny_lm, tmp_path):
    v = Verifier(tiny_lm)
    dec = make_decoder("oilbird", v)
    traces = [dec.run(f"r{i}", ids, 20) for i, ids in enumerate(_prompts(3))]
    path = save_traces(traces, tmp_path / "t.jsonl")
    assert load_traces(path) == traces


def test_a_trace_with_a_nan_is_refused_before_the_file_is_touched(tiny_lm, tmp_path):
    """The writer refuses what the reader refuses (NaN, infinity), naming request and cycle; the
    file already there stays as it was, and no half-written file is left beside it."""
    from oilbird.trace import TraceError
    tr = make_decoder("goose", Verifier(tiny_lm)).run("r0", _prompts(1)[0], 12)
    path = save_traces([tr], tmp_path / "t.jsonl")
    before = path.read_bytes()
    bad = tr.cycles[-1]
    bad.scores[0] = {"suffix": float("nan")}
    with pytest.raises(TraceError, match=f"request 'r0', cycle {bad.cycle}: .*finite numbers"):
        save_traces([tr], path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


def test_cycles_record_whether_the_adjacency_table_opened_the_gate(tiny_lm):
    """Every drafting cycle says whether the token-adjacency table had a row for its root (the
    semantic key's gate opens on it too); a method without that table never has one."""
    v = Verifier(tiny_lm)
    for method, can_have in (("oilbird", True), ("pld", False)):
        dec = make_decoder(method, v)
        rows = [c.adjacency_row for ids in _prompts(3) for c in dec.run("r", ids, 20).cycles[1:]]
        assert rows and all(isinstance(r, bool) for r in rows)
        assert any(rows) == can_have, method


def test_cycles_record_what_the_store_held(tiny_lm):
    """The first request finds an empty store; later ones the records of those before them."""
    dec = make_decoder("oilbird", Verifier(tiny_lm))
    held = [{c.store_records for c in dec.run(f"r{i}", ids, 12).cycles[1:]} for i, ids in enumerate(_prompts(3))]
    assert held[0] == {0} and len(held[1]) == 1 and 0 < min(held[1]) < min(held[2])


def test_an_eager_attention_model_verifies_trees_losslessly():
    """Eager attention adds the mask to the scores: the tree mask reaches it as 0 / -inf (a
    True / False mask would add 1 and 0 and mask nothing)."""
    from conftest import make_tiny_lm
    lm = make_tiny_lm()
    lm.model.set_attn_implementation("eager")
    v = Verifier(lm)
    dec = make_decoder("goose", v, tree=TreeConfig(budget=12, semantic_budget=4))
    for i, ids in enumerate(_prompts(3)):
        assert dec.run(f"r{i}", ids, 32).output_ids == greedy_without_cache(lm.model, ids, 32)


def test_verify_then_commit_matches_chain_on_tiny(tiny_lm):
    v = Verifier(tiny_lm)
    ids = _prompts(1)[0]
    cache, _ = v.prefill(ids)
    tree = DraftTree(tokens=[5, 6, 7, 8, 9], parents=[-1, 0, 0, 2, 1])
    out = v.verify(cache, len(ids), tree)
    for path in ([0, 1, 4], [0, 2, 3]):
        with torch.inference_mode():
            logits = tiny_lm.model(input_ids=torch.tensor([ids + [tree.tokens[i] for i in path]])).logits[0]
        for k, node in enumerate(path):
            assert int(out.argmax[node]) == int(logits[len(ids) + k].argmax())
    Verifier.commit(cache, len(ids), [0, 2, 3])
    assert cache.get_seq_length() == len(ids) + 3


def test_verify_then_commit_matches_the_plain_forward_with_sliding_windows():
    """A model with sliding-window layers (window 8, one full layer among them): each node's
    outputs are those of the plain forward over its path, before and after a commit that keeps
    a branch (the cache's sliding layers compacted like the full one)."""
    from conftest import make_windowed_lm
    lm = make_windowed_lm(window=8)
    v = Verifier(lm)
    ids = _prompts(1)[0]
    assert len(ids) > 2 * 8
    cache, _ = v.prefill(ids)

    @torch.inference_mode()
    def check(prefix, tree, out):
        for leaf in range(len(tree)):
            path = [leaf]
            while tree.parents[path[0]] > 0:
                path.insert(0, tree.parents[path[0]])
            path = [0] + path if path[0] != 0 else path
            logits = lm.model(input_ids=torch.tensor([prefix + [tree.tokens[i] for i in path]])).logits[0]
            for k, node in enumerate(path):
                assert int(out.argmax[node]) == int(logits[len(prefix) + k].argmax())
                ref = torch.softmax(logits[len(prefix) + k].float(), -1).topk(v.topk).values
                assert torch.allclose(out.topk_probs[node], ref, atol=1e-5)

    tree = DraftTree(tokens=[5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
                     parents=[-1, 0, 0, 2, 1, 3, 5, 6, 7, 8])
    check(ids, tree, v.verify(cache, len(ids), tree))
    Verifier.commit(cache, len(ids), [0, 2, 3, 5, 6])
    prefix = ids + [5, 7, 8, 10, 11]
    assert cache.get_seq_length() == len(prefix)
    second = DraftTree(tokens=[20, 21, 22, 23], parents=[-1, 0, 1, 0])
    check(prefix, second, v.verify(cache, len(prefix), second))


@pytest.mark.parametrize("method,kind", [(m, "gemma3") for m in ("pld", "goose", "oilbird", "oilbird-ungated",
                                                                  "oilbird-no-suffix")]
                         + [(m, "mistral") for m in ("goose", "oilbird")] + [("oilbird", "gemma3-eager")])
def test_presets_are_lossless_with_sliding_windows(method, kind):
    """Tree verification on a model whose layers mostly (gemma3) or all (mistral) see only the
    last 8 positions: every output equals greedy decoding without any cache (transformers' own
    sliding-window masks); with eager attention too, which adds the mask to the scores."""
    from conftest import make_windowed_lm
    lm = make_windowed_lm(window=8, kind=kind.split("-")[0], attn="eager" if kind.endswith("eager") else "sdpa")
    dec = make_decoder(method, Verifier(lm), tree=TreeConfig(budget=12, semantic_budget=4))
    for i, ids in enumerate(_prompts(3, seed=4)):
        ref = greedy_without_cache(lm.model, ids, 40)
        tr = dec.run(f"r{i}", ids, 40)
        assert compare(ref, tr.output_ids).lossless, (method, i, compare(ref, tr.output_ids).message())
    assert sum(len(c.accepted) > 1 for c in tr.cycles) > 0          # trees were accepted past their root


def test_a_conversation_reuses_its_cache_losslessly_with_sliding_windows():
    """reuse_prefix (exact replay's multi-turn cache) on a sliding-window model: each turn's
    prompt extends the last turn's prompt and output, or repeats it whole (the re-fed last
    token); every output equals cacheless greedy."""
    from conftest import make_windowed_lm
    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter
    from oilbird.sources.prompt_lookup import PromptLookupSource
    lm = make_windowed_lm(window=8)
    dec = SpeculativeDecoder(Verifier(lm), Drafter([PromptLookupSource()], TreeConfig(budget=8, semantic_budget=0)),
                             reuse_prefix=True)
    ids = _prompts(1, seed=9)[0]
    for turn in range(4):
        out = dec.run(f"t{turn}", ids, 20).output_ids
        assert out == greedy_without_cache(lm.model, ids, 20), turn
        ids = ids + out[:-1] if turn == 1 else ids + out + [7, 8, 9]   # turn 2 starts inside what the cache holds


def test_a_sliding_layer_holds_its_window_not_the_history(monkeypatch):
    """commit trims a sliding layer to its window and the nodes it kept, so decoding far past the
    window holds O(window) keys there (the full layer holds them all), and stays lossless."""
    from conftest import make_windowed_lm
    lm = make_windowed_lm(window=8)
    held, commit = [], Verifier.commit

    def watched(cache, prefix_len, accepted):
        commit(cache, prefix_len, accepted)
        held.append([layer.keys.shape[-2] for layer in cache.layers])
    monkeypatch.setattr(Verifier, "commit", staticmethod(watched))
    dec = make_decoder("goose", Verifier(lm), tree=TreeConfig(budget=12, semantic_budget=4))
    ids = _prompts(1, seed=6)[0]
    assert dec.run("r", ids, 60).output_ids == greedy_without_cache(lm.model, ids, 60)
    assert max(h[2] for h in held) >= len(ids) + 50                   # the full layer: every position
    assert max(max(h[:2]) for h in held) <= 8 - 1 + 12                # the sliding ones: the window and a tree


def test_a_prefill_that_must_re_feed_a_cropped_window_starts_afresh():
    """A cache whose sliding layers a crop cut back to their window holds no position before it:
    a prompt that ends where the cache does (its last token re-fed for its outputs) is prefilled
    afresh, and its outputs are the fresh forward's."""
    from conftest import make_windowed_lm
    lm = make_windowed_lm(window=8)
    v = Verifier(lm)
    ids = _prompts(1, seed=5)[0]
    cache, _ = v.prefill(ids + [40, 41, 42])
    cache.crop(-3)                                  # as SpeculativeDecoder._keep does past an EOS
    _, again = v.prefill(ids, cache)
    _, fresh = v.prefill(ids)
    assert torch.allclose(again.states, fresh.states, atol=1e-5) and again.argmax.tolist() == fresh.argmax.tolist()


def test_empty_and_overlong_prompts_rejected(tiny_lm):
    v = Verifier(tiny_lm)
    with pytest.raises(PromptError, match="empty"):
        autoregressive(v, [], 5)
    with pytest.raises(PromptError, match="context"):
        make_decoder("oilbird", v).run("x", [5] * 600, 5)
    # judges say whether their verdicts run the model: fast replay does not (its rows may be
    # windowed past the context), exact replay and the live ones do; a judge of one's own that
    # does not say is checked as the live one is
    from oilbird.decoding import Greedy, Replay
    from oilbird.sampled import Sampled
    from oilbird.sampling import SamplingParams
    assert Greedy().runs_model and Sampled(SamplingParams(0.7)).runs_model and Replay([1]).runs_model
    assert not Replay([1], teacher=object()).runs_model
    with pytest.raises(PromptError, match="context"):
        make_decoder("oilbird", v).run("x", [5] * 600, 5, judge=type("Plain", (), {
            "limit": lambda self, n: n, "start": Greedy.start, "verdict": Greedy.verdict})())


def test_a_run_checks_every_prompt_first_and_names_the_bad_one(tiny_lm):
    """bench and diagnose encode all requests before decoding any: the over-long one is named."""
    from oilbird.data.requests import encode_requests
    from oilbird.data.requests import Request
    reqs = [Request("fine", [{"role": "user", "content": "hi"}]),
            Request("long", [{"role": "user", "content": "x" * 600}])]
    with pytest.raises(PromptError, match="^request 'long': The prompt has .* context of 512 tokens"):
        encode_requests(tiny_lm, reqs, 8)
    assert [r.id for r, _ in encode_requests(tiny_lm, reqs[:1], 8)] == ["fine"]


def test_bench_rows_per_request_add_up(tiny_lm):
    """results.json keeps one row per (method, request) for paired comparisons; the rows add
    up to the method's totals and each carries its own audit verdict."""
    from oilbird.evaluation.bench import run_bench
    from oilbird.data.requests import Request
    reqs = [Request(f"r{i}", [{"role": "user", "content": f"call f(x={v}) then f(x={v})"}],
                    meta={"conversation": i // 2} if i < 2 else {})
            for i, v in enumerate("abc")]
    res = run_bench(reqs, ["ar", "goose"], Verifier(tiny_lm), 8, progress=False)
    for m, r in res["methods"].items():
        rows = r["per_request"]
        assert [x["request"] for x in rows] == ["r0", "r1", "r2"], m
        # turns of one dialogue say so (a pooled ratio's interval draws them together)
        assert [x.get("unit") for x in rows] == ["conversation 0", "conversation 0", None]
        assert sum(x["tokens"] for x in rows) == r["tokens"]
        assert sum(x["forwards"] for x in rows) == r["forwards"]
        assert all(x["lossless"] is True for x in rows)
    assert all(x["forwards"] == x["tokens"] for x in res["methods"]["ar"]["per_request"])


def test_bench_runs_fills_beside_the_plain_methods(tiny_lm, tmp_path):
    """'goose:expected', 'oilbird:reserved' run beside the plain methods, each keyed by its name."""
    from oilbird.evaluation.bench import run_bench
    from oilbird.data.requests import Request
    reqs = [Request("r0", [{"role": "user", "content": "call f(x=1) then f(x=1)"}])]
    names = ["goose", "goose:expected", "oilbird:reserved", "oilbird:expected"]
    res = run_bench(reqs, names, Verifier(tiny_lm), 8, progress=False, trace_out=tmp_path / "t.jsonl")
    assert list(res["methods"]) == names
    assert all(r["lossless"] for r in res["methods"].values())
    assert {m: r["fill"] for m, r in res["methods"].items()} == {
        "goose": "reserved", "goose:expected": "expected", "oilbird:reserved": "reserved",
        "oilbird:expected": "expected"}
    assert [t.method for t in load_traces(tmp_path / "t.jsonl")] == names
    for bad, msg in (("ar:expected", "only tree methods"), ("goose:huge", "one fill"),
                     ("goose:", "one fill"), ("goose:expected:reserved", "one fill"),
                     ("nope:expected", "unknown method")):
        with pytest.raises(ValueError, match=msg):
            run_bench(reqs, [bad], Verifier(tiny_lm), 8, progress=False)
    with pytest.raises(ValueError, match="named twice"):
        run_bench(reqs, ["goose", "goose"], Verifier(tiny_lm), 8, progress=False)


@pytest.mark.parametrize("method,fill", [("goose", "expected"), ("oilbird", "expected"),
                                         ("oilbird-ungated", "expected"), ("oilbird", "open"),
                                         ("oilbird-no-semantic", "open")])
def test_valued_fills_are_lossless_and_within_budget(tiny_lm, method, fill):
    v = Verifier(tiny_lm)
    dec = make_decoder(f"{method}:{fill}", v, tree=TreeConfig(budget=12))
    learned = 0
    for i, ids in enumerate(_prompts(4)):
        ref = autoregressive(v, ids, 32).output_ids
        tr = dec.run(f"r{i}", ids, 32)
        assert compare(ref, tr.output_ids).lossless, (method, i, compare(ref, tr.output_ids).message())
        assert all(len(c.tokens) <= 12 for c in tr.cycles)
        learned = sum(dec.drafter.rates.tested.values())
    assert learned > 0, "the acceptance rates never saw a verdict"


def test_stopping_a_request_early_leaves_the_next_one_clean(tiny_lm):
    """A caller that breaks out of cycles() ends that request there: its committed tokens are
    stored, and the next request through the same decoder decodes and stores normally."""
    v = Verifier(tiny_lm)
    dec = make_decoder("oilbird", v)
    a, b = _prompts(2)
    for k, c in enumerate(dec.cycles("r1", a, 40)):
        if k == 2:
            committed = c.generated_before + len(c.committed)
            break
    assert (len(dec.store), dec.store.n_requests) == (committed, 1)
    out = dec.run("r2", b, 20)
    assert out.output_ids == autoregressive(v, b, 20).output_ids
    assert (len(dec.store), dec.store.n_requests) == (committed + len(out.output_ids), 2)


def test_on_cycle_returning_true_stops_the_request_there(tiny_lm):
    """run()'s on_cycle may stop a request (the app's Stop button): the trace says stopped, holds
    a prefix of greedy's output, and the store holds the request as far as it went."""
    v = Verifier(tiny_lm)
    dec = make_decoder("oilbird", v)
    a, b = _prompts(2)
    tr = dec.run("r1", a, 40, on_cycle=lambda c: c.cycle == 2)
    assert tr.stop == "stopped" and len(tr.cycles) == 3
    assert tr.output_ids == autoregressive(v, a, 40).output_ids[:len(tr.output_ids)]
    assert (len(dec.store), dec.store.n_requests) == (len(tr.output_ids), 1)
    assert dec.run("r2", b, 20, on_cycle=lambda c: None).stop != "stopped"


def test_a_source_of_ones_own_plugs_in_by_role_and_stays_lossless(tiny_lm):
    """The recipe of oilbird/sources/base.py: any name, any proposals, the output is greedy's."""
    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter
    from oilbird.sources.base import Chain, DraftSource, Proposal
    from oilbird.sources.prompt_lookup import PromptLookupSource

    class Oracle(DraftSource):
        name = "oracle"                     # not a built-in name: routed by its (default) role

        def __init__(self, answer):
            self.answer = answer

        def propose(self, ctx, budget):
            done = len(ctx.tokens) - len(ids)
            return Proposal([Chain(self.answer[done:done + 4], 1.0)])

    v = Verifier(tiny_lm)
    ids = _prompts(1)[0]
    ref = autoregressive(v, ids, 24).output_ids
    for answer in (ref, [7] * 30):          # right drafts, then wrong ones
        dec = SpeculativeDecoder(v, Drafter([PromptLookupSource(), Oracle(answer)], TreeConfig()))
        tr = dec.run("r", ids, 24)
        assert tr.output_ids == ref
        delivered = sum("oracle" in s for c in tr.cycles for s in c.committed_sources)
        assert (delivered > len(ref) // 2) if answer is ref else delivered == 0
    # no method given: the trace is named by its sources, not passed off as the oilbird preset
    from oilbird.methods import has_semantic
    assert tr.method == "[pld+oracle]" and not has_semantic(tr.method)
    # a spine source (the default role) is an exact-match key to every view, and the trace says so
    from oilbird.trace import lexical_sources
    assert tr.meta["lexical_sources"] == ["oracle", "pld"] and lexical_sources(tr) == {"oracle", "pld"}
    Oracle.role = "chains"
    tr = SpeculativeDecoder(v, Drafter([PromptLookupSource(), Oracle(ref)], TreeConfig(fill="expected"))).run("r", ids, 24)
    assert tr.output_ids == ref and lexical_sources(tr) == {"pld"}
    assert tr.meta["tree"] == {"budget": TreeConfig().budget, "fill": "expected"}   # why a chain got no node


@pytest.mark.parametrize("chain, message", [
    ({"tokens": [5, 10**6]}, "a 'bad' chain proposes token id 1000000, past the model's vocabulary of 259"),
    ({"tokens": [5, -1]}, "a 'bad' chain proposes token id -1: token ids are >= 0"),
    ({"tokens": [5], "score": float("nan")}, "a 'bad' chain has score nan: a score is a finite number"),
])
def test_a_source_of_ones_own_with_a_bad_chain_is_named(tiny_lm, chain, message):
    """A custom source's bad token id or score is refused naming the source, not an IndexError in
    the embedding lookup or a trace file nothing can read back."""
    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter
    from oilbird.sources.base import Chain, DraftSource, Proposal

    class Bad(DraftSource):
        name = "bad"

        def propose(self, ctx, budget):
            return Proposal([Chain(**{"score": 1.0, **chain})])

    from oilbird.sources.recycling import RecyclingSource
    # with token recycling after it, which reads the tree's tokens in its table (an IndexError there)
    dec = SpeculativeDecoder(Verifier(tiny_lm), Drafter([Bad(), RecyclingSource(259)], TreeConfig()))
    with pytest.raises(ValueError, match=re.escape(message)):
        dec.run("r", _prompts(1)[0], 8)


def test_a_source_of_ones_own_may_propose_numpy_arrays(tiny_lm):
    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter
    from oilbird.sources.base import Chain, DraftSource, Proposal

    class Repeat(DraftSource):
        name = "repeat"

        def propose(self, ctx, budget):
            return Proposal([Chain(np.asarray(ctx.tokens[-3:]), 0.5), Chain(np.asarray([], dtype=int), 0.1)])

    v, ids = Verifier(tiny_lm), _prompts(1)[0]
    tr = SpeculativeDecoder(v, Drafter([Repeat()], TreeConfig())).run("r", ids, 16)
    assert tr.output_ids == autoregressive(v, ids, 16).output_ids


@pytest.mark.parametrize("name", ["bonus", "root"])
def test_a_source_may_not_take_a_name_the_trace_keeps(name):
    from oilbird.drafter import Drafter
    from oilbird.sources.prompt_lookup import PromptLookupSource
    src = PromptLookupSource()
    src.name = name
    with pytest.raises(ValueError, match=f"named '{name}', which the trace keeps"):
        Drafter([src], TreeConfig())


def test_a_decoder_without_a_store_fills_the_one_its_sources_read(tiny_lm):
    """The recipe of oilbird/sources/base.py with the key: built over a store and given no
    ``store=``, the decoder fills that store (it left it empty for good, every cycle "empty-store");
    a source over another store than the decoder's is refused."""
    from oilbird.decoding import SpeculativeDecoder
    from oilbird.drafter import Drafter
    from oilbird.sources.semantic import SemanticSource
    from oilbird.store import Store
    v = Verifier(tiny_lm)
    store = Store(dim=int(tiny_lm.model.config.hidden_size))
    dec = SpeculativeDecoder(v, Drafter([SemanticSource(store)], TreeConfig()))
    dec.run("a", _prompts(1)[0], 12)
    assert dec.store is store and len(store) > 0
    with pytest.raises(ValueError, match="'semantic' reads another store than the decoder fills"):
        SpeculativeDecoder(v, Drafter([SemanticSource(store)], TreeConfig()), store=Store(dim=store.dim))


def test_report_says_not_audited_for_traces_nothing_compared_with_greedy(tiny_lm):
    from oilbird.evaluation.report import source_table, trace_methods
    tr = make_decoder("goose", Verifier(tiny_lm)).run("r", _prompts(1)[0], 8)
    assert tr.lossless is None                       # a Python caller's run: nothing audited it
    assert source_table(trace_methods([tr])).endswith("| not audited |")     # the table report prints
    tr.lossless = True
    assert source_table(trace_methods([tr])).endswith("| yes |")


def test_make_decoder_variant_reaches_the_drafter(tiny_lm):
    dec = make_decoder("oilbird:expected", Verifier(tiny_lm), tree=TreeConfig(budget=8))
    assert (dec.drafter.cfg.fill, dec.drafter.cfg.budget, dec.method) == ("expected", 8, "oilbird:expected")


def test_a_second_request_is_refused_while_one_is_open_and_nothing_of_it_starts(tiny_lm):
    """While one request's cycles() is left open, another through the same decoder (whose
    sources follow one request at a time) is refused with advice before it starts anything."""
    v = Verifier(tiny_lm)
    dec = make_decoder("oilbird", v)
    a, b = _prompts(2)
    g = dec.cycles("A", a, 40)
    next(g), next(g)                                   # A is open, its records queued
    ended = []
    end = dec.drafter.end_request
    dec.drafter.end_request = lambda rid: (ended.append(rid), end(rid))
    with pytest.raises(ValueError, match="'B' starts while 'A' is still being decoded: finish or close"):
        dec.run("B", b, 20)
    assert ended == []                                 # B never started
    g.close()                                          # A ends cleanly; the decoder serves again
    assert ended == ["A"] and dec.store.n_requests == 1
    assert dec.run("C", b, 20).output_ids == autoregressive(v, b, 20).output_ids


def test_a_request_is_refused_during_anothers_prefill_and_a_failed_prefill_frees_the_decoder(tiny_lm):
    """The decoder is claimed before the prefill (the long first forward): a second request that
    arrives during it is refused, not let in to share the sources; a prefill that fails frees it."""
    from oilbird.decoding import Greedy
    v = Verifier(tiny_lm)
    dec = make_decoder("oilbird", v)
    a, b = _prompts(2)
    seen = []

    class Meddling(Greedy):
        def start(self, verifier, ids, cache):
            with pytest.raises(ValueError, match="'B' starts while 'A' is still being decoded"):
                dec.run("B", b, 8)
            seen.append("refused")
            return super().start(verifier, ids, cache)
    assert dec.run("A", a, 12, judge=Meddling()).output_ids == autoregressive(v, a, 12).output_ids
    assert seen == ["refused"] and dec.store.n_requests == 1

    class Failing(Greedy):
        def start(self, verifier, ids, cache):
            raise MemoryError("no room for the prefill")
    with pytest.raises(MemoryError):
        dec.run("C", b, 8, judge=Failing())
    assert dec.run("D", b, 8).output_ids == autoregressive(v, b, 8).output_ids


def test_traces_decoded_without_text_round_trip_too(tiny_lm, tmp_path):
    """trace=False keeps the tree and verdict but no text: such records save and load as well."""
    dec = make_decoder("oilbird:expected", Verifier(tiny_lm), trace=False)
    traces = [dec.run(f"r{i}", ids, 20) for i, ids in enumerate(_prompts(2))]
    assert not traces[0].output_text
    assert load_traces(save_traces(traces, tmp_path / "t.jsonl")) == traces


def test_a_failed_audit_says_how_near_a_tie_the_difference_was(tiny_lm):
    """explain(): where two outputs first differ, by how much the reference preferred its token,
    so a rounding flip reads apart from a bug: greedy in logits; sampled as the race weighs it,
    with the draw plain sampling made there (so the reference's own token beats every other)."""
    from dataclasses import replace
    from oilbird.audit import explain
    from oilbird.sampled import sampled_autoregressive
    from oilbird.sampling import SamplingParams
    v, ids = Verifier(tiny_lm), _prompts(1)[0]
    ref = autoregressive(v, ids, 12).output_ids
    i = 5
    with torch.no_grad():
        logits = tiny_lm.model(input_ids=torch.tensor([ids + ref[:i]])).logits[0, -1].double()
    second = int(torch.topk(logits, 2).indices[1])
    res = explain(tiny_lm, ids, compare(ref, ref[:i] + [second] + ref[i + 1:]))
    assert res.margin == pytest.approx(float(logits[ref[i]] - logits[second]), rel=1e-4) and res.margin > 0.01
    assert f"there greedy preferred its token by {res.margin:.3g} in logits: not a rounding near tie" in res.message()
    assert res.near_tie == 0.01
    assert explain(replace(tiny_lm, dtype=torch.bfloat16), ids, compare(ref, ref[:i] + [second])).near_tie == 0.5
    said = {}
    for m in (0.001, -0.001, -3.0):
        r = compare(ref, ref[:i] + [second] + ref[i + 1:])
        r.margin, r.near_tie, r.unit = m, 0.01, "in logits"
        said[m] = r.message()
    assert "a near tie (within 0.01)" in said[0.001] and "a near tie (within 0.01)" in said[-0.001]
    assert "the reference's own forward prefers ours there" in said[-3.0] and "near tie" not in said[-3.0]
    assert explain(tiny_lm, ids, compare(ref, ref)).margin is None
    assert explain(tiny_lm, ids, compare(ref, ref[:3])).margin is None       # ours ended: no token to weigh
    for bad in (10 ** 6, -1):                                                # no token of the model
        assert explain(tiny_lm, ids, compare(ref, ref[:i] + [bad])).margin is None
    for prompt in ([], [-1, 5], [10 ** 6]):                                  # no prompt the model reads
        assert explain(tiny_lm, prompt, compare(ref, ref[:i] + [second])).margin is None
    vocab = int(tiny_lm.model.config.vocab_size)
    for params in (SamplingParams(0.9, 1.0, 4), SamplingParams(0.05, 0.5, 4)):
        sref = sampled_autoregressive(v, ids, 12, params, "q").output_ids
        margins = [explain(tiny_lm, ids, compare(sref, sref[:i] + [t]), params, "q").margin
                   for t in range(vocab) if t != sref[i]]
        assert min(margins) > 0          # the draw replayed is the one the reference used
        if params.temperature > 0.5:     # (at T 0.05 the logits decide whatever the draw)
            wrong_seed = [explain(tiny_lm, ids, compare(sref, sref[:i] + [t]), replace(params, seed=5), "q").margin
                          for t in range(vocab) if t != sref[i]]
            assert min(wrong_seed) < 0   # another draw ranks another token first: the check can fail


def test_the_bench_explains_its_first_greedy_failure(tiny_lm):
    """bench's audit hands a failure to explain(): results.json says how near a tie it was."""
    from oilbird.data.requests import Request
    from oilbird.evaluation.bench import _audit
    v, ids = Verifier(tiny_lm), _prompts(1)[0]
    ref = autoregressive(v, ids, 12).output_ids
    stats = {"ok": MethodStats(), "bad": MethodStats()}
    for st in stats.values():
        st.add_request("q0", 12, 12, 0.0, 0.0)
    _audit(tiny_lm, Request("q0", [{"role": "user", "content": "x"}]), ids, 12, ["ok", "bad"],
           {"ok": ref, "bad": ref[:4] + [(ref[4] + 1) % 259] + ref[5:]}, stats, [])
    assert stats["ok"].lossless and stats["ok"].first_failure is None
    assert not stats["bad"].lossless
    assert stats["bad"].first_failure.startswith("q0: NOT lossless at position 4")
    assert "there greedy preferred its token by" in stats["bad"].first_failure


def test_the_audit_reports_the_first_differing_token_and_a_length_mismatch():
    """Every lossless check rests on compare(): it must fail an output that differs anywhere."""
    assert compare([1, 2, 3], [1, 2, 3]).lossless
    bad = compare([1, 2, 3], [1, 9, 3])
    assert not bad.lossless and bad.first_diff == 1
    for short, long in (([1, 2], [1, 2, 3]), ([1, 2, 3], [1, 2])):
        r = compare(short, long)
        assert not r.lossless and r.first_diff == 2
