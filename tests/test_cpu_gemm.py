"""The oneDNN-packed CPU linears: same function, same parameters, switchable back to stock."""
import pytest
import torch
import torch.nn.functional as F

from oilbird import cpu_gemm
from oilbird.model import ModelError, load_model

needs_onednn = pytest.mark.skipif(not cpu_gemm.onednn_available(), reason="torch built without oneDNN")


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 40), torch.nn.SiLU(), torch.nn.Linear(40, 16))
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.mlp(self.emb(ids)))


@needs_onednn
def test_pack_replaces_every_linear_and_keeps_the_function():
    torch.manual_seed(0)
    m = Tied().eval()
    ids = torch.randint(0, 50, (1, 7))
    with torch.inference_mode():
        before = m(ids)
    keys = set(m.state_dict())
    assert cpu_gemm.pack_linears(m) == 3
    assert all(isinstance(x, cpu_gemm.PackedLinear) for x in (m.mlp[0], m.mlp[2], m.head))
    assert m.head.weight is m.emb.weight                    # tied weights stay tied
    assert set(m.state_dict()) == keys                     # the packed copy is not state
    with torch.inference_mode():
        packed = m(ids)
        with cpu_gemm.stock_linears(m):
            stock = m(ids)
        assert m.head.use_packed                            # switched back on after the block
    torch.testing.assert_close(packed, before, atol=1e-5, rtol=1e-5)
    assert torch.equal(stock, before)                       # stock path is F.linear exactly
    # one row and many rows: the same per-row values as F.linear
    x = torch.randn(12, 16)
    with torch.inference_mode():
        torch.testing.assert_close(m.mlp[0](x), F.linear(x, m.mlp[0].weight, m.mlp[0].bias),
                                   atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(m.mlp[0](x[:1]), F.linear(x[:1], m.mlp[0].weight, m.mlp[0].bias),
                                   atol=1e-5, rtol=1e-5)


@needs_onednn
def test_packed_copy_follows_an_in_place_weight_change():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8)
    m = torch.nn.Sequential(lin)
    cpu_gemm.pack_linears(m)
    x = torch.randn(3, 16)
    with torch.no_grad():
        m[0].weight.mul_(2.0)                                   # e.g. load_state_dict / copy_
        torch.testing.assert_close(m[0](x), F.linear(x, m[0].weight, m[0].bias), atol=1e-5, rtol=1e-5)
        m.load_state_dict({"0.weight": torch.zeros(8, 16), "0.bias": torch.ones(8)})
        assert torch.equal(m[0](x), torch.ones(3, 8))


@needs_onednn
def test_autograd_and_autocast_take_the_stock_path():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 8))
    cpu_gemm.pack_linears(m)
    x = torch.randn(3, 16, requires_grad=True)
    y = m(x)                                                    # grad enabled: stock F.linear
    assert y.requires_grad
    y.sum().backward()
    assert x.grad is not None and m[0].weight.grad is not None
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert m[0](torch.randn(3, 16)).dtype == torch.bfloat16


def test_pack_skips_what_it_cannot_pack():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4).to(torch.float64))
    assert cpu_gemm.pack_linears(m) == 0
    assert type(m[0]) is torch.nn.Linear


def test_wanted_only_fp32_cpu_and_env(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.delenv("OILBIRD_GEMM", raising=False)
    assert cpu_gemm.wanted(cpu, torch.float32)
    assert not cpu_gemm.wanted(cpu, torch.bfloat16)
    assert not cpu_gemm.wanted(cuda, torch.float32)
    monkeypatch.setenv("OILBIRD_GEMM", "torch")
    assert not cpu_gemm.wanted(cpu, torch.float32)
    monkeypatch.setenv("OILBIRD_GEMM", "mkl")
    with pytest.raises(ValueError, match="OILBIRD_GEMM"):
        cpu_gemm.wanted(cpu, torch.float32)


def test_bad_gemm_setting_is_one_clear_error_before_loading(monkeypatch, tmp_path):
    monkeypatch.setenv("OILBIRD_GEMM", "fast")
    with pytest.raises(ModelError, match="OILBIRD_GEMM must be 'onednn' or 'torch'"):
        load_model(tmp_path / "not-there")     # refused before the path is even looked at


@pytest.mark.model
@needs_onednn
def test_real_model_is_packed_on_cpu_and_agrees_with_stock(real_lm):
    if real_lm.device.type != "cpu":
        pytest.skip("packing is CPU-only")
    assert real_lm.gemm == "onednn"
    n = sum(isinstance(m, cpu_gemm.PackedLinear) for m in real_lm.model.modules())
    assert n == 7 * real_lm.num_layers + 1            # q k v o gate up down per layer + LM head
    ids = torch.tensor([[1, 504, 3458, 314, 260, 2593, 28, 198, 330, 7]])
    with torch.inference_mode():
        packed = real_lm.model(input_ids=ids).logits[0]
        with cpu_gemm.stock_linears(real_lm.model):
            stock = real_lm.model(input_ids=ids).logits[0]
    torch.testing.assert_close(packed, stock, atol=2e-3, rtol=1e-3)
    assert packed.argmax(-1).tolist() == stock.argmax(-1).tolist()
