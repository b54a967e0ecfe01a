"""Hand-built trace records for the workbench tests: no model, every number chosen by hand.

Request "r1", method "oilbird", output "Hi· there↵" as 4 tokens in 3 forwards:

* cycle 0 (prefill): bonus "Hi" (id 10).
* cycle 1: tree root "Hi" (0) -> " there" (1, pld+semantic) -> "\\n" (2, pld);
  root -> " you" (3, recycling); node 1 -> "!" (4, semantic).
  Verifier argmax [11, 12, 99, 0, 0]: accepts 0 -> 1 -> 2, bonus 99 ("!!").
  One neighbour from request "r0" (similarity 0.91, 2 of 2 accepted; pld proposed its first token too).
* cycle 2: tree root "!!" (0) -> "ok" (1, suffix), rejected; bonus 2 (EOS, text "").

A second method "goose" decodes the same output in 4 forwards (all bonus tokens).
"""
from __future__ import annotations

import copy

from dataclasses import replace

from oilbird.trace import CycleTrace, Neighbour, RequestTrace


def cycle1() -> CycleTrace:
    return CycleTrace(
        request_id="r1", method="oilbird", cycle=1, prefix_len=20, generated_before=1,
        tokens=[10, 11, 12, 13, 14], token_text=["Hi", " there", "\n", " you", "!"],
        parents=[-1, 0, 1, 0, 1], depths=[0, 1, 2, 1, 2],
        sources=[[], ["pld", "semantic"], ["pld"], ["recycling"], ["semantic"]],
        scores=[{}, {"pld": 1.0, "semantic": 0.91}, {"pld": 1.0}, {"recycling": 0.2}, {"semantic": 0.5}],
        argmax=[11, 12, 99, 0, 0], argmax_text=[" there", "\n", "!!", "", ""],
        accepted=[0, 1, 2], bonus=99, committed=[11, 12, 99], committed_text=[" there", "\n", "!!"],
        committed_sources=[["pld", "semantic"], ["pld"], ["bonus"]],
        neighbours=[Neighbour(record=3, request_id="r0", position=5, similarity=0.91, proposed=[11, 12],
                              proposed_text=[" there", "\n"], context_text=["Hello", " there", "\n"],
                              context_index=1, paid_nodes=[4], walked_nodes=[1, 4], accepted=1,
                              lexical_reachable=True)],
        lexical_match_len=2, adjacency_row=True, store_records=40, retrieval="retrieved", retrieval_floor=0.8,
        timings={"draft": 0.001, "verify": 0.02, "commit": 0.0005, "update": 0.002})


def request_oilbird(gap_labels=None) -> RequestTrace:
    c0 = CycleTrace(request_id="r1", method="oilbird", cycle=0, prefix_len=0, generated_before=0,
                    bonus=10, committed=[10], committed_text=["Hi"], committed_sources=[["bonus"]],
                    timings={"verify": 0.05})
    c2 = CycleTrace(request_id="r1", method="oilbird", cycle=2, prefix_len=23, generated_before=4,
                    tokens=[99, 50], token_text=["!!", "ok"], parents=[-1, 0], depths=[0, 1],
                    sources=[[], ["suffix"]], scores=[{}, {"suffix": 0.3}], argmax=[2, 7],
                    argmax_text=["", "x"], accepted=[0], bonus=2, committed=[2], committed_text=[""],
                    committed_sources=[["bonus"]], adjacency_row=True, store_records=0, retrieval="empty-store",
                    retrieval_floor=0.8, stop="eos",
                    timings={"draft": 0.001, "verify": 0.02, "commit": 0.0005, "update": 0.002})
    return RequestTrace(request_id="r1", method="oilbird", model="tiny", prompt_ids=[1, 2, 3],
                        prompt_text="say hi", output_ids=[10, 11, 12, 99, 2],
                        output_text=["Hi", " there", "\n", "!!", ""], cycles=[c0, cycle1(), c2],
                        lossless=True, gap_labels=gap_labels, stop="eos")


def request_key_find() -> RequestTrace:
    """``request_oilbird()`` where the neighbour's first token " there" was proposed by token
    recycling and the key, no lexical source: the key's own find (oilbird.trace.lexically_reachable)."""
    r = copy.deepcopy(request_oilbird())
    c = r.cycles[1]
    c.sources[1] = ["recycling", "semantic"]
    c.scores[1] = {"recycling": 0.4, "semantic": 0.91}
    c.committed_sources[0] = ["recycling", "semantic"]
    c.neighbours[0].lexical_reachable = True       # as a trace that counted recycling as lexical recorded it
    return r


def request_goose() -> RequestTrace:
    out = [10, 11, 12, 99, 2]
    text = ["Hi", " there", "\n", "!!", ""]
    cycles = []
    for k, (t, x) in enumerate(zip(out, text)):
        cycles.append(CycleTrace(request_id="r1", method="goose", cycle=k, prefix_len=3 + k, generated_before=k,
                                 tokens=[] if k == 0 else [out[k - 1]], token_text=[] if k == 0 else [text[k - 1]],
                                 parents=[] if k == 0 else [-1], depths=[] if k == 0 else [0],
                                 sources=[] if k == 0 else [[]], scores=[] if k == 0 else [{}],
                                 argmax=[] if k == 0 else [t], argmax_text=[] if k == 0 else [x],
                                 accepted=[] if k == 0 else [0], bonus=t, committed=[t], committed_text=[x],
                                 committed_sources=[["bonus"]], timings={"verify": 0.02},
                                 retrieval=None if k == 0 else "no-source", stop="eos" if k == len(out) - 1 else None))
    return RequestTrace(request_id="r1", method="goose", model="tiny", prompt_ids=[1, 2, 3], prompt_text="say hi",
                        output_ids=out, output_text=text, cycles=cycles, lossless=True, stop="eos")


def request_other(request_id: str = "r2") -> RequestTrace:
    """A one-token request under another id (for navigation tests)."""
    c0 = CycleTrace(request_id=request_id, method="oilbird", cycle=0, prefix_len=0, generated_before=0,
                    bonus=2, committed=[2], committed_text=[""], committed_sources=[["bonus"]],
                    timings={"verify": 0.05}, stop="eos")
    return RequestTrace(request_id=request_id, method="oilbird", model="tiny", prompt_ids=[1], prompt_text="x",
                        output_ids=[2], output_text=[""], cycles=[c0], lossless=True, stop="eos")


def all_requests() -> list[RequestTrace]:
    return [request_oilbird(gap_labels=["absent", "lexical_hit", "gap_recovered", "gap_missed", "absent"]),
            request_goose(), request_other()]


def relabel(request: RequestTrace, names: dict[str, str]) -> RequestTrace:
    """``request`` with its draft sources renamed per ``names`` (a peer's or an unknown source's
    trace, e.g. ``{"pld": "suffix-arctic"}``); the input is left as it was."""
    def rn(srcs):
        return [names.get(s, s) for s in srcs]
    cycles = [replace(c, sources=[rn(x) for x in c.sources],
                      scores=[{names.get(k, k): v for k, v in x.items()} for x in c.scores],
                      committed_sources=[rn(x) for x in c.committed_sources]) for c in request.cycles]
    return replace(request, cycles=cycles)


def request_truncated(committed: int = 2) -> RequestTrace:
    """Request "r3", whose output ends inside its last cycle's accepted path (the token limit
    or EOS cut it, as ``oilbird.decoding._finish`` does): output "A B C" in 2 forwards.

    * cycle 0 (prefill): bonus "A" (id 20).
    * cycle 1: root "A" (0) -> "B" (1, pld) -> "C" (2, pld) -> "D" (3, semantic); root -> "X"
      (4, suffix). Verifier argmax [21, 22, 23, 25, 0]: accepts 0 -> 1 -> 2 -> 3, bonus 25 ("E").
      Only the first ``committed`` tokens of "B C D E" are committed (2: "B C"; 3: "B C D", so
      every accepted draft but not the bonus; 4: all, the bonus included).
    """
    new, text, srcs = [21, 22, 23, 25], ["B", "C", "D", "E"], [["pld"], ["pld"], ["semantic"], ["bonus"]]
    c0 = CycleTrace(request_id="r3", method="oilbird", cycle=0, prefix_len=0, generated_before=0,
                    bonus=20, committed=[20], committed_text=["A"], committed_sources=[["bonus"]],
                    timings={"verify": 0.05})
    c1 = CycleTrace(
        request_id="r3", method="oilbird", cycle=1, prefix_len=4, generated_before=1,
        tokens=[20, 21, 22, 23, 24], token_text=["A", "B", "C", "D", "X"],
        parents=[-1, 0, 1, 2, 0], depths=[0, 1, 2, 3, 1],
        sources=[[], ["pld"], ["pld"], ["semantic"], ["suffix"]],
        scores=[{}, {"pld": 1.0}, {"pld": 1.0}, {"semantic": 0.93}, {"suffix": 0.4}],
        argmax=[21, 22, 23, 25, 0], argmax_text=["B", "C", "D", "E", ""],
        accepted=[0, 1, 2, 3], bonus=25, committed=new[:committed], committed_text=text[:committed],
        committed_sources=srcs[:committed], lexical_match_len=3, adjacency_row=True, store_records=12,
        retrieval="below-floor", retrieval_floor=0.8, stop="limit",
        timings={"draft": 0.001, "verify": 0.02, "commit": 0.0005, "update": 0.002})
    return RequestTrace(request_id="r3", method="oilbird", model="tiny", prompt_ids=[1, 2], prompt_text="abc",
                        output_ids=[20] + new[:committed], output_text=["A"] + text[:committed],
                        cycles=[c0, c1], lossless=True, stop="limit")


def cycle_neighbours(n: int = 8) -> CycleTrace:
    """``cycle1()`` with ``n`` neighbours (most similar first) whose contexts and proposals run
    long, one token a 40-character run without spaces; the last two chains got no node in the
    tree (the semantic budget was spent), and one more similar chain proposed nothing (copy depth
    0)."""
    words = [" the", " quick", " brown", "_fox_jumps_over_the_lazy_dog_and_its_pup", " over", "\n", ' {"a":', " b"]
    nbs = []
    for k in range(n):
        ctx = words[: 3 + k % 6]
        prop = [] if k == 1 else [f" tok{j}" for j in range(10 + k)]
        walked = [] if k >= n - 2 or k == 1 else list(range(1, 2 + k % 4))
        nbs.append(Neighbour(record=k, request_id=f"api-bank-{k:04d}", position=100 + k, similarity=0.99 - 0.02 * k,
                             proposed=list(range(len(prop))), proposed_text=prop, context_text=ctx,
                             context_index=2, paid_nodes=[], walked_nodes=walked, accepted=min(len(walked), k // 2),
                             lexical_reachable=k % 2 == 0,
                             why_no_node="no-tokens" if k == 1 else "budget" if k >= n - 2 else ""))
    return replace(cycle1(), neighbours=nbs)
