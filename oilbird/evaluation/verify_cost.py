"""What one verification forward costs against one AR step, by tree size, on a real prompt.

    python -m oilbird.evaluation.verify_cost                                  # API-Bank request 1 if present
    python -m oilbird.evaluation.verify_cost --data builtin --nodes 1,4,8,12,24

Times (median of ``--repeat``) a plain AR step and ``Verifier.verify`` of a binary tree of n
nodes on top of the prompt's cache, cropping back after each; then the linear layers alone
(an MLP projection and the LM head) at 1, 4 and 12 rows, which is where the jump from one row
to several comes from on CPU. Both with the oneDNN-packed linears that ``load_model`` uses on
CPU (:mod:`oilbird.cpu_gemm`) and with the stock torch kernels, in the same run. Set ``TRANSFORMERS_SDPA_FORCE_GQA=0`` to time the verify
without GQA under a tree mask (``load_model`` turns it on for CPU).
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from ..cpu_gemm import PackedLinear, stock_linears
from ..model import load_model
from ..data.requests import encode, load_requests
from ..tree import DraftTree
from ..verifier import Verifier


def _median_ms(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1000 * statistics.median(ts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m oilbird.evaluation.verify_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="api-bank")
    ap.add_argument("--model", default=None)
    ap.add_argument("--nodes", default="1,4,8,12")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    lm = load_model(args.model)
    v = Verifier(lm)
    ids = encode(lm.tokenizer, load_requests(args.data, limit=1)[0])
    cache, _ = v.prefill(ids)
    n0 = len(ids)

    def step():
        v.step(cache, ids[-1])
        v.commit(cache, n0, [])

    sizes = [int(x) for x in args.nodes.split(",")]
    trees = {n: DraftTree(tokens=[ids[-1]] * n, parents=[-1] + [(i - 1) // 2 for i in range(1, n)])
             for n in sizes}
    kernels = ["onednn", "torch"] if lm.gemm == "onednn" else ["torch"]
    print(f"prefix {n0} tokens, {torch.get_num_threads()} threads; binary trees of n nodes; "
          f"ms, median of {args.repeat}")
    print(f"{'linear kernels':16s} {'AR step':>8s} " + " ".join(f"{n:>6d}" for n in sizes)
          + "   (verify / AR step)")
    for k in kernels:
        with stock_linears(lm.model) if k == "torch" else contextlib.nullcontext():
            ar = _median_ms(step, args.repeat)
            ms = []
            for n in sizes:
                def verify(tree=trees[n]):
                    v.verify(cache, n0, tree)
                    v.commit(cache, n0, [])
                ms.append(_median_ms(verify, args.repeat))
        print(f"{k:16s} {ar:8.1f} " + " ".join(f"{m:6.1f}" for m in ms)
              + "   (" + " ".join(f"{m / ar:.2f}" for m in ms) + ")")
    # one linear alone, the same two ways: an MLP projection and the model's own LM head
    cfg = lm.model.config
    head = lm.model.get_output_embeddings()
    up = torch.nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False,
                         dtype=head.weight.dtype, device=head.weight.device)
    if lm.gemm == "onednn":
        up = PackedLinear(up)
    pair = torch.nn.ModuleList([up, head])
    print(f"one linear alone (ms): MLP {cfg.hidden_size}x{cfg.intermediate_size}, "
          f"LM head {head.out_features}x{head.in_features}")
    with torch.inference_mode():
        for rows in (1, 4, 12):
            h = torch.randn(rows, cfg.hidden_size, dtype=head.weight.dtype, device=head.weight.device)
            parts = []
            for k in kernels:
                with stock_linears(pair) if k == "torch" else contextlib.nullcontext():
                    parts.append(f"{k} MLP {_median_ms(lambda: up(h), args.repeat * 3):.2f}, "
                                 f"head {_median_ms(lambda: head(h), args.repeat):.1f}")
            print(f"  {rows:2d} rows: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
