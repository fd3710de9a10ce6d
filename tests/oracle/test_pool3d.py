"""maxpool3d, avgpool3d (forward, indices, gradient ops), max_unpool and
rnn against PyTorch: F.max_pool3d (return_indices, per plane in PyTorch,
flat over the tensor in mge as in ONNX: offset by the plane), F.avg_pool3d
(both divisors, ceil_mode) and their autograd, F.max_unpool2d/3d, and
nn.RNN (tanh and relu, layers, bidirectional, batch_first, h0) with
PyTorch's weights bound by name; mge-run on cpu at 1 and 2 threads."""
import os

import numpy as np

from common import need_torch, npy_stream, read_stream, rel_err, run, tmpdir, tool

need_torch()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(2)
TOL = 1e-5


def _lst(v):
    return "[" + ",".join(map(str, v)) + "]"


def _shape(a):
    return _lst(a.shape)


def _run_model(src, stream, threads):
    d = tmpdir()
    path = os.path.join(d, "m.mgt")
    with open(path, "w") as f:
        f.write(src)
    _, out, _ = run([tool("mge-run"), path, "--threads", str(threads)], stdin=stream)
    return read_stream(out)


def _check(got, want, what, exact=False):
    assert len(got) == len(want), (what, len(got), len(want))
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, (what, k, a.shape, b.shape)
        if exact:
            assert np.array_equal(a, b), f"{what}: output {k} differs"
        else:
            e = rel_err(a, b)
            assert e < TOL, f"{what}: output {k} relative error {e:.3g}"


def _flat_indices(idx, x_shape):
    """PyTorch's per-plane indices as flat indices into x (ONNX's)."""
    n, c = idx.shape[:2]
    plane = int(np.prod(x_shape[2:]))
    off = (np.arange(n * c, dtype=np.int64) * plane).reshape(n, c, *([1] * (idx.ndim - 2)))
    return idx.astype(np.int64) + off


def test_pools_forward_indices_and_grads():
    rng = np.random.default_rng(31)
    done = 0
    while done < 10:
        k = [int(rng.integers(1, 4)) for _ in range(3)]
        s = [int(rng.integers(1, 3)) for _ in range(3)]
        p = [int(rng.integers(0, k[i] // 2 + 1)) for i in range(3)]
        dl = [int(rng.integers(1, 3)) for _ in range(3)]
        ceil = bool(rng.integers(0, 2))
        cip = bool(rng.integers(0, 2))
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *(int(rng.integers(2, 9)) for _ in range(3)))
        if any(shape[2 + i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1 < 0 for i in range(3)):
            continue
        done += 1
        x = rng.standard_normal(shape).astype(np.float32)
        tx = torch.tensor(x, requires_grad=True)
        ym, im = F.max_pool3d(tx, k, s, p, dl, ceil_mode=ceil, return_indices=True)
        ya = F.avg_pool3d(tx, k, s, p, ceil_mode=ceil, count_include_pad=cip)
        dym = rng.standard_normal(tuple(ym.shape)).astype(np.float32)
        dya = rng.standard_normal(tuple(ya.shape)).astype(np.float32)
        (gm,) = torch.autograd.grad(ym, tx, torch.tensor(dym))
        (ga,) = torch.autograd.grad(ya, tx, torch.tensor(dya))
        ceil_s = "true" if ceil else "false"
        mattrs = f"kernel={_lst(k)}, stride={_lst(s)}, pad={_lst(p)}, dilation={_lst(dl)}, ceil_mode={ceil_s}"
        aattrs = (f"kernel={_lst(k)}, stride={_lst(s)}, pad={_lst(p)}, ceil_mode={ceil_s}, "
                  f"count_include_pad={'true' if cip else 'false'}")
        src = f"""input x : f32{_shape(x)}
input dym : f32{_shape(dym)}
input dya : f32{_shape(dya)}
m, mi = maxpool3d(x, {mattrs})
a = avgpool3d(x, {aattrs})
gm = maxpool3d_grad(dym, x, {mattrs})
ga = avgpool3d_grad(dya, x, {aattrs})
output m, a, gm, ga, mi
"""
        want = [ym.detach().numpy(), ya.detach().numpy(), gm.numpy(), ga.numpy()]
        flat = _flat_indices(im.numpy(), shape)
        for t in (1, 2):
            got = _run_model(src, npy_stream(x, dym, dya), t)
            what = f"pool3d {shape} k{k} s{s} p{p} d{dl} ceil={ceil} cip={cip} t{t}"
            _check(got[:4], want, what)
            _check(got[4:], [flat], what + " indices", exact=True)


def test_max_unpool():
    rng = np.random.default_rng(32)
    for trial in range(6):
        nsp = 2 + trial % 2
        k = [int(rng.integers(1, 4)) for _ in range(nsp)]
        s = [int(rng.integers(1, 4)) for _ in range(nsp)]
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *(int(rng.integers(k[i], 9)) for i in range(nsp)))
        x = torch.tensor(rng.standard_normal(shape).astype(np.float32))
        pool, unpool = (F.max_pool2d, F.max_unpool2d) if nsp == 2 else (F.max_pool3d, F.max_unpool3d)
        y, idx = pool(x, k, s, return_indices=True)
        # the default size, (in-1)*s + k, when it holds every index; else x's (the shape attribute)
        full = [(y.shape[2 + i] - 1) * s[i] + k[i] for i in range(nsp)]
        fits = all(full[i] >= shape[2 + i] for i in range(nsp))
        want = unpool(y, idx, k, s, output_size=None if fits else shape[2:]).numpy()
        flat = _flat_indices(idx.numpy(), want.shape)
        sh = "" if fits else f", shape={_lst(want.shape)}"
        src = f"""input y : f32{_shape(y)}
input i : i64{_shape(flat)}
u = max_unpool(y, i, kernel={_lst(k)}, stride={_lst(s)}{sh})
output u
"""
        for t in (1, 2):
            _check(_run_model(src, npy_stream(y.numpy(), flat), t), [want], f"max_unpool {shape} k{k} s{s} t{t}",
                   exact=True)


def _save_weights(d, m):
    path = os.path.join(d, "w.npz")
    np.savez(path, **{f"rnn.{k}": v.detach().numpy().copy() for k, v in m.state_dict().items()})
    return path


def test_rnn_layer():
    cases = [  # I, H, layers, bidir, batch_first, bias, nonlinearity, h0
        (3, 4, 1, False, False, True, "tanh", False),
        (5, 3, 2, True, False, True, "relu", True),
        (2, 6, 2, False, True, False, "tanh", True),
        (4, 5, 1, True, True, True, "relu", False),
    ]
    for seed, (I, H, L, bidir, bf, bias, act, state) in enumerate(cases):
        torch.manual_seed(seed)
        m = nn.RNN(I, H, num_layers=L, nonlinearity=act, bias=bias, batch_first=bf, bidirectional=bidir)
        D = 2 if bidir else 1
        N = 3
        gen = torch.Generator().manual_seed(seed + 50)
        d = tmpdir()
        w = _save_weights(d, m)
        b = lambda v: "true" if v else "false"  # noqa: E731
        src = f'weights "{w}"\ninput x : f32[{"N,S" if bf else "S,N"},{I}]\n'
        args = "x"
        if state:
            src += f"input h0 : f32[{D * L},N,{H}]\n"
            args += ", h0"
        src += (f"rnn, hn = rnn({args}, hidden_size={H}, num_layers={L}, bidirectional={b(bidir)}, "
                f"batch_first={b(bf)}, bias={b(bias)}, nonlinearity={act})\noutput rnn\noutput hn\n")
        recs, want = [], []
        with torch.no_grad():
            for S in (4, 7):   # two records of different lengths: S is a symbol
                x = torch.randn(*((N, S, I) if bf else (S, N, I)), generator=gen)
                h0 = torch.randn(D * L, N, H, generator=gen)
                y, hn = m(x, h0) if state else m(x)
                recs += [x.numpy(), h0.numpy()] if state else [x.numpy()]
                want += [y.numpy(), hn.numpy()]
        for t in (1, 2):
            _check(_run_model(src, npy_stream(*recs), t), want, f"rnn case {seed} t{t}")
