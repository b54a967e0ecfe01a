"""The bench under sampling (``--temperature > 0``): runners and the sampled audit.

The tree rule (:mod:`oilbird.sampling`) takes one draw per committed token, the one plain
sampling takes at that position, so a sampled request's output is a function of the model, the
seed and the request id: every method, whatever its drafts and store, must commit token for
token what plain sampling commits. That is the audit (``results.json``: ``sampling.checked``;
per method ``lossless`` true or false, as for greedy, and ``valid``):

* **lossless**: every output equal, token for token, to an independent plain-sampling run of
  the same request with the same seed (:func:`oilbird.sampled.sampled_autoregressive`, one
  forward per token with the KV cache; not the timed runner);
* **valid tokens**, on every request: ids inside the vocabulary, no end-of-sequence before the
  end, and the output ends with end-of-sequence or at ``max_new_tokens``
  (:func:`oilbird.sampled.check_sampled_output`).

That the rule is lossless in distribution (each committed token drawn from the model's p) is
proven by tests/test_sampling.py.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Callable

from ..audit import explain, record_audit
from ..decoding import DecodeResult
from ..methods import Method, TreeConfig
from ..sampled import Sampled, check_sampled_output, sampled_autoregressive
from ..sampling import SamplingParams
from ..verifier import Verifier

CHECKED = ("every output equal token for token to plain sampling of the same request with the same seed "
           "(one draw per token, so the drafts cannot change it; a near tie in rounding can, as in greedy's "
           "audit), and valid tokens on every request")


def check_sampled_methods(methods: list[Method]) -> None:
    """Refuse (one line) the methods that cannot sample: they run transformers' greedy generate."""
    for m in methods:
        if m.base in ("hf-greedy", "hf-pld"):
            raise ValueError(f"'{m.name}' runs transformers' greedy generate and cannot sample; with "
                             f"--temperature > 0 choose from ar, suffix-arctic and the presets")


def sampled_runner(m: Method, verifier: Verifier, max_new: int, keep_traces: bool, tree: TreeConfig | None,
                   store_kwargs: dict | None, params: SamplingParams) -> Callable:
    """A function (request, ids) -> DecodeResult that samples with ``params``, each request
    with its own generator (seed, request id)."""
    if m.base == "ar":
        return lambda req, ids: sampled_autoregressive(verifier, ids, max_new, params, req.id)
    check_sampled_methods([m])
    from ..presets import make_decoder
    dec = make_decoder(m, verifier, trace=keep_traces, tree=tree, store_kwargs=store_kwargs)

    def run(req, ids):
        t = time.perf_counter()
        tr = dec.run(req.id, ids, max_new, judge=Sampled(params, req.id))
        secs = time.perf_counter() - t
        return DecodeResult(tr.output_ids, tr.forwards, secs, tr.cycles[0].timings.get("verify", 0.0), tr)
    return run


class SampledChecks:
    """The sampled audit (module doc), per method, request after request."""

    def __init__(self, names: list[str], verifier: Verifier, max_new: int, params: SamplingParams):
        self.names, self.verifier, self.max_new, self.params = names, verifier, max_new, params
        self.valid = {n: True for n in names}
        self.failure: dict[str, str] = {}

    def request(self, req, ids, outputs: dict[str, list[int]], stats: dict, req_traces=()) -> None:
        lm = self.verifier.lm
        vocab, eos = int(lm.model.config.vocab_size), lm.eos_token_ids
        for n in self.names:
            why = check_sampled_output(outputs[n], vocab, eos, self.max_new)
            stats[n].per_request[-1]["valid"] = why is None
            if why is not None:
                self.valid[n] = False
                self.failure.setdefault(n, f"{req.id}: {why}")
        ref = sampled_autoregressive(self.verifier, ids, self.max_new, self.params, req.id).output_ids
        record_audit(ref, req, self.names, outputs, stats, req_traces, "plain sampling with the same seed",
                     lambda res: explain(lm, ids, res, self.params, req.id))

    def annotate(self, results: dict) -> dict:
        """Put the checks into a results dict: ``valid`` per method, first failures, the settings."""
        for n, r in results["methods"].items():
            r["valid"] = self.valid[n]
            if n in self.failure and "first_failure" not in r:
                r["first_failure"] = self.failure[n]
        results["sampling"] = {**asdict(self.params), "checked": CHECKED}
        return results
