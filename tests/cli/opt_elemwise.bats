#!/usr/bin/env bats
# mge-opt --passes=fuse-elemwise: chains of elementwise ops become one
# fused_elemwise node with the same numbers; no-ops are said with -v.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# x * 2 + b (per channel) -> sigmoid -> * y, then a relu -> neg chain on a second output.
write_chain() {
    cat > "$T/chain.mgt" <<'NET'
input x : f32[N,3,4,5]
input y : f32[N,3,4,5]
const two : f32[] = [2]
param b : f32[3,1,1] init=uniform(1)
m = mul(x, two)
a = add(b, m)
s = sigmoid(a)
out = mul(s, y)
r = relu(y)
n = neg(r)
output out, n
NET
}

@test "fuse-elemwise: a chain becomes one fused_elemwise node, --verify passes exactly" {
    write_chain
    run --separate-stderr "$MGE_OPT" --passes=fuse-elemwise --verify -v --atol 0 --rtol 0 \
        "$T/chain.mgt" -o "$T/f.mge"
    assert_success
    [[ "$stderr" == *"--verify: 2 outputs"*"match"* ]]
    [[ "$stderr" != *"does not apply"* ]]
    run --separate-stderr "$MGE_DUMP" "$T/f.mge"
    assert_success
    assert_line "out = fused_elemwise(x, two, b, y, ops=[mul, add, sigmoid, mul])"
    assert_line "n = fused_elemwise(y, ops=[relu, neg])"
    assert_line "output out, n"
    [ "$(grep -c 'fused_elemwise(' <<< "$output")" -eq 2 ]
    # the chains' inner values are gone
    run ! grep -Eq '^(m|a|s|r) = ' <<< "$output"
}

@test "fuse-elemwise: the fused model runs and gives the unfused model's outputs" {
    write_chain
    "$MGE_OPT" "$T/chain.mgt" -o "$T/plain.mge"
    "$MGE_OPT" --passes=fuse-elemwise "$T/chain.mgt" -o "$T/fused.mge"
    npys "$T/in.npy" f32:2x3x4x5:rand f32:2x3x4x5:rand
    "$MGE_RUN" "$T/plain.mge" < "$T/in.npy" > "$T/a.npy"
    "$MGE_RUN" --threads 2 "$T/fused.mge" < "$T/in.npy" > "$T/b.npy"
    [ "$(npy_count "$T/b.npy")" -eq 2 ]
    cmp "$T/a.npy" "$T/b.npy"
}

@test "fuse-elemwise: a model with no chain is left as it was, and -v says so" {
    write_mlp
    "$MGE_OPT" "$T/mlp.mgt" -o "$T/plain.mge"
    run --separate-stderr "$MGE_OPT" -v --passes=fuse-elemwise "$T/mlp.mgt" -o "$T/f.mge"
    assert_success
    [[ "$stderr" == *"fuse-elemwise: no change (does not apply)"* ]]
    cmp "$T/plain.mge" "$T/f.mge"
}

@test "fuse-elemwise: a training model (with a loss) is not fused" {
    cat > "$T/train.mgt" <<'NET'
input x : f32[N,4]
input label : i32[N]
fc = linear(x, out=3)
r = relu(fc)
e = neg(r)
loss = cross_entropy(e, label)
output e
minimize loss
NET
    run --separate-stderr "$MGE_OPT" -v --passes=fuse-elemwise -S "$T/train.mgt"
    assert_success
    [[ "$stderr" == *"fuse-elemwise: no change (does not apply)"* ]]
    run ! grep -q fused_elemwise <<< "$output"
    # after strip-training it fuses
    run --separate-stderr "$MGE_OPT" --passes=strip-training,fuse-elemwise --verify -S "$T/train.mgt"
    assert_success
    assert_line "e = fused_elemwise(fc, ops=[relu, neg])"
}

@test "fuse-elemwise is listed with a summary" {
    run --separate-stderr "$MGE_OPT" --list-passes
    assert_success
    assert_line --regexp '^fuse-elemwise +[a-z]'
}
