#!/usr/bin/env bats
# mge-run on models that compute shapes at run time (shape, slice, concat,
# reshape with a shape input, expand, split, ...): records of different
# shapes in one stream, and the errors of shapes that do not fit.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# The pattern ONNX exports use: y = reshape(x, concat(shape(x)[0:2], [2, -1])).
write_dyn() {
    cat > "$T/dyn.txt" <<'M'
input x : f32[N,S,8]
const two : i64[1] = [2]
const neg : i64[1] = [-1]
s = shape(x)
lead = slice(s, axis=0, start=0, end=2)
t = concat(lead, two, neg, axis=0)
y = reshape(x, t)
h0, h1 = split(y, axis=2)
z = expand(h1, shape=[1,1,3,4])
output y
output z
M
}

@test "mge-run: reshape by x's own shape, two different S in one stream, matches numpy" {
    need_numpy
    write_dyn
    npy_records "$T/x.npy" 'np.random.default_rng(1).standard_normal((2,3,8)).astype(np.float32)' \
        'np.random.default_rng(2).standard_normal((1,5,8)).astype(np.float32)'
    run --separate-stderr "$MGE_RUN" "$T/dyn.txt" -o "$T/y.npy" < "$T/x.npy"
    assert_success
    run py 'f = open(sys.argv[1], "rb"); g = open(sys.argv[2], "rb")
for i in range(2):
    x = np.load(f)
    y = np.load(g); z = np.load(g)
    want = x.reshape(x.shape[0], x.shape[1], 2, -1)
    assert y.shape == want.shape and np.array_equal(y, want), (y.shape, want.shape)
    zw = np.broadcast_to(want[:, :, 1:2, :], (x.shape[0], x.shape[1], 3, 4))
    assert z.shape == zw.shape and np.array_equal(z, zw), (z.shape, zw.shape)
print("ok")' "$T/x.npy" "$T/y.npy"
    assert_output "ok"
}

@test "mge-run: a reshape whose shape does not hold x's elements names both, exits 1, writes no file" {
    cat > "$T/bad.txt" <<'M'
input x : f32[2,3,4]
const s : i64[2] = [5,5]
y = reshape(x, s)
output y
M
    run --separate-stderr "$MGE_RUN" "$T/bad.txt" -o "$T/out.npy" < /dev/null
    assert_failure 1
    [[ "$stderr" == *"mge-run: "*"bad.txt:3:1: error: y: reshape: x has 24 elements (f32[2,3,4]) but the shape [5,5] holds 25"* ]]
    [ ! -e "$T/out.npy" ]
}

@test "mge-run: a record whose runtime shape does not fit the reshape is a clear error" {
    cat > "$T/odd.txt" <<'M'
input x : f32[N,S]
y = reshape(x, shape=[2,-1])
output y
M
    npys "$T/x.npy" f32:2x3:arange f32:1x3:arange
    run --separate-stderr "$MGE_RUN" "$T/odd.txt" -o "$T/out.npy" < "$T/x.npy"
    assert_failure 1
    [[ "$stderr" == *"reshape: x has 3 elements (f32[1,3]) but the shape [2,-1] cannot hold them"* ]]
    [ ! -e "$T/out.npy" ]
}

@test "mge-run: squeeze of a dim that is not 1 and a shape that depends on data are refused" {
    printf 'input x : f32[2,3,1]\ny = squeeze(x, axis=[1])\noutput y\n' > "$T/sq.txt"
    run --separate-stderr "$MGE_RUN" "$T/sq.txt" < /dev/null
    assert_failure 1
    [[ "$stderr" == *"squeeze: axis 1 of x f32[2,3,1] has size 3: expected 1"* ]]
    printf 'input x : f32[2,3]\ninput q : i64[2]\ny = reshape(x, q)\noutput y\n' > "$T/dd.txt"
    run --separate-stderr "$MGE_RUN" "$T/dd.txt" < /dev/null
    assert_failure 1
    [[ "$stderr" == *"depends on data, not only on shapes and constants: not supported"* ]]
}
