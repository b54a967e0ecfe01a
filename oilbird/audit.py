"""Lossless audit: compare a decoder's output with an independent plain greedy run.

The reference is Hugging Face ``model.generate(do_sample=False)`` with the linear layers on
torch's stock kernels (the oneDNN linears of :mod:`oilbird.cpu_gemm` switched off): none of this
project's decoding code runs in it, so agreement is evidence, not a tautology. (Its attention
is transformers' own SDPA path, under the ``TRANSFORMERS_SDPA_FORCE_GQA`` switch that
``load_model`` sets on CPU.)

Outputs may differ at a near tie: a tree forward rounds logits unlike a one-token forward. A
failed audit says how near (:func:`explain`): by how much the reference preferred its token
over ours where they first differ, so a rounding flip reads apart from a bug.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from .cpu_gemm import stock_linears
from .model import LoadedModel

# below this margin (logits, or the race's log scores) two forwards' rounding can flip a choice:
# float32 rounds a logit of ~20 to ~1e-6 and sums of hundreds of terms drift to ~1e-4; bfloat16
# keeps 8 bits of mantissa (~0.1 at 20)
NEAR_TIE = {torch.float32: 1e-2, torch.float16: 0.1, torch.bfloat16: 0.5}


@dataclass
class AuditResult:
    lossless: bool
    first_diff: int | None     # first differing position, None when equal
    expected: list[int]
    got: list[int]
    margin: float | None = None     # how much the reference preferred its token there (:func:`explain`)
    near_tie: float | None = None   # the margin below which rounding can flip it, for the model's dtype
    unit: str = "logits"

    def message(self, reference: str = "greedy") -> str:
        if self.lossless:
            return f"lossless: {len(self.got)} tokens equal {reference}"
        i = self.first_diff
        said = (f"NOT lossless at position {i}: expected {self.expected[i:i + 3]} "
                f"got {self.got[i:i + 3]} (len {len(self.expected)} vs {len(self.got)})")
        if self.margin is None:
            return said
        m, tie = self.margin, self.near_tie
        if abs(m) < tie:
            why = f"a near tie (within {tie:g}): two forwards' rounding can flip it"
        elif m < 0:
            why = ("the reference's own forward prefers ours there: the reference does not reproduce itself "
                   "(another kernel or cache path)")
        else:
            why = "not a rounding near tie"
        return f"{said}; there {reference} preferred its token by {m:.3g} {self.unit}: {why}"


@torch.inference_mode()
def explain(lm: LoadedModel, ids: list[int], res: AuditResult, params=None, request_id: str = "") -> AuditResult:
    """``res`` with the reference's margin at the first difference filled in (unchanged when
    lossless, where one output ended early, or where ours or the prompt is no text of the model:
    an explanation never turns a failure's report into a crash): the
    reference's score of its own token minus that of ours, from one more forward over the prompt
    and the reference's tokens before the difference (stock kernels), in logits. Greedy: the
    logits' difference. Sampling (``params``, the request's id): the race's, ``z - T log E`` with
    the draw plain sampling made at that position (:mod:`oilbird.sampling`; top-p left aside, so
    a token it cut is weighed too), which is > 0 when the reference reproduces itself. Either way
    a margin within :data:`NEAR_TIE` of 0, for the model's dtype, is one that rounding can flip."""
    i = res.first_diff
    if res.lossless or i is None or not 0 <= i < min(len(res.expected), len(res.got)) or not ids:
        return res
    want, ours = int(res.expected[i]), int(res.got[i])
    x = torch.tensor([list(ids) + list(res.expected[:i])], dtype=torch.long, device=lm.device)
    try:
        with stock_linears(lm.model):
            z = lm.model(input_ids=x).logits[0, -1].double().cpu().numpy()
    except (IndexError, RuntimeError, ValueError):     # ids the model cannot read: the report stands unexplained
        return res
    if not (0 <= want < len(z) and 0 <= ours < len(z)):
        return res
    res.near_tie = NEAR_TIE.get(lm.dtype, NEAR_TIE[torch.float32])
    if params is None:
        res.margin, res.unit = float(z[want] - z[ours]), "in logits"
        return res
    from .sampling import draw, request_rng
    rng = request_rng(params, request_id)
    for _ in range(i):                       # one draw per committed token before this one
        draw(rng, len(z))
    log_race = np.log(draw(rng, len(z))) * params.temperature
    res.margin = float((z[want] - log_race[want]) - (z[ours] - log_race[ours]))
    res.unit = "in logits, the draw included (z - T log E)"
    return res


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


def record_audit(ref: list[int], req, names, outputs, stats, req_traces, reference: str = "greedy",
                 why=None) -> None:
    """Every method's output of ``req`` compared with the ``reference`` output ``ref``: per
    request and per method in ``stats`` (the first failure kept, explained by ``why(result)``,
    e.g. :func:`explain`, when given), and on each of the request's traces."""
    verdicts = {name: compare(ref, outputs[name]) for name in names}
    for name, res in verdicts.items():
        stats[name].per_request[-1]["lossless"] = res.lossless
        if not res.lossless:
            stats[name].lossless = False
            if not stats[name].first_failure:
                res = why(res) if why is not None else res
                stats[name].first_failure = f"{req.id}: {res.message(reference)}"
    for tr in req_traces:
        tr.lossless = verdicts[tr.method].lossless if tr.method in verdicts else compare(ref, tr.output_ids).lossless
