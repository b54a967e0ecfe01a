"""fp32 linear layers on CPU through oneDNN, with each weight packed once at load time.

Why this exists: a tree verify feeds the model 4-24 rows at once, and what decides whether a
tree pays on CPU is how much more those rows cost than the AR step's one row. PyTorch's CPU
``F.linear`` goes to MKL's sgemm, which on this project's reference machine (AMD EPYC, AVX2,
2 cores) makes 4-12 rows cost 2-3x one row. oneDNN's inner product, on a weight reordered
once into its blocked layout, does not: ``python -m oilbird.evaluation.verify_cost`` (both kernels in one
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

    Inference only, fp32 on CPU: anything else (autograd wanted, autocast on, another dtype or
    device, ``use_packed`` False, see :func:`stock_linears`) runs the stock ``F.linear``. If
    the weight is changed in place (``load_state_dict``, ``copy_``), the packed copy is
    rebuilt at the next call. The packed copy is an opaque oneDNN tensor: ``save_pretrained``
    works (it saves the weights), ``copy.deepcopy`` and ``torch.save`` of the module do not.
    """

    def __init__(self, lin: torch.nn.Linear):
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = lin.in_features, lin.out_features
        self.weight = lin.weight          # the same Parameter: tied weights stay tied
        self.bias = lin.bias
        self.use_packed = True
        self._repack()

    def _repack(self) -> None:
        # plain attributes, not buffers: they never enter state_dict or save_pretrained
        w = self.weight.detach()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(w)
        self._bias = None if self.bias is None else self.bias.detach()   # shares the storage
        self._packed_from = (w.data_ptr(), self.weight._version)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # ~211 calls per forward of the default model: the checks are ordered cheapest first
        w = self.weight
        if (self.use_packed and x.dtype is torch.float32 and x.is_cpu
                and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))
                and not torch.is_autocast_enabled("cpu")):
            if self._packed_from != (w.data_ptr(), w._version):
                if not w.is_cpu or w.dtype is not torch.float32:   # moved or cast since packing
                    return F.linear(x, w, self.bias)
                self._repack()            # the weight changed (in place or replaced) since
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self._bias, "none", [], "")
        return F.linear(x, w, self.bias)


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
    """Run the block with every :class:`PackedLinear` of ``model`` on the stock kernels.

    It flips a flag on the shared modules, so it is not for overlapping use from several
    threads on one model: a decode running meanwhile in another thread would switch kernels
    too (its outputs stay greedy, only its rounding and speed change). The workbench runs one
    model call at a time behind a lock.
    """
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
