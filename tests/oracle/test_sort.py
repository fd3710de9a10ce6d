"""topk, sort, argsort, cumsum and the prod/min/argmin reductions against
PyTorch: one text model with symbolic R and S run by mge-run (cpu and sim)
on records of several random sizes, odd ones included (values exact but
for cumsum and prod, 1e-5 relative; indices exact where there are no
ties, and NaN placed as torch places it); and their gradients through one
SGD step of mge-train on a parameter (loss mean((op(w) - r)^2)) against
torch.autograd, within 1e-5 relative; prod with zeros in its rows."""
import os

import numpy as np

from common import need_torch, read_stream, npy_stream, rel_err, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(2)

MODEL = """\
input x : f32[R,S]
v, i = topk(x, k=3, axis=1)
sv, si = topk(x, k=2, axis=0, largest=false)
s, so = sort(x, axis=1)
a = argsort(x, axis=0, descending=true)
c = cumsum(x, axis=1)
ce = cumsum(x, axis=0, exclusive=true, reverse=true)
p = prod(x, axis=1, keepdim=true)
m = min(x, axis=1)
am = argmin(x, axis=0)
output v, i, sv, si, s, so, a, c, ce, p, m, am
"""


def _want(x):
    t = torch.from_numpy(x)
    v, i = torch.topk(t, 3, dim=1)
    sv, si = torch.topk(t, 2, dim=0, largest=False)
    s, so = torch.sort(t, dim=1, stable=True)
    a = torch.sort(t, dim=0, descending=True, stable=True).indices
    c = torch.cumsum(t, 1)
    rc = torch.flip(torch.cumsum(torch.flip(t, [0]), 0), [0])
    ce = rc - t  # exclusive reverse: the sum of the later rows
    p = torch.prod(t, 1, keepdim=True)
    m = torch.amin(t, 1)
    am = torch.argmin(t, 0)
    return [v, i, sv, si, s, so, a, c, ce, p, m, am]


EXACT = {0, 1, 2, 3, 4, 5, 6, 10, 11}


def test_forward_vs_torch():
    d = tmpdir()
    path = os.path.join(d, "s.mgt")
    with open(path, "w") as f:
        f.write(MODEL)
    rng = np.random.default_rng(23)
    xs = [rng.standard_normal((N, S)).astype(np.float32) for N, S in [(2, 7), (5, 3), (3, 33), (9, 4)]]
    for x in xs:
        x *= rng.uniform(0.5, 1.5, x.shape).astype(np.float32)  # products stay near 1
    for dev in ["cpu", "sim"]:
        _, out, _ = run([tool("mge-run"), path, "--threads", "2", "--device", dev], stdin=npy_stream(*xs))
        got = read_stream(out)
        assert len(got) == 12 * len(xs)
        for n, x in enumerate(xs):
            for k, w in enumerate(_want(x)):
                g, w = got[12 * n + k], w.numpy()
                assert g.shape == w.shape, (dev, n, k, g.shape, w.shape)
                if k in EXACT:
                    assert np.array_equal(g, w), (dev, n, k, g, w)
                else:
                    assert rel_err(g, w) < 1e-5, (dev, n, k, rel_err(g, w))


def test_nan_order_vs_torch():
    """NaN is the largest value: sort puts it last, topk first; min and
    argmin return it."""
    d = tmpdir()
    path = os.path.join(d, "s.mgt")
    with open(path, "w") as f:
        f.write(MODEL)
    x = np.array([[1, np.nan, -2, 5, 0, 3, 2], [4, 1, 0, -1, 2, np.nan, 7]], np.float32)
    _, out, _ = run([tool("mge-run"), path], stdin=npy_stream(x))
    got = read_stream(out)
    for k, w in enumerate(_want(x)):
        if k in (7, 8, 9):  # sums and products with NaN are NaN either way
            continue
        assert np.array_equal(got[k], w.numpy(), equal_nan=True), (k, got[k], w)


GRAD_CASES = [
    # (name, mge line with y from w, torch function, w shape)
    ("topk", "y, yi = topk(w, k=3, axis=1)", lambda w: torch.topk(w, 3, 1).values, (4, 7)),
    ("topk0", "y, yi = topk(w, k=2, axis=0, largest=false)", lambda w: torch.topk(w, 2, 0, largest=False).values,
     (5, 3)),
    ("sort", "y, yi = sort(w, axis=1, descending=true)",
     lambda w: torch.sort(w, dim=1, descending=True, stable=True).values, (3, 6)),
    ("cumsum", "y = cumsum(w, axis=1)", lambda w: torch.cumsum(w, 1), (4, 5)),
    ("cumsum_rev_excl", "y = cumsum(w, axis=0, exclusive=true, reverse=true)",
     lambda w: torch.flip(torch.cumsum(torch.flip(w, [0]), 0), [0]) - w, (4, 5)),
    ("prod", "y = prod(w, axis=1)", lambda w: torch.prod(w, 1), (4, 5)),
    ("min", "y = min(w, axis=1)", lambda w: torch.amin(w, 1), (4, 6)),
]


def _grad_case(name, line, fn, shape, seed):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(shape).astype(np.float32)
    if name == "prod":
        w0[1, 2] = 0  # a lone zero: the product of the others
        w0[2, 0] = w0[2, 3] = 0  # two zeros: no gradient
    wt = torch.from_numpy(w0.copy()).requires_grad_(True)
    y = fn(wt)
    r = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    F.mse_loss(y, torch.from_numpy(r)).backward()
    want = (wt - 0.5 * wt.grad).detach().numpy()
    d = tmpdir()
    # one sample r [1, y's shape]: mean((y - r)^2) is mse_loss(y, r)
    rdims = ",".join(["N"] + [str(s) for s in y.shape])
    mgt = os.path.join(d, "g.mgt")
    with open(mgt, "w") as f:
        f.write(f"input r : f32[{rdims}]\nparam w : f32[{','.join(map(str, shape))}]\n{line}\n"
                "e = sub(y, r)\ne2 = mul(e, e)\nloss = mean(e2)\noutput y\nminimize loss\n")
    nb = 1
    np.savez(os.path.join(d, "init.npz"), w=w0)
    np.savez(os.path.join(d, "data.npz"), r=r[None])
    out = os.path.join(d, "g.mge")
    run([tool("mge-train"), mgt, "--data", os.path.join(d, "data.npz"), "--batch", str(nb), "--steps", "1",
         "--optimizer", "sgd", "--lr", "0.5", "--no-shuffle", "-q", "--weights", os.path.join(d, "init.npz"),
         "-o", out])
    run([tool("mge-dump"), out, "--params", os.path.join(d, "p.npz")])
    got = np.load(os.path.join(d, "p.npz"))["w"]
    e = rel_err(got - w0, want - w0)
    assert e < 1e-5, (name, seed, e)


def test_grads_vs_torch():
    for seed in (1, 2):
        for case in GRAD_CASES:
            _grad_case(*case, seed)
