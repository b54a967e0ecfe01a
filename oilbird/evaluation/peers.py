"""Peers: implementations we did not write, run in the same bench run as ours.

* ``hf-pld`` — Hugging Face's own prompt lookup decoding: ``model.generate(do_sample=False,
  prompt_lookup_num_tokens=10, max_matching_ngram_size=3)`` (Saxena 2023's settings), with
  the same EOS / pad arguments as the audit's plain greedy run. Timed like ``hf-greedy``:
  wall clock around ``generate``. ``forwards`` counts the calls of the target model's
  ``forward`` during that ``generate`` (a forward pre-hook; prefill included, nothing else
  runs the model: prompt lookup drafts from the token ids alone), so tau is comparable with
  ours. ``prefill_seconds`` is the duration of the first such call.
* ``suffix-arctic`` — the published SuffixDecoding (``arctic-inference``'s
  ``SuffixDecodingCache``) as a draft source (:mod:`oilbird.sources.arctic`) inside our
  :class:`~oilbird.decoding.SpeculativeDecoder`, at the same node budget as the presets, fed the
  same cross-request history (every earlier request's response, plus this request's prompt and
  response), and audited like every other method (built by :func:`oilbird.presets.make_decoder`). Needs the optional
  ``requirements-peers.txt``; without it, asking for this peer raises one clear error.

The names are registered in :mod:`oilbird.methods`; :mod:`oilbird.evaluation.bench` runs them.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from ..decoding import DecodeResult
from ..verifier import Verifier

HF_PLD_NUM_TOKENS = 10     # prompt_lookup_num_tokens
HF_PLD_MAX_NGRAM = 3       # max_matching_ngram_size


class ForwardCounter:
    """Counts (and times the first of) a module's forward calls while active::

        with ForwardCounter(model) as fc:
            model.generate(...)
        fc.calls, fc.first_seconds
    """

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self.calls = 0
        self.first_seconds = 0.0
        self._t = None
        self._handles = []

    def _pre(self, *_args, **_kw):
        self.calls += 1
        if self.calls == 1:
            self._t = time.perf_counter()

    def _post(self, *_args, **_kw):
        if self._t is not None:
            self.first_seconds = time.perf_counter() - self._t
            self._t = None

    def __enter__(self) -> "ForwardCounter":
        self._handles = [self.module.register_forward_pre_hook(self._pre, with_kwargs=True),
                         self.module.register_forward_hook(self._post, with_kwargs=True)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


@torch.inference_mode()
def hf_prompt_lookup(lm, ids: list[int], max_new_tokens: int) -> tuple[list[int], int, float]:
    """HF ``generate`` with prompt lookup; returns (new tokens, target forwards, prefill seconds)."""
    x = torch.tensor([ids], device=lm.device)
    with ForwardCounter(lm.model) as fc:
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                                do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None,
                                prompt_lookup_num_tokens=HF_PLD_NUM_TOKENS,
                                max_matching_ngram_size=HF_PLD_MAX_NGRAM,
                                eos_token_id=sorted(lm.eos_token_ids) or None,
                                pad_token_id=lm.model.generation_config.pad_token_id)
    return out[0, len(ids):].tolist(), fc.calls, fc.first_seconds


def hf_pld_runner(verifier: Verifier, max_new: int) -> Callable:
    """The ``hf-pld`` runner, (request, ids) -> :class:`~oilbird.decoding.DecodeResult`: HF
    drafts 10 tokens as a chain, with no node budget and no trace."""
    lm = verifier.lm

    def run(req, ids):
        t = time.perf_counter()
        toks, fwd, pre = hf_prompt_lookup(lm, ids, max_new)
        return DecodeResult(toks, fwd, time.perf_counter() - t, pre)
    return run
