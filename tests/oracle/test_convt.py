"""conv_transpose2d, conv1d, conv3d and adaptive pooling against PyTorch.

Forward and both gradient ops (the grad ops run directly, fed PyTorch's
dy) on random shapes, strides, pads, output_padding, dilations and groups,
odd sizes; mge-run on cpu at 1 and 2 threads. The forward models take
two records of different spatial sizes in one stream (symbolic H, W, L);
the convolutions' gradient models are concrete (dy's dims are
expressions of the input's, which an input declaration cannot state).
Then training steps: a small encoder-decoder (conv2d, three
conv_transpose2d, adaptive pooling), a 1-D net (conv1d, adaptive 1-D
pooling) and a 3-D one (conv3d), each trained two SGD steps with momentum
by mge-train from PyTorch's initial weights, at 1 and 2 threads; every
parameter must match within 1e-5 relative."""
import os

import numpy as np

from common import need_torch, npy_stream, read_stream, rel_err, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(2)
TOL = 1e-5


def _ints(v):
    return f"[{v[0]},{v[1]}]" if isinstance(v, (tuple, list)) else str(v)


def _run_model(src, stream, threads):
    d = tmpdir()
    path = os.path.join(d, "m.mgt")
    with open(path, "w") as f:
        f.write(src)
    _, out, _ = run([tool("mge-run"), path, "--threads", str(threads)], stdin=stream)
    return read_stream(out)


def _check(got, want, what):
    assert len(got) == len(want), (what, len(got), len(want))
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, (what, k, a.shape, b.shape)
        e = rel_err(a, b)
        assert e < TOL, f"{what}: output {k} relative error {e:.3g}"


def _convt_config(rng):
    g = int(rng.integers(1, 4))
    cin, cout = g * int(rng.integers(1, 4)), g * int(rng.integers(1, 4))
    k = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
    s = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    p = (int(rng.integers(0, 3)), int(rng.integers(0, 3)))
    dl = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    op = tuple(int(rng.integers(0, max(s[i], dl[i]))) for i in range(2))
    return dict(groups=g, cin=cin, cout=cout, k=k, s=s, p=p, d=dl, op=op)


def _convt_out(h, c, i):
    return (h - 1) * c["s"][i] - 2 * c["p"][i] + c["d"][i] * (c["k"][i] - 1) + c["op"][i] + 1


def test_conv_transpose2d_forward_and_grads():
    rng = np.random.default_rng(20)
    done = 0
    while done < 14:
        c = _convt_config(rng)
        sizes = [(int(rng.integers(1, 10)), int(rng.integers(1, 10))) for _ in range(2)]
        if any(_convt_out(hw[i], c, i) < 1 for hw in sizes for i in range(2)):
            continue
        done += 1
        attrs = (f"out={c['cout']}, kernel={_ints(c['k'])}, stride={_ints(c['s'])}, pad={_ints(c['p'])}, "
                 f"output_padding={_ints(c['op'])}, dilation={_ints(c['d'])}, groups={c['groups']}")
        gattrs = attrs.split(", ", 1)[1]
        wshape = (c["cin"], c["cout"] // c["groups"]) + c["k"]
        src = f"""input x : f32[N,{c['cin']},H,W]
input w : f32[{','.join(map(str, wshape))}]
input b : f32[{c['cout']}]
y = conv_transpose2d(x, w, b, {attrs})
output y
"""
        ins, want, grads = [], [], []
        for n, (h, wd) in zip((2, 1), sizes):
            x = rng.standard_normal((n, c["cin"], h, wd)).astype(np.float32)
            w = rng.standard_normal(wshape).astype(np.float32)
            b = rng.standard_normal(c["cout"]).astype(np.float32)
            tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
            y = F.conv_transpose2d(tx, tw, tb, stride=c["s"], padding=c["p"], output_padding=c["op"],
                                   groups=c["groups"], dilation=c["d"])
            dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
            y.backward(torch.tensor(dy))
            ins += [x, w, b]
            want.append(y.detach().numpy())
            # the gradient ops on concrete shapes (dy's shape is an expression of H, W)
            gsrc = f"""input x : f32[{','.join(map(str, x.shape))}]
input w : f32[{','.join(map(str, wshape))}]
input dy : f32[{','.join(map(str, dy.shape))}]
gx = conv_transpose2d_grad_input(dy, w, x, {gattrs})
gw = conv_transpose2d_grad_weight(dy, x, w, {gattrs})
output gx, gw
"""
            grads.append((gsrc, [x, w, dy], [tx.grad.numpy(), tw.grad.numpy()]))
        for t in (1, 2):
            _check(_run_model(src, npy_stream(*ins), t), want, f"conv_transpose2d {c} {sizes} t{t}")
            for gsrc, gin, gwant in grads:
                _check(_run_model(gsrc, npy_stream(*gin), t), gwant, f"conv_transpose2d grads {c} {sizes} t{t}")


def test_conv1d_forward_and_grads():
    rng = np.random.default_rng(21)
    done = 0
    while done < 12:
        g = int(rng.integers(1, 4))
        cin, cout = g * int(rng.integers(1, 5)), g * int(rng.integers(1, 4))
        k, s, p, dl = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(0, 3)), int(rng.integers(1, 3))
        lens = [int(rng.integers(1, 40)) for _ in range(2)]
        if any(L + 2 * p - dl * (k - 1) - 1 < 0 for L in lens):
            continue
        done += 1
        attrs = f"out={cout}, kernel={k}, stride={s}, pad={p}, dilation={dl}, groups={g}"
        gattrs = attrs.split(", ", 1)[1]
        src = f"""input x : f32[N,{cin},L]
input w : f32[{cout},{cin // g},{k}]
input b : f32[{cout}]
y = conv1d(x, w, b, {attrs})
output y
"""
        ins, want, grads = [], [], []
        for n, L in zip((3, 1), lens):
            x = rng.standard_normal((n, cin, L)).astype(np.float32)
            w = rng.standard_normal((cout, cin // g, k)).astype(np.float32)
            b = rng.standard_normal(cout).astype(np.float32)
            tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
            y = F.conv1d(tx, tw, tb, stride=s, padding=p, dilation=dl, groups=g)
            dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
            y.backward(torch.tensor(dy))
            ins += [x, w, b]
            want.append(y.detach().numpy())
            gsrc = f"""input x : f32[{','.join(map(str, x.shape))}]
input w : f32[{cout},{cin // g},{k}]
input dy : f32[{','.join(map(str, dy.shape))}]
gx = conv1d_grad_input(dy, w, x, {gattrs})
gw = conv1d_grad_weight(dy, x, w, {gattrs})
output gx, gw
"""
            grads.append((gsrc, [x, w, dy], [tx.grad.numpy(), tw.grad.numpy()]))
        for t in (1, 2):
            what = f"conv1d k{k} s{s} p{p} d{dl} g{g} {lens} t{t}"
            _check(_run_model(src, npy_stream(*ins), t), want, what)
            for gsrc, gin, gwant in grads:
                _check(_run_model(gsrc, npy_stream(*gin), t), gwant, what + " grads")


def test_adaptive_pooling_forward_and_grads():
    rng = np.random.default_rng(22)
    for trial in range(8):
        oh, ow = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        ol = int(rng.integers(1, 30))
        src = f"""input x : f32[N,3,H,W]
input s : f32[N,2,L]
input da : f32[N,3,{oh},{ow}]
input dm : f32[N,3,{oh},{ow}]
input d1 : f32[N,2,{ol}]
input d2 : f32[N,2,{ol}]
a = adaptive_avgpool2d(x, output_size=[{oh},{ow}])
m = adaptive_maxpool2d(x, output_size=[{oh},{ow}])
a1 = adaptive_avgpool1d(s, output_size={ol})
m1 = adaptive_maxpool1d(s, output_size={ol})
ga = adaptive_avgpool2d_grad(da, x, output_size=[{oh},{ow}])
gm = adaptive_maxpool2d_grad(dm, x, output_size=[{oh},{ow}])
g1 = adaptive_avgpool1d_grad(d1, s, output_size={ol})
g2 = adaptive_maxpool1d_grad(d2, s, output_size={ol})
output a, m, a1, m1, ga, gm, g1, g2
"""
        ins, want = [], []
        for n in (2, 1):
            h, w, L = (int(rng.integers(1, 20)) for _ in range(3))
            x = rng.standard_normal((n, 3, h, w)).astype(np.float32)
            s = rng.standard_normal((n, 2, L)).astype(np.float32)
            tx, ts = torch.tensor(x, requires_grad=True), torch.tensor(s, requires_grad=True)
            outs = [F.adaptive_avg_pool2d(tx, (oh, ow)), F.adaptive_max_pool2d(tx, (oh, ow)),
                    F.adaptive_avg_pool1d(ts, ol), F.adaptive_max_pool1d(ts, ol)]
            dys = [rng.standard_normal(tuple(o.shape)).astype(np.float32) for o in outs]
            grads = []
            for o, dy, src_t in zip(outs, dys, (tx, tx, ts, ts)):
                (gr,) = torch.autograd.grad(o, src_t, torch.tensor(dy))
                grads.append(gr.numpy())
            ins += [x, s] + dys
            want += [o.detach().numpy() for o in outs] + grads
        for t in (1, 2):
            _check(_run_model(src, npy_stream(*ins), t), want, f"adaptive pooling trial {trial} t{t}")


def test_conv3d_forward_and_grads():
    rng = np.random.default_rng(23)
    done = 0
    while done < 8:
        g = int(rng.integers(1, 3))
        cin, cout = g * int(rng.integers(1, 4)), g * int(rng.integers(1, 4))
        k, s, p, dl = ([int(rng.integers(lo, hi)) for _ in range(3)] for lo, hi in ((1, 4), (1, 3), (0, 2), (1, 3)))
        sizes = [[int(rng.integers(1, 9)) for _ in range(3)] for _ in range(2)]
        if any(x[i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1 < 0 for x in sizes for i in range(3)):
            continue
        done += 1
        lst = lambda v: "[" + ",".join(map(str, v)) + "]"  # noqa: E731
        attrs = f"out={cout}, kernel={lst(k)}, stride={lst(s)}, pad={lst(p)}, dilation={lst(dl)}, groups={g}"
        gattrs = attrs.split(", ", 1)[1]
        wshape = (cout, cin // g, *k)
        src = f"""input x : f32[N,{cin},D,H,W]
input w : f32[{','.join(map(str, wshape))}]
input b : f32[{cout}]
y = conv3d(x, w, b, {attrs})
output y
"""
        ins, want, grads = [], [], []
        for n, dhw in zip((2, 1), sizes):
            x = rng.standard_normal((n, cin, *dhw)).astype(np.float32)
            w = rng.standard_normal(wshape).astype(np.float32)
            b = rng.standard_normal(cout).astype(np.float32)
            tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
            y = F.conv3d(tx, tw, tb, stride=s, padding=p, dilation=dl, groups=g)
            dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
            y.backward(torch.tensor(dy))
            ins += [x, w, b]
            want.append(y.detach().numpy())
            gsrc = f"""input x : f32[{','.join(map(str, x.shape))}]
input w : f32[{','.join(map(str, wshape))}]
input dy : f32[{','.join(map(str, dy.shape))}]
gx = conv3d_grad_input(dy, w, x, {gattrs})
gw = conv3d_grad_weight(dy, x, w, {gattrs})
output gx, gw
"""
            grads.append((gsrc, [x, w, dy], [tx.grad.numpy(), tw.grad.numpy()]))
        for t in (1, 2):
            what = f"conv3d k{k} s{s} p{p} d{dl} g{g} {sizes} t{t}"
            _check(_run_model(src, npy_stream(*ins), t), want, what)
            for gsrc, gin, gwant in grads:
                _check(_run_model(gsrc, npy_stream(*gin), t), gwant, what + " grads")


# ---------------------------------------------------------------- a training step

class UNetish(nn.Module):
    """Down with a conv, up with both transposed kinds, adaptive pools to the head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 12, 3, stride=2, padding=1)
        self.up1 = nn.ConvTranspose2d(12, 6, 2, stride=2)
        self.up2 = nn.ConvTranspose2d(6, 4, 4, stride=2, padding=1, groups=2)
        self.up3 = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1, dilation=1)
        self.fc = nn.Linear(4 * 3 * 3 + 4 * 2 * 5, 5)

    def forward(self, x):
        h = F.relu(self.conv1(x))
        h = F.relu(self.down(h))
        h = F.relu(self.up1(h))
        h = F.relu(self.up2(h))
        h = self.up3(h)
        a = torch.flatten(F.adaptive_avg_pool2d(h, 3), 1)
        m = torch.flatten(F.adaptive_max_pool2d(h, (2, 5)), 1)
        return self.fc(torch.cat([a, m], 1))


UNETISH_MGT = """input x : f32[N,2,10,6]
input label : i32[N]
conv1 = conv2d(x, out=8, kernel=3, pad=1)
r1 = relu(conv1)
down = conv2d(r1, out=12, kernel=3, stride=2, pad=1)
r2 = relu(down)
up1 = conv_transpose2d(r2, out=6, kernel=2, stride=2)
r3 = relu(up1)
up2 = conv_transpose2d(r3, out=4, kernel=4, stride=2, pad=1, groups=2)
r4 = relu(up2)
up3 = conv_transpose2d(r4, out=4, kernel=3, stride=2, pad=1, output_padding=1)
a = adaptive_avgpool2d(up3, output_size=3)
m = adaptive_maxpool2d(up3, output_size=[2,5])
fa = flatten(a)
fm = flatten(m)
cat = concat(fa, fm, axis=1)
fc = linear(cat, out=5)
loss = cross_entropy(fc, label)
output fc
minimize loss
"""


class Seq1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(3, 8, 5, padding=2)
        self.c2 = nn.Conv1d(8, 8, 3, stride=2, dilation=2, groups=4)
        self.fc = nn.Linear(8 * 4, 5)

    def forward(self, x):
        h = F.relu(self.c1(x))
        h = F.relu(self.c2(h))
        m = torch.flatten(F.adaptive_max_pool1d(h, 2), 1)
        a = torch.flatten(F.adaptive_avg_pool1d(h, 2), 1)
        return self.fc(torch.cat([m, a], 1))


SEQ1D_MGT = """input x : f32[N,3,23]
input label : i32[N]
c1 = conv1d(x, out=8, kernel=5, pad=2)
r1 = relu(c1)
c2 = conv1d(r1, out=8, kernel=3, stride=2, dilation=2, groups=4)
r2 = relu(c2)
m = adaptive_maxpool1d(r2, output_size=2)
a = adaptive_avgpool1d(r2, output_size=2)
fm = flatten(m)
fa = flatten(a)
cat = concat(fm, fa, axis=1)
fc = linear(cat, out=5)
loss = cross_entropy(fc, label)
output fc
minimize loss
"""


class Vol3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv3d(2, 4, 3, padding=1)
        self.c2 = nn.Conv3d(4, 4, 3, stride=2, groups=2)
        self.fc = nn.Linear(4 * 2 * 2 * 1, 5)

    def forward(self, x):
        h = F.relu(self.c1(x))
        return self.fc(torch.flatten(F.relu(self.c2(h)), 1))


VOL3D_MGT = """input x : f32[N,2,5,6,4]
input label : i32[N]
c1 = conv3d(x, out=4, kernel=3, pad=1)
r1 = relu(c1)
c2 = conv3d(r1, out=4, kernel=3, stride=2, groups=2)
r2 = relu(c2)
f = flatten(r2)
fc = linear(f, out=5)
loss = cross_entropy(fc, label)
output fc
minimize loss
"""


def _train_step(model_cls, mgt, xshape, seed):
    torch.manual_seed(seed)
    model = model_cls()
    gen = torch.Generator().manual_seed(seed + 1)
    batch = 8
    x = torch.randn(batch, *xshape, generator=gen)
    label = torch.randint(0, 5, (batch,), generator=gen)
    d = tmpdir()
    with open(os.path.join(d, "m.mgt"), "w") as f:
        f.write(mgt)
    np.savez(os.path.join(d, "init.npz"), **{k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    np.savez(os.path.join(d, "batch.npz"), x=x.numpy(), label=label.numpy().astype(np.int32))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(x), label).backward()
        opt.step()
    ref = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    for t in (1, 2):
        out, params = os.path.join(d, f"t{t}.mge"), os.path.join(d, f"t{t}.npz")
        run([tool("mge-train"), os.path.join(d, "m.mgt"), "--data", os.path.join(d, "batch.npz"), "--batch",
             str(batch), "--steps", "2", "--threads", str(t), "-q", "-o", out, "--optimizer", "sgd", "--lr", "0.1",
             "--momentum", "0.9", "--no-shuffle", "--weights", os.path.join(d, "init.npz")])
        run([tool("mge-dump"), out, "--params", params])
        got = dict(np.load(params))
        assert set(got) == set(ref), (sorted(got), sorted(ref))
        for k, r in ref.items():
            assert got[k].shape == r.shape, (k, got[k].shape, r.shape)
            e = rel_err(got[k], r)
            assert e < TOL, f"{model_cls.__name__} t{t}: {k} relative error {e:.3g}"


def test_train_step_conv_transpose_and_adaptive_pools():
    _train_step(UNetish, UNETISH_MGT, (2, 10, 6), 5)


def test_train_step_conv1d():
    _train_step(Seq1d, SEQ1D_MGT, (3, 23), 6)


def test_train_step_conv3d():
    _train_step(Vol3d, VOL3D_MGT, (2, 5, 6, 4), 7)
