#!/usr/bin/env bats
# convt.bats — conv_transpose2d, conv1d, conv3d and adaptive pooling through the
# tools: mge-dump's symbolic templates (k2 s2 doubles H and W), mge-run on
# one stream whose records differ in H, W (and L), with the adaptive pool
# checked against numpy's bins of the transposed conv's output, and the
# bad attributes and shapes: exit 1 with the exact message, no output file.
bats_require_minimum_version 1.5.0
load helper

write_model() {
    cat > "$T/up.mgt" <<'NET'
input x : f32[N,4,H,W]
y = conv_transpose2d(x, out=2, kernel=2, stride=2)
z = conv_transpose2d(y, out=3, kernel=4, stride=2, pad=1)
p = adaptive_avgpool2d(z, output_size=[3,5])
m = adaptive_maxpool2d(z, output_size=2)
output z, p, m
NET
}

@test "mge-dump: conv_transpose2d k2 s2 and k4 s2 p1 give 2*H templates; adaptive pooling is fixed-size" {
    write_model
    run --separate-stderr "$MGE_DUMP" "$T/up.mgt"
    assert_success
    [[ "$output" == *"# y     conv_transpose2d    f32[N,2,2*H,2*W]"* ]] || { echo "$output"; return 1; }
    [[ "$output" == *"# z     conv_transpose2d    f32[N,3,4*H,4*W]"* ]] || { echo "$output"; return 1; }
    [[ "$output" == *"p f32[N,3,3,5], m f32[N,3,2,2]"* ]] || { echo "$output"; return 1; }
    # ConvTranspose2d's weight layout [in, out/groups, kh, kw]
    [[ "$output" == *"param y.weight : f32[4,2,2,2]"* ]] || { echo "$output"; return 1; }
}

@test "conv_transpose2d + adaptive pooling on records of two shapes: pooled as numpy bins the output" {
    need_numpy
    write_model
    py '
rng = np.random.default_rng(5)
with open(sys.argv[1], "wb") as f:
    for shape in [(2, 4, 3, 5), (1, 4, 6, 2)]:
        np.save(f, rng.standard_normal(shape).astype(np.float32))
' "$T/in.npy"
    run --separate-stderr "$MGE_RUN" "$T/up.mgt" -i "$T/in.npy" -o "$T/out.npy"
    assert_success
    run py '
import math
f = open(sys.argv[1], "rb")
for rec in range(2):
    z, p, m = (np.load(f) for _ in range(3))
    H, W = z.shape[2:]
    def bins(L, n):
        return [(i * L // n, -(-(i + 1) * L // n)) for i in range(n)]
    wp = np.array([[[[z[b, c, h0:h1, w0:w1].mean() for w0, w1 in bins(W, 5)] for h0, h1 in bins(H, 3)]
                    for c in range(3)] for b in range(z.shape[0])])
    wm = np.array([[[[z[b, c, h0:h1, w0:w1].max() for w0, w1 in bins(W, 2)] for h0, h1 in bins(H, 2)]
                    for c in range(3)] for b in range(z.shape[0])])
    assert np.allclose(p, wp, rtol=1e-5, atol=1e-6), (p, wp)
    assert np.array_equal(m, wm.astype(np.float32))
    print(z.shape, p.shape, m.shape)' "$T/out.npy"
    assert_success
    assert_output "(2, 3, 12, 20) (2, 3, 3, 5) (2, 3, 2, 2)
(1, 3, 24, 8) (1, 3, 3, 5) (1, 3, 2, 2)"
}

@test "conv1d on records of two lengths" {
    need_numpy
    cat > "$T/c1.mgt" <<'NET'
input s : f32[N,3,L]
c = conv1d(s, out=4, kernel=3, stride=2, pad=1)
a = adaptive_maxpool1d(c, output_size=5)
output c, a
NET
    py '
with open(sys.argv[1], "wb") as f:
    np.save(f, np.ones((2, 3, 9), np.float32)); np.save(f, np.ones((1, 3, 30), np.float32))
' "$T/in.npy"
    run --separate-stderr "$MGE_RUN" "$T/c1.mgt" -i "$T/in.npy" -o "$T/out.npy"
    assert_success
    run py '
f = open(sys.argv[1], "rb")
print([np.load(f).shape for _ in range(4)])' "$T/out.npy"
    assert_output "[(2, 4, 5), (2, 4, 5), (1, 4, 15), (1, 4, 5)]"
}

# bad_model BODY: a model on x f32[N,4,6,6], s f32[N,4,5] and v f32[N,2,3,4,5] whose node y is BODY
bad_model() {
    printf 'input x : f32[N,4,6,6]\ninput s : f32[N,4,5]\ninput v : f32[N,2,3,4,5]\ny = %s\noutput y\n' "$1" > "$T/bad.mgt"
}

expect_error() {
    run --separate-stderr "$MGE_RUN" "$T/bad.mgt" -o "$T/out.npy" < /dev/null
    assert_failure 1
    [ "$stderr" = "mge-run: $T/bad.mgt:4:1: error: y: $1" ] || { echo "got: $stderr"; return 1; }
    [ ! -e "$T/out.npy" ]
}

@test "conv_transpose2d: output_padding >= stride (and dilation) exits 1 naming both" {
    bad_model "conv_transpose2d(x, out=2, kernel=3, stride=2, output_padding=2)"
    expect_error "conv_transpose2d: output_padding=[2,2] must be smaller than stride=[2,2] or dilation=[1,1] (axis h: 2 against stride 2, dilation 1)"
    bad_model "conv_transpose2d(x, out=2, kernel=3, stride=[2,1], dilation=[1,2], output_padding=[1,2])"
    expect_error "conv_transpose2d: output_padding=[1,2] must be smaller than stride=[2,1] or dilation=[1,2] (axis w: 2 against stride 1, dilation 2)"
}

@test "conv_transpose2d: a negative pad and an empty output exit 1" {
    bad_model "conv_transpose2d(x, out=2, kernel=3, pad=[1,-1])"
    expect_error "conv_transpose2d: pad=[1,-1]: expected values in [0, 1073741824]"
    bad_model "conv_transpose2d(x, out=2, kernel=1, pad=[0,3])"
    expect_error "conv_transpose2d: x f32[1,4,6,6] with stride=1 pad=3 dilation=1 kernel=1 output_padding=0 gives output width 0: expected at least 1"
}

@test "conv1d: a kernel larger than the padded input and a negative pad exit 1" {
    bad_model "conv1d(s, out=2, kernel=5, dilation=2, pad=1)"
    expect_error "conv1d: kernel=5 with dilation=2 spans 9, larger than the padded input length 7 (x f32[1,4,5], pad=1): the output would be empty"
    bad_model "conv1d(s, out=2, kernel=3, pad=-1)"
    expect_error "conv1d: pad=-1: expected values in [0, 1073741824]"
}

@test "conv3d: a kernel larger than the padded input names the axis" {
    bad_model "conv3d(v, out=2, kernel=[3,3,6], pad=[0,0,0])"
    expect_error "conv3d: axis w: kernel=6 with dilation=1 spans 6, larger than the padded input length 5 (x f32[1,2,3,4,5], pad=0): the output would be empty"
}

@test "adaptive pooling: output_size below 1 exits 1" {
    bad_model "adaptive_avgpool2d(x, output_size=[4,0])"
    expect_error "adaptive_avgpool2d: output_size=[4,0]: expected values in [1, 1073741824]"
    bad_model "adaptive_maxpool1d(s, output_size=0)"
    expect_error "adaptive_maxpool1d: output_size=0: expected values in [1, 1073741824]"
}
