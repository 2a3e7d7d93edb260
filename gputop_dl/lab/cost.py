"""Model cost: parameters and forward GMac of torchvision classification models.

Counted with `torch.utils.flop_counter.FlopCounterMode` on a batch of one, on the meta device
(shapes only, no memory, no arithmetic; the CPU where a model cannot be built on meta). The
counter reports FLOPs of matmuls and convolutions, ≈ 2 × MACs, so GMac = FLOPs / 2 / 1e9; it skips
element-wise layers (BN, ReLU, pooling), which other counters add (< 1 % for these models).
Training costs ≈ 3 × forward per image (forward + backward); count it that way, because the
counter over-counts the backward of grouped/depthwise convolutions (MobileNets).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode

if TYPE_CHECKING:
    from rich.table import Table

# The lab notebooks' reference table (224×224, one image, forward): model -> (GMac, params in millions).
REFERENCE: dict[str, tuple[float, float]] = {
    "alexnet": (0.71, 61.1), "vgg16": (15.5, 138.36), "densenet121": (2.88, 7.98),
    "resnet50": (4.12, 25.56), "resnet18": (1.82, 11.69), "inception_v3": (2.85, 27.16),
    "googlenet": (1.51, 6.6),
}
DEFAULT_MODELS: tuple[str, ...] = (*REFERENCE, "resnet34", "mobilenet_v2")

# As torchvision ships the model (its documented parameter counts): GoogLeNet's pretrained
# weights drop the auxiliary heads, Inception v3's keep them.
_AS_SHIPPED: dict[str, dict[str, bool]] = {"googlenet": {"aux_logits": False, "init_weights": False},
                                "inception_v3": {"init_weights": False}}


@dataclass(frozen=True)
class ModelCost:
    name: str
    input_size: int
    params: int | None = None
    flops: float | None = None  # forward, one image
    device: str | None = None  # where it was counted: meta or cpu
    error: str | None = None

    @property
    def gmac(self) -> float | None:
        return None if self.flops is None else self.flops / 2 / 1e9

    def to_json(self) -> dict[str, Any]:
        ref = REFERENCE.get(self.name)
        return {"model": self.name, "input_size": self.input_size, "params": self.params,
                "params_m": None if self.params is None else self.params / 1e6,
                "gmac": self.gmac, "train_gmac": None if self.gmac is None else 3 * self.gmac,
                "flops": self.flops, "counted_on": self.device, "error": self.error,
                "reference": {"gmac": ref[0], "params_m": ref[1]} if ref else None}


def build(name: str, input_size: int = 224) -> torch.nn.Module:
    kw: dict[str, object] = dict(_AS_SHIPPED.get(name, {}))
    if name.startswith("vit_"):
        kw["image_size"] = input_size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model: torch.nn.Module = torchvision.models.get_model(name, weights=None, **kw)
    return model


def _count(name: str, input_size: int, device: str) -> tuple[int, float]:
    with torch.device(device):
        model = build(name, input_size)
    model.eval()
    x = torch.empty(1, 3, input_size, input_size, device=device)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(x)
    return sum(p.numel() for p in model.parameters()), float(counter.get_total_flops())


def model_cost(name: str, input_size: int = 224) -> ModelCost:
    """Parameters and forward FLOPs of one model at `input_size`²; errors go into `.error`."""
    err = None
    for device in ("meta", "cpu"):
        try:
            params, flops = _count(name, input_size, device)
            return ModelCost(name, input_size, params, flops, device)
        except Exception as exc:  # noqa: BLE001 - e.g. too small an input for the model
            lines = str(exc).strip().splitlines()
            err = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return ModelCost(name, input_size, error=err[:200] if err else "failed")


def rich_table(costs: list[ModelCost]) -> Table:
    from rich.table import Table
    from rich.text import Text

    t = Table(title=f"model cost · forward, one image · {costs[0].input_size}×"
              f"{costs[0].input_size}" if costs else "model cost", title_justify="left")
    for h in ("model", "params (M)", "GMac", "train GMac (≈3×)", "background GMac / M", "note"):
        t.add_column(h, justify="left" if h in ("model", "note") else "right")
    for c in costs:
        ref = REFERENCE.get(c.name) if c.input_size == 224 else None
        t.add_row(c.name, "–" if c.params is None else f"{c.params / 1e6:.2f}",
                  "–" if c.gmac is None else f"{c.gmac:.2f}",
                  "–" if c.gmac is None else f"{3 * c.gmac:.2f}",
                  f"{ref[0]} / {ref[1]}" if ref else "–", Text(c.error or ""))
    return t
