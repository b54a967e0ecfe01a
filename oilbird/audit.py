"""Lossless audit: compare a decoder's output with an independent plain greedy run.

The reference is Hugging Face ``model.generate(do_sample=False)`` with the linear layers on
torch's stock kernels (the oneDNN linears of :mod:`oilbird.cpu_gemm` switched off): none of this
project's decoding code runs in it, so agreement is evidence, not a tautology. (Its attention
is transformers' own SDPA path, under the ``TRANSFORMERS_SDPA_FORCE_GQA`` switch that
``load_model`` sets on CPU.)
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from .cpu_gemm import stock_linears
from .model import LoadedModel


@dataclass
class AuditResult:
    lossless: bool
    first_diff: int | None     # first differing position, None when equal
    expected: list[int]
    got: list[int]

    def message(self, reference: str = "greedy") -> str:
        if self.lossless:
            return f"lossless: {len(self.got)} tokens equal {reference}"
        i = self.first_diff
        return (f"NOT lossless at position {i}: expected {self.expected[i:i + 3]} "
                f"got {self.got[i:i + 3]} (len {len(self.expected)} vs {len(self.got)})")


@torch.inference_mode()
def hf_greedy(lm: LoadedModel, ids: list[int], max_new_tokens: int, stock: bool = True) -> list[int]:
    """Plain greedy decoding by ``transformers``' own ``generate``.

    ``stock`` (the audit reference) runs it on stock linear kernels; ``stock=False`` on the
    kernels the decoders use (the timed ``hf-greedy`` peer of a bench).
    """
    x = torch.tensor([ids], device=lm.device)
    with stock_linears(lm.model) if stock else contextlib.nullcontext():
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                            do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None,
                            eos_token_id=sorted(lm.eos_token_ids) or None,
                            pad_token_id=lm.model.generation_config.pad_token_id)
    return out[0, len(ids):].tolist()


def compare(expected: list[int], got: list[int]) -> AuditResult:
    """Token-for-token comparison; reports the first differing position."""
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return AuditResult(False, i, expected, got)
    if len(expected) != len(got):
        return AuditResult(False, min(len(expected), len(got)), expected, got)
    return AuditResult(True, None, expected, got)


def audit(lm: LoadedModel, ids: list[int], got: list[int], max_new_tokens: int,
          reference: list[int] | None = None) -> AuditResult:
    """Compare ``got`` with greedy decoding of ``ids`` (computed unless ``reference`` is given)."""
    ref = reference if reference is not None else hf_greedy(lm, ids, max_new_tokens)
    return compare(ref, got)


def record_audit(ref: list[int], req, names, outputs, stats, req_traces, against: str = "") -> None:
    """Every method's output of ``req`` compared with the reference output ``ref``: per request
    and per method in ``stats`` (the first failure kept, ``against`` appended to it), and on
    each of the request's traces."""
    verdicts = {name: compare(ref, outputs[name]) for name in names}
    for name, res in verdicts.items():
        stats[name].per_request[-1]["lossless"] = res.lossless
        if not res.lossless:
            stats[name].lossless = False
            stats[name].first_failure = stats[name].first_failure or f"{req.id}: {res.message()}{against}"
    for tr in req_traces:
        tr.lossless = verdicts[tr.method].lossless if tr.method in verdicts else compare(ref, tr.output_ids).lossless
