"""The vLLM proposer's logic on inputs shaped like vLLM's (no vLLM needed), and one end-to-end
run inside vLLM that skips when its environment is absent (scripts/setup_vllm_env.sh)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from oilbird.serving import chains
from oilbird.serving.chains import best_chain
from oilbird.serving.vllm import BatchProposer, Forward, ProposerConfig
from oilbird.tree import DraftTree

DIM, VOCAB, K, MAX_LEN = 16, 64, 6, 256
STOP = VOCAB - 1            # the token the fake engine samples after an output's end
ROOT = Path(__file__).resolve().parent.parent


class FakeEngine:
    """Greedy 'verification' against known outputs, in vLLM's shapes: a ``token_ids_cpu``
    array per slot, ``num_tokens_no_spec``, per-slot sampled tokens (the accepted prefix of the
    last draft plus one), and a forward whose rows follow ``query_start_loc``."""

    def __init__(self, proposer: BatchProposer, slots: int = 4, with_states: bool = True, device=None):
        self.p = proposer
        self.device = device or (lambda t: t)    # where the forward's rows live (OffCPU: a GPU's)
        self.ids = np.zeros((slots, MAX_LEN), dtype=np.int64)
        self.n = np.zeros(slots, dtype=np.int64)
        self.slot_req: list = [None] * slots     # [prompt, truth, generated, draft]
        self.with_states = with_states
        self.emb = torch.randn(VOCAB, DIM, generator=torch.Generator().manual_seed(0))
        self.accepted = 0
        self.drafted = 0

    def add(self, slot: int, prompt: list[int], truth: list[int]) -> None:
        self.slot_req[slot] = [prompt, truth, [], []]
        self.ids[slot, :len(prompt)] = prompt
        self.n[slot] = len(prompt)

    def move(self, src: int, dst: int) -> None:        # vLLM condensing its batch
        self.ids[dst], self.n[dst], self.slot_req[dst] = self.ids[src].copy(), self.n[src], self.slot_req[src]
        self.slot_req[src] = None
        self.n[src] = 0

    def step(self, forward_layout_ok: bool = True, final_shift: int = 0) -> list[list[int]]:
        live = [i for i, r in enumerate(self.slot_req) if r is not None]
        sampled, rows, qsl, nxt = [], [], [0], []
        for i in live:
            prompt, truth, gen, draft = self.slot_req[i]
            if not gen and not draft and self.n[i] == len(prompt):
                toks = list(prompt)                    # prefill: every prompt row
                new = [truth[0]]
                nxt += [0] * (len(toks) - 1) + [truth[0]]
            else:
                toks = [int(self.ids[i, self.n[i] - 1])] + draft
                pos = len(gen)
                a = 0
                while a < len(draft) and pos + a < len(truth) and draft[a] == truth[pos + a]:
                    a += 1
                # the accepted drafts and the engine's own token: a + 1 sampled tokens always, as
                # vLLM's sampler gives them (past the output's end a stop token; the request ends)
                new = (truth[pos:pos + a + 1] + [STOP])[:a + 1]
                self.accepted += a
                nxt += [truth[min(pos + j, len(truth) - 1)] for j in range(len(toks))]   # what each row predicts
            rows += toks
            qsl.append(qsl[-1] + len(toks) + (0 if forward_layout_ok else 1))
            gen += new[:len(truth) - len(gen)]
            self.ids[i, self.n[i]:self.n[i] + len(new)] = new
            self.n[i] += len(new)
            sampled.append(new)
        hidden = self.emb[torch.tensor(rows)] if rows else torch.zeros(0, DIM)
        if not forward_layout_ok:
            hidden = torch.cat([hidden, torch.zeros(len(live), DIM)])
        # the model's output rows, as one-hot logits of the token each row predicts (shifted: a wrong map)
        final = torch.nn.functional.one_hot(torch.tensor(nxt[final_shift:] + nxt[:final_shift]), VOCAB).float()
        fwd = Forward(self.device(hidden), np.array(qsl), final) if self.with_states else None
        # the proposer sees the live slots packed at the front, as vLLM's input batch is
        order = live
        ids = self.ids[order]
        n = self.n[order]
        out = self.p.propose(sampled, n, ids, fwd)
        for i, d in zip(order, out):
            assert len(d) <= K
            self.slot_req[i][3] = list(d)
            self.drafted += len(d)
        return out

    def run(self, slot: int) -> list[int]:
        """Step until the request in ``slot`` has its whole output."""
        while len(self.slot_req[slot][2]) < len(self.slot_req[slot][1]):
            self.step()
        return self.slot_req[slot][2]


def _proposer(**cfg) -> BatchProposer:
    p = BatchProposer(DIM, VOCAB, K, MAX_LEN, ProposerConfig(**cfg))
    p.logits_fn = lambda rows: rows            # the fake forward's output rows are logits already
    return p


PROMPT = [1, 5, 6, 7, 8, 9]
TRUTH = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 2]


def test_best_chain_picks_highest_expected_length():
    t = DraftTree([0, 1, 2, 3], [-1, 0, 1, 0])       # root->A->B, root->C
    assert best_chain(t, [1, .8, .6, .9], max_len=8) == [1, 2]
    assert best_chain(t, [1, .8, .6, .9], max_len=1) == [3]
    assert best_chain(t, [1, .8, .05, .9], max_len=8, min_prob=0.1) == [3]   # B cut: A alone is .8 < .9
    assert best_chain(DraftTree([0], [-1]), [1.0], max_len=8) == []


def test_the_chain_is_sent_whole_unless_a_cut_is_set():
    """min_prob 0 (the default) sends the best path whole; a cut must be a number in [0, 1]."""
    assert ProposerConfig().min_prob == chains.ChainConfig().min_prob == 0.0
    t = DraftTree([0, 1, 2, 3], [-1, 0, 1, 2])                 # one path, its tail unlikely
    assert best_chain(t, [1, .9, .05, .01], max_len=8) == [1, 2, 3]
    assert best_chain(t, [1, .9, .05, .01], max_len=8, min_prob=0.1) == [1]
    for bad in ('2', '"0.1"', 'true', 'null'):
        with pytest.raises(ValueError, match="min_prob"):
            ProposerConfig.from_json('{"min_prob": %s}' % bad)


def test_step_cost_learns_what_a_draft_row_costs_and_where_a_token_stops_paying():
    from oilbird.serving.vllm import StepCost
    c = StepCost()
    for j in range(StepCost.MIN_STEPS - 1):
        c.observe(1, j % 9, 0.1 + 0.01 * (j % 9), 3)
    assert c.fit() is None and c.cut() == 0.0                    # too few steps: send whole
    c.observe(1, 4, 0.14, 3)
    a, per_request, per_row = c.fit()
    assert a + per_request == pytest.approx(0.1) and per_row == pytest.approx(0.01)
    assert c.cut() == pytest.approx(0.01 * 3 / (c.seconds / (c.tokens / 3)))   # row cost x tokens / s
    # a batch that changes size: what a request costs is not read as what a row costs
    grow = StepCost()
    for j in range(96):
        reqs, rows = 1 + j % 8, (j * 5) % 11
        grow.observe(reqs, rows, 0.05 + 0.02 * reqs + 0.004 * rows, reqs)
    assert grow.fit()[1] == pytest.approx(0.02, rel=1e-3) and grow.fit()[2] == pytest.approx(0.004, rel=1e-3)
    # Oilbird's own drafting time is no row's cost; the cut still divides by the whole step
    drafting = StepCost()
    for j in range(64):
        drafting.observe(2, j % 9, 0.1 + 0.01 * (j % 9) + 0.003 * (j % 9), 4, drafting=0.003 * (j % 9))
    assert drafting.fit()[2] == pytest.approx(0.01)
    flat = StepCost()                                             # no spread in rows: nothing to fit
    for _ in range(64):
        flat.observe(4, 4, 0.2, 2)
    assert flat.fit() is None and flat.cut() == 0.0
    free = StepCost()                                             # rows that cost nothing: no cut
    for j in range(64):
        free.observe(1, j % 9, 0.2 - 0.001 * (j % 9), 2)
    assert free.cut() == 0.0


def test_only_pure_decode_steps_are_priced():
    """A step that also prefilled a prompt chunk (a slot with no sampled tokens) or served nobody
    says nothing of what a draft row costs: the cost model skips it."""
    p = _proposer(min_prob="auto")
    eng = FakeEngine(p)
    eng.add(0, PROMPT, TRUTH)
    for _ in range(4):
        eng.step()
    n0 = p.cost.steps
    assert n0 == 3                                # four steps, the prefill's not priced
    decode = p.propose

    def with_a_chunk(sampled, n, ids, fwd=None):  # slot 1: a long prompt's first chunk this step
        more = np.vstack([ids, np.zeros((1, ids.shape[1]), ids.dtype)])
        return decode(list(sampled) + [[]], np.append(n, 3), more, None)[:len(sampled)]
    p.propose = with_a_chunk
    eng.step()
    assert p.cost.steps == n0
    p.propose = decode
    eng.step()
    assert p.cost.steps == n0 + 1
    p.propose([], [], [], None)                   # nobody left in the batch
    assert p.cost.steps == n0 + 1


def test_an_auto_cut_sends_shorter_chains_where_positions_are_dear(monkeypatch):
    """min_prob "auto": the proposer times its own steps (a fake clock here: each step costs
    a fixed part plus a part per verified row) and cuts the chain where a token's chance of
    acceptance no longer pays for its row; where rows are nearly free it sends the same chains."""
    import oilbird.serving.vllm as V
    rng = np.random.default_rng(0)       # phrases that recur in a shuffled order: every chain a guess
    phrases = [[30, 31, 32, 33], [30, 31, 40, 41], [30, 50, 51, 52], [44, 45, 46, 30]]
    truth = [t for j in rng.integers(0, 4, 60) for t in phrases[j]]

    def run(min_prob, per_row):
        clock = [0.0]
        monkeypatch.setattr(V.time, "perf_counter", lambda: clock[0])
        p = _proposer(min_prob=min_prob)
        real = p.propose

        def timed(sampled, n, ids, fwd=None):
            clock[0] += 0.05 + per_row * (len(fwd.hidden) if fwd is not None else 1)
            return real(sampled, n, ids, fwd)
        p.propose = timed
        eng = FakeEngine(p)
        eng.add(0, PROMPT, truth)
        out = eng.run(0)
        return out, eng.drafted, clock[0], p.stats()["step_cost"]

    _, drafted0, seconds0, _ = run(0.0, 0.05)
    _, drafted1, seconds1, cost = run("auto", 0.05)
    _, drafted2, _, cost2 = run("auto", 1e-6)
    assert cost["draft_row_s"] == pytest.approx(0.05) and cost["cut"] > 0.3
    # fewer rows verified: more steps, but the same output in less (fake) time
    assert drafted1 < 0.8 * drafted0 and seconds1 < 0.95 * seconds0
    assert cost2["cut"] < 1e-3 and drafted2 == drafted0           # rows nearly free: the whole chains
    with pytest.raises(ValueError, match="auto"):
        ProposerConfig.from_json('{"min_prob": "often"}')


@pytest.mark.parametrize("option, message", [
    ('{"budget": "16"}', "'budget' must be a whole number of tree nodes"),
    ('{"budget": 0}', "'budget' must be a whole number"),
    ('{"store_max_records": "x"}', "'store_max_records' must be a whole number of records"),
    ('{"state_layer": -3}', "'state_layer' must be a decoder layer"),
    ('{"state_layer": 0}', "'state_layer' must be a decoder layer (1 = the first layer's output)"),
    ('{"tenant": 5}', "'tenant' must be a non-empty string, not 5"),
    ('{"sources": "pld"}', "'sources' must be a non-empty list of source names, not \"pld\""),
    ('{"check_layout": "yes"}', "'check_layout' must be true or false"),
    ('{"min_prob": true}', "'min_prob' must be a number in [0, 1]"),
])
def test_a_wrong_typed_option_is_one_line_naming_it(option, message):
    """serve-bench's --oilbird-config (and $OILBIRD_VLLM_CONFIG): a value of the wrong type is
    refused before any engine starts, naming the option and what it takes."""
    with pytest.raises(ValueError) as exc:
        ProposerConfig.from_json(option, "--oilbird-config")
    assert str(exc.value).startswith("--oilbird-config: ") and message in str(exc.value)
    ok = ProposerConfig.from_json('{"budget": 24, "sources": ["pld"], "state_layer": "last", "tenant": "t", '
                                  '"store_max_records": null, "min_prob": 0.1, "check_layout": true}')
    assert ok.sources == ("pld",) and ok.state_layer == "last"


def test_a_request_drafts_from_another_running_requests_output_with_the_live_source():
    """Two requests with one answer, the second starting when the first is 30 tokens in: the
    store has neither (neither has finished), but with "live" the second copies the first's
    output so far; the registry forgets a request when it leaves the batch."""
    from oilbird.serving.chains import SOURCES
    truth = [int(t) for t in np.random.default_rng(1).integers(10, 60, 50)] + [2]

    def second_request_steps(sources):
        p = _proposer(sources=list(sources))
        eng = FakeEngine(p)
        eng.add(0, PROMPT, truth)
        for _ in range(30):
            eng.step()
        eng.add(1, [9, 9] + PROMPT, truth)
        steps = 0
        while len(eng.slot_req[1][2]) < len(truth):
            eng.step()
            steps += 1
        assert eng.slot_req[1][2] == truth and p.stats()["store_requests"] == 0 and p.stats()["failures"] == 0
        p.propose([], [], [], None)                # both leave the batch
        return steps, p
    assert "live" in SOURCES                       # the default
    alone, _ = second_request_steps(tuple(s for s in SOURCES if s != "live"))
    together, p = second_request_steps(SOURCES)
    assert together <= alone - 5
    assert p.shared.live.tokens == {} and p.shared.live.grams == {} and p.stats()["store_requests"] == 2


def test_live_outputs_match_another_requests_text_with_something_after_it():
    from oilbird.sources.live import LiveOutputs
    live = LiveOutputs()
    live.open("a")
    live.extend("a", [5, 6, 7, 8, 5, 6])          # its newest tokens repeat an earlier phrase
    live.open("b")
    live.extend("b", [9, 5, 6, 1])
    assert min(map(len, live.grams)) == 2          # a 1-token match is never asked for: not indexed
    hits = live.match([3, 5, 6], exclude="b")
    assert [(r, p) for r, p, _ in hits] == [("a", 1)]       # not a's end (nothing after it), not b
    assert live.tokens["a"][hits[0][1] + 1:] == [7, 8, 5, 6]
    assert live.match([3, 9, 5, 6], exclude="a")[0] == ("b", 2, 3)
    assert live.match([3, 4], exclude="b") == []
    live.close("a")
    live.close("b")
    assert live.tokens == {} and live.grams == {}


def test_a_repeated_request_is_drafted_from_the_store_and_accepted():
    p = _proposer()
    eng = FakeEngine(p)
    eng.add(0, PROMPT, TRUTH)
    assert eng.run(0) == TRUTH
    first = eng.accepted
    eng.slot_req[0] = None
    eng.add(1, [3] + PROMPT, TRUTH)          # a new request, same answer
    eng.step()                                # its prefill step: request 0 left the batch -> stored
    assert p.stats()["store_requests"] == 1
    assert eng.run(1) == TRUTH
    s = p.stats()
    assert s["requests_started"] == 2 and s["requests_finished"] == 1
    assert eng.accepted - first >= len(TRUTH) // 2    # the store's copy of the answer was accepted
    assert s["accepted_tokens"] == eng.accepted and s["failures"] == 0
    assert s["states_used"] > 0 and s["layout_mismatch"] == 0


def test_a_moved_request_keeps_its_state_and_an_absent_one_finishes():
    p = _proposer()
    eng = FakeEngine(p)
    eng.add(0, PROMPT, TRUTH)
    eng.add(1, [4, 4, 4, 4], TRUTH[::-1])
    for _ in range(3):
        eng.step()
    eng.slot_req[0] = None                    # request in slot 0 finished; slot 1 moves to slot 0
    eng.move(1, 0)
    eng.step()
    s = p.stats()
    assert s["requests_started"] == 2         # the moved one was recognised, not restarted
    assert s["requests_finished"] == 1 and s["store_requests"] == 1


def test_a_failing_request_gets_an_empty_draft_and_the_others_are_untouched(monkeypatch):
    loop = [30, 31, 32, 33, 34, 35]
    truth = loop * 4 + [2]
    real = chains.RequestDrafter.propose

    def propose(self, context, query, max_len, min_prob=None):
        if context[:2] == [7, 7] and len(context) > 12:
            raise RuntimeError("injected")
        return real(self, context, query, max_len, min_prob)
    monkeypatch.setattr(chains.RequestDrafter, "propose", propose)
    p = _proposer()
    eng = FakeEngine(p)
    eng.add(0, PROMPT, truth)
    eng.add(1, [7, 7] + PROMPT, truth)
    outs = [eng.step() for _ in range(10)]
    s = p.stats()
    assert s["failures"] > 0 and "injected" in s["last_failure"]
    assert all(o[1] == [] for o in outs[2:])                 # the failing request drafts nothing
    assert sum(len(o[0]) for o in outs) > 0                  # the other one still drafts
    assert s["accepted_tokens"] > 0
    # a request dropped on failure leaves no entry in the live registry, and what it had
    # committed joins the store; the stats keep the last few failed ids, not one per step
    assert set(p.shared.live.tokens) <= {r.drafter.request_id for r in p.active.values()}
    assert s["store_requests"] >= s["failures"] > 0
    from oilbird.serving.vllm import FAILED_KEPT
    for _ in range(2 * FAILED_KEPT):
        eng.step()
    s = p.stats()
    assert s["failures"] > FAILED_KEPT and len(s["failed_requests"]) == FAILED_KEPT


def _stored(p: BatchProposer) -> tuple[list[int], int]:
    """The store's tokens, in record order, and how many of them carry a state."""
    st = p.shared.store
    return [st.record(i).token for i in st.record_ids()], int(st.index.ntotal)


def test_an_unexpected_row_layout_drops_that_steps_states_not_the_drafts_nor_later_states():
    truth = [30, 31, 32, 33, 34, 35] * 4 + [2]        # it repeats itself: something to draft
    p = _proposer()
    eng = FakeEngine(p)
    eng.add(0, PROMPT, truth)
    eng.step()
    eng.step()
    eng.step(forward_layout_ok=False)
    s = p.stats()
    assert s["layout_mismatch"] == 1 and s["failures"] == 0
    drafted = eng.drafted
    assert eng.run(0) == truth and eng.drafted > drafted          # it drafts on
    p.propose([], [], [], None)                                    # it leaves the batch: stored
    tokens, with_state = _stored(p)
    assert tokens == truth
    # only the tokens that one step committed (and the last, never a root) lack a state
    assert with_state >= len(truth) - K - 2


def test_the_store_keeps_an_output_up_to_its_first_eos():
    """The engine commits a whole accepted chain and cuts the output afterwards: the proposer's
    copy holds tokens past the end, the store does not (TRUTH ends with EOS 2)."""
    p = BatchProposer(DIM, VOCAB, K, MAX_LEN, ProposerConfig(), eos=(2,))
    eng = FakeEngine(p)
    eng.add(0, PROMPT, TRUTH)
    eng.run(0)
    eng.slot_req[0] = None
    eng.add(1, [3] + PROMPT, TRUTH)
    eng.run(1)                                  # drafted from the first's stored copy: overshoots
    overshoot = [len(r.tokens) - len(r.drafter.prompt) for r in p.active.values()]
    p.propose([], [], [], None)
    tokens, _ = _stored(p)
    assert overshoot and overshoot[0] > len(TRUTH)                 # the engine's copy ran past EOS
    assert tokens == TRUTH + TRUTH


def test_a_finished_request_is_stored_before_the_next_one_drafts():
    """A request that left the batch joins the store before this step's drafts are made, so the
    request that took its slot drafts from it at its first step."""
    p = _proposer(sources=["suffix"])
    eng = FakeEngine(p)
    eng.add(0, PROMPT, TRUTH)
    eng.run(0)
    eng.slot_req[0] = None
    eng.add(0, [3] + PROMPT, TRUTH)             # same slot, same answer
    first = eng.step()                           # its prefill step; request 0 is gone
    assert p.stats()["store_requests"] == 1 and first[0] == TRUTH[1:1 + len(first[0])] and first[0]


def test_the_layout_check_catches_rows_read_from_the_wrong_place():
    eng = FakeEngine(_proposer())
    eng.add(0, PROMPT, TRUTH)
    eng.add(1, [4, 4, 4, 4], TRUTH[::-1])
    for _ in range(4):
        eng.step()
    s = eng.p.stats()
    assert s["layout_checked"] == s["states_used"] > 0 and s["layout_check_failed"] == 0
    eng.step(final_shift=1)                   # every row read one place off
    assert eng.p.stats()["layout_check_failed"] == 2


class OffCPU:
    """A tensor on an accelerator, as the proposer touches one: ``numpy()`` refuses, as a CUDA
    tensor's does, until ``cpu()`` has copied it over."""

    def __init__(self, t, on_cpu: bool = False):
        self.t, self.on_cpu = t, on_cpu

    def __getitem__(self, k):
        return OffCPU(self.t[k], self.on_cpu)

    def __len__(self):
        return len(self.t)

    def float(self):
        return OffCPU(self.t.float(), self.on_cpu)

    def cpu(self):
        return OffCPU(self.t, True)

    def numpy(self):
        if not self.on_cpu:
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() first.")
        return self.t.numpy()


def test_states_on_an_accelerator_are_read_as_on_the_cpu():
    """On a GPU the forward's rows are CUDA tensors: the key must copy the rows it needs over,
    not fail every slot (which would draft nothing and restart each request, silently)."""
    def run(device):
        eng = FakeEngine(_proposer(), device=device)
        eng.add(0, PROMPT, TRUTH)
        eng.add(1, PROMPT, TRUTH)
        eng.run(0)
        eng.run(1)
        return eng, eng.p.stats()
    plain, s_plain = run(None)
    gpu, s_gpu = run(OffCPU)
    assert s_gpu["failures"] == 0 and s_gpu["states_used"] == s_plain["states_used"] > 0
    assert (gpu.accepted, gpu.drafted) == (plain.accepted, plain.drafted)


def test_a_key_layer_hook_that_never_fires_is_counted(caplog, monkeypatch):
    """A compiled model runs its layers inside the graph, so the key layer's hook never fires
    and the key reads the model's output instead: counted, and said once."""
    import sys
    import types
    from oilbird.serving.vllm import _Capture

    class Meta:
        query_start_loc = torch.tensor([0, 3])
    context = types.ModuleType("vllm.forward_context")       # vLLM's, as the hook reads it
    context.get_forward_context = lambda: types.SimpleNamespace(attn_metadata={"layer.0": Meta()})
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.forward_context", context)
    p = _proposer()
    cap = _Capture(p)
    cap.layer_hooked = True
    out = torch.randn(3, DIM)
    with caplog.at_level("WARNING"):
        cap.on_model(None, (), out)
        cap.on_model(None, (), out)
    assert p.stats()["key_layer_missed"] == 2 and p.stats()["hook_errors"] == 0
    assert cap.last is not None and torch.equal(cap.last.hidden, out)
    assert sum("hook did not fire" in r.message for r in caplog.records) == 1
    cap.on_layer(None, (), out * 2)               # eager: the hook fired, nothing counted
    cap.on_model(None, (), out)
    assert p.stats()["key_layer_missed"] == 2 and torch.equal(cap.last.hidden, out * 2)


def test_a_key_layer_past_the_model_is_refused_when_the_engine_hooks_it(monkeypatch):
    """state_layer is checked against the model's layer count where vLLM hands the model over:
    one line naming the range, not a key silently read from the last layer."""
    import types
    from oilbird.serving.vllm import OilbirdProposer
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"state_layer": 5}')
    hf = types.SimpleNamespace(num_hidden_layers=2, hidden_size=DIM, vocab_size=VOCAB)
    cfg = types.SimpleNamespace(speculative_config=types.SimpleNamespace(num_speculative_tokens=K),
                                model_config=types.SimpleNamespace(hf_text_config=hf, hf_config=hf, max_model_len=64))
    model = torch.nn.Module()
    model.model = types.SimpleNamespace(layers=[torch.nn.Identity(), torch.nn.Identity()])
    with pytest.raises(ValueError, match=r"state_layer 5 is past this model's 2 decoder layers \(1\.\.2"):
        OilbirdProposer(cfg).load_model(model)
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"state_layer": 2}')
    prop = OilbirdProposer(cfg)
    prop.load_model(model)
    assert prop.capture.layer_hooked
    # the suffix source's state weighting reads states too: hooked without the semantic key;
    # sources that read none are not
    for sources, hooked in (('["suffix-state", "pld"]', True), ('["suffix", "pld"]', False)):
        monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"sources": %s}' % sources)
        prop = OilbirdProposer(cfg)
        prop.load_model(model)
        assert (prop.capture is not None) == hooked, sources


@pytest.mark.parametrize("room", [0, 2])
def test_drafts_stop_at_the_model_length(room):
    """A proposer that has the answer stored drafts it, but never past max_model_len."""
    n = len(PROMPT) + 1
    p = BatchProposer(DIM, VOCAB, K, max_model_len=n + 1 + room, config=ProposerConfig(sources=("suffix",)))
    eng = FakeEngine(p)
    eng.add(0, PROMPT, TRUTH)
    eng.run(0)
    p.propose([], [], [], None)                  # stored
    ids = np.zeros((1, 16), dtype=np.int64)
    ids[0, :n] = PROMPT + [TRUTH[0]]
    assert p.propose([[TRUTH[0]]], np.array([n]), ids) == [TRUTH[1:1 + room]]


def test_config_from_env_names_a_bad_option(monkeypatch):
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"budget": 12, "sources": ["suffix", "pld"]}')
    c = ProposerConfig.from_env()
    assert c.budget == 12 and c.sources == ("suffix", "pld")
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"budgett": 12}')
    with pytest.raises(ValueError, match="budgett"):
        ProposerConfig.from_env()
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"sources": ["suffix", "eagle"]}')
    with pytest.raises(ValueError, match="eagle"):
        ProposerConfig.from_env().chain_config()
    # a source named twice would fail every slot's drafter at every step: refused up front
    for twice in ('["pld", "pld"]', '["suffix", "suffix-state"]'):
        monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"sources": %s}' % twice)
        with pytest.raises(ValueError, match="twice"):
            ProposerConfig.from_env().chain_config()


# -- end to end, inside vLLM -----------------------------------------------------------------
def _vllm_python() -> str | None:
    from oilbird.serving.serve_bench import vllm_python
    py = vllm_python()
    if not Path(py).is_file():
        return None
    ok = subprocess.run([py, "-c", "import vllm, faiss"], capture_output=True, timeout=300)
    return py if ok.returncode == 0 else None


@pytest.mark.model
def test_vllm_engine_with_oilbird_matches_greedy(tmp_path):
    py = _vllm_python()
    if py is None:
        pytest.skip("no vLLM environment (scripts/setup_vllm_env.sh; $OILBIRD_VLLM_PYTHON)")
    from oilbird.serving.serve_bench import engine_env, prepare
    spec = prepare("builtin", limit=3, max_new_tokens=32, out=tmp_path)
    env = engine_env()
    res = subprocess.run([py, "-m", "oilbird.serving.serve_bench", "--check", str(spec)], env=env,
                         capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = json.loads((tmp_path / "check.json").read_text())
    assert out["outputs_equal"], out
    assert out["accepted_tokens"] > 0 and out["proposer"]["failures"] == 0
    # the engine's step count serve-bench divides by: one token a step without drafts, fewer steps with
    assert out["engine_steps_off"] == out["tokens"] and out["engine_steps_on"] < out["tokens"]
    pr = out["proposer"]      # every state row read was the row vLLM sampled the token from
    assert pr["layout_checked"] > 0 and pr["layout_check_failed"] == 0 and pr["layout_mismatch"] == 0


@pytest.mark.model
def test_the_openai_server_with_oilbird_returns_plain_greedy_outputs(real_lm, tmp_path):
    """`python -m oilbird serve` starts vLLM's OpenAI server with the proposer; its completions of
    three built-in requests, sent as token ids and as chat messages (rendered by vLLM from the
    model folder's chat template, as the project renders them), equal transformers' greedy decoding
    token for token, and drafts were accepted (vLLM's own counter)."""
    import socket
    import sys
    import time
    import urllib.request
    from oilbird.audit import compare, hf_greedy
    from oilbird.data.requests import encode, load_requests
    from oilbird.model import DEFAULT_MODEL
    if _vllm_python() is None:
        pytest.skip("no vLLM environment (scripts/setup_vllm_env.sh; $OILBIRD_VLLM_PYTHON)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    def call(path, body=None):
        req = urllib.request.Request(url + path, json.dumps(body).encode() if body else None,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.read().decode()

    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "oilbird", "serve", "--port", str(port), "--",
                             "--max-model-len", "2048"], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 1200
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the server did not start in 20 minutes"
            try:
                call("/health")
                break
            except OSError:
                time.sleep(2)
        for r in load_requests("builtin", limit=3):
            ids = encode(real_lm.tokenizer, r)
            out = json.loads(call("/v1/completions", {"model": DEFAULT_MODEL, "prompt": ids, "max_tokens": 32,
                                                      "temperature": 0, "return_token_ids": True}))
            want = hf_greedy(real_lm, ids, 32)
            check = compare(want, out["choices"][0]["token_ids"])
            assert check.lossless, f"{r.id}: {check.message()}"
            chat = json.loads(call("/v1/chat/completions", {"model": DEFAULT_MODEL, "messages": r.messages,
                                                            "max_tokens": 32, "temperature": 0,
                                                            "return_token_ids": True}))
            assert chat["prompt_token_ids"] == ids, f"{r.id}: vLLM rendered the chat differently"
            check = compare(want, chat["choices"][0]["token_ids"])
            assert check.lossless, f"{r.id} (chat): {check.message()}"
        accepted = [line for line in call("/metrics").splitlines()
                    if line.startswith("vllm:spec_decode_num_accepted_tokens_total")]
        assert accepted and float(accepted[0].split()[-1]) > 0, accepted
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_serve_is_refused_before_any_server_starts(capsys, monkeypatch):
    """A bad dtype, port, proposer option or vLLM option, or no vLLM environment, is one line
    before vLLM starts."""
    import oilbird.serving.serve as sv
    from oilbird.__main__ import main
    monkeypatch.setattr(sv.os, "execve", lambda *a: pytest.fail("server started"))
    monkeypatch.delenv("OILBIRD_VLLM_CONFIG", raising=False)
    for argv, said in [(["--dtype", "fp8"], "--dtype must be one of"),
                       (["--oilbird-config", '{"budgett": 3}'], "budgett"),
                       (["--oilbird-config", '{"budget": 3}', "--no-spec"], "--no-spec leaves out"),
                       (["--port", "70000"], "--port must be 1-65535"),
                       (["mymodel", "--port", "9000"], "unexpected argument 'mymodel'"),
                       (["--", "--port", "9000"], "--port after -- would override"),
                       (["--", "--speculative-config.num_speculative_tokens", "4"], "use --num-spec-tokens"),
                       (["--", "--dtype=half"], "use --dtype instead")]:
        assert main(["serve", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, (argv, err)
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"budgett": 3}')        # one already in the shell is checked too
    assert main(["serve"]) == 2 and "$OILBIRD_VLLM_CONFIG" in capsys.readouterr().err
    monkeypatch.delenv("OILBIRD_VLLM_CONFIG")
    monkeypatch.setenv("OILBIRD_VLLM_PYTHON", "/nowhere/bin/python")
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "no vLLM environment at /nowhere/bin/python" in err and len(err.strip().splitlines()) == 1


def test_serve_becomes_vllms_server_with_what_it_was_told(tmp_path, capsys, monkeypatch):
    """Past the checks the process becomes vLLM's server (exec: signals and the exit code are its
    own), on the model folder's absolute path, with the proposer, its options and the flags' KV
    cache; arguments after -- follow."""
    import oilbird.serving.serve as sv
    import oilbird.serving.serve_bench as sb
    from oilbird.__main__ import main
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "tokenizer.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sv, "check_python", lambda py: None)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")
    seen = {}
    monkeypatch.setattr(sv.os, "execve", lambda py, cmd, env: seen.update(py=py, cmd=cmd, env=env))
    assert main(["serve", "--model", "my-model", "--port", "9000", "--num-spec-tokens", "4", "--kv-cache-gb", "2",
                 "--oilbird-config", '{"budget": 6}', "--", "--max-num-seqs", "2"]) == 0
    cmd, env = seen["cmd"], seen["env"]
    assert cmd[1:3] == ["-m", sv.SERVER] and cmd[cmd.index("--model") + 1] == str(model.resolve())
    assert cmd[cmd.index("--served-model-name") + 1] == "my-model" and cmd[cmd.index("--port") + 1] == "9000"
    assert "--enforce-eager" in cmd and cmd[-2:] == ["--max-num-seqs", "2"]
    spec = json.loads(cmd[cmd.index("--speculative-config") + 1])
    assert spec == {"method": "custom_class", "model": sb.PROPOSER, "num_speculative_tokens": 4}
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and json.loads(env["OILBIRD_VLLM_CONFIG"]) == {"budget": 6}
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(sb.ROOT)
    assert "VLLM_ALLOW_INSECURE_SERIALIZATION" not in env or os.environ.get("VLLM_ALLOW_INSECURE_SERIALIZATION")
    assert "http://127.0.0.1:9000/health" in capsys.readouterr().err
    assert main(["serve", "--model", "my-model", "--no-spec", "--compile", "--host", "0.0.0.0",
                 "--served-model-name", "m"]) == 0
    cmd = seen["cmd"]
    assert "--speculative-config" not in cmd and "--enforce-eager" not in cmd and "m" in cmd
    assert seen["env"]["VLLM_CPU_KVCACHE_SPACE"] == "7"            # no flag: the shell's stays
    assert "http://localhost:8000/health" in capsys.readouterr().err
    assert sv.served_name(None) == "SmolLM2-135M-Instruct" and sv.served_name("/x/tiny.gguf") == "tiny"


def test_summary_flags_a_differing_output_and_computes_speedups(tmp_path, capsys):
    from oilbird.serving.serve_bench import check_methods, format_serve_table, summarize

    def run(tps, outputs, spec=None, proposer=None, steps=None):
        return {"passes": {"1": {"outputs": outputs, "seconds": 1.0, "tokens": 6, "tokens_per_s": tps,
                                 "spec": spec, "proposer": proposer, "engine_steps": steps}},
                "load_before": [1.0], "load_after": [1.0]}
    same = {"a": [1, 2, 3], "b": [4, 5, 6]}
    # oilbird: 4 engine steps for 6 tokens, though vLLM counted 3 accepted drafts (6 - 3 = 3 steps
    # by the estimate: one draft was accepted past a request's end); ngram: a run without the count
    runs = {"nospec": run(10.0, same, steps=6),
            "ngram": run(12.0, same, {"drafts": 4, "draft_tokens": 8, "accepted_tokens": 2, "accepted_per_pos": [2, 0]}),
            "oilbird": run(15.0, {"a": [1, 2, 3], "b": [4, 5, 7]},
                           {"drafts": 2, "draft_tokens": 4, "accepted_tokens": 3, "accepted_per_pos": [2, 1]},
                           {"failures": 1, "draft_share_of_step": 0.02, "draft_ms_per_step": 1.5}, steps=4)}
    res = summarize(runs, {"model": "m", "data": "builtin", "prompts": [1, 2], "max_new_tokens": 3}, k=2)
    rows = res["batch_sizes"]["1"]
    assert rows["ngram"]["speedup"] == pytest.approx(1.2) and rows["ngram"]["lossless"]
    assert rows["ngram"]["mean_acceptance_length"] == pytest.approx(1.5)
    assert not rows["oilbird"]["lossless"] and rows["oilbird"]["differing_requests"] == ["b"]
    assert rows["oilbird"]["proposer_failures"] == 1 and not res["lossless"]
    assert rows["oilbird"]["tokens_per_step"] == pytest.approx(1.5) and rows["oilbird"]["engine_steps"] == 4
    assert rows["oilbird"]["tokens_per_step_est"] == pytest.approx(2.0)
    assert rows["nospec"]["tokens_per_step"] == pytest.approx(1.0)
    assert rows["ngram"]["tokens_per_step"] == pytest.approx(1.5)      # no count kept: the estimate, 6 / 4
    assert not rows["ngram"]["steps_counted"] and "| 1 | ngram | 12.00 | 1.20x | 1.50 (est.) | 1.50 |" in \
        format_serve_table(res)
    assert "| 1 | oilbird | 15.00 | 1.50x | 1.50 | 2.00 | 2.50 | 3 / 4 | 2.0 | 1 | NO |" in format_serve_table(res)
    # what was served, above the table (the model and data by name: no path of this machine)
    assert format_serve_table({**res, "model": "/x/cache/SmolLM2", "data": "/y/builtin"}).startswith(
        "SmolLM2 serving its own outputs of --data builtin: 2 requests, up to 3 new tokens, 2 speculative tokens")
    assert check_methods("oilbird,ngram") == ["nospec", "oilbird", "ngram"]
    with pytest.raises(ValueError, match="eagle"):
        check_methods("ngram,eagle")
    # report reads a serve-bench results.json (it said "not a bench results.json") and prints its table
    import json

    from oilbird.evaluation.report import main as report
    (tmp_path / "results.json").write_text(json.dumps(res))
    assert report([str(tmp_path)]) == 0 and format_serve_table(res) in capsys.readouterr().out
    del res["batch_sizes"]["1"]["oilbird"]["speedup"]
    (tmp_path / "results.json").write_text(json.dumps(res))
    assert report([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "a serve-bench results.json whose table cannot be read" in err and len(err.strip().splitlines()) == 1


def test_sampled_serve_bench_reports_acceptance_and_speed_never_lossless():
    """--temperature reaches vLLM's SamplingParams; a sampled run's outputs differ by nature, so
    no row is called lossless or not: acceptance and speed only (no vLLM needed here)."""
    from oilbird.serving.serve_bench import check_temperature, format_serve_table, sampling_kwargs, summarize
    assert sampling_kwargs(16) == {"temperature": 0.0, "max_tokens": 16, "ignore_eos": False}
    assert sampling_kwargs(16, 0.7) == {"temperature": 0.7, "max_tokens": 16, "ignore_eos": False, "seed": 0}

    def run(outputs, spec=None):
        return {"passes": {"1": {"outputs": outputs, "seconds": 1.0, "tokens": 6, "tokens_per_s": 10.0,
                                 "spec": spec, "proposer": None}}, "load_before": [1.0], "load_after": [1.0]}
    runs = {"nospec": run({"a": [1, 2, 3]}),
            "ngram": run({"a": [1, 9, 3]}, {"drafts": 2, "draft_tokens": 4, "accepted_tokens": 2})}
    res = summarize(runs, {"model": "m", "data": "builtin", "prompts": [1], "max_new_tokens": 3}, k=2, temperature=0.7)
    assert res["lossless"] is None and res["batch_sizes"]["1"]["ngram"]["lossless"] is None
    assert res["batch_sizes"]["1"]["ngram"]["mean_acceptance_length"] == pytest.approx(2.0)
    table = format_serve_table(res)
    assert "| sampled |" in table and "| NO |" not in table and "rejection sampler" in table
    for bad in (-1, "warm", float("inf"), "inf", float("nan")):
        with pytest.raises(ValueError, match="--temperature"):
            check_temperature(bad)


def test_serve_bench_refuses_a_bad_temperature_before_any_engine(capsys, monkeypatch):
    import oilbird.serving.serve_bench as sb
    from oilbird.__main__ import main
    monkeypatch.setattr(sb, "run_serve_bench", lambda *a, **k: pytest.fail("engine started"))
    assert main(["serve-bench", "--temperature", "-0.5"]) == 2
    err = capsys.readouterr().err
    assert "--temperature must be a number >= 0" in err and len(err.strip().splitlines()) == 1


def test_engine_settings_reach_vllm_and_the_table(capsys, monkeypatch, tmp_path):
    """serve-bench's engines run float32, eager, without prefix caching unless told otherwise;
    --dtype / --prefix-caching / --compile reach vLLM's arguments and the table says them."""
    import oilbird.serving.serve_bench as sb
    from oilbird.__main__ import main
    spec = {"model": "m", "max_new_tokens": 8, "prompts": [{"ids": [1, 2, 3]}, {"ids": [1] * 10}]}
    kw = sb.engine_kwargs(spec, {"method": "oilbird", "k": 4, "batch_sizes": [1, 8]})
    assert (kw["dtype"], kw["enforce_eager"], kw["enable_prefix_caching"]) == ("float32", True, False)
    assert kw["max_num_seqs"] == 8 and kw["max_model_len"] == 10 + 8 + 4 + 16
    assert kw["speculative_config"] == {"method": "custom_class", "model": sb.PROPOSER, "num_speculative_tokens": 4}
    kw = sb.engine_kwargs(spec, {"method": "nospec", "k": 4, "batch_sizes": [1], "dtype": "bfloat16",
                                 "prefix_caching": True, "compile": True})
    assert (kw["dtype"], kw["enforce_eager"], kw["enable_prefix_caching"]) == ("bfloat16", False, True)
    assert "speculative_config" not in kw

    seen = {}
    monkeypatch.setattr(sb, "run_serve_bench", lambda *a, **k: seen.update(k) or {
        "batch_sizes": {}, "lossless": True,
        "engine": {"nospec": {"dtype": "bfloat16", "prefix_caching": True, "compile": False}}})
    assert main(["serve-bench", "--dtype", "bfloat16", "--prefix-caching", "--out", str(tmp_path / "sb")]) == 0
    assert (seen["dtype"], seen["prefix_caching"], seen["compile"]) == ("bfloat16", True, False)
    assert "engines: bfloat16, eager, prefix caching on" in capsys.readouterr().out
    # a run written before the settings were options still reads
    assert sb.engine_settings({"enforce_eager": True, "dtype": "float32", "prefix_caching": False}) == \
        "float32, eager, prefix caching off"
    monkeypatch.setattr(sb, "run_serve_bench", lambda *a, **k: pytest.fail("engine started"))
    assert main(["serve-bench", "--dtype", "fp8"]) == 2
    err = capsys.readouterr().err
    assert "--dtype must be one of" in err and len(err.strip().splitlines()) == 1


def test_serve_bench_by_default_leaves_out_suffix_where_vllm_cannot_run_it(capsys, monkeypatch, tmp_path):
    """arctic-inference is optional in the vLLM environment (a C++ build): the documented first
    run, with no --methods, stopped on 'suffix'. Left out with a note where it is missing; named
    explicitly, it is still refused before any engine."""
    import oilbird.serving.serve_bench as sb
    from oilbird.__main__ import main
    monkeypatch.setattr(sb, "has_arctic", lambda py: False)
    seen = {}
    monkeypatch.setattr(sb, "run_serve_bench", lambda data, methods, *a, **k: seen.update(methods=methods) or {
        "batch_sizes": {}, "lossless": True, "engine": {}})
    assert main(["serve-bench", "--out", str(tmp_path / "a")]) == 0
    assert seen["methods"] == ["nospec", "ngram", "oilbird"]
    assert "note: suffix left out: the vLLM environment has no arctic-inference" in capsys.readouterr().out
    import json
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert saved["note"].startswith("suffix left out")          # so report of the file says it too
    monkeypatch.setattr(sb, "has_arctic", lambda py: True)
    assert main(["serve-bench", "--out", str(tmp_path / "b")]) == 0 and seen["methods"] == list(sb.METHODS)
    assert "left out" not in capsys.readouterr().out
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sb, "has_arctic", lambda py: False)
    with pytest.raises(sb.ServeBenchError, match="method 'suffix' needs arctic-inference"):
        sb.check_python(str(fake), ["suffix"])


def test_the_engines_environment_gives_the_flags_precedence_and_checks_the_shells_config(monkeypatch):
    """--kv-cache-gb and --oilbird-config (even '{}') win over the shell's variables; without
    them the shell's stay (else 1 GB), and a bad proposer config in the shell is refused before
    any engine starts, unless no engine runs the proposer."""
    from oilbird.serving.serve_bench import engine_env
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"budget": 9}')
    assert engine_env(2)["VLLM_CPU_KVCACHE_SPACE"] == "2" and engine_env()["VLLM_CPU_KVCACHE_SPACE"] == "7"
    assert json.loads(engine_env(None, {})["OILBIRD_VLLM_CONFIG"]) == {}
    assert json.loads(engine_env()["OILBIRD_VLLM_CONFIG"]) == {"budget": 9}
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE")
    assert engine_env()["VLLM_CPU_KVCACHE_SPACE"] == "1"
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"budgett": 9}')
    with pytest.raises(ValueError, match=r"\$OILBIRD_VLLM_CONFIG.*budgett"):
        engine_env()
    assert engine_env(proposer=False)["OILBIRD_VLLM_CONFIG"] == '{"budgett": 9}'


def test_serve_bench_refuses_a_bad_shell_config_before_any_engine(capsys, monkeypatch, tmp_path):
    import oilbird.serving.serve_bench as sb
    from oilbird.__main__ import main
    monkeypatch.setattr(sb, "check_python", lambda *a: pytest.fail("engine started"))
    monkeypatch.setenv("OILBIRD_VLLM_CONFIG", '{"budgett": 9}')
    assert main(["serve-bench", "--out", str(tmp_path / "sb")]) == 2
    err = capsys.readouterr().err
    assert "budgett" in err and len(err.strip().splitlines()) == 1


def test_an_engine_runs_with_this_checkout_on_its_path():
    """The engine process imports oilbird from this checkout (PYTHONPATH's first entry holds the
    package), whatever the vLLM environment has installed."""
    import os
    from oilbird.serving.serve_bench import ROOT, engine_env
    first = engine_env()["PYTHONPATH"].split(os.pathsep)[0]
    assert Path(first) == ROOT and (ROOT / "oilbird" / "serving" / "serve_bench.py").is_file()


def test_serve_bench_results_are_written_as_a_run_and_force_replaces_the_earlier_one(capsys, monkeypatch, tmp_path):
    """results.json is written atomically by the command's Run, after every engine: an earlier
    run's results are refused without --force and, with it, replaced together with what was made
    from them (its CSV, figures)."""
    import oilbird.serving.serve_bench as sb
    from oilbird.__main__ import main
    out = tmp_path / "sb"
    out.mkdir()
    (out / "results.json").write_text('{"old": true}')
    (out / "results.csv").write_text("old\n")
    fake = {"batch_sizes": {}, "lossless": True, "engine": {}}
    monkeypatch.setattr(sb, "run_serve_bench", lambda *a, **k: pytest.fail("engine started"))
    assert main(["serve-bench", "--out", str(out)]) == 2
    assert "pass --force" in capsys.readouterr().err and json.loads((out / "results.json").read_text()) == {"old": True}
    monkeypatch.setattr(sb, "run_serve_bench", lambda *a, **k: fake)
    assert main(["serve-bench", "--out", str(out), "--force"]) == 0
    assert json.loads((out / "results.json").read_text()) == fake and not (out / "results.csv").exists()


def test_an_engine_that_writes_nothing_is_never_read_from_an_earlier_runs_file(monkeypatch, tmp_path):
    """Each engine's raw output is removed before it starts: an engine that exits 0 without
    writing fails the bench instead of reporting the earlier run's numbers."""
    import oilbird.serving.serve_bench as sb
    out = tmp_path / "sb"
    out.mkdir()
    (out / "engine-nospec.json").write_text('{"stale": true}')
    (out / "spec.json").write_text(json.dumps({"prompts": []}))
    monkeypatch.setattr(sb, "check_python", lambda *a: None)
    monkeypatch.setattr(sb, "prepare", lambda *a: out / "spec.json")
    monkeypatch.setattr(sb.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0))
    with pytest.raises(sb.ServeBenchError, match="the nospec engine failed"):
        sb.run_serve_bench(methods=["nospec"], out=out, python="python")
    assert not (out / "engine-nospec.json").exists()
