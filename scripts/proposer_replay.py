"""The vLLM proposer replayed on a serve-bench run's recorded outputs, or on recorded agent
traffic, without vLLM (batch 1).

    python -m oilbird serve-bench --data builtin --limit 48 --max-new-tokens 64 --methods nospec,suffix,oilbird --batch-sizes 1 --out runs/sb-48
    python scripts/proposer_replay.py runs/sb-48 --limit 16
    python scripts/proposer_replay.py runs/sb-48 --limit 16 --config '{"min_prob": 0.1}'
    python scripts/proposer_replay.py runs/sb-48 --limit 16 --suffix
    python scripts/proposer_replay.py --recording my-logs.jsonl --suffix       # your own traffic
    python scripts/proposer_replay.py --recording agent-builtin --limit 4 --suffix

``--recording DATA`` takes what ``python -m oilbird replay --data`` takes (``--limit`` then counts
conversations): every assistant turn is one request whose output is the recording, served
conversation by conversation as replay serves them. Tokens per engine step are then what a
batch-1 vLLM engine whose model wrote the recording would count, with each proposer; turns
longer than the local model's context are skipped and counted; a conversation another one holds
whole (a log with a line per call) is left out and listed; ``--skip-bad`` leaves out the
recording's bad lines, listed, instead of stopping at the first. The states come from one forward
per conversation where each turn extends the one before (otherwise one per turn).

Reads a greedy serve-bench run (its ``--out`` folder: ``spec.json``, the prompts' token ids;
``job-oilbird.json``, ``num_speculative_tokens``; ``engine-oilbird.json``, every request's
output at batch 1, equal to no-spec's when the run was lossless) and drives
:class:`oilbird.serving.vllm.BatchProposer`, the proposer's whole logic, one request after
another as a batch-1 engine does: the first call after the prefill; per step the accepted
prefix of the chain sent plus the engine's next token, with the hidden states of the root and
the accepted tokens (the semantic key's layer, from one fp32 forward of the local model over each
request's prompt and output); a finished request leaves the batch in the next request's first
call. Prints what serve-bench counts: output tokens, accepted drafts, engine steps (the
prefill's and one per verify), tokens per engine step (output tokens / steps), and the
proposer's own counters.

``--suffix`` also replays vLLM's own ``suffix`` proposer (arctic's cache, driven as vLLM drives
it, with vLLM's defaults) on the same outputs and prints the ratio of steps: on the built-in 16
requests of ``runs/sb-48b`` it takes 423 steps and accepts 557 drafts within the outputs, where
vLLM counted 423 steps (``runs/sb-s15``; vLLM's acceptance counter says 582, counting drafts
accepted past ``max_tokens`` too).

What it is for: a change to the proposer (its cut, budget, sources, learning) measured in seconds
instead of an engine run per variant. What it is not: a vLLM run. Where they differ: a chain
that covers the output's end is counted accepted up to the end (vLLM's acceptance counter
also counts draft tokens accepted past ``max_tokens``, which no recording shows; its step count
does not depend on them), and the states are transformers' rather than the engine hook's. On the
built-in 16 requests it counted 359 steps, as vLLM did (`runs/sb-s15`). Compare variants with each
other, and measure a winner with serve-bench (docs/serving.md, "The chain's cut", "Counting
engine steps").
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))    # run from a checkout


class RunError(ValueError):
    """A folder this script cannot replay; the message says why."""


def load_run(run: Path, limit: int | None = None) -> tuple[list[tuple[str, list[int], list[int]]], dict]:
    """((request id, prompt ids, output ids) of the requests the oilbird engine answered at
    batch 1, in the run's order; the oilbird job: ``k``, ``temperature``, ...)."""
    try:
        spec = json.loads((run / "spec.json").read_text())
        engine = json.loads((run / "engine-oilbird.json").read_text())
        job = json.loads((run / "job-oilbird.json").read_text())
    except (OSError, ValueError) as exc:
        raise RunError(f"{run}: not a serve-bench run with an oilbird engine ({exc})") from None
    if job.get("temperature"):
        raise RunError(f"{run}: a sampled run (temperature {job['temperature']}): outputs drawn at "
                       f"random say nothing of what greedy verification would accept")
    outputs = engine.get("passes", {}).get("1", {}).get("outputs")
    if not outputs:
        raise RunError(f"{run}: its oilbird engine ran no batch-1 pass (serve-bench --batch-sizes 1)")
    reqs = [(p["id"], list(p["ids"]), list(outputs[p["id"]])) for p in spec["prompts"] if outputs.get(p["id"])]
    if not reqs:
        raise RunError(f"{run}: no prompt of spec.json has an output in engine-oilbird.json")
    return (reqs[:limit] if limit else reqs), job


def load_recording(tokenizer, convs, context: int, end_ids=None, tool_calls: str = "text"
                   ) -> tuple[list[tuple[str, list[int], list[int]]], int]:
    """((turn id, prompt ids, recording ids) of every assistant turn of the recorded
    conversations ``convs`` (:func:`~oilbird.data.conversations.load_conversations`), in serving
    order; how many turns were skipped as longer than ``context``). ``tool_calls``: as ``replay --tool-calls``."""
    from oilbird.data.conversations import encode_conversation
    reqs, skipped = [], 0
    for conv in convs:
        for turn in encode_conversation(tokenizer, conv, end_ids=end_ids, tool_calls=tool_calls):
            if turn.length > context:
                skipped += 1
            elif turn.recording_ids:
                reqs.append((turn.id, list(turn.prompt_ids), list(turn.recording_ids)))
    if not reqs:
        raise RunError(f"no assistant turn with a recording fits the model's context ({context} tokens)")
    return reqs, skipped


def hidden_states(model, reqs) -> dict[str, np.ndarray]:
    """The semantic key's layer at every position of prompt + output. A request whose tokens
    begin a later request's (a conversation's earlier turn) takes its rows from that request's
    forward (a causal model's rows at a prefix are the prefix's own); every other request gets
    one forward. Only that layer is kept and only the last position's logits are made, as the
    verifier's prefill does (``Verifier.prefill`` itself would also make the output distribution
    at every position wanted: ~0.4 MB a token at SmolLM2's vocabulary, for states alone)."""
    import torch
    out, longer = {}, None                     # longer: (tokens, rows) of the last forward
    with torch.inference_mode():
        for rid, prompt, output in reversed(reqs):
            seq = prompt + output
            if longer is not None and len(seq) <= len(longer[0]) and longer[0][:len(seq)] == seq:
                out[rid] = longer[1][:len(seq)]
                continue
            x = torch.tensor([seq], device=model.device)
            hs = model.model(input_ids=x, logits_to_keep=1, output_hidden_states=[model.state_layer])
            out[rid] = hs.hidden_states[model.state_layer][0].float().cpu().numpy()
            longer = (seq, out[rid])
    return out


def drive(reqs, first, step) -> dict:
    """A batch-1 engine over recorded greedy outputs, one request after another: the prefill's
    step commits ``out[0]`` and asks ``first(rid, prompt, out)`` for a draft; each later step
    accepts the draft's prefix that equals the recording and commits it plus the engine's own
    next token, then asks ``step(rid, prompt, out, pos, draft, sampled)`` (``pos``: where this
    step started; ``sampled``: what it committed) for the next draft. A draft that runs past
    the output's end is accepted up to the end. Returns output tokens, accepted drafts, steps
    (the prefill's and one per verify: what vLLM counts) and tokens per step."""
    tokens = accepted = steps = 0
    for rid, prompt, out in reqs:
        draft, pos = first(rid, prompt, out), 1
        steps += 1
        while pos < len(out):
            a = 0
            while a < len(draft) and pos + a < len(out) and draft[a] == out[pos + a]:
                a += 1
            sampled = out[pos: pos + a + 1]        # the accepted drafts, then the engine's token
            accepted += a
            steps += 1
            draft = step(rid, prompt, out, pos, draft, sampled)
            pos += len(sampled)
        tokens += len(out)
    return {"requests": len(reqs), "tokens": tokens, "accepted": accepted, "steps": steps,
            "tokens_per_step": tokens / steps if steps else None}


def replay(proposer, reqs, states: dict[str, np.ndarray], logits: dict[str, np.ndarray] | None = None) -> dict:
    """Serve ``reqs`` one after another through ``proposer`` (a BatchProposer); returns the
    counts serve-bench reports and the proposer's. ``logits`` (optional, per request like
    ``states``) go with the rows as the forward's output, for ``check_layout``."""
    import torch
    from oilbird.serving.vllm import Forward

    def forward(rid, start, n):
        rows = torch.from_numpy(states[rid][start:start + n])
        fin = torch.from_numpy(logits[rid][start:start + n]) if logits else None
        if len(rows) < n:                          # rows past the output's end: never read
            pad = n - len(rows)
            rows = torch.cat([rows, rows[-1:].expand(pad, -1)])
            fin = torch.cat([fin, fin[-1:].expand(pad, -1)]) if fin is not None else None
        return Forward(rows, np.array([0, n]), fin)

    def first(rid, prompt, out):               # an earlier request that finished leaves the batch here
        return proposer.propose([[out[0]]], [len(prompt) + 1], [prompt + out[:1]], forward(rid, 0, len(prompt)))[0]

    def step(rid, prompt, out, pos, draft, sampled):
        rows = forward(rid, len(prompt) + pos - 1, 1 + len(draft))    # the root, then the chain sent
        end = pos + len(sampled)
        return proposer.propose([sampled], [len(prompt) + end], [prompt + out[:end]], rows)[0]

    res = drive(reqs, first, step)
    proposer.propose([], [], [], None)             # the last request leaves the batch
    st = proposer.stats()
    return {**res, **{k: st[k] for k in ("drafts", "draft_tokens", "failures", "states_used", "layout_mismatch",
                                         "layout_checked", "layout_check_failed", "store_requests")}}


# vLLM's suffix proposer's defaults (SpeculativeConfig.suffix_decoding_*, vLLM 0.32; tests/test_proposer_replay.py
# compares them with the installed vLLM's)
SUFFIX_DEFAULTS = {"max_tree_depth": 24, "max_cached_requests": 10000, "max_spec_factor": 1.0,
                   "min_token_prob": 0.1}


def replay_suffix(reqs, k: int, **options) -> dict:
    """vLLM's ``suffix`` proposer replayed the same way: arctic's ``SuffixDecodingCache`` driven as
    vLLM's ``SuffixDecodingProposer.propose`` drives it (a request's prompt opens its tree, every
    committed token is appended, the last ``max_tree_depth`` tokens are the pattern, at most
    ``k`` tokens a step; a finished request's response stays cached for later ones).
    ``options`` override :data:`SUFFIX_DEFAULTS`. Needs arctic-inference (requirements-peers.txt)."""
    from oilbird.sources.arctic import load_cache_class
    o = {**SUFFIX_DEFAULTS, **options}
    cache = load_cache_class()(max_tree_depth=o["max_tree_depth"], max_cached_requests=o["max_cached_requests"])

    def speculate(rid, prompt, out, end):
        """The pattern is the last ``max_tree_depth`` tokens of ``prompt + out[:end]`` (built
        from the two tails: the whole context is not copied each step)."""
        depth = o["max_tree_depth"]
        recent = out[max(0, end - depth):end]
        older = prompt[max(0, len(prompt) - (depth - len(recent))):] if len(recent) < depth else []
        pattern = np.asarray(list(older) + list(recent), dtype=np.int32)
        return list(cache.speculate(rid, pattern, max_spec_tokens=k, max_spec_factor=o["max_spec_factor"],
                                    min_token_prob=o["min_token_prob"]).token_ids)

    def first(rid, prompt, out):
        for old in list(cache.active_requests):    # the finished request leaves the batch
            cache.stop_request(old)
        cache.start_request(rid, np.asarray(prompt, dtype=np.int32))
        cache.add_active_response(rid, [out[0]])
        return speculate(rid, prompt, out, 1)

    def step(rid, prompt, out, pos, draft, sampled):
        cache.add_active_response(rid, list(sampled))
        return speculate(rid, prompt, out, pos + len(sampled))

    res = drive(reqs, first, step)
    for old in list(cache.active_requests):
        cache.stop_request(old)
    return res


def _recorded(data: str, limit: int | None, bad: list[dict] | None, folded: list[dict]):
    """The recorded conversations, as ``replay --data`` reads them: bad lines stop the load unless
    ``bad`` is a list (``--skip-bad``), and what was left out is said on stderr."""
    from oilbird.data.conversations import load_conversations
    from oilbird.data.requests import ConversationError
    try:
        convs = load_conversations(data, limit, bad, folded)
    except ConversationError as exc:
        if bad is not None or not exc.skippable:
            raise
        raise ConversationError(f"{exc.reason} (--skip-bad replays the other lines)", exc.path, exc.line) from None
    if bad:
        print(f"--skip-bad: left out {len(bad)} bad line{'s' if len(bad) > 1 else ''} of the recording (listed in "
              f"the output's bad_lines); the first: {bad[0]['error']}", file=sys.stderr)
    if folded:
        print(f"left out {len(folded)} conversation{'s' if len(folded) > 1 else ''} whose messages are the start of "
              f"another's (listed in the output's folded_conversations)", file=sys.stderr)
    return convs


def main(argv: list[str] | None = None) -> int:
    from oilbird.data.template_form import FORMS
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))   # the first sentence, whole
    ap.add_argument("run", nargs="?", help="a serve-bench --out folder with an oilbird engine at batch 1")
    ap.add_argument("--recording", metavar="DATA", default=None,
                    help="instead of a run: recorded conversations, as `python -m oilbird replay --data` takes them")
    ap.add_argument("--k", type=int, default=None,
                    help="draft tokens per step (num_speculative_tokens; default: the run's, or 8 with --recording)")
    ap.add_argument("--limit", type=int, default=None,
                    help="the first N requests (with --recording: conversations; default: all)")
    ap.add_argument("--config", default="{}", help="proposer options (JSON, as OILBIRD_VLLM_CONFIG)")
    ap.add_argument("--model", default=None, help="the run's model, when it was not the default one")
    ap.add_argument("--device", default="cpu", help="where the states are computed, in fp32 (default cpu)")
    ap.add_argument("--skip-bad", action="store_true",
                    help="with --recording: leave out the recording's bad lines (listed in the output) instead of "
                         "stopping at the first, as `replay --skip-bad` does")
    ap.add_argument("--tool-calls", choices=FORMS, default="text",
                    help="with --recording: how a recorded tool call becomes tokens, as `replay --tool-calls`")
    ap.add_argument("--suffix", action="store_true",
                    help="also replay vLLM's suffix proposer (needs arctic-inference) and print the ratio of steps")
    args = ap.parse_args(argv)
    from oilbird.data.template_form import check_template
    from oilbird.model import ModelError, load_model, load_tokenizer
    from oilbird.serving.vllm import BatchProposer, ProposerConfig
    run = Path(args.run) if args.run is not None else None
    try:
        if args.limit is not None and args.limit < 1:
            raise RunError(f"--limit must be at least 1, not {args.limit}")
        if args.k is not None and args.k < 1:
            raise RunError(f"--k must be at least 1, not {args.k}")
        if (args.run is None) == (args.recording is None):
            raise RunError("give a serve-bench run folder or --recording DATA (one of the two)")
        if args.skip_bad and args.recording is None:
            raise RunError("--skip-bad is for --recording's lines (a serve-bench run has none to skip)")
        if args.tool_calls != "text" and args.recording is None:
            raise RunError("--tool-calls is for --recording (a serve-bench run's requests are tokens already)")
        bad: list[dict] | None = [] if args.skip_bad else None
        folded: list[dict] = []
        if args.recording is not None:
            convs = _recorded(args.recording, args.limit, bad, folded)   # every line checked before the model loads
            reqs, job = None, {"k": 8}
        else:
            reqs, job = load_run(run, args.limit)
        cfg = ProposerConfig.from_json(args.config, "--config")
        if cfg.min_prob == "auto":
            raise RunError('min_prob "auto" prices a row by the engine\'s step time, which a replay does not '
                           'have: measure it with serve-bench --oilbird-config')
        layer = cfg.state_layer if isinstance(cfg.state_layer, int) else None
        if args.tool_calls == "template":     # refused before the weights load
            check_template(load_tokenizer(args.model))
        model = load_model(args.model, device=args.device, state_layer=layer)
        if cfg.state_layer == "last":           # the hook's fallback: the model's last (normed) layer
            model.state_layer = model.num_layers
        if args.suffix:
            from oilbird.sources.arctic import load_cache_class
            load_cache_class()                     # missing: the install hint, before any work
    except (RunError, ValueError, ModelError, ImportError) as exc:
        print(f"proposer_replay: {exc}", file=sys.stderr)
        return 2
    skipped = None
    if reqs is None:
        from oilbird.evaluation.teacher import model_context
        try:
            reqs, skipped = load_recording(model.tokenizer, convs, model_context(model), model.eos_token_ids,
                                           args.tool_calls)
        except (RunError, ValueError) as exc:
            print(f"proposer_replay: {exc}", file=sys.stderr)
            return 2
    model.model.float()
    states = hidden_states(model, reqs)
    dim = next(iter(states.values())).shape[1]
    k = args.k or int(job.get("k", 8))
    res = replay(BatchProposer(dim, model.model.config.vocab_size, k, 1 << 20, cfg, eos=model.eos_token_ids),
                 reqs, states)
    if args.suffix:
        res["suffix"] = replay_suffix(reqs, k)
        res["steps_ratio"] = res["suffix"]["steps"] / res["steps"]   # = oilbird / suffix in tokens per step
    res["k"] = k
    # whose outputs these are, in the one line printed (a bare count read as the local model's decoding)
    res["outputs"] = ("recorded turns (--recording), counted as a batch-1 engine whose model wrote them would count "
                      "them; the semantic key reads the local model's hidden states of them" if args.recording else
                      "the serve-bench run's outputs: the local model's own decoding")
    if skipped is not None:
        res["skipped_turns"] = skipped
        res["tool_calls"] = args.tool_calls
    if bad:
        res["bad_lines"] = bad
    if folded:
        res["folded_conversations"] = folded
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
