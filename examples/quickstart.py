"""A first look at the `tpu` device: tensors, ops, a small model, and what ran."""

import torch

import torch_tpu

print(
    f"torch_tpu {torch_tpu.__version__}: {torch.tpu.device_count()} device(s), "
    f"{torch.tpu.get_device_name(0)}"
)

x = torch.randn(64, 64)
y = x.to("tpu")
z = (y @ y + 1).relu().sum(0)
ref = (x @ x + 1).relu().sum(0)
print("matches CPU:", torch.allclose(z.cpu(), ref, rtol=1e-4, atol=1e-4))

model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
out_cpu = model(x)
model.to("tpu")
out_tpu = model(y)
print(
    "model output on",
    out_tpu.device,
    "matches CPU:",
    torch.allclose(out_tpu.detach().cpu(), out_cpu.detach(), rtol=1e-4, atol=1e-4),
)
print(out_tpu[:2])

for i in range(8):  # new scalars and offsets reuse the compiled program
    y[i] + i
print(torch_tpu.metrics.report())
