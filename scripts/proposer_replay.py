"""The vLLM proposer replayed on a serve-bench run's recorded outputs, without vLLM (batch 1).

    python scripts/proposer_replay.py runs/sb-48 --limit 16
    python scripts/proposer_replay.py runs/sb-48 --limit 16 --config '{"min_prob": 0.1}'

Reads ``spec.json`` (the prompts' token ids) and ``engine-oilbird.json`` (every request's greedy
output, equal to no-spec's when the run was lossless) of ``python -m oilbird serve-bench``, and
drives :class:`oilbird.serving.vllm.BatchProposer` (the proposer's whole logic) one request
after another, as a batch-1 engine would: the first call after the prefill, then per step the
accepted prefix of the chain sent plus the engine's next token, with the hidden states of the
root and the accepted tokens (the semantic key's layer, from one forward of the local model
over each request's prompt and output, ``--model``). Prints tokens per engine step as
serve-bench counts them (output tokens / (output tokens - accepted drafts)).

What it is for: a change to the proposer (its cut, budget, sources, learning) measured in seconds
instead of an engine run per variant. What it is not: a vLLM run. Its states are transformers'
rather than the engine's hook's, so its numbers sit a little below the engine's (on `runs/sb-48`,
16 requests, default proposer: 593 accepted drafts here, 616 in vLLM); use it to compare variants
with each other, and measure a winner with serve-bench (docs/serving.md, "The chain's cut").
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))    # run from a checkout


def load_run(run: Path, limit: int | None = None) -> list[tuple[str, list[int], list[int]]]:
    """(request id, prompt ids, output ids) of the requests an ``oilbird`` engine answered."""
    spec = json.loads((run / "spec.json").read_text())
    outputs = json.loads((run / "engine-oilbird.json").read_text())["passes"]["1"]["outputs"]
    reqs = [(p["id"], list(p["ids"]), list(outputs[p["id"]])) for p in spec["prompts"] if p["id"] in outputs]
    return reqs[:limit] if limit else reqs


def hidden_states(model, reqs) -> dict[str, np.ndarray]:
    """The semantic key's layer at every position of prompt + output, one forward per request."""
    import torch
    out = {}
    for rid, prompt, output in reqs:
        with torch.no_grad():
            hs = model.model(torch.tensor([prompt + output], device=model.device), output_hidden_states=True)
        out[rid] = hs.hidden_states[model.state_layer][0].float().cpu().numpy()
    return out


def replay(proposer, reqs, states: dict[str, np.ndarray]) -> dict:
    """Serve ``reqs`` one after another through ``proposer`` (a BatchProposer); returns the
    counts serve-bench reports."""
    from oilbird.serving.vllm import Forward
    import torch
    tokens = accepted = steps = 0
    for rid, prompt, out in reqs:
        H, P = torch.from_numpy(states[rid]), len(prompt)
        draft = proposer.propose([[out[0]]], [P + 1], [prompt + out[:1]], Forward(H[:P], np.array([0, P])))[0]
        pos, steps = 1, steps + 1
        while pos < len(out):
            a = 0
            while a < len(draft) and pos + a < len(out) and draft[a] == out[pos + a]:
                a += 1
            sampled = out[pos: pos + a + 1]
            rows = H[P + pos - 1: P + pos + len(draft)]            # the root, then the chain sent
            if len(rows) < 1 + len(draft):                         # past the output's end: never read
                rows = torch.cat([rows, rows[-1:].expand(1 + len(draft) - len(rows), -1)])
            pos += len(sampled)
            accepted += len(sampled) - 1
            steps += 1
            draft = proposer.propose([sampled], [P + pos], [prompt + out[:pos]],
                                     Forward(rows, np.array([0, 1 + len(draft)])))[0]
        proposer.propose([], [], [], None)                        # the request left the batch
        tokens += len(out)
    st = proposer.stats()
    return {"requests": len(reqs), "tokens": tokens, "accepted": accepted, "steps": steps,
            "tokens_per_step": tokens / (tokens - accepted) if tokens > accepted else None,
            "draft_tokens": st["draft_tokens"], "failures": st["failures"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("run", help="a serve-bench --out folder with an oilbird engine")
    ap.add_argument("--limit", type=int, default=None, help="the first N requests")
    ap.add_argument("--config", default="{}", help="proposer options (JSON, as OILBIRD_VLLM_CONFIG)")
    ap.add_argument("--model", default=None, help="the run's model (default: the default model)")
    ap.add_argument("--k", type=int, default=8, help="num_speculative_tokens")
    args = ap.parse_args(argv)
    from oilbird.model import load_model
    from oilbird.serving.vllm import BatchProposer, ProposerConfig
    run = Path(args.run)
    try:
        reqs = load_run(run, args.limit)
        cfg = ProposerConfig.from_json(args.config, "--config")
    except (OSError, KeyError, ValueError) as exc:
        print(f"{run}: not a serve-bench run with an oilbird engine, or a bad --config ({exc})", file=sys.stderr)
        return 2
    model = load_model(args.model)
    states = hidden_states(model, reqs)
    dim = next(iter(states.values())).shape[1]
    res = replay(BatchProposer(dim, model.model.config.vocab_size, args.k, 1 << 20, cfg), reqs, states)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
