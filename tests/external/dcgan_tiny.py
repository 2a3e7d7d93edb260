"""A tiny DCGAN-style loop (PyTorch's examples/dcgan, shrunk): two models, two optimizers per
step, BCE losses, `fake.detach()` for D and a second forward of D for G. It does NOT import
gputop_dl; gputop-dl's start-up hook must split its steps into phases with no code change.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    nz = 8
    netG = nn.Sequential(nn.ConvTranspose2d(nz, 16, 4, 1, 0), nn.BatchNorm2d(16), nn.ReLU(True),
                         nn.ConvTranspose2d(16, 3, 4, 2, 1), nn.Tanh())  # -> 3x8x8
    netD = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.LeakyReLU(0.2, True),
                         nn.Conv2d(16, 1, 4, 1, 0), nn.Sigmoid())
    data = TensorDataset(torch.randn(256, 3, 8, 8))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    crit = nn.BCELoss()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for _epoch in range(2):
        for (real,) in loader:
            real = real.to("cpu")
            b = real.size(0)
            netD.zero_grad()
            out = netD(real).view(-1)
            errD_real = crit(out, torch.ones(b))
            errD_real.backward()
            fake = netG(torch.randn(b, nz, 1, 1))
            out = netD(fake.detach()).view(-1)
            errD_fake = crit(out, torch.zeros(b))
            errD_fake.backward()
            optD.step()
            netG.zero_grad()
            out = netD(fake).view(-1)
            errG = crit(out, torch.ones(b))
            errG.backward()
            optG.step()
    print("done")


if __name__ == "__main__":
    main()
