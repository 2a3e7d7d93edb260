"""PyTorch's examples (dcgan, mnist, word_language_model), shrunk, with intra-op threads; it does
NOT import gputop_dl.

Ground truth for the estimated slowdown of multi-threaded jobs: each model and loop is
the example's own (dcgan/main.py: G and D of `--ngf`/`--ndf` feature maps, Adam, BCE, two
optimizers a step; mnist/main.py: its Net, Adadelta, NLL; word_language_model/main.py: its
2-layer LSTM, clipping, plain SGD), on random data of the example's shape (no download), on the
CPU with `torch.set_num_threads(--threads)` (torch's OpenMP intra-op pool) and `--workers`
loader processes. The model sizes are shrunk so that one iteration takes a fraction of a second
on a small box.

It prints one line per iteration, `it N T` (T: time.time() when the iteration ended), and at the
end its own rate as JSON on the last stdout line: {"its_per_s", "iters", "from", "to"}, the
iterations after `--warmup` over their span. `--seconds S` trains for S seconds, `--iters N`
for N iterations (whichever comes first).
"""

import argparse
import json
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


class Random(Dataset):
    """Random samples of the example's shape (a decode-free stand-in for its dataset)."""

    def __init__(self, make, n=1 << 20):
        self.make, self.n = make, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return self.make(g)


def dcgan(a):
    nz, ngf, ndf, nc = 100, a.width, a.width, 3
    netG = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh())  # 32x32
    netD = nn.Sequential(
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    crit = nn.BCELoss()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    data = Random(lambda g: (torch.rand(nc, 32, 32, generator=g) * 2 - 1,))

    def step(batch):
        (real,) = batch
        b = real.size(0)
        netD.zero_grad()
        errD_real = crit(netD(real).view(-1), torch.ones(b))
        errD_real.backward()
        fake = netG(torch.randn(b, nz, 1, 1))
        errD_fake = crit(netD(fake.detach()).view(-1), torch.zeros(b))
        errD_fake.backward()
        optD.step()
        netG.zero_grad()
        errG = crit(netD(fake).view(-1), torch.ones(b))
        errG.backward()
        optG.step()

    return data, step


class MnistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.relu(self.fc1(torch.flatten(self.dropout1(x), 1)))
        return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)


def mnist(a):
    model = MnistNet()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    data = Random(lambda g: (torch.randn(1, 28, 28, generator=g),
                             torch.randint(0, 10, (), generator=g)))

    def step(batch):
        x, y = batch
        opt.zero_grad()
        F.nll_loss(model(x), y).backward()
        opt.step()

    return data, step


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return F.log_softmax(self.decoder(self.drop(out)), dim=-1), hidden


def lm(a):
    ntoken, bptt = 10000, 35
    model = RNNModel(ntoken, a.width, a.width, 2)
    state = {"hidden": None}
    data = Random(lambda g: torch.randint(0, ntoken, (bptt + 1,), generator=g))

    def step(batch):
        seq = batch.t().contiguous()  # (bptt + 1, batch), as batchify + get_batch
        x, y = seq[:-1], seq[1:].reshape(-1)
        h = state["hidden"]
        if h is not None:
            h = tuple(v.detach() for v in h)  # repackage_hidden
        model.zero_grad()
        out, state["hidden"] = model(x, h)
        F.nll_loss(out.view(-1, ntoken), y).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-20.0)

    return data, step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=("dcgan", "mnist", "lm"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=32)  # dcgan: ngf = ndf; lm: embedding and hidden
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    data, step = {"dcgan": dcgan, "mnist": mnist, "lm": lm}[a.model](a)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        drop_last=True)
    t_end = time.time() + a.seconds
    stamps = []
    for i, batch in enumerate(loader, 1):
        step(batch)
        stamps.append(time.time())
        print(f"it {i} {stamps[-1]:.4f}", flush=True)
        if stamps[-1] >= t_end or (a.iters and i >= a.iters):
            break
    use = stamps[a.warmup:]
    rate = (len(use) - 1) / (use[-1] - use[0]) if len(use) > 1 else None
    print(json.dumps({"its_per_s": rate, "iters": len(use) - 1,
                      "from": use[0] if use else None, "to": use[-1] if use else None}))


if __name__ == "__main__":
    main()
