#!/usr/bin/env bats
# mge-opt --passes=winograd: 3x3 stride-1 convs become conv2d_winograd with
# the weight transformed offline, with the same outputs (--verify).

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

@test "winograd on resnet18: 3x3 stride-1 convs rewritten, outputs verified" {
    [ -f "$SAMPLES/resnet18.mgt" ] || skip "samples/nets/resnet18.mgt missing"
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" -o "$T/r18.mge"
    run --separate-stderr "$MGE_OPT" "$T/r18.mge" --passes=winograd --verify -v -o "$T/r18w.mge"
    assert_success
    [[ "$stderr" == *"--verify: 1 output"*"match"* ]]
    run --separate-stderr "$MGE_DUMP" "$T/r18w.mge"
    assert_success
    # the stride-2 convs, the 7x7 stem and the 1x1 downsamples stay conv2d
    grep -q '^layer2\.0\.conv1 = conv2d(' <<< "$output"
    grep -q '^conv1 = conv2d(' <<< "$output"
    grep -q '^layer2\.0\.downsample\.0 = conv2d(' <<< "$output"
    # layer1 and layer2 (56x56, 28x28) take F(4,3) (tile=4, the default), with
    # the transformed weight as a param; layer3 (14x14) F(2,3); layer4 (7x7) none
    grep -q '^layer1\.0\.conv1 = conv2d_winograd(maxpool, layer1\.0\.conv1\.weight_winograd, out=64, pad=1, bias=false)' <<< "$output"
    grep -q '^layer2\.1\.conv2 = conv2d_winograd(layer2\.1\.relu1, layer2\.1\.conv2\.weight_winograd, out=128, pad=1, bias=false)' <<< "$output"
    grep -q '^layer3\.1\.conv1 = conv2d_winograd(.*, out=256, tile=2, pad=1' <<< "$output"
    grep -q '^layer4\.1\.conv1 = conv2d(' <<< "$output"
    [ "$(grep -c '= conv2d_winograd(' <<< "$output")" -eq 10 ]
    grep -q '^param layer1\.0\.conv1\.weight_winograd : f32\[36,64,64\]' <<< "$output"
    refute_output --partial 'param layer1.0.conv1.weight :'
    # the rewritten model runs at another batch and thread count too
    run --separate-stderr "$MGE_OPT" "$T/r18.mge" --passes=winograd --verify --batch 1 --threads 1 -o "$T/r18w1.mge"
    assert_success
    cmp "$T/r18w.mge" "$T/r18w1.mge"
}

@test "winograd after the folds of -O2 and fuse-activation keeps the fused residual and activation" {
    [ -f "$SAMPLES/resnet18.mgt" ] || skip "samples/nets/resnet18.mgt missing"
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" -o "$T/r18.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/r18.mge" | "$MGE_OPT" --passes=fuse-activation -o "$T/r18f.mge"
    run --separate-stderr "$MGE_OPT" "$T/r18f.mge" --passes=winograd --verify -v -o "$T/r18w.mge"
    assert_success
    [[ "$stderr" == *"--verify: 1 output"*"match"* ]]
    run --separate-stderr "$MGE_DUMP" "$T/r18w.mge"
    assert_success
    # the transformed weight is named after the node (here the fused relu)
    grep -q '^layer1\.0\.relu2 = conv2d_winograd(layer1\.0\.relu1, layer1\.0\.relu2\.weight_winograd, maxpool, out=64, pad=1, .*residual=true, act=relu)' <<< "$output"
    grep -q '^layer1\.0\.relu1 = conv2d_winograd(maxpool, layer1\.0\.relu1\.weight_winograd, out=64, pad=1, .*act=relu)' <<< "$output"
    grep -q '^layer4\.1\.relu2 = fused_conv2d(' <<< "$output"
    refute_output --partial 'param layer1.0.conv2.weight :'
}

@test "winograd leaves a model with a loss alone (conv2d_winograd has no gradient)" {
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/plain.mge"
    run --separate-stderr "$MGE_OPT" "$T/conv.mgt" --passes=winograd -v -o "$T/c.mge"
    assert_success
    [[ "$stderr" == *"winograd: no change"* ]]
    cmp "$T/plain.mge" "$T/c.mge"
}

@test "winograd on a model without 3x3 stride-1 convs is a no-op" {
    cat > "$T/n.mgt" <<'NET'
input x : f32[N,3,32,32]
a = conv2d(x, out=8, kernel=3, stride=2, pad=1)
b = conv2d(a, out=8, kernel=1)
c = conv2d(b, out=8, kernel=3, pad=1, groups=8)
output c
NET
    "$MGE_OPT" "$T/n.mgt" -o "$T/plain.mge"
    run --separate-stderr "$MGE_OPT" "$T/n.mgt" --passes=winograd -v -o "$T/n.mge"
    assert_success
    [[ "$stderr" == *"winograd: no change"* ]]
    cmp "$T/plain.mge" "$T/n.mge"
}

@test "winograd is listed with its summary" {
    run "$MGE_OPT" --list-passes
    assert_success
    assert_output --partial "winograd"
    assert_output --partial "Winograd"
}
