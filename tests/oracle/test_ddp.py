"""Data-parallel training against PyTorch: `mpirun -np N mge-train` with
--batch B per rank, from a PyTorch state_dict (--weights), against PyTorch
training the same model on the global batches of N*B samples (what DDP is
equal to, by PyTorch's own test of it), every parameter within 1e-5
relative after S steps: the MLP with SGD + momentum and Adam (eps 1e-4, as
in test_train_step.py), the sample LeNet with --sync-bn (batchnorm over the
global batch) with SGD + momentum, at 2 and 3 ranks (3 oversubscribed).
Skipped, visibly, without mpirun or with a mge-train built without MPI."""
import os
import shutil
import subprocess

import numpy as np

from common import ROOT, Skip, need_torch, rel_err, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from nets import MLP, LeNet  # noqa: E402

torch.set_num_threads(1)

if shutil.which("mpirun") is None:
    raise Skip("mpirun not installed (scripts/deps installs openmpi-bin)")
if b"libmpi" not in subprocess.run(["ldd", tool("mge-train")], stdout=subprocess.PIPE).stdout:
    raise Skip("mge-train built without MPI (libopenmpi-dev missing at build time)")

TOL = 1e-5
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader")
# Under ASan, LeakSanitizer reports OpenMPI's own allocations at exit in every
# rank (as in tests/cli/train_mpi.bats); mge's side is leak-checked by test_dist.c.
if b"libasan" in subprocess.run(["ldd", tool("mge-train")], stdout=subprocess.PIPE).stdout:
    ENV["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
NETS = {"lenet": LeNet, "mlp": MLP}


def case(net, ranks, batch, steps, seed=11):
    torch.manual_seed(seed)
    model = NETS[net]()
    n = ranks * batch * steps
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, 1, 28, 28, generator=gen)
    label = torch.randint(0, 10, (n,), generator=gen)
    d = tmpdir()
    np.savez(os.path.join(d, "init.npz"), **{k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    np.savez(os.path.join(d, "data.npz"), x=x.numpy(), label=label.numpy().astype(np.int32))
    return d, model, x, label


def torch_global(model, opt, x, label, gbatch, steps):
    model.train()
    for s in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x[s * gbatch:(s + 1) * gbatch]), label[s * gbatch:(s + 1) * gbatch]).backward()
        opt.step()
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def mge_ddp(d, net, ranks, batch, steps, opts):
    out = os.path.join(d, "ddp.mge")
    p = subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), tool("mge-train"),
                        os.path.join(ROOT, "samples", "nets", net + ".mgt"), "--data", os.path.join(d, "data.npz"),
                        "--weights", os.path.join(d, "init.npz"), "--batch", str(batch), "--steps", str(steps),
                        "--threads", "1", "--no-shuffle", "--check-sync", "-q", "-o", out, *opts],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    params = os.path.join(d, "ddp.npz")
    run([tool("mge-dump"), out, "--params", params])
    return dict(np.load(params))


def check(net, ranks, batch, steps, make_opt, opts):
    d, model, x, label = case(net, ranks, batch, steps)
    ref = torch_global(model, make_opt(model.parameters()), x, label, ranks * batch, steps)
    got = mge_ddp(d, net, ranks, batch, steps, opts)
    worst = max((rel_err(got[k], r), k) for k, r in ref.items() if k in got)
    assert sorted(got) == sorted(ref), (sorted(got), sorted(ref))
    assert worst[0] < TOL, f"{net}, {ranks} ranks: {worst[1]} relative error {worst[0]:.3g} >= {TOL}"


SGD = (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), ["--lr", "0.05", "--momentum", "0.9"])
ADAM = (lambda p: torch.optim.Adam(p, lr=1e-3, eps=1e-4), ["--optimizer", "adam", "--lr", "0.001", "--eps", "1e-4"])


def test_mlp_sgd_momentum_2_ranks():
    check("mlp", 2, 8, 5, *SGD)


def test_mlp_adam_3_ranks():
    check("mlp", 3, 6, 5, *ADAM)


def test_lenet_sync_bn_sgd_momentum_2_ranks():
    check("lenet", 2, 8, 3, SGD[0], SGD[1] + ["--sync-bn"])


def test_lenet_sync_bn_sgd_momentum_3_ranks():
    check("lenet", 3, 4, 3, SGD[0], SGD[1] + ["--sync-bn"])
