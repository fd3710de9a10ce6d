"""The elementwise math ops (group elem: clamp ... prelu, and acos ... shrink, kernels/kact.h)
against PyTorch. Forward: one text model with symbolic dims run by mge-run
on records of two shapes (odd sizes), inputs salted with NaN, +-inf, +-0,
exact halves (round is half to even) and large magnitudes, on the cpu
backend and the simulated device; NaN must sit where torch has it, the
rest within 1e-5 relative (per element, floored at 1e-6 absolute).
Gradient: one SGD step (lr 1) of mge-train on a model where each op reads
x * w_op for a param w_op and the loss is the mse of their sum, against
the same step in torch (the rules, unary_grad, prelu_grad and the weight's
sum over the broadcast dims), several seeds and sizes."""
import os

import numpy as np

from common import Skip, npy_stream, read_stream, run, tool, tmpdir

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    raise Skip(f"PyTorch not installed ({e})")

C = 7  # channels (dim 1): prelu's per-channel weight

# name: (mge expression of x, torch function of x)
FWD = {
    "clamp": ("clamp(x, min=-1.5, max=2)", lambda x: torch.clamp(x, -1.5, 2)),
    "clampmin": ("clamp(x, min=0.25)", lambda x: torch.clamp(x, min=0.25)),
    "clampmax": ("clamp(x, max=-0.5)", lambda x: torch.clamp(x, max=-0.5)),
    "hardtanh": ("hardtanh(x, min=-2, max=0.5)", lambda x: F.hardtanh(x, -2, 0.5)),
    "softplus": ("softplus(x)", F.softplus),
    "softplus2": ("softplus(x, beta=2, threshold=3)", lambda x: F.softplus(x, 2, 3)),
    "elu": ("elu(x)", F.elu),
    "elu2": ("elu(x, alpha=0.3)", lambda x: F.elu(x, 0.3)),
    "selu": ("selu(x)", F.selu),
    "mish": ("mish(x)", F.mish),
    "softsign": ("softsign(x)", F.softsign),
    "erf": ("erf(x)", torch.erf),
    "rsqrt": ("rsqrt(x)", torch.rsqrt),
    "reciprocal": ("reciprocal(x)", torch.reciprocal),
    "square": ("square(x)", torch.square),
    "sin": ("sin(x)", torch.sin),
    "cos": ("cos(x)", torch.cos),
    "floor": ("floor(x)", torch.floor),
    "ceil": ("ceil(x)", torch.ceil),
    "round": ("round(x)", torch.round),
    "sign": ("sign(x)", torch.sign),
    "isnan": ("isnan(x)", torch.isnan),
    "isinf": ("isinf(x)", torch.isinf),
    # extra math (ops.def's area math block)
    "acos": ("acos(x)", torch.acos),
    "acosh": ("acosh(x)", torch.acosh),
    "asin": ("asin(x)", torch.asin),
    "asinh": ("asinh(x)", torch.asinh),
    "atan": ("atan(x)", torch.atan),
    "atanh": ("atanh(x)", torch.atanh),
    "cosh": ("cosh(x)", torch.cosh),
    "sinh": ("sinh(x)", torch.sinh),
    "shrink": ("shrink(x, lambd=0.7, shift=0.2)",
               lambda x: torch.where(x < -0.7, x + 0.2, torch.where(x > 0.7, x - 0.2, torch.zeros_like(x)))),
    "hardshrink": ("shrink(x, lambd=1.5)", lambda x: torch.where(x.isnan(), torch.zeros_like(x), F.hardshrink(x, 1.5))),
}


def _model():
    lines = [f"input x : f32[N,{C},S]", f"param pw : f32[{C}]", "param p1 : f32[1]"]
    names = []
    for k, (expr, _) in FWD.items():
        lines.append(f"y_{k} = {expr}")
        names.append(f"y_{k}")
    lines += [f"y_prelu = prelu(x, pw, num={C})", "y_prelu1 = prelu(x, p1)"]
    names += ["y_prelu", "y_prelu1"]
    lines.append("output " + ", ".join(names))
    return "\n".join(lines) + "\n", names


def _salted(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    n = flat.size
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -2.5, -0.5, 1e30, -1e30, 3e5, -7e4],
                        np.float32)
    at = rng.choice(n, size=min(n, 3 * len(specials)), replace=False)
    flat[at] = np.resize(specials, len(at))
    return x


def _close(got, want, what):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if want.dtype == np.bool_:
        assert got.dtype == np.bool_ and np.array_equal(got, want), what
        return
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), f"{what}: NaN at {np.argwhere(np.isnan(g) != nan)[:3].tolist()}"
    inf = np.isinf(w)
    assert np.array_equal(g[inf], w[inf]), f"{what}: inf mismatch"
    ok = ~nan & ~inf
    err = np.abs(g[ok] - w[ok]) / np.maximum(np.abs(w[ok]), 1e-1)
    bad = ~((err <= 1e-5) | (np.abs(g[ok] - w[ok]) <= 1e-6))
    assert not bad.any(), f"{what}: {bad.sum()} elements off, worst relative error {err.max():.3g}"


def test_forward_vs_torch():
    d = tmpdir()
    src, names = _model()
    path = os.path.join(d, "m.mgt")
    with open(path, "w") as f:
        f.write(src)
    rng = np.random.default_rng(20)
    pw = rng.uniform(-1, 1, C).astype(np.float32)
    p1 = np.array([0.25], np.float32)
    np.savez(os.path.join(d, "w.npz"), pw=pw, p1=p1)
    mge = os.path.join(d, "m.mge")
    run([tool("mge-opt"), path, "-O0", "--weights", os.path.join(d, "w.npz"), "-o", mge])
    xs = [_salted(rng, (2, C, 13)), _salted(rng, (3, C, 1)), _salted(rng, (1, C, 301))]
    for dev in ["cpu", "sim"]:
        _, out, _ = run([tool("mge-run"), mge, "--threads", "2", "--device", dev], stdin=npy_stream(*xs))
        got = read_stream(out)
        assert len(got) == len(xs) * len(names), (len(got), len(xs) * len(names))
        for r, x in enumerate(xs):
            tx = torch.from_numpy(x)
            want = [fn(tx).numpy() for _, fn in FWD.values()]
            want += [F.prelu(tx, torch.from_numpy(pw)).numpy(), F.prelu(tx, torch.from_numpy(p1)).numpy()]
            for k, (name, w) in enumerate(zip(names, want)):
                _close(got[r * len(names) + k], w, f"{dev} record {r} {name}")


# ops with a gradient: (mge expression of u, torch function of u, input range away from the kinks)
GRAD = {
    "clamp": ("clamp(u, min=-0.7, max=0.9)", lambda u: torch.clamp(u, -0.7, 0.9)),
    "hardtanh": ("hardtanh(u)", F.hardtanh),
    "softplus": ("softplus(u, beta=1.5, threshold=2)", lambda u: F.softplus(u, 1.5, 2)),
    "elu": ("elu(u, alpha=0.8)", lambda u: F.elu(u, 0.8)),
    "selu": ("selu(u)", F.selu),
    "mish": ("mish(u)", F.mish),
    "softsign": ("softsign(u)", F.softsign),
    "erf": ("erf(u)", torch.erf),
    "square": ("square(u)", torch.square),
    "sin": ("sin(u)", torch.sin),
    "cos": ("cos(u)", torch.cos),
    "floor": ("floor(u)", torch.floor),
    "round": ("round(u)", torch.round),
    "sign": ("sign(u)", torch.sign),
    "asinh": ("asinh(u)", torch.asinh),
    "atan": ("atan(u)", torch.atan),
    "cosh": ("cosh(u)", torch.cosh),
    "sinh": ("sinh(u)", torch.sinh),
}


def _grad_case(d, seed, n, s):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, C, s)).astype(np.float32)
    x[np.abs(x) < 0.05] = 0.3
    t = rng.standard_normal((n, C, s)).astype(np.float32)
    ws = {k: rng.uniform(0.5, 1.5, (C, 1)).astype(np.float32) for k in GRAD}
    pw = rng.uniform(-1, 1, C).astype(np.float32)
    lines = [f"input x : f32[N,{C},{s}]", f"input t : f32[N,{C},{s}]"]
    acc = None
    for k, (expr, _) in GRAD.items():
        lines += [f"param w_{k} : f32[{C},1]", f"u_{k} = mul(x, w_{k})", f"y_{k} = " + expr.replace("(u", f"(u_{k}", 1)]
        nxt = f"y_{k}"
        if acc:
            lines.append(f"s_{k} = add({acc}, {nxt})")
            nxt = f"s_{k}"
        acc = nxt
    lines += [f"param pw : f32[{C}]", "yp = prelu(x, pw, num=7)", f"z = add({acc}, yp)", "loss = mse(z, t)",
              "output z", "minimize loss"]
    path = os.path.join(d, f"g{seed}.mgt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    np.savez(os.path.join(d, f"init{seed}.npz"), pw=pw, **{f"w_{k}": v for k, v in ws.items()})
    np.savez(os.path.join(d, f"batch{seed}.npz"), x=x, t=t)
    out = os.path.join(d, f"g{seed}.mge")
    run([tool("mge-train"), path, "--data", os.path.join(d, f"batch{seed}.npz"), "--batch", str(n), "--steps", "1",
         "--no-shuffle", "--lr", "1", "--threads", "2", "-q", "-o", out, "--weights", os.path.join(d, f"init{seed}.npz")])
    params = os.path.join(d, f"p{seed}.npz")
    run([tool("mge-dump"), out, "--params", params])
    got = dict(np.load(params))

    tx, tt = torch.from_numpy(x), torch.from_numpy(t)
    tw = {k: torch.tensor(v, requires_grad=True) for k, v in ws.items()}
    tpw = torch.tensor(pw, requires_grad=True)
    z = sum(fn(tx * tw[k]) for k, (_, fn) in GRAD.items()) + F.prelu(tx, tpw)
    F.mse_loss(z, tt).backward()
    for k in GRAD:
        want = (tw[k] - tw[k].grad).detach().numpy()
        g = got[f"w_{k}"]
        err = np.abs(g - want).max() / max(np.abs(tw[k].grad.numpy()).max(), 1e-3)
        assert err < 1e-4, f"seed {seed} {k}: step error {err:.3g} relative to the gradient"
        if k in ("floor", "round", "sign"):
            assert np.array_equal(g, ws[k]), f"{k}: a zero gradient must leave w unchanged"
    want = (tpw - tpw.grad).detach().numpy()
    err = np.abs(got["pw"] - want).max() / max(np.abs(tpw.grad.numpy()).max(), 1e-3)
    assert err < 1e-4, f"seed {seed} prelu weight: step error {err:.3g}"


def test_gradients_vs_torch():
    d = tmpdir()
    for seed, n, s in [(1, 2, 5), (2, 3, 1), (3, 1, 17)]:
        _grad_case(d, seed, n, s)


def test_integers_vs_torch():
    """sign, square (wrapping), abs, neg and clamp with integer bounds keep i32 / i64."""
    d = tmpdir()
    path = os.path.join(d, "i.mgt")
    with open(path, "w") as f:
        f.write("input a : i32[N]\ninput b : i64[N]\n"
                "sa = sign(a)\nqa = square(a)\nca = clamp(a, min=-3, max=40)\nna = neg(a)\n"
                "sb = sign(b)\nqb = square(b)\ncb = clamp(b, max=-7)\nab = abs(b)\n"
                "output sa, qa, ca, na, sb, qb, cb, ab\n")
    rng = np.random.default_rng(5)
    recs = []
    for n in (11, 4):
        a = rng.integers(-100000, 100000, n).astype(np.int32)
        a[0] = 0
        b = rng.integers(-10 ** 12, 10 ** 12, n).astype(np.int64)
        b[1] = 0
        recs.append((a, b))
    _, out, _ = run([tool("mge-run"), path], stdin=npy_stream(*[x for r in recs for x in r]))
    got = read_stream(out)
    assert len(got) == 16
    for k, (a, b) in enumerate(recs):
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        want = [torch.sign(ta), torch.square(ta), torch.clamp(ta, -3, 40), torch.neg(ta),
                torch.sign(tb), torch.square(tb), torch.clamp(tb, max=-7), torch.abs(tb)]
        for j, w in enumerate(want):
            g = got[k * 8 + j]
            assert g.dtype == w.numpy().dtype and np.array_equal(g, w.numpy()), (k, j, g, w)
