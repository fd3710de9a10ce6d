#!/usr/bin/env bats
# mge-opt --passes=fuse-activation: conv2d/linear + residual add + activation
# become fused_conv2d / fused_linear nodes, with the same outputs.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

@test "fuse-activation on resnet18 after the folds of -O2: no relu or add left, fused_conv2d nodes, outputs verified" {
    [ -f "$SAMPLES/resnet18.mgt" ] || skip "samples/nets/resnet18.mgt missing"
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" -o "$T/r18.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/r18.mge" | "$MGE_OPT" --passes=fuse-activation --verify -o "$T/r18f.mge"
    run --separate-stderr "$MGE_DUMP" "$T/r18f.mge"
    assert_success
    refute_output --partial '= relu('
    refute_output --partial '= add('
    [ "$(grep -c '= fused_conv2d(' <<< "$output")" -eq 17 ]
    # the block outputs keep their names; the residual is the fused node's last input
    local want='^layer1\.0\.relu2 = fused_conv2d(layer1\.0\.relu1, layer1\.0\.conv2\.weight, maxpool, '
    grep -q "$want.*residual=true, act=relu)" <<< "$output"
    # --verify says the outputs match; a file gives the same bytes as the pipe
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/r18.mge" -o "$T/r18o.mge"
    run --separate-stderr "$MGE_OPT" "$T/r18o.mge" --passes=fuse-activation --verify -v -o "$T/r18f2.mge"
    assert_success
    [[ "$stderr" == *"--verify: 1 output"*"match"* ]]
    cmp "$T/r18f.mge" "$T/r18f2.mge"
}

@test "fuse-activation on mobilenet_v2: relu6 and the residual adds fuse" {
    [ -f "$SAMPLES/mobilenet_v2.mgt" ] || skip "samples/nets/mobilenet_v2.mgt missing"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$SAMPLES/mobilenet_v2.mgt" | "$MGE_OPT" --passes=fuse-activation --verify -o "$T/mb.mge"
    run --separate-stderr "$MGE_DUMP" "$T/mb.mge"
    assert_success
    refute_output --partial '= relu6('
    refute_output --partial '= add('
    grep -q 'groups=.*act=relu6' <<< "$output"   # depthwise convs fused too
    grep -q 'residual=true)' <<< "$output"        # project conv + shortcut, no activation
}

@test "fuse-activation with -v on a model with nothing to fuse says it was a no-op" {
    cat > "$T/n.mgt" <<'NET'
input x : f32[N,3,8,8]
conv = conv2d(x, out=4, kernel=3, pad=1)
a = relu(conv)
b = sigmoid(conv)
pool = maxpool2d(a, kernel=2)
output pool, b
NET
    "$MGE_OPT" "$T/n.mgt" -o "$T/plain.mge"
    run --separate-stderr "$MGE_OPT" "$T/n.mgt" --passes=fuse-activation -v -o "$T/n.mge"
    assert_success
    [[ "$stderr" == *"fuse-activation: no change (does not apply)"* ]]
    cmp "$T/plain.mge" "$T/n.mge"
}

@test "fuse-activation leaves a model with a loss alone (fused ops have no gradient)" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/plain.mge"
    run --separate-stderr "$MGE_OPT" "$T/conv.mgt" --passes=fuse-activation -v -o "$T/c.mge"
    assert_success
    [[ "$stderr" == *"fuse-activation: no change (does not apply)"* ]]
    cmp "$T/plain.mge" "$T/c.mge"
    # after strip-training it fuses, and mge-run gives the same numbers
    "$MGE_OPT" "$T/conv.mgt" --passes=strip-training -o "$T/s.mge"
    "$MGE_OPT" "$T/s.mge" --passes=fuse-activation -o "$T/f.mge"
    run "$MGE_DUMP" "$T/f.mge"
    assert_output --partial "relu1 = fused_conv2d(x, conv1.weight, conv1.bias, out=4, kernel=3, pad=1, act=relu)"
    npys "$T/x.npy" f32:2x1x8x8:rand
    "$MGE_RUN" "$T/s.mge" < "$T/x.npy" > "$T/a.npy"
    "$MGE_RUN" "$T/f.mge" < "$T/x.npy" > "$T/b.npy"
    cmp "$T/a.npy" "$T/b.npy"
}

@test "fuse-activation is listed with its summary" {
    run "$MGE_OPT" --list-passes
    assert_success
    assert_output --partial "fuse-activation"
    assert_output --partial "residual add and activation"
}
