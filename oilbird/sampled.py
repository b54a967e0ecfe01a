"""Sampled decoding (temperature > 0): the sampling judge of the tree cycle and the sampled AR baseline.

What it knows: how to run one cycle's verdict under sampling. The tree is verified by the same
single forward as greedy, with the nodes' logits kept; :func:`oilbird.sampling.target_probs`
turns them into the request's target distributions and :func:`oilbird.sampling.sample_tree`
decides the tree. What it does not know: drafting, the store, the trace format (the decoder
fills those from the verdict).

Greedy (temperature 0) never comes here: :class:`oilbird.decoding.Greedy` stays the default
judge and the plain AR loop stays :func:`oilbird.decoding.autoregressive`, so greedy's cost and
outputs are unchanged.

Randomness and the audit: one numpy Generator per request, seeded by (seed, request id)
(:func:`oilbird.sampling.request_rng`), and one draw per committed token, the same draw plain
sampling makes at that position. So a request's sampled output is a function of the model, the
seed and the request id: every drafter, from any store state, commits token for token what
:func:`sampled_autoregressive` commits with the same seed (up to near ties in rounding, as for
greedy: the tree forward rounds logits unlike a one-token forward), and that is what the bench audits
(:mod:`oilbird.evaluation.sampled_bench`). :func:`check_sampled_output` says what any sampled
output must be (valid ids, no early end-of-sequence).
"""
from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np

from .decoding import DecodeResult, _finish, check_prompt, outputs_verdict
from .sampling import (SamplingParams, decisions_per_node, request_rng, sample_from,  # noqa: F401
                       sample_tree, target_probs)
from .tree import DraftTree
from .verdict import TreeVerdict
from .verifier import Verifier


class _LazyProbs:
    """``probs[i]``: node i's target distribution, computed only for the nodes the rule visits."""

    def __init__(self, logits, params: SamplingParams):
        self.logits, self.params, self.memo = logits, params, {}

    def __getitem__(self, i: int) -> np.ndarray:
        if i not in self.memo:
            self.memo[i] = target_probs(self.logits[i], self.params.temperature, self.params.top_p)
        return self.memo[i]


class Sampled:
    """The sampling judge (see :class:`oilbird.decoding.Greedy` for what every judge answers).
    ``rng``: the request's generator (default: :func:`request_rng` of ``request_id``)."""
    runs_model = True

    def __init__(self, params: SamplingParams, request_id: str = "", rng: np.random.Generator | None = None):
        if params.greedy:
            raise ValueError("temperature 0 is greedy: use the Greedy judge (the default)")
        self.params = params
        self.rng = rng if rng is not None else request_rng(params, request_id)

    def limit(self, max_new_tokens: int) -> int:
        return max_new_tokens

    def meta(self) -> dict:
        return {"sampling": asdict(self.params)}

    def start(self, v: Verifier, ids: list[int], cache):
        cache, pre = v.prefill(ids, cache, keep_logits=True)
        p = target_probs(pre.logits[-1], self.params.temperature, self.params.top_p)
        return cache, sample_from(p, self.rng), pre.states[-1].numpy()

    def verdict(self, v: Verifier, cache, prefix_len: int, tree: DraftTree, before: int) -> TreeVerdict:
        res = v.verify(cache, prefix_len, tree, keep_logits=True)   # the same one forward as greedy
        sv = sample_tree(tree.tokens, tree.parents, _LazyProbs(res.logits, self.params), self.rng)
        Verifier.commit(cache, prefix_len, sv.accepted)
        # what each node's child had to be: on the accepted path, the token committed after it;
        # elsewhere the argmax (the acceptance rates' proxy; nothing else reads it)
        targets = res.argmax.tolist()
        nxt = [tree.tokens[i] for i in sv.accepted[1:]] + [sv.bonus]
        for node, t in zip(sv.accepted, nxt):
            targets[node] = int(t)
        verdict = outputs_verdict(sv.accepted, sv.bonus, targets, res)
        verdict.decisions = [asdict(t) for t in sv.tried]
        return verdict


def sampled_autoregressive(verifier: Verifier, ids: list[int], max_new_tokens: int, params: SamplingParams,
                           request_id: str = "", rng: np.random.Generator | None = None) -> DecodeResult:
    """Plain sampling with the KV cache: one forward per token, each token drawn from the
    request's target distribution (the sampled ``ar`` baseline)."""
    check_prompt(verifier.lm, ids, max_new_tokens)
    rng = rng if rng is not None else request_rng(params, request_id)
    eos = verifier.lm.eos_token_ids
    t0 = time.perf_counter()
    cache, out = verifier.prefill(ids, keep_logits=True)
    t_prefill = time.perf_counter() - t0
    tokens: list[int] = []
    forwards = 1
    nxt = sample_from(target_probs(out.logits[-1], params.temperature, params.top_p), rng)
    _, done = _finish(tokens, [nxt], eos, max_new_tokens)
    while not done:
        logits = verifier.step_logits(cache, tokens[-1])
        forwards += 1
        nxt = sample_from(target_probs(logits, params.temperature, params.top_p), rng)
        _, done = _finish(tokens, [nxt], eos, max_new_tokens)
    return DecodeResult(tokens, forwards, time.perf_counter() - t0, t_prefill)


def check_sampled_output(tokens: list[int], vocab_size: int, eos: set[int], max_new_tokens: int) -> str | None:
    """What a sampled output must be, whatever the draws: ids inside the vocabulary, no EOS before
    the end, and it ends with EOS or at ``max_new_tokens``. None when valid, else why not."""
    if not tokens:
        return "empty output"
    bad = [t for t in tokens if not 0 <= int(t) < vocab_size]
    if bad:
        return f"token id {bad[0]} outside the vocabulary of {vocab_size}"
    early = [i for i, t in enumerate(tokens[:-1]) if t in eos]
    if early:
        return f"end-of-sequence at position {early[0]} before the end"
    if len(tokens) > max_new_tokens:
        return f"{len(tokens)} tokens, more than max_new_tokens={max_new_tokens}"
    if tokens[-1] not in eos and len(tokens) != max_new_tokens:
        return f"stopped after {len(tokens)} tokens without end-of-sequence"
    return None
