#!/usr/bin/env bats
# sort.bats — topk, sort, argsort, cumsum and the prod/min/argmin
# reductions through mge-run: a model with symbolic N and S on one stream
# whose records differ in both, checked against numpy (NaN sorts last,
# ties keep index order); and the attribute errors (k larger than the dim,
# an axis out of range, cumsum without its axis): exit 1 with the exact
# message and no output file.
bats_require_minimum_version 1.5.0
load helper

@test "topk, sort, argsort, cumsum, prod, min, argmin on records of two shapes match numpy" {
    need_numpy
    cat > "$T/s.mgt" <<'NET'
input x : f32[N,S]
v, i = topk(x, k=3, axis=1)
s, si = sort(x, axis=1, descending=true)
c = cumsum(x, axis=1, reverse=true)
p = prod(x, axis=1)
m = min(x, axis=0, keepdim=true)
am = argmin(x, axis=1)
a = argsort(x, axis=0)
output v, i, si, c, p, m, am, a
NET
    py '
rng = np.random.default_rng(5)
with open(sys.argv[1], "wb") as f, open(sys.argv[2], "wb") as r:
    for N, S in [(2, 7), (3, 4)]:
        x = rng.integers(-3, 4, (N, S)).astype(np.float32)   # ties
        x[0, 1] = np.nan
        np.save(f, x)
        key = np.where(np.isnan(x), np.inf, x)
        si = np.argsort(-key, axis=1, kind="stable")   # descending, NaN first, ties by index
        si[0] = [1] + [j for j in np.argsort(-key[0], kind="stable") if j != 1]
        np.save(r, np.take_along_axis(x, si[:, :3], 1)); np.save(r, si[:, :3].astype(np.int64))
        np.save(r, si.astype(np.int64))
        np.save(r, np.flip(np.cumsum(np.flip(x, 1), 1), 1))
        np.save(r, np.prod(x, 1)); np.save(r, np.min(x, 0, keepdims=True))
        np.save(r, np.argmin(np.where(np.isnan(x), -np.inf, x), 1).astype(np.int64))
        np.save(r, np.argsort(x, axis=0, kind="stable").astype(np.int64))   # numpy too puts NaN last
' "$T/in.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/s.mgt" -i "$T/in.npy" -o "$T/out.npy"
    assert_success
    # --check counts NaN against NaN as a difference: compare here, NaN equal to NaN
    run py '
f, r = open(sys.argv[1], "rb"), open(sys.argv[2], "rb")
shapes = []
for k in range(16):
    a, b = np.load(f), np.load(r)
    assert a.dtype == b.dtype or a.dtype == np.float32, (k, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=0, equal_nan=True, err_msg=str(k))
    shapes.append(a.shape)
print(shapes[1], shapes[9], shapes[15])' "$T/out.npy" "$T/ref.npy"
    assert_success
    assert_output "(2, 3) (3, 3) (3, 4)"
}

@test "bad sort attributes exit 1 naming the value and the bound, writing nothing" {
    need_numpy
    npys "$T/x.npy" f32:2x5:rand
    for case in "v, i = topk(x, k=6)|topk: k=6 is larger than dim 1 of x f32[2,5] (5)" \
                "v, i = topk(x, k=2, axis=2)|topk: axis=2 is out of range for x f32[2,5] (rank 2)" \
                "v = cumsum(x)|cumsum needs attribute 'axis'" \
                "v = argmin(x, axis=-3)|argmin: axis=-3 is out of range for x f32[2,5] (rank 2)"; do
        printf 'input x : f32[2,5]\n%s\noutput v\n' "${case%%|*}" > "$T/bad.mgt"
        run --separate-stderr "$MGE_RUN" "$T/bad.mgt" -i "$T/x.npy" -o "$T/out.npy"
        assert_failure 1
        [[ "$stderr" == "mge-run: "*"error: "*"${case#*|}"* ]] || { echo "$stderr"; return 1; }
        [ ! -e "$T/out.npy" ]
    done
}
