#!/usr/bin/env bats
# The dtypes f64, i16, u16, u32, u64 through the tools: NPY records of each
# go through mge-run unchanged (numpy reads back the same dtype and bits,
# little- and big-endian in), f64 models compute in double, integer ones
# in their width, mge-dump prints the tensors, and mge-opt keeps the
# dtypes in .mge and the text form.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

@test "mge-run: NPY records of f64, i16, u16, u32, u64 round-trip through an identity model" {
    need_numpy
    for dt in f64:'<f8' i16:'<i2' u16:'<u2' u32:'<u4' u64:'<u8' f64be:'>f8' u64be:'>u8'; do
        local name=${dt%%:*} descr=${dt#*:} mt=${dt%%:*}
        mt=${mt%be}
        printf 'input x : %s[N,3]\ny = copy(x)\noutput y\n' "$mt" > "$T/id.mgt"
        py '
d = np.dtype(sys.argv[2])
info = np.finfo(d) if d.kind == "f" else np.iinfo(d)
x = np.array([[info.min, info.max, 0], [1, 2, 3]], dtype=d)
if d.kind == "f":
    x[1] = [np.pi, -0.0, 1e-300]
np.save(sys.argv[1], x)
' "$T/in.npy" "$descr"
        run --separate-stderr "$MGE_RUN" "$T/id.mgt" -i "$T/in.npy" -o "$T/out.npy"
        assert_success
        run py '
x = np.load(sys.argv[1]); y = np.load(sys.argv[2])
assert y.dtype == x.dtype.newbyteorder("="), (y.dtype, x.dtype)
assert y.shape == x.shape and y.tobytes() == x.astype(y.dtype).tobytes(), (x, y)
print("ok")
' "$T/in.npy" "$T/out.npy"
        assert_output "ok"
    done
}

@test "mge-run: f64 arithmetic in double, integers in their width, u64 unsigned" {
    need_numpy
    cat > "$T/m.mgt" <<'NET'
input a : f64[4]
input b : u64[3]
input c : i16[3]
s = add(a, a)
e = exp(a)
t = sum(a)
cs = cumsum(a, axis=0)
d = div(b, b)
m = max(b)
lt = less(b, b)
w = mul(c, c)
f = cast(a, dtype=f32)
output s, e, t, cs, d, m, lt, w, f
NET
    py '
with open(sys.argv[1], "wb") as f:
    np.save(f, np.array([1e-12, 1.0, 700.0, -1e300]))
    np.save(f, np.array([2**64 - 1, 2**63, 3], dtype=np.uint64))
    np.save(f, np.array([300, -200, 181], dtype=np.int16))
' "$T/in.npy"
    run --separate-stderr "$MGE_RUN" "$T/m.mgt" -i "$T/in.npy" -o "$T/out.npy"
    assert_success
    run py '
f = open(sys.argv[1], "rb"); g = open(sys.argv[2], "rb")
a, b, c = np.load(f), np.load(f), np.load(f)
s, e, t, cs, d, m, lt, w, fl = [np.load(g) for _ in range(9)]
assert s.dtype == np.float64 and (s == a + a).all()
assert e.dtype == np.float64 and np.allclose(e, np.exp(a), rtol=1e-15, atol=0)
assert t == a.sum() and (cs == np.cumsum(a)).all()
assert d.dtype == np.uint64 and (d == 1).all()
assert m == np.uint64(2**64 - 1) and not lt.any()
with np.errstate(over="ignore"):
    assert w.dtype == np.int16 and (w == c * c).all(), w   # wraps: 300*300
with np.errstate(over="ignore"):
    assert fl.dtype == np.float32 and (fl == a.astype(np.float32)).all()
print("ok")
' "$T/in.npy" "$T/out.npy"
    assert_output "ok"
}

@test "mge-opt and mge-dump keep and print the new dtypes" {
    cat > "$T/c.mgt" <<'NET'
input x : u32[2]
const k : u32[2] = [4000000000, 7]
const h : f64[2] = [0.1, 1e+300]
y = add(x, k)
z = cast(y, dtype=u64)
output z, h
NET
    run "$MGE_OPT" "$T/c.mgt" -o "$T/c.mge"
    assert_success
    run "$MGE_DUMP" "$T/c.mge"
    assert_success
    assert_output --partial "input x : u32[2]"
    assert_output --partial "const k : u32[2] = [4000000000, 7]"
    assert_output --partial "const h : f64[2] = [0.1, 1e+300]"
    assert_output --partial "dtype=u64"
    # the text form parses back to the same graph
    "$MGE_DUMP" "$T/c.mge" > "$T/back.mgt"
    run "$MGE_OPT" "$T/back.mgt" -o "$T/back.mge"
    assert_success
    "$MGE_DUMP" "$T/back.mge" > "$T/back2.mgt"
    cmp "$T/back.mgt" "$T/back2.mgt"
}

@test "mge-run: float64 data for an f32 input is an error that says to save float32" {
    need_numpy
    printf 'input x : f32[N,3]\ny = relu(x)\noutput y\n' > "$T/r.mgt"
    py 'np.save(sys.argv[1], np.zeros((2, 3)))' "$T/x.npy"
    run -1 --separate-stderr "$MGE_RUN" "$T/r.mgt" -i "$T/x.npy" -o "$T/y.npy"
    assert_equal "$stderr" "mge-run: $T/x.npy: error: step 0: input 'x': expected f32[N,3], got f64[2,3] (save float32: x.astype(np.float32))"
    [ ! -e "$T/y.npy" ]
}
