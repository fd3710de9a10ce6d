#!/usr/bin/env bats
# mge-opt --passes=unfuse: -O2 output (fused, Winograd, blocked NCHWc ops)
# back to plain NCHW ops with every intermediate named, as mge-quant needs.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# No op of -O2's own in the model text on stdin.
# (bash's errexit ignores `! cmd`: say it with if)
FANCY='= (fused_[a-z0-9]+|conv2d_winograd|winograd_weight|to_nchwc|from_nchwc|[a-z0-9]+_nchwc)\('
no_fancy_ops() {
    if grep -E "$FANCY" <<< "$1"; then echo "fused, winograd or blocked ops left"; return 1; fi
    if grep -E 'f32\[[^]]*,[^]]*,[^]]*,[^]]*,[^]]*\]' <<< "$1"; then echo "a 5-D (blocked) value left"; return 1; fi
}

# count OP TEXT: how many nodes of op in the dump text
count() {
    grep -cE "= $1\(" <<< "$2" || true
}

# -O2 on a sample net, then unfuse with --verify; checks the result is
# plain, has the plain net's outputs and as many convs/linears.
roundtrip() {
    local net=$1
    "$MGE_OPT" "$SAMPLES/$net.mgt" --seed 1 -o "$T/$net.mge"
    run --separate-stderr "$MGE_DUMP" "$T/$net.mge"
    assert_success
    local plain=$output
    "$MGE_OPT" -O2 "$T/$net.mge" -o "$T/$net.o2.mge"
    run "$MGE_DUMP" "$T/$net.o2.mge"
    grep -qE "$FANCY" <<< "$output" # -O2 fused something to undo
    run --separate-stderr bash -c "set -o pipefail; '$MGE_OPT' < '$T/$net.o2.mge' --passes=unfuse --verify --batch 1 --atol 1e-4 --rtol 1e-4 | cat > '$T/$net.u.mge'"
    assert_success
    run --separate-stderr "$MGE_DUMP" "$T/$net.u.mge"
    assert_success
    no_fancy_ops "$output"
    [ "$(grep '^# outputs:' <<< "$output")" = "$(grep '^# outputs:' <<< "$plain")" ]
    [ "$(count conv2d "$output")" -eq "$(count conv2d "$plain")" ]
    [ "$(count linear "$output")" -eq "$(count linear "$plain")" ]
    # batchnorm stays folded
    [ "$(count batchnorm "$output")" -eq 0 ]
}

@test "unfuse after -O2 on lenet, mlp, resnet18, mobilenet_v2: plain ops, same outputs, --verify passes" {
    for net in lenet mlp resnet18 mobilenet_v2; do
        roundtrip "$net"
    done
    # resnet18: every relu and residual add is a node again
    run "$MGE_DUMP" "$T/resnet18.u.mge"
    [ "$(count relu "$output")" -eq 17 ]
    [ "$(count add "$output")" -eq 8 ]
    run "$MGE_DUMP" "$T/mobilenet_v2.u.mge"
    [ "$(count relu6 "$output")" -eq 35 ]
    [ "$(count add "$output")" -eq 10 ]
}

@test "unfuse after -O2 with MGE_CPU_ISA=avx2 (Winograd resnet18, blocked-by-8 mobilenet_v2)" {
    grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null || skip "no AVX2 and FMA"
    export MGE_CPU_ISA=avx2
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" --seed 1 -O2 -o "$T/r.mge"
    run "$MGE_DUMP" "$T/r.mge"
    [ "$(count conv2d_winograd "$output")" -gt 0 ]
    roundtrip resnet18
    roundtrip mobilenet_v2
}

@test "unfuse names the intermediates: conv output before the add, add before the activation" {
    cat > "$T/s.mgt" <<'NET'
input x : f32[N,8,6,6]
c = conv2d(x, out=8, kernel=3, pad=1)
a = add(c, x)
r = relu(a)
output r
NET
    "$MGE_OPT" -O2 "$T/s.mgt" -o "$T/s.o2.mge"
    run "$MGE_DUMP" "$T/s.o2.mge"
    [[ "$output" == *"r = fused_conv2d("* ]]
    run --separate-stderr "$MGE_OPT" --passes=unfuse --verify "$T/s.o2.mge" -o "$T/s.u.mge"
    assert_success
    run "$MGE_DUMP" "$T/s.u.mge"
    assert_success
    [[ "$output" == *"r.conv = conv2d(x, c.weight, c.bias, out=8, kernel=3, pad=1)"* ]]
    [[ "$output" == *"r.add = add(r.conv, x)"* ]]
    [[ "$output" == *"r = relu(r.add)"* ]]
}

@test "unfuse refuses a conv2d_winograd on a stored transformed weight, naming the node" {
    cat > "$T/w.mgt" <<'NET'
input x : f32[N,8,6,6]
param wt : f32[36,8,8] init=uniform(0.1)
y = conv2d_winograd(x, wt, out=8, pad=1, bias=false)
output y
NET
    run --separate-stderr "$MGE_OPT" --passes=unfuse "$T/w.mgt" -o "$T/w.mge"
    assert_failure 1
    [[ "$stderr" == *"y (conv2d_winograd)"*"winograd_weight"* ]]
    [ ! -e "$T/w.mge" ]
}

@test "unfuse leaves a plain model byte-identical and a second unfuse changes nothing" {
    "$MGE_OPT" "$SAMPLES/lenet.mgt" --seed 1 -o "$T/l.mge"
    run --separate-stderr "$MGE_OPT" -v --passes=unfuse "$T/l.mge" -o "$T/l2.mge"
    assert_success
    [[ "$stderr" == *"unfuse: no change"* ]]
    cmp "$T/l.mge" "$T/l2.mge"
    "$MGE_OPT" -O2 "$T/l.mge" | "$MGE_OPT" --passes=unfuse -o "$T/u1.mge"
    "$MGE_OPT" --passes=unfuse "$T/u1.mge" -o "$T/u2.mge"
    cmp "$T/u1.mge" "$T/u2.mge"
}
