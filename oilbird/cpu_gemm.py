"""fp32 linear layers on CPU through oneDNN, with each weight packed once at load time.

Why this exists: a tree verify feeds the model 4-24 rows at once, and what decides whether a
tree pays on CPU is how much more those rows cost than the AR step's one row. PyTorch's CPU
``F.linear`` goes to MKL's sgemm, which on this project's reference machine (AMD EPYC, AVX2,
2 cores) makes 4-12 rows cost 2-3x one row. oneDNN's inner product, on a weight reordered
once into its blocked layout, does not: ``python -m oilbird.verify_cost`` (both kernels in one
run, 608-token API-Bank prefix; two runs) timed the 49152x576 LM head at 12 rows in 14.2-14.5
ms against 34.9-40.5 ms, a 4-node tree verify at 1.15-1.16 AR steps against 1.76-2.00, and a
12-node one at 1.27-1.47 against 1.78-1.84.

The swap is the same function with different rounding: every method of a run, the AR
baseline and Hugging Face's own ``generate`` peers included, runs on the packed model, and
the lossless audit's reference runs with the packing switched off (:func:`stock_linears`),
so agreement is checked against stock ``transformers`` kernels, not against ourselves.

The cost is memory: the packed copy sits beside the original weight (kept for the stock
path, and for the input embedding a tied LM head shares), so the linear weights take twice
their size (SmolLM2-135M: ~0.5 GB more). ``OILBIRD_GEMM=torch`` turns it off; it is only ever applied to fp32 on CPU, and only when
this torch build has oneDNN.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
import torch.nn.functional as F


def onednn_available() -> bool:
    """True when this torch build can pack linear weights for oneDNN."""
    return bool(torch.backends.mkldnn.is_available()
                and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
                and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


class PackedLinear(torch.nn.Linear):
    """An ``nn.Linear`` that keeps its weight (shared, unchanged) plus a oneDNN-packed copy.

    ``use_packed`` False makes it a stock ``nn.Linear`` again (see :func:`stock_linears`).
    """

    def __init__(self, lin: torch.nn.Linear):
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = lin.in_features, lin.out_features
        self.weight = lin.weight          # the same Parameter: tied weights stay tied
        self.bias = lin.bias
        # a plain attribute, not a buffer: it never enters state_dict or save_pretrained
        self.packed = torch.ops.mkldnn._reorder_linear_weight(lin.weight.detach())
        self.use_packed = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.use_packed or x.dtype != torch.float32 or x.device.type != "cpu":
            return F.linear(x, self.weight, self.bias)
        bias = None if self.bias is None else self.bias.detach()
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, bias, "none", [], "")


def pack_linears(model: torch.nn.Module) -> int:
    """Replace every fp32 CPU ``nn.Linear`` of ``model`` by a :class:`PackedLinear`.

    Returns how many were replaced (0 when oneDNN is missing or nothing qualifies).
    """
    if not onednn_available():
        return 0
    n = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if (type(child) is torch.nn.Linear and child.weight.dtype == torch.float32
                    and child.weight.device.type == "cpu"):
                setattr(module, name, PackedLinear(child))
                n += 1
    return n


@contextlib.contextmanager
def stock_linears(model: torch.nn.Module) -> Iterator[None]:
    """Run the block with every :class:`PackedLinear` of ``model`` on the stock kernels."""
    packed = [m for m in model.modules() if isinstance(m, PackedLinear)]
    before = [m.use_packed for m in packed]
    for m in packed:
        m.use_packed = False
    try:
        yield
    finally:
        for m, b in zip(packed, before):
            m.use_packed = b


def wanted(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether :func:`pack_linears` should run for this device/dtype and ``$OILBIRD_GEMM``."""
    choice = os.environ.get("OILBIRD_GEMM", "onednn").strip().lower()
    if choice not in ("onednn", "torch"):
        raise ValueError(f"OILBIRD_GEMM must be 'onednn' or 'torch', not {choice!r}")
    return choice == "onednn" and device.type == "cpu" and dtype == torch.float32
