"""The synthetic model's written-out SGD against torch.optim.SGD: the same parameters after the
same steps."""

import pytest
import torch

from gputop_dl.injob.trainer.loop import build_optimizer
from gputop_dl.injob.trainer.synthetic import SyntheticSGD
from gputop_dl.workload import Workload


def _train(make_opt, steps: int = 6) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        x = torch.rand(4, 5, generator=g)
        torch.nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 2, 0])).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_its_steps_match_torch_optims_sgd_with_momentum():
    ours = _train(lambda ps: SyntheticSGD(ps, lr=0.1, momentum=0.9))
    torchs = _train(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9))
    start = _train(lambda ps: SyntheticSGD(ps, lr=0.1, momentum=0.9), steps=0)
    for a, b, s in zip(ours, torchs, start):
        assert torch.allclose(a, b, atol=1e-6), (a, b)
        assert not torch.allclose(a, s)  # it trained


def test_zero_grad_without_none_keeps_zeroed_tensors():
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    SyntheticSGD([p], lr=0.1, momentum=0.9).zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad.abs().sum().item() == 0


@pytest.mark.parametrize("model, optimizer, ours", [
    ("synthetic", "sgd", True), ("synthetic", "adam", False), ("resnet18", "sgd", False)])
def test_only_a_synthetic_models_sgd_is_written_out(model, optimizer, ours):
    w = Workload(name="a", model=model, optimizer=optimizer)
    opt = build_optimizer(w, torch.nn.Linear(2, 2).parameters())
    assert isinstance(opt, SyntheticSGD) == ours
