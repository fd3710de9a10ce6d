"""Training steps against PyTorch: the same random initial weights (a
PyTorch state_dict as .npz, bound with mge-train --weights) and the same
batches; after S steps of SGD (plain; momentum + weight decay + Nesterov),
Adam or AdamW, every parameter mge-dump --params exports equals PyTorch's
within 1e-5 relative, at 1 and 2 threads (Adam at eps 1e-4, and at the
default eps where that is well-conditioned: see test_adam_default_eps; the
sample lenet's batch normalization makes some gradients rounding noise, so
its Adam check is against float64 PyTorch: test_adam_batchnorm_lenet).
Also: two runs with the same seed and threads write byte-identical parameters."""
import os

import numpy as np

from common import ROOT, need_torch, rel_err, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from nets import LENET_PLAIN_MGT, MLP, LeNet, LeNetPlain  # noqa: E402

torch.set_num_threads(2)

TOL = 1e-5
BATCH = 16


NETS = {"lenet": LeNet, "lenet_plain": LeNetPlain, "mlp": MLP}

# name: (torch optimizer factory, mge-train options)
OPTIMS = {
    "sgd": (lambda p: torch.optim.SGD(p, lr=0.1),
            ["--optimizer", "sgd", "--lr", "0.1"]),
    "sgd_nesterov": (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True),
                     ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "0.01",
                      "--nesterov"]),
    # eps 1e-4: see test_adam_default_eps for why
    "adam": (lambda p: torch.optim.Adam(p, lr=1e-3, eps=1e-4),
             ["--optimizer", "adam", "--lr", "0.001", "--eps", "1e-4"]),
    "adamw": (lambda p: torch.optim.AdamW(p, lr=1e-3, betas=(0.8, 0.99), eps=1e-4, weight_decay=0.1),
              ["--optimizer", "adamw", "--lr", "0.001", "--betas", "0.8,0.99", "--eps", "1e-4",
               "--weight-decay", "0.1"]),
    "adam_default": (lambda p: torch.optim.Adam(p),
                     ["--optimizer", "adam"]),
}


def make_case(net, steps, label_dtype, seed=7):
    """Initial weights and steps*BATCH samples, written to a fresh directory."""
    torch.manual_seed(seed)
    model = NETS[net]()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(steps * BATCH, 1, 28, 28, generator=gen)
    label = torch.randint(0, 10, (steps * BATCH,), generator=gen)
    d = tmpdir()
    with open(os.path.join(d, "lenet_plain.mgt"), "w") as f:
        f.write(LENET_PLAIN_MGT)
    init = os.path.join(d, "init.npz")
    data = os.path.join(d, "batch.npz")
    np.savez(init, **{k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    np.savez(data, x=x.numpy(), label=label.numpy().astype(label_dtype))
    return d, model, x, label


def torch_train(model, make_opt, x, label, steps):
    opt = make_opt(model.parameters())
    model.train()
    for s in range(steps):
        xb, lb = x[s * BATCH:(s + 1) * BATCH], label[s * BATCH:(s + 1) * BATCH]
        opt.zero_grad()
        F.cross_entropy(model(xb), lb).backward()
        opt.step()
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def mge_train(d, net, opts, steps, threads, tag, init=True):
    """Runs mge-train on d/batch.npz (from d/init.npz unless not init); returns the .npz of the
    trained parameters."""
    out = os.path.join(d, f"{tag}.mge")
    params = os.path.join(d, f"{tag}.npz")
    mgt = os.path.join(d, net + ".mgt") if net == "lenet_plain" else os.path.join(ROOT, "samples", "nets", net + ".mgt")
    run([tool("mge-train"), mgt,
         "--data", os.path.join(d, "batch.npz"), "--batch", str(BATCH), "--steps", str(steps),
         "--threads", str(threads), "-q", "-o", out, *opts,
         *(["--weights", os.path.join(d, "init.npz")] if init else [])])
    run([tool("mge-dump"), out, "--params", params])
    return params


def compare(got_path, ref, what):
    got = dict(np.load(got_path))
    missing = sorted(set(ref) - set(got))
    extra = sorted(set(got) - set(ref))
    assert not missing and not extra, f"{what}: missing {missing[:5]}, extra {extra[:5]}"
    worst = (0.0, "")
    for k, r in ref.items():
        g = got[k]
        assert g.shape == r.shape, f"{what}: {k} shape {g.shape} != {r.shape}"
        e = rel_err(g, r)
        if e > worst[0]:
            worst = (e, k)
    assert worst[0] < TOL, f"{what}: {worst[1]} relative error {worst[0]:.3g} >= {TOL}"


def check(optim, steps, nets=("lenet", "mlp"), threads=(1, 2)):
    make_opt, opts = OPTIMS[optim]
    for i, net in enumerate(nets):
        # both label dtypes the .npz may carry (the .mgt declares i32)
        d, model, x, label = make_case(net, steps, np.int64 if i % 2 == 0 else np.int32)
        ref = torch_train(model, make_opt, x, label, steps)
        for t in threads:
            got = mge_train(d, net, opts + ["--no-shuffle"], steps, t, f"{optim}-{steps}-t{t}")
            compare(got, ref, f"{net} {optim}, {steps} step(s), {t} thread(s)")


def test_sgd():
    check("sgd", 1)


def test_sgd_momentum_wd_nesterov():
    check("sgd_nesterov", 1)


def test_sgd_momentum_wd_nesterov_3_steps():
    check("sgd_nesterov", 3)


# Adam's update lr * m / (sqrt(v) + eps) amplifies rounding where gradients
# are near zero; the sample lenet's batch normalization makes the conv
# biases' gradients exactly that, so the strict comparisons use the plain
# LeNet and the MLP, and test_adam_batchnorm_lenet checks the sample lenet
# against float64 PyTorch.
ADAM_NETS = ("lenet_plain", "mlp")


def test_adam():
    check("adam", 1, nets=ADAM_NETS)


def test_adam_2_steps():
    check("adam", 2, nets=ADAM_NETS)


def test_adamw_weight_decay():
    check("adamw", 1, nets=ADAM_NETS)


def test_adam_batchnorm_lenet():
    """The sample lenet (batch normalization): after 2 Adam steps, each of
    mge's parameters and running statistics is within 1e-5 relative of
    float64 PyTorch, or no further from it than float32 PyTorch is (x2), or
    within a thousandth of a learning-rate step of it (batchnorm biases start
    at 0, so their largest magnitude is a couple of steps)."""
    for optim in ("adam", "adamw"):
        make_opt, opts = OPTIMS[optim]
        d, model, x, label = make_case("lenet", 2, np.int32)
        m64 = LeNet().double()
        m64.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in model.state_dict().items()})
        ref32 = torch_train(model, make_opt, x, label, 2)
        ref64 = torch_train(m64, make_opt, x.double(), label, 2)
        got = dict(np.load(mge_train(d, "lenet", opts + ["--no-shuffle"], 2, 2, f"bn-{optim}")))
        assert set(got) == set(ref64), f"names differ: {sorted(set(got) ^ set(ref64))[:5]}"
        for k, r in ref64.items():
            e_mge, e_t32 = rel_err(got[k], r), rel_err(ref32[k], r)
            diff = float(np.max(np.abs(got[k].astype(np.float64) - r)))
            assert e_mge <= max(TOL, 2 * e_t32) or diff <= 1e-3 * 1e-3, \
                f"lenet {optim}: {k}: mge {e_mge:.3g} from float64 ({diff:.3g} absolute), float32 PyTorch {e_t32:.3g}"


def test_adam_default_eps():
    """Adam's first update is lr * g / (|g| + eps): where |g| is near eps,
    the last-bit rounding of a gradient moves it by up to lr (at eps 1e-8,
    float32 PyTorch is itself ~1e-3 relative away from float64 PyTorch on
    lenet's fc1.weight), so the other Adam tests use eps 1e-4. Here, at the
    default eps: within 1e-5 of PyTorch where |g| >= 1e-6 (100 eps), and no
    element moved by more than lr elsewhere."""
    make_opt, opts = OPTIMS["adam_default"]
    lr = 1e-3
    for net in ADAM_NETS:
        d, model, x, label = make_case(net, 1, np.int64)
        init = dict(np.load(os.path.join(d, "init.npz")))
        model.zero_grad()
        F.cross_entropy(model(x), label).backward()
        grads = {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
        ref = torch_train(model, make_opt, x, label, 1)
        for t in (1, 2):
            got = dict(np.load(mge_train(d, net, opts + ["--no-shuffle"], 1, t, f"adam-default-t{t}")))
            what = f"{net} adam eps 1e-8, {t} thread(s)"
            for k, r in ref.items():
                g = got[k].astype(np.float64)
                well = np.abs(grads[k]) >= 1e-6
                assert well.sum() > g.size // 4, f"{what}: {k}: too few gradients >= 1e-6 to compare"
                e = float(np.max(np.abs(g - r)[well]) / np.max(np.abs(r)))
                assert e < TOL, f"{what}: {k} relative error {e:.3g} >= {TOL} (where |grad| >= 1e-6)"
                step = float(np.max(np.abs(g - init[k])))
                assert step <= lr * (1 + 1e-3), f"{what}: {k} moved by {step:.3g} > lr {lr}"


def test_deterministic():
    """Same seed and threads: byte-identical parameters (seeded init, shuffled data)."""
    for net in ("lenet", "mlp"):
        d, _, _, _ = make_case(net, 3, np.int64)
        for t in (1, 2):
            opts = ["--optimizer", "adam", "--seed", "5"]
            a = mge_train(d, net, opts, 4, t, f"det-a-t{t}", init=False)
            b = mge_train(d, net, opts, 4, t, f"det-b-t{t}", init=False)
            with open(a, "rb") as fa, open(b, "rb") as fb:
                assert fa.read() == fb.read(), f"{net}, {t} thread(s): two runs differ"
            # the identity is not vacuous: another seed gives other parameters
            c = mge_train(d, net, ["--optimizer", "adam", "--seed", "6"], 4, t, f"det-c-t{t}", init=False)
            za, zc = np.load(a), np.load(c)
            assert any(not np.array_equal(za[k], zc[k]) for k in za.files), f"{net}: --seed 5 and 6 give equal parameters"


def test_trained_params_load_strict():
    """mge-dump --params of a model trained with its optimizer state gives a
    state_dict PyTorch loads strictly (no __opt entries), and the loaded
    model computes what mge-run computes."""
    d, model, x, label = make_case("lenet", 2, np.int32)
    out = os.path.join(d, "t.mge")
    run([tool("mge-train"), os.path.join(ROOT, "samples", "nets", "lenet.mgt"), "--data", os.path.join(d, "batch.npz"),
         "--batch", str(BATCH), "--steps", "2", "--optimizer", "adam", "-q", "-o", out])
    params = os.path.join(d, "t.npz")
    run([tool("mge-dump"), out, "--params", params])
    sd = {k: torch.from_numpy(v) for k, v in np.load(params).items()}
    fresh = LeNet()
    fresh.load_state_dict(sd, strict=True)
    xin = os.path.join(d, "x.npy")
    np.save(xin, x[:4].numpy())
    logits = os.path.join(d, "y.npy")
    run([tool("mge-run"), out, "--input", "x=" + xin, "-o", logits])
    fresh.eval()
    with torch.no_grad():
        ref = fresh(x[:4]).numpy()
    assert rel_err(np.load(logits), ref) < 1e-4
