"""Gap labels on traces: every trace gets the per-position labels (paper section 3,
:mod:`oilbird.evaluation.diagnose`) of its request's greedy output, computed once per request
(one rule for a trace file, ``python -m oilbird trace --diagnose``, and a live run in the
notebooks, ``workbench.lesson``), or of the output a live decoder actually produced, against
what its store held: the app's live runs, decoded one at a time in the order a user presses
Run, are labelled as they come (:class:`RunningLabels`).
"""
from __future__ import annotations

from ..trace import GAP_POOL_STORE, load_traces, save_traces
from .diagnose import Pool, diagnose_requests, teacher_forced


def known_outputs(traces, max_new_tokens: int, eos_ids) -> dict[str, list[int]]:
    """The greedy output under ``max_new_tokens`` of every request that some trace settles.

    A trace that is not known to be lossy (``lossless`` True, or None for an unaudited run of
    the library's own decoders) holds the greedy output under the unknown limit it was decoded
    with. Greedy outputs are prefixes of one another, so it settles the output under
    ``max_new_tokens`` if it is at least that long (cut to length) or ends in EOS before it;
    the first trace of a request that settles it counts. (:func:`diagnose_requests` checks
    each against the teacher-forced argmax and decodes any other itself.)
    """
    eos = set(eos_ids)
    out: dict[str, list[int]] = {}
    for t in traces:
        if t.lossless is False or t.request_id in out:
            continue
        ids = list(t.output_ids)
        if len(ids) >= max_new_tokens:
            out[t.request_id] = ids[:max_new_tokens]
        elif ids and ids[-1] in eos:
            out[t.request_id] = ids
    return out


def label_traces(traces, requests, lm, max_new_tokens: int, progress: bool = False) -> dict:
    """Give every trace the per-position gap labels of its request's greedy output; the one
    rule for a trace file (:func:`attach_labels`) and a live run (``workbench.lesson``).

    The labels belong to the greedy output, so they are computed once per request, in
    ``requests`` order (the pool holds the requests before it), from the output a trace settles
    (:func:`known_outputs`) or else by decoding, and attached to each trace whose output equals
    it; a trace with another output (lossy, or cut at another length) gets None. Returns the
    result of :func:`diagnose_requests` (for :func:`build_report`).
    """
    res = diagnose_requests(requests, lm, max_new_tokens,
                            outputs=known_outputs(traces, max_new_tokens, lm.eos_token_ids), progress=progress)
    by_id = {d.request_id: d for d in res["diags"]["generated"]}
    for tr in traces:
        d = by_id.get(tr.request_id)
        same = d is not None and list(tr.output_ids) == d.output
        _give(tr, d.labels if same else None, d.drafter_hit if same else None)
    return res


def attach_report(traces, report: dict) -> None:
    """Give every trace its request's ``gap_labels`` and ``drafter_reach`` from a diagnosis
    report (:func:`~oilbird.evaluation.diagnose.build_report`) of the same outputs: a replay's,
    whose output is the recording for every method. A trace whose request the report lacks, or
    whose output is not as long as its labels, gets None."""
    for tr in traces:
        lab = report["labels"].get(tr.request_id)
        fits = lab is not None and len(lab) == len(tr.output_ids)
        reach = report.get("detail", {}).get(tr.request_id, {}).get("drafter_hit")
        _give(tr, lab if fits else None, reach if fits else None)


def _give(tr, labels, reach) -> None:
    """The one assignment both rules end in, once each has decided whether its request's labels
    belong to this trace's output (None where they do not): the labels, and the drafter's reach
    only beside them and only as long as they are (a report written before the field has none)."""
    tr.gap_labels = list(labels) if labels is not None else None
    tr.drafter_reach = (list(reach) if labels is not None and reach is not None and len(reach) == len(labels)
                        else None)


class RunningLabels:
    """Gap labels for the requests one live decoder decodes, one after another (the app's live
    runs of one method in one session), each against the pool its decoder's store holds then:
    the outputs this labeller was given before (generated tokens only, with the state at each
    position, as :class:`~oilbird.store.Store` keeps them), and none of the current request.

    The labels are those of :func:`label_traces` on the same outputs in the same order (the
    diagnosis' own :class:`~oilbird.evaluation.diagnose.Pool`, one teacher-forced forward per
    request), but of the output actually decoded: a sampled or stopped run is labelled too,
    since the store holds what it decoded. Give it every request its decoder stored, in order,
    or its pool stops mirroring the store.
    """

    def __init__(self, lm):
        self.lm = lm
        self.pool = Pool(int(lm.model.config.hidden_size))     # no static key: the labels never read it
        self.requests: list[str] = []       # the request ids whose outputs the pool holds, in order

    def label(self, trace, prompt_ids) -> None:
        """Label ``trace`` (its ``gap_labels`` and ``drafter_reach``), then add its output to the
        pool. The trace's ``meta`` says what the pool held: ``gap_pool`` (:data:`GAP_POOL_STORE`),
        ``gap_pool_runs`` (how many outputs) and ``gap_pool_same`` (how many of them were of this
        same request: an earlier run of it)."""
        out = list(trace.output_ids)
        states, _ = teacher_forced(self.lm, list(prompt_ids), out)
        d = self.pool.label(trace.request_id, prompt_ids, out, states)
        self.pool.add_request(prompt_ids, out, states)
        _give(trace, d.labels, d.drafter_hit)
        trace.meta.update(gap_pool=GAP_POOL_STORE, gap_pool_runs=len(self.requests),
                          gap_pool_same=self.requests.count(trace.request_id))
        self.requests.append(trace.request_id)


def attach_labels(trace_path, requests, lm, max_new_tokens: int) -> None:
    """Write per-position gap labels into every RequestTrace of ``trace_path``
    (:func:`label_traces`)."""
    traces = load_traces(trace_path)
    label_traces(traces, requests, lm, max_new_tokens)
    save_traces(traces, trace_path)
