#!/usr/bin/env bats
# mge-opt --passes=winograd: 3x3 stride-1 convs become conv2d_winograd on a
# winograd_weight node over the kept 3x3 weight (transformed at load time,
# not stored), with the same outputs (--verify).

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
    # the weight transformed by a winograd_weight node from the 3x3 param,
    # which stays; layer3 (14x14) F(2,3); layer4 (7x7) none
    grep -q '^layer1\.0\.conv1\.weight_winograd = winograd_weight(layer1\.0\.conv1\.weight)$' <<< "$output"
    grep -q '^layer1\.0\.conv1 = conv2d_winograd(maxpool, layer1\.0\.conv1\.weight_winograd, out=64, pad=1, bias=false)' <<< "$output"
    grep -q '^layer2\.1\.conv2 = conv2d_winograd(layer2\.1\.relu1, layer2\.1\.conv2\.weight_winograd, out=128, pad=1, bias=false)' <<< "$output"
    grep -q '^layer3\.1\.conv1\.weight_winograd = winograd_weight(layer3\.1\.conv1\.weight, tile=2)$' <<< "$output"
    grep -q '^layer3\.1\.conv1 = conv2d_winograd(.*, out=256, tile=2, pad=1' <<< "$output"
    grep -q '^layer4\.1\.conv1 = conv2d(' <<< "$output"
    [ "$(grep -c '= conv2d_winograd(' <<< "$output")" -eq 10 ]
    [ "$(grep -c '= winograd_weight(' <<< "$output")" -eq 10 ]
    grep -q '^param layer1\.0\.conv1\.weight : f32\[64,64,3,3\]' <<< "$output"
    refute_output --partial 'param layer1.0.conv1.weight_winograd'
    # so the file grows by the new nodes only, not by transformed weights
    [ $(($(stat -c %s "$T/r18w.mge") * 100)) -le $(($(stat -c %s "$T/r18.mge") * 101)) ]
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
    grep -q '^layer1\.0\.relu2\.weight_winograd = winograd_weight(layer1\.0\.conv2\.weight)$' <<< "$output"
    grep -q '^layer1\.0\.relu2 = conv2d_winograd(layer1\.0\.relu1, layer1\.0\.relu2\.weight_winograd, maxpool, out=64, pad=1, .*residual=true, act=relu)' <<< "$output"
    grep -q '^layer1\.0\.relu1 = conv2d_winograd(maxpool, layer1\.0\.relu1\.weight_winograd, out=64, pad=1, .*act=relu)' <<< "$output"
    grep -q '^layer4\.1\.relu2 = fused_conv2d(' <<< "$output"
    grep -q '^param layer1\.0\.conv2\.weight : f32\[64,64,3,3\]' <<< "$output"
}

@test "-O2 with winograd keeps the model's size, and a later -O run does not fold winograd_weight" {
    [ -f "$SAMPLES/resnet18.mgt" ] || skip "samples/nets/resnet18.mgt missing"
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" -o "$T/r18.mge"
    # without AVX-512, layout leaves the convs to winograd (see mge-opt(1))
    MGE_CPU_ISA=avx2 run --separate-stderr "$MGE_OPT" -O2 --verify -v "$T/r18.mge" -o "$T/r18o2.mge"
    assert_success
    [[ "$stderr" == *"--verify: 1 output"*"match"* ]]
    run --separate-stderr "$MGE_DUMP" "$T/r18o2.mge"
    assert_success
    [ "$(grep -c '= conv2d_winograd(' <<< "$output")" -eq 10 ]
    [ "$(grep -c '= winograd_weight(' <<< "$output")" -eq 10 ]
    refute_output --partial 'param layer1.0.relu1.weight_winograd'
    # within 1% of the -O0 file (it was 47 MB -> 75 MB with the weights stored
    # transformed); -O2 folds the batchnorms away, so it may be smaller
    local o0 o2
    o0=$(stat -c %s "$T/r18.mge")
    o2=$(stat -c %s "$T/r18o2.mge")
    [ $((o2 * 100)) -le $((o0 * 101)) ]
    [ $((o2 * 100)) -ge $((o0 * 99)) ]
    # fold-constants would store weight_t again: it leaves winograd_weight alone
    MGE_CPU_ISA=avx2 run --separate-stderr "$MGE_OPT" -O1 -v "$T/r18o2.mge" -o "$T/r18o21.mge"
    assert_success
    [[ "$stderr" == *"fold-constants: no change"* ]]
    cmp "$T/r18o2.mge" "$T/r18o21.mge"
    # and the tools run it, the transform preprocessed at load time
    MGE_CPU_ISA=avx2 run "$MGE_BIN/mge-bench" "$T/r18o2.mge" -n 1 --warmup 0
    assert_success
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
