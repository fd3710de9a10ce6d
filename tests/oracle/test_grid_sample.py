"""grid_sample and resize's bicubic mode against PyTorch (torch 1.13's
F.grid_sample and F.interpolate(mode='bicubic')): forward and the
gradient ops (grid_sample_grad's dx and dgrid, resize_grad's dx) against
autograd, on random shapes, every mode and padding mode, align_corners
both ways; grids reach past [-1, 1] so the padding modes matter. f32,
relative error ~1e-5 (nearest exact)."""
import numpy as np

from common import Skip, npy_stream, read_stream, rel_err, run, tool, tmpdir

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    raise Skip(f"PyTorch not installed ({e}); scripts/deps installs it")


def fmt(v):
    return "[" + ", ".join(str(a) for a in v) + "]"


def shape_str(s):
    return "f32" + fmt(s).replace(" ", "")


def mge(model, ins, nout):
    d = tmpdir()
    with open(f"{d}/m.mgt", "w") as f:
        f.write(model)
    _, out, _ = run([tool("mge-run"), f"{d}/m.mgt", "--threads", "2"], stdin=npy_stream(*ins))
    got = read_stream(out)
    assert len(got) == nout, (len(got), nout)
    return got


def close(got, want, what, tol):
    want = want.detach().numpy() if hasattr(want, "detach") else want
    assert got.shape == want.shape, (what, got.shape, want.shape)
    e = rel_err(got, want)
    assert e <= tol, (what, e)


def grid_case(rng, xshape, gshape, mode, pad, align):
    x = torch.tensor(rng.standard_normal(xshape).astype(np.float32), requires_grad=True)
    # past [-1, 1] by a margin, and never on a pixel boundary for nearest
    # (a tie there rounds by the last float bit; both round half to even)
    g = torch.tensor((rng.uniform(-1.3, 1.3, gshape)).astype(np.float32), requires_grad=True)
    y = F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)
    dy = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
    y.backward(dy)
    attr = f"mode={mode}, padding_mode={pad}, align_corners={'true' if align else 'false'}"
    model = f"""input x : {shape_str(xshape)}
input g : {shape_str(gshape)}
input dy : {shape_str(tuple(y.shape))}
y = grid_sample(x, g, {attr})
dx, dg = grid_sample_grad(dy, x, g, {attr})
output y, dx, dg
"""
    got = mge(model, [x.detach().numpy(), g.detach().numpy(), dy.numpy()], 3)
    what = (xshape, gshape, mode, pad, align)
    close(got[0], y, ("y",) + what, 0 if mode == "nearest" else 2e-5)
    close(got[1], x.grad, ("dx",) + what, 1e-6 if mode == "nearest" else 2e-5)
    if mode == "nearest":
        assert np.all(got[2] == 0), what
    else:
        close(got[2], g.grad, ("dgrid",) + what, 1e-4)


def test_grid_sample_2d_vs_torch():
    rng = np.random.default_rng(7)
    for xs, gs in [((2, 3, 5, 7), (2, 4, 6, 2)), ((1, 2, 8, 3), (1, 9, 2, 2)), ((3, 1, 1, 4), (3, 3, 3, 2))]:
        for mode in ["bilinear", "nearest", "bicubic"]:
            for pad in ["zeros", "border", "reflection"]:
                for align in [False, True]:
                    grid_case(rng, xs, gs, mode, pad, align)


def test_grid_sample_3d_vs_torch():
    rng = np.random.default_rng(8)
    for mode in ["bilinear", "nearest"]:
        for pad in ["zeros", "border", "reflection"]:
            for align in [False, True]:
                grid_case(rng, (2, 2, 3, 4, 5), (2, 2, 3, 4, 3), mode, pad, align)


def bicubic_case(rng, shape, align, scales=None, size=None):
    x = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    if scales:
        y = F.interpolate(x, scale_factor=tuple(scales), mode="bicubic", align_corners=align)
    else:
        y = F.interpolate(x, size=tuple(size), mode="bicubic", align_corners=align)
    dy = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
    y.backward(dy)
    attr = f"mode=bicubic, align_corners={'true' if align else 'false'}, "
    attr += f"scales={fmt(scales)}" if scales else f"size={fmt(size)}"
    model = f"""input x : {shape_str(shape)}
input dy : {shape_str(tuple(y.shape))}
y = resize(x, {attr})
dx = resize_grad(dy, x, {attr})
output y, dx
"""
    got = mge(model, [x.detach().numpy(), dy.numpy()], 2)
    what = (shape, align, scales, size)
    close(got[0], y, ("y",) + what, 2e-5)
    close(got[1], x.grad, ("dx",) + what, 2e-5)


def test_resize_bicubic_vs_torch():
    rng = np.random.default_rng(9)
    for shape in [(2, 3, 5, 7), (1, 2, 8, 6), (3, 1, 2, 11)]:
        for align in [False, True]:
            for scales in [[2, 2], [1.5, 0.75], [0.5, 3], [1.7, 2.3]]:
                bicubic_case(rng, shape, align, scales=scales)
            for size in [[10, 3], [4, 13], [1, 1], [shape[2], shape[3]]]:
                bicubic_case(rng, shape, align, size=size)
