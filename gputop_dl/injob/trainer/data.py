"""Datasets and transform pipelines for the built-in trainer (FakeData, ImageFolder, synthetic)."""

from __future__ import annotations

import ast
import re
from typing import Any

import torch

from gputop_dl.injob.trainer.synthetic import SyntheticDataset
from gputop_dl.workload import Workload

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.S)


# torchvision has no type annotations (pyproject: ignore_missing_imports): its transforms and
# datasets are the objects it makes, checked where the trainer uses them. It is imported where
# used: a synthetic job (model and data) never needs it, and its import is about 2.5 s of CPU
# of the 7 s a trainer takes to start on the 2-core box


def parse_transform(spec: str) -> object:
    """'RandomResizedCrop(224, scale=(0.5, 1.0))' -> the torchvision transform object."""
    from torchvision import transforms as T

    m = _SPEC.match(spec)
    if not m or not hasattr(T, m.group(1)):
        raise ValueError(f"unknown transform {spec!r}: expected a torchvision.transforms name")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if m.group(2) and m.group(2).strip():
        call = ast.parse(f"f({m.group(2)})", mode="eval").body
        if not isinstance(call, ast.Call):  # "f(...)" parses as a call or not at all
            raise ValueError(f"unknown transform {spec!r}: expected NAME(ARGS)")
        args = [ast.literal_eval(a) for a in call.args]
        for k in call.keywords:
            if k.arg is None:  # `**{...}`: not a keyword the transform takes by name
                raise ValueError(f"unknown transform {spec!r}: expected name=value arguments")
            kwargs[k.arg] = ast.literal_eval(k.value)
    return getattr(T, m.group(1))(*args, **kwargs)


def build_transform(w: Workload) -> object:
    """The `light` / `heavy` presets, or the explicit list of the workload."""
    from torchvision import transforms as T

    if w.transforms == "light":  # pre-resized images: only conversion and normalisation
        steps = [T.ToTensor(), T.Normalize(MEAN, STD)]
    elif w.transforms == "heavy":  # a CPU-heavy ImageNet-style augmentation
        steps = [
            T.Resize(int(w.input_size * 1.15)),
            T.RandomResizedCrop(w.input_size),
            T.RandomHorizontalFlip(),
            T.ColorJitter(0.3, 0.3, 0.3),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ]
    else:
        steps = [parse_transform(s) for s in w.transforms]
    return T.Compose(steps)


def source_size(w: Workload) -> int:
    """Side of generated FakeData images: pre-resized for `light`, larger for other pipelines."""
    if w.source_size:
        return w.source_size
    return w.input_size if w.transforms == "light" else int(w.input_size * 1.5)


def epoch_length(w: Workload, world_size: int = 1) -> int:
    if w.dataset_size:
        return w.dataset_size
    steps = w.steps_per_epoch or 50
    return steps * w.batch_size * world_size


def build_dataset(w: Workload, world_size: int = 1) -> torch.utils.data.Dataset[Any]:
    if w.dataset == "synthetic":
        return SyntheticDataset(epoch_length(w, world_size), w.input_size, w.num_classes,
                                w.sample_cpu_ms, w.sample_io_ms)
    import torchvision

    ds: torch.utils.data.Dataset[Any]
    if w.dataset == "imagefolder":
        ds = torchvision.datasets.ImageFolder(w.root, transform=build_transform(w))
        return ds
    s = source_size(w)
    ds = torchvision.datasets.FakeData(size=epoch_length(w, world_size), image_size=(3, s, s),
                                       num_classes=w.num_classes, transform=build_transform(w),
                                       random_offset=w.seed)
    return ds
