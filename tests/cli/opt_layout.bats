#!/usr/bin/env bats
# mge-opt --passes=layout: conv regions in the blocked layout NCHWc.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# The layout pass blocks by 16 with AVX-512, by 8 with AVX2 and FMA (only
# regions with a depthwise conv), and changes nothing without them.
need_blocked_isa() {
    grep -qw avx512f /proc/cpuinfo 2>/dev/null || skip "no AVX-512: the layout pass does not block resnet18"
    [ -z "${MGE_CPU_ISA:-}" ] || skip "MGE_CPU_ISA=$MGE_CPU_ISA caps the ISA"
}

need_avx2() {
    grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null || skip "no AVX2 and FMA"
    [ "${MGE_CPU_ISA:-}" != baseline ] || skip "MGE_CPU_ISA=baseline: the layout pass changes nothing"
}

@test "layout on resnet18 after the folds of -O2: blocked convs, outputs within 1e-4 (--verify)" {
    need_blocked_isa
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" -o "$T/r18.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/r18.mge" -o "$T/r18o.mge"
    run --separate-stderr "$MGE_OPT" --passes=layout --verify --batch 1 --atol 1e-4 --rtol 1e-4 "$T/r18o.mge" -o "$T/r18l.mge"
    assert_success
    run "$MGE_DUMP" "$T/r18l.mge"
    assert_success
    # one region from the 3-channel stem (x read as blocks of one channel,
    # a view) through maxpool to the last block; one transpose, out. The
    # 3x3 stride-1 convs on planes of 14 and more (layer1-3) run as
    # Winograd, their weights transformed at load time
    [ "$(grep -c '= conv2d_nchwc(' <<< "$output")" -eq 10 ]
    [ "$(grep -c '= conv2d_winograd_nchwc(' <<< "$output")" -eq 10 ]
    [ "$(grep -c '= winograd_weight_nchwc(' <<< "$output")" -eq 10 ]
    [ "$(grep -c '= maxpool2d_nchwc(' <<< "$output")" -eq 1 ]
    [ "$(grep -c '= to_nchwc(' <<< "$output")" -eq 0 ]
    [ "$(grep -c '= from_nchwc(' <<< "$output")" -eq 1 ]
    [ "$(grep -cE '= (conv2d|maxpool2d)\(' <<< "$output")" -eq 0 ]
    # every residual add and relu runs in a conv's epilogue
    [ "$(grep -cE '= (add|relu)\(' <<< "$output")" -eq 0 ]
    [[ "$output" == *"outputs: fc f32[N,1000]"* ]]
}

@test "layout on mobilenet_v2 after the folds of -O2 in a pipe: stem, depthwise, activations, residuals; within 1e-4" {
    need_avx2
    "$MGE_OPT" "$SAMPLES/mobilenet_v2.mgt" -o "$T/mb.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/mb.mge" | "$MGE_OPT" --passes=layout --verify --batch 1 --atol 1e-4 --rtol 1e-4 -o "$T/mbl.mge"
    run "$MGE_DUMP" "$T/mbl.mge"
    assert_success
    # the 3-channel stem reads x as blocks of one channel (a view): no transpose in, one out
    [ "$(grep -c '= to_nchwc(' <<< "$output")" -eq 0 ]
    [[ "$output" == *"x.c1 = reshape(x, shape=[0, 0, 0, 0, 1])"* ]]
    [ "$(grep -c '= from_nchwc(' <<< "$output")" -eq 1 ]
    [ "$(grep -c '= conv2d(' <<< "$output")" -eq 0 ]
    grep -q 'conv2d_nchwc(.*groups=.*act=relu6' <<< "$output"
    grep -q 'conv2d_nchwc(.*residual=true' <<< "$output"
    [ "$(grep -cE '= (relu6|add)\(' <<< "$output")" -eq 0 ]
    [[ "$output" == *"outputs: "*"f32[N,1000]"* ]]
}

@test "layout leaves a training graph alone, byte for byte" {
    cat > "$T/conv.mgt" <<'NET'
input x : f32[N,16,8,8]
input label : i32[N]
c1 = conv2d(x, out=16, kernel=3, pad=1)
r1 = relu(c1)
c2 = conv2d(r1, out=16, kernel=3, pad=1)
p = global_avgpool(c2)
flat = flatten(p)
loss = cross_entropy(flat, label)
output flat
minimize loss
NET
    "$MGE_OPT" "$T/conv.mgt" -o "$T/a.mge"
    "$MGE_OPT" --passes=layout "$T/conv.mgt" -o "$T/b.mge"
    cmp "$T/a.mge" "$T/b.mge"
}

@test "layout output is reproducible" {
    need_blocked_isa
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" -o "$T/r18.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/r18.mge" | "$MGE_OPT" --passes=layout -o "$T/a.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/r18.mge" | "$MGE_OPT" --passes=layout -o "$T/b.mge"
    cmp "$T/a.mge" "$T/b.mge"
}

@test "layout at c = 8 (MGE_CPU_ISA=avx2): mobilenet_v2 blocks by 8, resnet18 (no depthwise) stays plain" {
    need_avx2
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" -o "$T/r18.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/r18.mge" -o "$T/r18o.mge"
    MGE_CPU_ISA=avx2 "$MGE_OPT" --passes=layout "$T/r18o.mge" -o "$T/r18l.mge"
    cmp "$T/r18o.mge" "$T/r18l.mge"
    "$MGE_OPT" "$SAMPLES/mobilenet_v2.mgt" -o "$T/mb.mge"
    "$MGE_OPT" --passes=strip-training,fold-bn,fold-scale,cse,fold-constants,dce "$T/mb.mge" -o "$T/mbo.mge"
    MGE_CPU_ISA=avx2 run --separate-stderr "$MGE_OPT" --passes=layout --verify --batch 1 --atol 1e-4 --rtol 1e-4 "$T/mbo.mge" -o "$T/mbl.mge"
    assert_success
    run "$MGE_DUMP" "$T/mbl.mge"
    assert_success
    [ "$(grep -c '= conv2d(' <<< "$output")" -eq 0 ]
    grep -q 'conv2d_nchwc(.*groups=.*act=relu6' <<< "$output"
    grep -q 'x.c1 = reshape(x, shape=\[0, 0, 0, 0, 1\])' <<< "$output"
    # blocks of 8: the stem's 32 outputs in 4 blocks
    grep -qF '.weight_nchwc : f32[4,3,3,3,1,8]' <<< "$output"
}
