"""roi_align (forward and roi_align_grad) and deform_conv2d against
torchvision 0.14's ops and autograd (every gradient of deform_conv2d's; avg
pooling, aligned both ways, fixed and adaptive sampling_ratio, rois
partly outside; deform_conv2d with stride, pad, dilation, groups,
offset groups, bias and mask). f32, relative error ~1e-5. pooling=max is
ONNX's own (torchvision has none): the ONNX node tests check it."""
import numpy as np

from common import Skip, npy_stream, read_stream, rel_err, run, tool, tmpdir

try:
    import torch
    import torchvision.ops as tvo
except ImportError as e:  # pragma: no cover
    raise Skip(f"torchvision not installed ({e}); scripts/deps installs it")


def fmt(v):
    return "[" + ", ".join(str(a) for a in v) + "]"


def shape_str(s, dt="f32"):
    return dt + fmt(s).replace(" ", "")


def mge(model, ins, nout):
    d = tmpdir()
    with open(f"{d}/m.mgt", "w") as f:
        f.write(model)
    _, out, _ = run([tool("mge-run"), f"{d}/m.mgt", "--threads", "2"], stdin=npy_stream(*ins))
    got = read_stream(out)
    assert len(got) == nout, (len(got), nout)
    return got


def close(got, want, what, tol=2e-5):
    want = want.detach().numpy()
    assert got.shape == want.shape, (what, got.shape, want.shape)
    e = rel_err(got, want)
    assert e <= tol, (what, e)


def test_roi_align_vs_torchvision():
    rng = np.random.default_rng(3)
    N, C, H, W = 2, 3, 11, 9
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    R = 7
    xy = rng.uniform(-3, 12, (R, 2, 2)).astype(np.float32)
    boxes = np.concatenate([xy.min(1), xy.max(1)], 1).astype(np.float32)  # x1 <= x2, y1 <= y2
    bi = rng.integers(0, N, R).astype(np.int64)
    for aligned in [False, True]:
        for sr in [0, 1, 2, 3]:
            for scale, out in [(1.0, (3, 4)), (0.5, (2, 2)), (1.3, (5, 1))]:
                xt = torch.tensor(x, requires_grad=True)
                want = tvo.roi_align(xt, torch.tensor(np.concatenate([bi[:, None], boxes], 1).astype(np.float32)),
                                     out, spatial_scale=scale, sampling_ratio=sr, aligned=aligned)
                dy = rng.standard_normal(tuple(want.shape)).astype(np.float32)
                want.backward(torch.tensor(dy))
                attr = (f"output_size={fmt(out)}, sampling_ratio={sr}, spatial_scale={scale}, "
                        f"aligned={'true' if aligned else 'false'}")
                model = f"""input x : {shape_str(x.shape)}
input r : {shape_str(boxes.shape)}
input b : {shape_str(bi.shape, 'i64')}
input dy : {shape_str(dy.shape)}
y = roi_align(x, r, b, {attr})
dx = roi_align_grad(dy, x, r, b, {attr})
output y, dx
"""
                got = mge(model, [x, boxes, bi, dy], 2)
                close(got[0], want, (aligned, sr, scale, out))
                close(got[1], xt.grad, ("dx", aligned, sr, scale, out))


def test_deform_conv2d_vs_torchvision():
    rng = np.random.default_rng(4)
    cases = [  # N, C, H, W, O, k, stride, pad, dil, groups, offset groups, bias, mask
        (2, 4, 7, 8, 6, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, True, False),
        (1, 4, 9, 7, 4, (2, 3), (2, 1), (0, 2), (1, 2), 2, 2, False, True),
        (2, 6, 6, 6, 3, (3, 2), (1, 2), (2, 0), (2, 1), 3, 3, True, True),
    ]
    for N, C, H, W, O, k, s, p, d, g, og, bias, mask in cases:
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = rng.standard_normal((O, C // g, *k)).astype(np.float32)
        OH = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
        OW = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
        off = (rng.standard_normal((N, 2 * og * k[0] * k[1], OH, OW)) * 2).astype(np.float32)
        b = rng.standard_normal(O).astype(np.float32)
        m = rng.uniform(0, 1, (N, og * k[0] * k[1], OH, OW)).astype(np.float32)
        ts = [torch.tensor(a, requires_grad=True) for a in (x, off, w, m)]
        want = tvo.deform_conv2d(ts[0], ts[1], ts[2], torch.tensor(b) if bias else None, s, p, d,
                                 ts[3] if mask else None)
        dy = rng.standard_normal(tuple(want.shape)).astype(np.float32)
        want.backward(torch.tensor(dy))
        ins = [x, w, off] + ([b] if bias or mask else []) + ([m] if mask else [])
        if mask and not bias:
            ins[3] = np.zeros(O, np.float32)
        decl = f"input x : {shape_str(x.shape)}\ninput w : {shape_str(w.shape)}\ninput o : {shape_str(off.shape)}\n"
        args = "x, w, o"
        if len(ins) > 3:
            decl += f"input b : f32[{O}]\n"
            args += ", b"
        if mask:
            decl += f"input m : {shape_str(m.shape)}\n"
            args += ", m"
        attr = f"stride={fmt(s)}, pad={fmt(p)}, dilation={fmt(d)}, groups={g}, offset_groups={og}"
        model = (decl + f"input dy : {shape_str(dy.shape)}\ny = deform_conv2d({args}, {attr})\n"
                 f"dx, dw, doff, dm = deform_conv2d_grad(dy, {args}, {attr})\noutput y, dx, dw, doff, dm\n")
        got = mge(model, ins + [dy], 5)
        what = (N, C, H, W, O, k, s, p, d, g, og, bias, mask)
        close(got[0], want, what)
        close(got[1], ts[0].grad, ("dx",) + what, 1e-4)
        close(got[2], ts[2].grad, ("dweight",) + what, 1e-4)
        close(got[3], ts[1].grad, ("doffset",) + what, 1e-4)
        if mask:
            close(got[4], ts[3].grad, ("dmask",) + what, 1e-4)
