"""Spatial ops against PyTorch (torch 1.13's F.interpolate, F.pad,
F.group_norm, F.instance_norm, F.layer_norm; rms_norm by its formula, as
torch 1.13 lacks nn.RMSNorm): forward and the gradient ops (resize_grad,
pad_grad, group_norm_grad, rms_norm_grad, layernorm_grad) against
autograd, on random shapes with odd sizes, every mode, align_corners both
ways, scales (up, down, non-integer) and sizes, asymmetric pads and
crops; and three SGD steps of mge-train (the gradient rules) on a net of
all of them. f32, relative error ~1e-5 (nearest and pad are exact)."""
import numpy as np

from common import Skip, npy_stream, read_stream, rel_err, run, tool, tmpdir

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    raise Skip(f"PyTorch not installed ({e}); scripts/deps installs it")


def fmt(v):
    return "[" + ", ".join(str(a) for a in v) + "]"


def mge(model, ins, nout):
    """Runs the text model on the inputs (cpu, 2 threads); the outputs."""
    d = tmpdir()
    with open(f"{d}/m.mgt", "w") as f:
        f.write(model)
    _, out, _ = run([tool("mge-run"), f"{d}/m.mgt", "--threads", "2"], stdin=npy_stream(*ins))
    got = read_stream(out)
    assert len(got) == nout, (len(got), nout)
    return got


def close(got, want, what, tol=2e-5):
    want = want.detach().numpy() if hasattr(want, "detach") else want
    assert got.shape == want.shape, (what, got.shape, want.shape)
    e = rel_err(got, want)
    assert e <= tol, (what, e)


def shape_str(s):
    return "f32" + fmt(s).replace(" ", "")


def resize_case(rng, shape, mode, align, scales=None, size=None):
    x = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    kw = {"mode": mode}
    if mode == "bilinear":
        kw["align_corners"] = align
    if scales:
        y = F.interpolate(x, scale_factor=tuple(scales), **kw)
    else:
        y = F.interpolate(x, size=tuple(size), **kw)
    dy = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
    y.backward(dy)
    attr = f"mode={mode}, align_corners={'true' if align else 'false'}, "
    attr += f"scales={fmt(scales)}" if scales else f"size={fmt(size)}"
    model = f"""input x : {shape_str(shape)}
input dy : {shape_str(tuple(y.shape))}
y = resize(x, {attr})
dx = resize_grad(dy, x, {attr})
output y, dx
"""
    got = mge(model, [x.detach().numpy(), dy.numpy()], 2)
    what = (shape, mode, align, scales, size)
    tol = 0 if mode == "nearest" else 2e-5
    close(got[0], y, ("y",) + what, tol)
    close(got[1], x.grad, ("dx",) + what, 1e-6 if mode == "nearest" else 2e-5)


def test_resize_scales_and_sizes_vs_torch():
    rng = np.random.default_rng(5)
    for shape in [(2, 3, 5, 7), (1, 2, 8, 6), (3, 1, 9, 11)]:
        for mode, aligns in [("nearest", [False]), ("bilinear", [False, True])]:
            for align in aligns:
                for scales in [[2, 2], [1.5, 0.75], [0.5, 3], [1.7, 2.3], [0.6, 1]]:
                    resize_case(rng, shape, mode, align, scales=scales)
                for size in [[10, 3], [4, 13], [1, 1], [shape[2], shape[3]]]:
                    resize_case(rng, shape, mode, align, size=size)


def pad_case(rng, shape, pads, mode, value=0.0):
    x = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    if mode == "constant":
        y = F.pad(x, tuple(pads), mode=mode, value=value)
    else:
        y = F.pad(x, tuple(pads), mode=mode)
    dy = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
    y.backward(dy)
    attr = f"pads={fmt(pads)}, mode={mode}, value={value}"
    model = f"""input x : {shape_str(shape)}
input dy : {shape_str(tuple(y.shape))}
y = pad(x, {attr})
dx = pad_grad(dy, x, {attr})
output y, dx
"""
    got = mge(model, [x.detach().numpy(), dy.numpy()], 2)
    close(got[0], y, ("y", shape, pads, mode), 0)
    close(got[1], x.grad, ("dx", shape, pads, mode), 1e-6)


def test_pad_modes_vs_torch():
    rng = np.random.default_rng(11)
    # constant: any rank, asymmetric, negative pads crop
    pad_case(rng, (3, 5), [1, 2], "constant", 1.5)
    pad_case(rng, (2, 3, 4, 5), [0, 3, 2, 1, 1, 0, 1, 2], "constant", -2.0)
    pad_case(rng, (2, 3, 6, 7), [-1, 2, 3, -2], "constant")
    pad_case(rng, (4, 1, 5), [2, 2], "constant")
    for mode in ["reflect", "replicate"]:
        pad_case(rng, (2, 3, 7), [2, 3], mode)
        pad_case(rng, (2, 3, 5, 6), [1, 4, 3, 0], mode)
        pad_case(rng, (1, 2, 4, 5, 6), [1, 2, 0, 3, 2, 1], mode)
        pad_case(rng, (3, 3, 9, 2), [1, 0, 4, 4], mode)


def norm_case(rng, shape, op, groups=None, affine=True):
    x = torch.tensor(rng.standard_normal(shape).astype(np.float32) * 3 + 1, requires_grad=True)
    C = shape[1]
    w = torch.tensor(rng.standard_normal(C).astype(np.float32), requires_grad=True)
    b = torch.tensor(rng.standard_normal(C).astype(np.float32), requires_grad=True)
    if op == "group_norm":
        y = F.group_norm(x, groups, w, b, eps=1e-5)
    else:
        y = F.instance_norm(x, weight=w if affine else None, bias=b if affine else None, eps=1e-5)
    dy = torch.tensor(rng.standard_normal(shape).astype(np.float32))
    y.backward(dy)
    s = shape_str(shape)
    if op == "group_norm":
        model = f"""input x : {s}
input dy : {s}
input w : f32[{C}]
input b : f32[{C}]
y = group_norm(x, w, b, num_groups={groups})
dx, dw, db = group_norm_grad(dy, x, w, num_groups={groups})
output y, dx, dw, db
"""
    elif affine:
        model = f"""input x : {s}
input dy : {s}
input w : f32[{C}]
input b : f32[{C}]
y = instance_norm(x, w, b, affine=true)
dx, dw, db = group_norm_grad(dy, x, w)
output y, dx, dw, db
"""
    else:
        model = f"""input x : {s}
input dy : {s}
y = instance_norm(x)
dx, dw, db = group_norm_grad(dy, x)
output y, dx
"""
    ins = [x.detach().numpy(), dy.numpy()] + ([w.detach().numpy(), b.detach().numpy()] if affine else [])
    got = mge(model, ins, 4 if affine else 2)
    what = (op, shape, groups, affine)
    close(got[0], y, ("y",) + what)
    close(got[1], x.grad, ("dx",) + what, 5e-5)
    if affine:
        close(got[2], w.grad, ("dw",) + what)
        close(got[3], b.grad, ("db",) + what)


def test_group_and_instance_norm_vs_torch():
    rng = np.random.default_rng(23)
    for shape, g in [((2, 6, 5, 3), 3), ((3, 4, 7), 2), ((1, 8, 3, 3), 8), ((2, 5, 4, 3, 2), 1), ((4, 6), 2)]:
        norm_case(rng, shape, "group_norm", groups=g)
    for shape in [(2, 3, 5, 7), (3, 2, 9), (1, 4, 2, 3, 3)]:
        norm_case(rng, shape, "instance_norm", affine=True)
        norm_case(rng, shape, "instance_norm", affine=False)


def rms_case(rng, shape, axis, eps):
    x = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    ax = axis % len(shape)
    w = torch.tensor(rng.standard_normal(shape[ax:]).astype(np.float32), requires_grad=True)
    dims = tuple(range(ax, len(shape)))
    e = eps if eps is not None else torch.finfo(torch.float32).eps
    y = x * torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + e) * w
    dy = torch.tensor(rng.standard_normal(shape).astype(np.float32))
    y.backward(dy)
    epsa = f", eps={eps}" if eps is not None else ""
    model = f"""input x : {shape_str(shape)}
input dy : {shape_str(shape)}
input w : {shape_str(shape[ax:])}
y = rms_norm(x, w, axis={axis}{epsa})
dx, dw = rms_norm_grad(dy, x, w, axis={axis}{epsa})
output y, dx, dw
"""
    got = mge(model, [x.detach().numpy(), dy.numpy(), w.detach().numpy()], 3)
    what = (shape, axis, eps)
    close(got[0], y, ("y",) + what)
    close(got[1], x.grad, ("dx",) + what, 5e-5)
    close(got[2], w.grad, ("dw",) + what, 5e-5)


def test_rms_norm_vs_formula():
    rng = np.random.default_rng(29)
    for shape, axis, eps in [((3, 7), -1, None), ((2, 5, 6), -2, 1e-6), ((2, 3, 4, 5), 1, 1e-5), ((4, 9), 0, None)]:
        rms_case(rng, shape, axis, eps)


def test_layernorm_last_k_dims_vs_torch():
    """layernorm over the last k = 1, 2, 3 dims: its params are the trailing shape."""
    rng = np.random.default_rng(31)
    for shape, k in [((3, 7), 1), ((2, 5, 6), 2), ((2, 3, 4, 5), 3), ((2, 3, 4, 5), 2)]:
        x = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        ns = shape[-k:]
        w = torch.tensor(rng.standard_normal(ns).astype(np.float32), requires_grad=True)
        b = torch.tensor(rng.standard_normal(ns).astype(np.float32), requires_grad=True)
        y = F.layer_norm(x, ns, w, b, eps=1e-5)
        dy = torch.tensor(rng.standard_normal(shape).astype(np.float32))
        y.backward(dy)
        model = f"""input x : {shape_str(shape)}
input dy : {shape_str(shape)}
input w : {shape_str(ns)}
input b : {shape_str(ns)}
y = layernorm(x, w, b, axis={-k})
dx, dw, db = layernorm_grad(dy, x, w, axis={-k})
output y, dx, dw, db
"""
        got = mge(model, [x.detach().numpy(), dy.numpy(), w.detach().numpy(), b.detach().numpy()], 4)
        for g, t, nm in zip(got, [y, x.grad, w.grad, b.grad], ["y", "dx", "dw", "db"]):
            close(g, t, (nm, shape, k), 5e-5)


SPATIAL_NET_MGT = """input  x     : f32[N,2,7,6]
input  label : i32[N]
conv1 = conv2d(x, out=6, kernel=3, pad=1)
gn    = group_norm(conv1, num_groups=3)
act   = tanh(gn)
up    = resize(act, mode=bilinear, scales=[1.5, 2])
pd    = pad(up, pads=[1, 2, 2, 0], mode=reflect)
inorm = instance_norm(pd, affine=true)
dn    = resize(inorm, size=[5, 4])
rp    = pad(dn, pads=[1, 1, 0, 1], mode=replicate)
flat  = flatten(rp)
rms   = rms_norm(flat, eps=1e-06)
fc    = linear(rms, out=4)
loss  = cross_entropy(fc, label)
output fc
minimize loss
"""


class SpatialNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(2, 6, 3, padding=1)
        self.gn = torch.nn.GroupNorm(3, 6)
        self.inorm = torch.nn.InstanceNorm2d(6, affine=True)
        self.rms = torch.nn.Parameter(torch.ones(6 * 6 * 6))  # nn.RMSNorm's weight (torch 1.13 lacks it)
        self.fc = torch.nn.Linear(6 * 6 * 6, 4)

    def forward(self, x):
        a = torch.tanh(self.gn(self.conv1(x)))
        a = F.interpolate(a, scale_factor=(1.5, 2), mode="bilinear", align_corners=False)
        a = self.inorm(F.pad(a, (1, 2, 2, 0), mode="reflect"))
        a = F.pad(F.interpolate(a, size=(5, 4), mode="nearest"), (1, 1, 0, 1), mode="replicate")
        a = torch.flatten(a, 1)
        a = a * torch.rsqrt((a * a).mean(-1, keepdim=True) + 1e-6) * self.rms
        return self.fc(a)


def test_training_steps_vs_torch():
    """Three SGD steps through mge-train (the gradient rules, not hand-written
    grad ops) on a net of every spatial op; params equal PyTorch's."""
    torch.manual_seed(3)
    model = SpatialNet()
    with torch.no_grad():  # away from ones/zeros so a wrong dweight or dbias would show
        for p in [model.gn.weight, model.gn.bias, model.inorm.weight, model.inorm.bias, model.rms]:
            p.add_(torch.randn(p.shape) * 0.3)
    steps, batch = 3, 4
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(steps * batch, 2, 7, 6, generator=gen)
    label = torch.randint(0, 4, (steps * batch,), generator=gen)
    d = tmpdir()
    sd = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    sd["rms.weight"] = sd.pop("rms")
    np.savez(f"{d}/init.npz", **sd)
    np.savez(f"{d}/batch.npz", x=x.numpy(), label=label.numpy().astype(np.int32))
    with open(f"{d}/net.mgt", "w") as f:
        f.write(SPATIAL_NET_MGT)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for s in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x[s * batch:(s + 1) * batch]), label[s * batch:(s + 1) * batch]).backward()
        opt.step()
    ref = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    ref["rms.weight"] = ref.pop("rms")
    for threads in (1, 2):
        out = f"{d}/t{threads}.mge"
        run([tool("mge-train"), f"{d}/net.mgt", "--data", f"{d}/batch.npz", "--batch", str(batch), "--steps",
             str(steps), "--threads", str(threads), "-q", "-o", out, "--optimizer", "sgd", "--lr", "0.1",
             "--no-shuffle", "--weights", f"{d}/init.npz"])
        run([tool("mge-dump"), out, "--params", f"{d}/p{threads}.npz"])
        got = dict(np.load(f"{d}/p{threads}.npz"))
        assert sorted(got) == sorted(ref), (sorted(got), sorted(ref))
        for k in ref:
            # the params moved, and by PyTorch's amounts
            assert rel_err(ref[k], sd[k]) > 1e-4, k
            assert rel_err(got[k], ref[k]) < 1e-5, (threads, k, rel_err(got[k], ref[k]))
