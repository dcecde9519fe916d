"""torch.tpu.optimizers (TorchTPU 0.2): AdamW, Sgd and Muon train a small model on tpu to
the losses and parameters torch.optim gives on CPU (Muon: torch.optim.Muon for the 2-D
weights, AdamW for the biases), each step one program; SingleTraceTrainer's compiled
step (forward, backward, update as one program) gives the eager CPU loop's losses, with
or without an optimizer or its own loss function."""

import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from helpers import assert_same, rand
from torch.tpu.optimizers import AdamW, Muon, Optimizer, Sgd, SingleTraceTrainer

STEPS = 5


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


X, Y = rand((8, 6), torch.float32, seed=1), rand((8, 3), torch.float32, seed=2)


def _cpu_loop(make_opt, model=None, loss_fn=None):
    """Losses of the eager CPU loop (each before its update) and the trained model."""
    model = model or _model()
    opt = make_opt(model)
    losses = []
    for _ in range(STEPS):
        loss = loss_fn(model) if loss_fn else F.mse_loss(model(X), Y)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses, model


def _loop(optimizer: Optimizer, device: str):
    """The same loop with a torch.tpu.optimizers optimizer on `device`."""
    model = _model().to(device)
    group = optimizer.init_param_group(model)
    x, y = X.to(device), Y.to(device)
    losses = []
    for _ in range(STEPS):
        loss = F.mse_loss(model(x), y)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        assert optimizer.step(group, dict(zip(group.params, grads))) is group
        losses.append(loss.item())
    return losses, model


def _same_model(got, want, rtol=1e-5, atol=1e-6):
    for (name, a), b in zip(got.named_parameters(), want.parameters()):
        got_p, want_p = a.detach().cpu(), b.detach()
        torch.testing.assert_close(
            got_p, want_p, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}"
        )


def test_adamw_matches_torch_optim():
    want, cpu_model = _cpu_loop(
        lambda m: torch.optim.AdamW(m.parameters(), lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)
    )
    ours = AdamW(lr=0.05, beta1=0.8, beta2=0.99, weight_decay=0.1, use_bfloat16_moments=False)
    got, model = _loop(ours, "tpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    _same_model(model, cpu_model)
    assert want[-1] < want[0] * 0.7  # it trains


def test_adamw_bfloat16_moments():
    ours = AdamW(lr=0.05)
    group = ours.init_param_group(_model().to("tpu"))
    assert all(m.dtype == torch.bfloat16 for m in group.opt_state_m.values())
    got, model = _loop(ours, "tpu")
    want, cpu_model = _loop(AdamW(lr=0.05), "cpu")  # the same optimizer on CPU tensors
    torch.testing.assert_close(got, want, rtol=1e-4, atol=0)
    _same_model(model, cpu_model, rtol=1e-3, atol=1e-4)
    # Float32 moments take nearly the same path: bfloat16 storage only rounds them.
    exact, _ = _loop(AdamW(lr=0.05, use_bfloat16_moments=False), "cpu")
    torch.testing.assert_close(got, exact, rtol=1e-2, atol=0)


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(lr=0.01, momentum=0.5, maximize=True),
]


@pytest.mark.parametrize("kw", SGD_CASES)
def test_sgd_matches_torch_optim(kw):
    want, cpu_model = _cpu_loop(lambda m: torch.optim.SGD(m.parameters(), **kw))
    got, model = _loop(Sgd(**kw), "tpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    _same_model(model, cpu_model)


def _muon_and_adamw(model):
    """torch.optim.Muon for the 2-D weights, torch.optim.AdamW for the rest."""
    two = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    opts = [
        torch.optim.Muon(two, lr=0.02, weight_decay=0.1, momentum=0.9),
        torch.optim.AdamW(rest, lr=0.01, betas=(0.9, 0.95), weight_decay=0.05),
    ]

    class Both:
        def zero_grad(self):
            for o in opts:
                o.zero_grad()

        def step(self):
            for o in opts:
                o.step()

    return Both()


def test_muon_matches_torch_optim():
    want, cpu_model = _cpu_loop(_muon_and_adamw)

    def muon():
        return Muon(
            lr=0.02,
            weight_decay=0.1,
            momentum=0.9,
            adamw_lr=0.01,
            adamw_betas=(0.9, 0.95),
            adamw_weight_decay=0.05,
        )

    # A Newton-Schulz product rounded to bfloat16 may land one bfloat16 step away where
    # its float32 sums differ in their last bits (summation orders differ), so the
    # parameters agree to a bfloat16 step of the update; the losses closely.
    on_cpu, cpu_ours = _loop(muon(), "cpu")  # the update itself, on CPU: torch's
    torch.testing.assert_close(on_cpu, want, rtol=1e-5, atol=0)
    _same_model(cpu_ours, cpu_model, rtol=1e-2, atol=1e-3)
    got, model = _loop(muon(), "tpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    _same_model(model, cpu_model, rtol=1e-2, atol=1e-3)
    assert got[-1] < got[0]


def test_step_is_one_program():
    model = _model().to("tpu")
    for opt in (AdamW(lr=0.01), Sgd(lr=0.1, momentum=0.9), Muon(lr=0.01)):
        group = opt.init_param_group(model)
        loss = F.mse_loss(model(X.to("tpu")), Y.to("tpu"))
        grads = dict(zip(group.params, torch.autograd.grad(loss, list(model.parameters()))))
        torch.tpu.synchronize()
        before = torch_tpu.metrics.snapshot()["executions"]
        opt.step(group, grads)
        assert torch_tpu.metrics.snapshot()["executions"] - before == 1, type(opt).__name__


def test_defaults_and_checks():
    opt = AdamW(lr=0.5, weight_decay=0.0, use_bfloat16_moments=False)
    assert opt.defaults["lr"] == 0.5 and opt.defaults["beta2"] == 0.999
    with pytest.raises(TypeError):
        opt.defaults["lr"] = 1.0
    assert Sgd().defaults == dict(
        lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False
    )
    group = opt.init_param_group({"w": torch.ones(2, device="tpu")})
    with pytest.raises(KeyError, match="w"):
        opt.step(group, {})
    with pytest.raises(ValueError, match="amsgrad"):
        AdamW(amsgrad=True)
    with pytest.raises(ValueError, match="Nesterov"):
        Sgd(nesterov=True)
    with pytest.raises(ValueError, match="ns_steps"):
        Muon(ns_steps=0)
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        Muon(adjust_lr_fn="other")
    with pytest.raises(TypeError):
        Optimizer()


def test_single_trace_trainer_matches_eager_loop():
    want, cpu_model = _cpu_loop(
        lambda m: torch.optim.AdamW(m.parameters(), lr=0.05, weight_decay=0.1)
    )
    model = _model().to("tpu")
    opt = AdamW(lr=0.05, weight_decay=0.1, use_bfloat16_moments=False)
    trainer = SingleTraceTrainer(model, opt)
    x, y = X.to("tpu"), Y.to("tpu")
    step = trainer.make_compiled_train_step(x, y)
    got = []
    for i in range(STEPS):
        before = torch_tpu.metrics.snapshot()["executions"]
        got.append(step(x, y).item())
        if i > 0:  # the first run compiles; every run is one program
            assert torch_tpu.metrics.snapshot()["executions"] - before == 1
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    _same_model(model, cpu_model, atol=1e-5)  # the model's own parameters were updated
    assert set(trainer.params) == {n for n, _ in model.named_parameters()}
    assert trainer.params["0.weight"] is trainer.param_group.params["0_weight"]
    with pytest.raises(ValueError, match="targets"):
        step(x)


def test_single_trace_trainer_loss_fn_and_sgd():
    def loss_fn(model, args, kwargs):
        return model(*args, **kwargs).pow(2).mean()

    kw = dict(lr=0.1, momentum=0.9)
    want, cpu_model = _cpu_loop(
        lambda m: torch.optim.SGD(m.parameters(), **kw), loss_fn=lambda m: loss_fn(m, (X,), {})
    )
    model = _model().to("tpu")
    trainer = SingleTraceTrainer(model, Sgd(**kw), compute_loss_fn=loss_fn)
    step = trainer.make_compiled_train_step({"input": X.to("tpu")})
    got = [step({"input": X.to("tpu")}).item() for _ in range(STEPS)]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    _same_model(model, cpu_model)


def test_single_trace_trainer_gradients_only():
    cpu_model = _model()
    F.mse_loss(cpu_model(X), Y).backward()
    model = _model().to("tpu")
    before = copy.deepcopy(model).cpu()
    calls = []

    def compile_fn(graph, example_inputs):
        calls.append(len(example_inputs))
        return torch.compile(graph, backend="tpu")

    trainer = SingleTraceTrainer(model, compile_fn=compile_fn)
    step = trainer.make_compiled_train_step(X.to("tpu"), Y.to("tpu"))
    loss = step(X.to("tpu"), Y.to("tpu"))
    assert calls == [4 + 2]  # 4 parameters, inputs, targets
    assert_same(loss, F.mse_loss(cpu_model(X), Y).detach(), rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(model.named_parameters(), cpu_model.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    _same_model(model, before, rtol=0, atol=0)  # no optimizer: nothing updated


def test_single_trace_trainer_updates_buffers():
    """Batch norm's running statistics, updated in place inside the traced step, reach
    the model as in the eager CPU loop."""

    def bn_model():
        torch.manual_seed(0)
        nn = torch.nn
        return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 3))

    want, cpu_model = _cpu_loop(lambda m: torch.optim.SGD(m.parameters(), lr=0.1), bn_model())
    model = bn_model().to("tpu")
    step = SingleTraceTrainer(model, Sgd(lr=0.1)).make_compiled_train_step(
        X.to("tpu"), Y.to("tpu")
    )
    got = [step(X.to("tpu"), Y.to("tpu")).item() for _ in range(STEPS)]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    _same_model(model, cpu_model)
    for (name, b), want_b in zip(model.named_buffers(), cpu_model.buffers()):
        assert_same(b, want_b, rtol=1e-5, atol=1e-6)


class _DictLoss(torch.nn.Module):
    """A model whose output carries its loss (as Hugging Face models' do)."""

    def __init__(self):
        super().__init__()
        self.net = _model()

    def forward(self, x):
        out = self.net(x)
        return {"logits": out, "loss": out.pow(2).mean()}


@pytest.mark.parametrize("kind", ["output loss", "output mean"])
def test_single_trace_trainer_loss_from_output(kind):
    """Without targets the loss is the output's `loss`, else the mean of its tensor."""

    def make():
        return _DictLoss() if kind == "output loss" else _model()

    def cpu_loss(m):
        out = m(X)
        return out["loss"] if kind == "output loss" else out.mean()

    want, cpu_model = _cpu_loop(lambda m: torch.optim.SGD(m.parameters(), lr=0.1), make(), cpu_loss)
    model = make().to("tpu")
    step = SingleTraceTrainer(model, Sgd(lr=0.1)).make_compiled_train_step(X.to("tpu"))
    got = [step(X.to("tpu")).item() for _ in range(STEPS)]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)
    _same_model(model, cpu_model)


@dataclasses.dataclass
class _SignState:
    params: dict


torch.utils._pytree.register_dataclass(_SignState)


class _SignDescent(Optimizer):
    """A user's optimizer written as TorchTPU's docs say: a ParamGroup pytree with the
    parameters, init_param_group and step."""

    ParamGroup = _SignState

    def init_param_group(self, params):
        if isinstance(params, torch.nn.Module):
            params = {n.replace(".", "_"): p.detach() for n, p in params.named_parameters()}
        return _SignState(dict(params))

    def step(self, param_group, grads):
        for n, p in param_group.params.items():
            p.sub_(self._lr * grads[n].sign())
        return param_group


def test_user_optimizer_in_single_trace_trainer():
    class CpuSign:
        def __init__(self, params):
            self.params = list(params)

        def zero_grad(self):
            for p in self.params:
                p.grad = None

        @torch.no_grad()
        def step(self):
            for p in self.params:
                p.sub_(0.01 * p.grad.sign())

    want, cpu_model = _cpu_loop(lambda m: CpuSign(m.parameters()))
    model = _model().to("tpu")
    trainer = SingleTraceTrainer(model, _SignDescent(lr=0.01))
    assert set(trainer.param_group.params) == {"0_weight", "0_bias", "2_weight", "2_bias"}
    step = trainer.make_compiled_train_step(X.to("tpu"), Y.to("tpu"))
    got = [step(X.to("tpu"), Y.to("tpu")).item() for _ in range(STEPS)]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    _same_model(model, cpu_model)
