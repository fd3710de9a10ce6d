"""Indexing and logic ops against numpy: one text model with symbolic dims
run by mge-run on records of different shapes (cpu and ref-equivalent sim
paths are compared in the parity harness; this checks the semantics):
gather (np.take), index_select, gather_elements (np.take_along_axis),
scatter (np.put_along_axis), scatter_nd, one_hot, where, the comparisons
and the bool ops. Exact: these only move, select or compare values."""
import numpy as np

from common import npy_stream, read_stream, run, tool, tmpdir

MODEL = """\
input x : f32[N,S,6]
input idx : i64[K]
input ie : i64[N,K,6]
input u : f32[N,K,6]
input ind : i32[M,2]
input un : f32[M,6]
input y : f32[S,1]
const vals : f32[2] = [-2, 7]
const i2 : i64[2,3] = [0, 5, -1, 2, -6, 3]
g = gather(x, idx, axis=1)
gi = gather(x, i2, axis=-1)
s = index_select(x, idx, axis=-2)
ge = gather_elements(x, ie, axis=1)
sc = scatter(x, ie, u, axis=1)
snd = scatter_nd(x, ind, un)
oh = one_hot(idx, vals, depth=5, axis=0)
lt = less(x, y)
eq = equal(x, y)
gt = greater(x, y)
le = less_equal(x, y)
gq = greater_equal(x, y)
w = where(lt, x, y)
nt = not(lt)
an = and(lt, gq)
o = or(eq, gt)
xo = xor(le, gq)
output g, gi, s, ge, sc, snd, oh, w, lt, eq, gt, le, gq, nt, an, o, xo
"""


def _case(rng, N, S, K, M):
    x = rng.integers(-3, 4, (N, S, 6)).astype(np.float32)  # small integers: ties for equal
    y = rng.integers(-3, 4, (S, 1)).astype(np.float32)
    idx = rng.integers(-S, S, K).astype(np.int64)
    # scatter's indices without repeats along the axis (numpy and mge agree
    # on the last write, but ONNX leaves repeats undefined)
    ie = np.stack([np.stack([rng.permutation(S)[:K] for _ in range(6)], -1) for _ in range(N)]).astype(np.int64)
    ie[ie % 2 == 1] -= S  # negative ones count from the end
    u = rng.standard_normal((N, K, 6)).astype(np.float32)
    rows = rng.permutation(N * S)[:M]
    ind = np.stack([rows // S - N * (rows % 2), rows % S], -1).astype(np.int32)
    un = rng.standard_normal((M, 6)).astype(np.float32)
    ins = [x, idx, ie, u, ind, un, y]

    p = np.where(ie < 0, ie + S, ie)
    sc = x.copy()
    np.put_along_axis(sc, p, u, axis=1)
    snd = x.copy()
    for r, (a, b) in enumerate(ind):
        snd[a, b] = un[r]
    oh = np.full((5, K), -2, np.float32)
    for j, v in enumerate(idx):
        if -5 <= v < 5:
            oh[v % 5, j] = 7
    lt, eq, gt, le, gq = x < y, x == y, x > y, x <= y, x >= y
    want = [np.take(x, idx, axis=1), np.take(x, np.array([[0, 5, -1], [2, -6, 3]]), axis=-1), np.take(x, idx, axis=-2),
            np.take_along_axis(x, p, axis=1), sc, snd, oh, np.where(lt, x, y), lt, eq, gt, le, gq,
            ~lt, lt & gq, eq | gt, le ^ gq]
    return ins, want


def test_index_ops_vs_numpy():
    d = tmpdir()
    path = f"{d}/m.mgt"
    with open(path, "w") as f:
        f.write(MODEL)
    rng = np.random.default_rng(19)
    cases = [_case(rng, 2, 5, 3, 4), _case(rng, 1, 9, 6, 2)]
    stream = npy_stream(*[a for ins, _ in cases for a in ins])
    for dev in ["cpu", "sim"]:
        _, out, _ = run([tool("mge-run"), path, "--threads", "2", "--device", dev], stdin=stream)
        got = read_stream(out)
        want = [a for _, w in cases for a in w]
        assert len(got) == len(want), (len(got), len(want))
        for k, (a, b) in enumerate(zip(got, want)):
            assert a.shape == b.shape and a.dtype == b.dtype, (dev, k, a.shape, b.shape, a.dtype, b.dtype)
            assert np.array_equal(a, b), (dev, k, a, b)
