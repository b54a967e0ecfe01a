"""What fast replay's teacher forcing will forward on a data set, and its floor, without the model.

    python scripts/teacher_plan.py --data agent-transcripts [--limit N] [--window W] [--gflops G] [--tool-calls template]

Runs :class:`oilbird.evaluation.teacher.TeacherForcer`'s own bookkeeping (conversation cache,
shared prefix, window restarts past the context) with a stub forward that computes nothing, so
the counts are the ones a real run records in ``results.json`` (``replay.teacher``), with and
without the shared prefix. Needs the tokenizer and the config only (the default model's come
from its cached copy, as ``oilbird.model.load_model`` makes it). The FLOPs per token come from
the config's shapes (a model built on the ``meta`` device: no weights). ``--gflops`` turns the
FLOPs into the floor's seconds (default: measure this machine's matmul as replay does).
"""
from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird.data.conversations import encode_conversation, load_conversations  # noqa: E402
from oilbird.data.template_form import FORMS  # noqa: E402
from oilbird.errors import InputError  # noqa: E402
from oilbird.model import ModelError, sliding_window  # noqa: E402
from oilbird.evaluation.teacher import (TeacherForcer, TeacherStats, floor_seconds,  # noqa: E402
                                        flops_per_token, matmul_gflops)
from oilbird.verifier import NodeOutputs  # noqa: E402


class _StubCache:
    def __init__(self):
        self.n = 0

    def get_seq_length(self) -> int:
        return self.n

    def crop(self, k: int) -> None:
        self.n += min(k, 0)


class _StubVerifier:
    """Verifier.prefill's bookkeeping without the forward."""
    topk = 10

    def __init__(self, lm):
        self.lm = lm
        self.window = sliding_window(lm.model.config)

    def new_cache(self):
        return _StubCache()

    def prefill(self, ids, cache=None, keep=1):
        cache = cache or _StubCache()
        cache.n = len(ids)
        z = torch.zeros(keep, dtype=torch.long)
        return cache, NodeOutputs(z, z[:, None], z[:, None].float(), torch.zeros(keep, 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="agent-transcripts")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--window", type=int, default=None)
    ap.add_argument("--model", default=None, help="a local HF model dir or .gguf file (default: the cached "
                                                  "SmolLM2-135M-Instruct)")
    ap.add_argument("--gflops", type=float, default=None, help="matmul throughput for the floor (default: measured)")
    ap.add_argument("--tool-calls", choices=FORMS, default="text",
                    help="how recorded tool calls become tokens, as `replay --tool-calls`")
    args = ap.parse_args(argv)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from oilbird.model import hf_model_dir
    convs = load_conversations(args.data, args.limit)
    src = str(hf_model_dir(args.model))      # the default's and a .gguf's cached plain copy, or the folder
    tok = AutoTokenizer.from_pretrained(src, local_files_only=True)
    cfg = AutoConfig.from_pretrained(src, local_files_only=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    lm = types.SimpleNamespace(model=model, device=torch.device("cpu"))
    turns = [encode_conversation(tok, c, tool_calls=args.tool_calls) for c in convs]
    flops = flops_per_token(lm)
    gflops = args.gflops or matmul_gflops(lm)["gflops"]
    out = {"data": args.data, "tool_calls": args.tool_calls, "conversations": len(convs), "turns": sum(map(len, turns)),
           "tokens": sum(t[-1].length for t in turns), "flops_per_token": flops, "gflops": gflops}
    for shared in (False, True):
        f = TeacherForcer(_StubVerifier(lm), window=args.window, shared_prefix=shared)
        for t in turns:
            list(f.conversation(t))
        s = f.stats
        fl = floor_seconds(TeacherStats(tokens_forwarded=s.tokens_forwarded, rows_kept=s.rows_kept,
                                        attention_pairs=s.attention_pairs), flops, gflops)
        out["shared_prefix" if shared else "no_shared_prefix"] = {
            **{k: v for k, v in s.as_dict().items() if k not in ("seconds", "cache_seconds", "cache_refused", "cache_hits",
                                                                  "cache_misses")},
            "tflop": fl["flops"] / 1e12, "floor_seconds": fl["seconds"]}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (InputError, OSError, ModelError) as exc:     # bad data, a refused template, a missing model: one line
        print(f"teacher_plan: {exc}", file=sys.stderr)
        sys.exit(2)
