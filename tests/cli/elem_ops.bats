#!/usr/bin/env bats
# The elementwise math ops (mge-ops(7) ELEMENTWISE MATH) through the tools:
# mge-run on a text model with symbolic dims and records of two shapes,
# the errors of bad attributes (exit 1, nothing written), and mge-opt -O2
# fusing the new activations into conv epilogues and fused_elemwise.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

write_model() {
    cat > "$T/m.mgt" <<'NET'
input x : f32[N,3,S]
c = clamp(x, min=-1, max=2)
r = round(x)
s = sign(x)
p = prelu(x, num=3)
e = elu(x, alpha=0.5)
sp = softplus(x, beta=2)
m = mish(x)
q = square(x)
n = isnan(x)
output c, r, s, p, e, sp, m, q, n
NET
}

@test "mge-run: the math ops on records of two shapes, against numpy" {
    need_numpy
    write_model
    py '
with open(sys.argv[1], "wb") as f:
    for shape in [(2, 3, 5), (1, 3, 8)]:
        x = np.linspace(-3.5, 3.5, int(np.prod(shape)), dtype=np.float32).reshape(shape)
        x.flat[0] = np.nan
        x.flat[1] = 2.5
        np.save(f, x)
' "$T/in.npy"
    run --separate-stderr "$MGE_RUN" "$T/m.mgt" -i "$T/in.npy" -o "$T/out.npy"
    assert_success
    run py '
f = open(sys.argv[1], "rb"); g = open(sys.argv[2], "rb")
for rec in range(2):
    x = np.load(f).astype(np.float64)
    got = [np.load(g) for _ in range(9)]
    assert [a.shape for a in got] == [x.shape] * 9, [a.shape for a in got]
    sp = np.where(2 * x > 20, x, np.log1p(np.exp(2 * x)) / 2)
    want = [np.clip(x, -1, 2), np.round(x), np.nan_to_num(np.sign(x), nan=0.0),
            np.where(x < 0, 0.25 * x, x), np.where(x > 0, x, 0.5 * np.expm1(x)), sp,
            x * np.tanh(np.log1p(np.exp(x))), x * x, np.isnan(x)]
    for k, (a, w) in enumerate(zip(got, want)):
        if w.dtype == bool:
            assert a.dtype == bool and (a == w).all(), (rec, k)
        else:
            ok = np.isclose(a, w, rtol=1e-5, atol=1e-6, equal_nan=True)
            assert ok.all(), (rec, k, a[~ok], w[~ok])
    assert got[1].flat[1] == 2.0  # half to even
    assert got[2].flat[0] == 0.0  # sign(NaN)
print("ok")
' "$T/in.npy" "$T/out.npy"
    assert_output "ok"
}

@test "bad attributes of the math ops exit 1 with the op's message, writing nothing" {
    local -a cases=(
        "clamp(x)|y: clamp: needs min, max or both"
        "hardtanh(x, min=1, max=-1)|y: hardtanh: min=1 > max=-1: expected min <= max"
        "softplus(x, beta=0)|y: softplus: beta=0: expected a finite nonzero number"
        "prelu(x, num=4)|y: prelu: num=4 but x is f32[1,3,4]: expected num 1 or x's dim 1"
        "prelu(x, num=-2)|y: prelu: num=-2: expected 1 or the channels"
        "fused_elemwise(x, ops=[hardtanh])|y: fused_elemwise: ops entry 0 is hardtanh"
    )
    for c in "${cases[@]}"; do
        printf 'input x : f32[N,3,4]\ny = %s\noutput y\n' "${c%%|*}" > "$T/bad.mgt"
        run --separate-stderr "$MGE_RUN" "$T/bad.mgt" -o "$T/out.npy" < /dev/null
        [ "$status" -eq 1 ] || { echo "${c%%|*}: exit $status"; return 1; }
        [[ "$stderr" == "mge-run: $T/bad.mgt:2:1: error: ${c#*|}"* ]] || { echo "${c%%|*}: $stderr"; return 1; }
        [ ! -e "$T/out.npy" ]
    done
}

@test "isnan of an integer tensor is a dtype error, and so is clamp of one to a fractional bound" {
    printf 'input x : i32[N]\ny = isnan(x)\noutput y\n' > "$T/bad.mgt"
    run --separate-stderr "$MGE_RUN" "$T/bad.mgt" < /dev/null
    assert_failure 1
    [[ "$stderr" == *"error: y: isnan: x is i32["*"]: expected a float dtype (f32, f16, bf16, f64)"* ]] || { echo "$stderr"; return 1; }
    printf 'input x : i64[N]\ny = clamp(x, min=-1, max=2.5)\noutput y\n' > "$T/bad.mgt"
    run --separate-stderr "$MGE_RUN" "$T/bad.mgt" < /dev/null
    assert_failure 1
    [[ "$stderr" == *"error: y: clamp: max=2.5 on i64: expected an integer in the dtype's range"* ]] || { echo "$stderr"; return 1; }
}

@test "mge-opt -O2 fuses conv2d + elu and an add + mish chain; the outputs match" {
    need_numpy
    cat > "$T/f.mgt" <<'NET'
input x : f32[N,3,9,9]
input b : f32[1,4,1,1]
c = conv2d(x, out=4, kernel=3, pad=1)
e = elu(c, alpha=0.7)
a = add(e, b)
m = mish(a)
s = softsign(m)
output s
NET
    "$MGE_OPT" "$T/f.mgt" -o "$T/plain.mge"
    run --separate-stderr "$MGE_OPT" -O2 "$T/f.mgt" --verify -o "$T/o2.mge"
    assert_success
    run --separate-stderr "$MGE_DUMP" "$T/o2.mge"
    assert_success
    grep -q 'fused_conv2d(.*act=elu, alpha=0.7)' <<< "$output" || { echo "$output"; return 1; }
    grep -q 'fused_elemwise(e, b, ops=\[add, mish, softsign\])' <<< "$output" || { echo "$output"; return 1; }
    refute_output --partial '= mish('
    npys "$T/in.npy" f32:2x3x9x9:rand f32:1x4x1x1:rand
    "$MGE_RUN" "$T/plain.mge" < "$T/in.npy" > "$T/a.npy"
    "$MGE_RUN" "$T/o2.mge" < "$T/in.npy" > "$T/b.npy"
    cmp "$T/a.npy" "$T/b.npy"
}
