"""A small `diffusers.UNet2DModel` (random init, no download) and a DDPM noise schedule
(Ho et al. 2020): linear betas, the forward process q(x_t | x_0) for training and the
ancestral sampler p(x_{t-1} | x_t) for generation."""

import torch
from diffusers import UNet2DModel


def unet_small(size: int = 16, channels: int = 3) -> UNet2DModel:
    """Two resolutions, one ResNet block each, self-attention at the lower one: the
    structure of the DDPM UNet (group norm, SiLU, time embedding, skip connections,
    nearest upsampling) at a size a test trains in seconds."""
    return UNet2DModel(
        sample_size=size,
        in_channels=channels,
        out_channels=channels,
        layers_per_block=1,
        block_out_channels=(16, 32),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
        attention_head_dim=8,
    )


def unet_base(size: int = 32, channels: int = 3) -> UNet2DModel:
    """The DDPM CIFAR-10 layout, narrower (four resolutions, attention at 16x16)."""
    return UNet2DModel(
        sample_size=size,
        in_channels=channels,
        out_channels=channels,
        layers_per_block=2,
        block_out_channels=(64, 128, 128, 128),
        down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
    )


class DDPM:
    """The schedule's constants as CPU float32 tensors; `to(device)` moves them once, so a
    step only indexes them (with device timesteps)."""

    def __init__(self, steps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02):
        self.steps = steps
        self.betas = torch.linspace(beta_start, beta_end, steps, dtype=torch.float64)
        self.alphas = 1 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, 0)
        prev = torch.cat([torch.ones(1, dtype=torch.float64), self.alphas_cumprod[:-1]])
        # Variance of the posterior q(x_{t-1} | x_t, x_0) (the "fixed small" choice).
        self.sigmas = (self.betas * (1 - prev) / (1 - self.alphas_cumprod)).sqrt()
        for name in ("betas", "alphas", "alphas_cumprod", "sigmas"):
            setattr(self, name, getattr(self, name).float())

    def to(self, device):
        for name in ("betas", "alphas", "alphas_cumprod", "sigmas"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    def add_noise(self, x0, noise, t):
        """x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) noise, per sample."""
        abar = self.alphas_cumprod[t].view(-1, 1, 1, 1)
        return abar.sqrt() * x0 + (1 - abar).sqrt() * noise

    def step(self, eps, t: int, x, z):
        """One ancestral step from x_t to x_{t-1} given the predicted noise `eps` and a
        fresh normal sample `z` (unused at t = 0)."""
        alpha, abar = self.alphas[t], self.alphas_cumprod[t]
        mean = (x - (1 - alpha) / (1 - abar).sqrt() * eps) / alpha.sqrt()
        return mean + self.sigmas[t] * z if t > 0 else mean
