"""The dynamic shape ops against numpy: mge-run on text models whose input
has symbolic dims, fed records of two different shapes in one stream, each
output compared with numpy's (and PyTorch's where the op is a torch one)."""
import os

import numpy as np

from common import read_stream, npy_stream, run, tmpdir, tool


def _run(model, records, nout):
    """mge-run on the text model over the records; the outputs per record."""
    d = tmpdir()
    path = os.path.join(d, "m.txt")
    with open(path, "w") as f:
        f.write(model)
    _, out, _ = run([tool("mge-run"), path], stdin=npy_stream(*records))
    got = read_stream(out)
    assert len(got) == nout * len(records), (len(got), nout, len(records))
    return [got[i * nout:(i + 1) * nout] for i in range(len(records))]


def _same(got, want):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.array_equal(got, want), (got, want)


def _ramp(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 0.5 - 3


def test_reshape_from_shape_vector():
    # the ONNX export pattern: shape -> slice -> concat -> reshape
    model = """input x : f32[N,S,8]
const two : i64[1] = [2]
const neg : i64[1] = [-1]
s = shape(x)
lead = slice(s, axis=0, start=0, end=2)
t = concat(lead, two, neg, axis=0)
y = reshape(x, t)
n = size(y)
output y
output s
output n
"""
    xs = [_ramp(2, 3, 8), _ramp(1, 7, 8)]
    for x, (y, s, n) in zip(xs, _run(model, xs, 3)):
        _same(y, x.reshape(x.shape[0], x.shape[1], 2, -1))
        _same(s, np.array(x.shape, dtype=np.int64))
        _same(n, np.array(x.size, dtype=np.int64))


def test_expand_tile_squeeze_unsqueeze():
    model = """input x : f32[S,1]
const t : i64[3] = [3,1,4]
e = expand(x, t)
r = tile(x, repeats=[2,3])
u = unsqueeze(x, axis=[0,-1])
q = squeeze(u, axis=[0,2])
output e
output r
output u
output q
"""
    xs = [_ramp(2, 1), _ramp(5, 1)]
    for x, (e, r, u, q) in zip(xs, _run(model, xs, 4)):
        _same(e, np.broadcast_to(x, (3, x.shape[0], 4)).copy())
        _same(r, np.tile(x, (2, 3)))
        _same(u, x[None, :, :, None])
        _same(q, x)


def test_split():
    model = """input x : f32[N,S]
a, b = split(x, axis=1)
const sz : i64[3] = [1,0,2]
y = slice(x, axis=1, start=0, end=3)
c, d, e = split(y, sz, axis=-1)
output a
output b
output c
output e
"""
    xs = [_ramp(2, 5), _ramp(3, 8)]
    for x, (a, b, c, e) in zip(xs, _run(model, xs, 4)):
        h = -(-x.shape[1] // 2)  # ONNX: ceil, the rest last
        _same(a, x[:, :h])
        _same(b, x[:, h:])
        _same(c, x[:, :1])
        _same(e, x[:, 1:3])


def test_slice_negative_and_runtime_bounds():
    model = """input x : f32[N,S]
const st : i64[2] = [-1, 1]
const en : i64[2] = [-9223372036854775807, 100]
const ax : i64[2] = [1, 0]
const sp : i64[2] = [-2, 2]
y = slice(x, st, en, ax, sp)
z = slice(x, axis=-1, start=-2, end=0, step=-1)
output y
output z
"""
    xs = [_ramp(4, 5), _ramp(7, 6)]
    for x, (y, z) in zip(xs, _run(model, xs, 2)):
        _same(y, x[1:100:2, ::-2])
        _same(z, x[:, -2:0:-1])
    try:
        import torch
    except ImportError:
        return
    # torch has no negative steps: flip, then slice, agrees with numpy
    x = xs[1]
    t = torch.from_numpy(x).flip(1)[1:100:2, 0::2]
    _same(_run(model, [x], 2)[0][0], t.numpy())


def test_range_and_constant_of_shape():
    model = """input x : f32[S]
const zero : i64[] = [0]
const three : i64[] = [3]
n = size(x)
r = range(zero, n, three)
s = shape(x)
c = constant_of_shape(s, value=-1.5)
ci = constant_of_shape(s, value=7, dtype=i32)
output r
output c
output ci
"""
    xs = [_ramp(4), _ramp(11)]
    for x, (r, c, ci) in zip(xs, _run(model, xs, 3)):
        _same(r, np.arange(0, x.size, 3, dtype=np.int64))
        _same(c, np.full(x.shape, -1.5, dtype=np.float32))
        _same(ci, np.full(x.shape, 7, dtype=np.int32))
    # a float range: numpy's arange with the same (exact) values
    model = """input x : f32[S]
const a : f32[] = [1]
const b : f32[] = [-1]
const d : f32[] = [-0.25]
r = range(a, b, d)
output r
"""
    (r,), = _run(model, [_ramp(2)], 1)
    _same(r, np.arange(1, -1, -0.25, dtype=np.float32))
