"""Twins: command lines equal but for where a run writes, its name or seed, its optimizer's
figures or its length (analyse/slowdown/twins.py)."""

import pytest

from gputop_dl.analyse.slowdown import twins


@pytest.mark.parametrize("a, b", [
    ("python main.py --dataset fake --workers 1 --outf out0",
     "python main.py --dataset fake --workers 1 --outf out1"),
    ("python train.py --seed 1 --run-name a --lr 0.1", "python train.py --lr 0.1 --seed=2 --run-name b"),
    ("python main.py --manualSeed 7 --save_dir x --log-interval 10",
     "python main.py --manualSeed 8 --save_dir y"),
    ("python main.py --save-model --epochs 2", "python main.py --epochs 2"),
    ("python main.py --lr 0.1 --weight-decay 1e-4 --epochs 90 --beta1 0.5",
     "python main.py --lr=0.01 --weight_decay 5e-4 --epochs 30 --beta1 0.9"),
    ("python fit.py --max_epochs 3 --max-steps 100", "python fit.py --max_epochs 5"),
    ("python run.py --num_train_epochs 1 --max_steps 50", "python run.py --num_train_epochs 3"),
    ("python mt.py dcgan --seconds 150", "python mt.py dcgan --seconds 100"),
])
def test_twins_differ_only_in_where_they_write_their_name_seed_optimizer_or_length(a, b):
    assert twins.key(a) == twins.key(b)


@pytest.mark.parametrize("a, b", [
    ("python main.py --batch-size 64", "python main.py --batch-size 128"),
    ("python main.py --workers 1", "python main.py --workers 2"),
    ("python main.py --dataset fake", "python main.py --dataset cifar10"),
    ("python a.py", "python b.py"),
    ("python main.py --arch resnet18", "python main.py --arch resnet50"),
    ("python main.py --lr 0.1", "python main.py --lr 0.1 --amp"),
    ("python main.py --shift -0.1 --seed 1", "python main.py --shift -0.2 --seed 1"),  # negative
    ("python main.py --out-channels 64", "python main.py --out-channels 128"),
])
def test_any_other_difference_makes_two_jobs(a, b):
    assert twins.key(a) != twins.key(b)


def test_what_differs_is_named_as_written():
    a = "python train.py --seed 1 --outf=o1 --run-name a --lr 0.1"
    b = "python train.py --lr 0.1 --seed 2 --outf=o2 --run-name a --tag x"
    assert twins.differ(a, b) == ("--seed", "--outf", "--tag")
    assert twins.differ(a, a) == ()
    assert twins.differ(b, a) == ("--seed", "--outf", "--tag")


def test_an_unbalanced_quote_is_one_token():
    assert twins.key("python 'a.py --seed 1") == ("python 'a.py --seed 1",)
