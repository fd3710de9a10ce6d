#!/usr/bin/env bats
# mge-opt --precision / --keep-f32, the bf16 pass of -O3, mge-train
# --precision, and what the tools say about where bf16 runs.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# The bf16 kernels this machine would run (the CPU's flags, capped by MGE_CPU_ISA).
bf16_here() {
    case "${MGE_CPU_ISA:-}" in baseline | avx2 | avx2-vnni | avx512 | avx512-vnni) return 1 ;; esac
    grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null || grep -qw amx_bf16 /proc/cpuinfo 2>/dev/null
}

@test "--precision bf16 marks the dense layers; depthwise convs stay f32" {
    run --separate-stderr "$MGE_OPT" "$SAMPLES/mobilenet_v2.mgt" --precision bf16 -S -v
    assert_success
    [[ "$stderr" == *"--precision bf16: "*" layers in bf16"* ]]
    # every depthwise conv (groups = its channels) is f32, every dense one bf16
    pyq '
import re, sys
dense = dw = bad = 0
for line in open(sys.argv[1]):
    m = re.search(r"= conv2d\((.*)\)$", line.strip())
    if not m:
        continue
    g = re.search(r"groups=(\d+)", m.group(1))
    bf = "precision=bf16" in line
    if g and int(g.group(1)) > 1:
        dw += 1; bad += bf
    else:
        dense += 1; bad += not bf
print(dense, dw, bad)
assert dense > 30 and dw > 10 and bad == 0, (dense, dw, bad)
' <(echo "$output")
    # linear too
    [[ "$output" == *"linear("*"precision=bf16)"* ]]
}

@test "--keep-f32 keeps the named nodes in f32; a name that matches nothing is an error with close names" {
    run --separate-stderr "$MGE_OPT" "$SAMPLES/resnet18.mgt" --precision bf16 --keep-f32 fc,conv1 -S -v
    assert_success
    [[ "$stderr" == *"kept in f32: fc,conv1"* ]]
    run grep -c "precision=bf16" <(echo "$output")
    [ "$output" -ge 19 ]
    run "$MGE_OPT" "$SAMPLES/resnet18.mgt" --precision bf16 --keep-f32 fc -S
    ! grep -q "^fc = linear(.*precision=bf16" <(echo "$output")
    grep -q "^layer1.0.conv1 = conv2d(.*precision=bf16" <(echo "$output")
    run --separate-stderr "$MGE_OPT" "$SAMPLES/resnet18.mgt" --precision bf16 --keep-f32 layer1.0.conv -o "$T/x.mge"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"error: --keep-f32: the model has no node 'layer1.0.conv' (close: layer1.0.conv1, "* ]]
    [[ "$stderr" == *"layer1.0.conv2"* ]]
    [ ! -e "$T/x.mge" ]
    # a node bf16 does not apply to: a warning, not an error
    run --separate-stderr "$MGE_OPT" "$SAMPLES/resnet18.mgt" --precision bf16 --keep-f32 maxpool -o "$T/y.mge"
    assert_success
    [[ "$stderr" == *"warning: --keep-f32: maxpool (maxpool2d) computes in f32 anyway"* ]]
}

@test "--precision and --keep-f32 usage errors" {
    run --separate-stderr "$MGE_OPT" "$SAMPLES/lenet.mgt" --precision fp8 -o "$T/x.mge"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"--precision fp8: expected f32 or bf16"* ]]
    run --separate-stderr "$MGE_OPT" "$SAMPLES/lenet.mgt" --keep-f32 fc1 -o "$T/x.mge"
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"--keep-f32 only applies to --precision bf16"* ]]
    run --separate-stderr "$MGE_OPT" "$SAMPLES/lenet.mgt" --precision bf16 --keep-f32 fc1,,fc2 -o "$T/x.mge"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"--keep-f32: an empty name"* ]]
    [ ! -e "$T/x.mge" ]
    run --separate-stderr "$MGE_BIN/mge-train" "$SAMPLES/lenet.mgt" --data x --precision f16
    [ "$status" -eq 2 ]
    [[ "$stderr" == *"--precision f16: expected f32 or bf16"* ]]
}

@test "--precision f32 undoes bf16, and -O2 --precision bf16 keeps the bf16 convs direct (no Winograd)" {
    "$MGE_OPT" "$SAMPLES/resnet18.mgt" --precision bf16 -o "$T/b.mge"
    run "$MGE_OPT" "$T/b.mge" --precision f32 -S
    ! grep -q "precision=bf16" <(echo "$output")
    run "$MGE_OPT" "$SAMPLES/resnet18.mgt" -O2 --precision bf16 -S
    assert_success
    ! grep -q "winograd" <(echo "$output")
    grep -q "conv2d_nchwc(.*kernel=3.*precision=bf16" <(echo "$output") || grep -q "conv2d(.*kernel=3.*precision=bf16" <(echo "$output")
}

# AMX tiles here (the CPU's flags, capped by MGE_CPU_ISA)
amx_here() {
    case "${MGE_CPU_ISA:-}" in "" | amx) grep -qw amx_bf16 /proc/cpuinfo 2>/dev/null ;; *) return 1 ;; esac
}

@test "-O3 runs the bf16 pass where the CPU has AMX, and leaves Winograd alone where not" {
    run --separate-stderr "$MGE_OPT" -O3 "$SAMPLES/resnet18.mgt" -S
    assert_success
    if amx_here; then
        grep -q "precision=bf16" <(echo "$output")
    else
        ! grep -q "precision=bf16" <(echo "$output")
    fi
    for cap in avx512 avx512-bf16; do
        run --separate-stderr env MGE_CPU_ISA=$cap "$MGE_OPT" -O3 "$SAMPLES/resnet18.mgt" -S -v
        assert_success
        ! grep -q "precision=bf16" <(echo "$output")
        [[ "$stderr" == *"bf16: no change (does not apply)"* ]]
    done
}

@test "mge-dump shows each layer's compute precision and where bf16 runs" {
    "$MGE_OPT" "$SAMPLES/lenet.mgt" -O2 --precision bf16 --keep-f32 fc2 -o "$T/l.mge"
    run "$MGE_DUMP" "$T/l.mge"
    assert_success
    [[ "$output" == *"FLOPs  precision"* ]]
    grep -Eq "^# fc2 +linear .* f32$" <(echo "$output")
    grep -Eq "^# act1 +fused_linear .* bf16$" <(echo "$output")
    grep -Eq "^# bf16: 3 layers, [0-9.]+% of the FLOPs" <(echo "$output")
    run env MGE_CPU_ISA=avx512 "$MGE_DUMP" "$T/l.mge"
    [[ "$output" == *"(here: computed in f32; MGE_CPU_ISA=avx512 turns bf16 off)"* ]]
    # f32 models have no precision column
    "$MGE_OPT" "$SAMPLES/lenet.mgt" -O2 -o "$T/f.mge"
    run "$MGE_DUMP" "$T/f.mge"
    [[ "$output" != *"precision"* ]]
}

@test "-v says where the bf16 layers run; on a CPU capped below bf16 they compute in f32" {
    need_numpy
    "$MGE_OPT" "$SAMPLES/lenet.mgt" --precision bf16 -o "$T/b.mge"
    "$MGE_OPT" "$SAMPLES/lenet.mgt" -o "$T/f.mge"
    py 'np.save(sys.argv[1], np.random.default_rng(1).standard_normal((2,1,28,28)).astype(np.float32))' "$T/x.npy"
    run --separate-stderr env MGE_CPU_ISA=avx512 "$MGE_RUN" -v "$T/b.mge" --input "$T/x.npy" -o "$T/yb.npy"
    assert_success
    [[ "$stderr" == *"4 bf16 layers compute in f32 here: MGE_CPU_ISA=avx512 turns bf16 off"* ]]
    # there the results are the f32 model's
    MGE_CPU_ISA=avx512 "$MGE_RUN" "$T/f.mge" --input "$T/x.npy" -o "$T/yf.npy"
    MGE_CPU_ISA=avx512 "$MGE_RUN" "$T/b.mge" --input "$T/x.npy" --check "$T/yf.npy" --atol 0 --rtol 0
    if bf16_here; then
        run --separate-stderr "$MGE_RUN" -v "$T/b.mge" --input "$T/x.npy" -o "$T/y2.npy"
        [[ "$stderr" == *"4 bf16 layers run on a"*"-bf16"* ]]
    fi
}

@test "--verify takes bf16 tolerances for bf16 layers; the given ones win" {
    run --separate-stderr "$MGE_OPT" "$SAMPLES/resnet18.mgt" -O2 --precision bf16 --verify --batch 1 -v -o "$T/r.mge"
    assert_success
    [[ "$stderr" == *"--verify: bf16 layers: tolerances atol 2e-2 x max|output|, rtol 2e-2"* ]]
    [[ "$stderr" == *"--verify: 1 output"*"match"* ]]
    if bf16_here; then
        # bf16 really rounds: exact tolerances fail
        run --separate-stderr "$MGE_OPT" "$SAMPLES/resnet18.mgt" -O2 --precision bf16 --verify --batch 1 --atol 0 --rtol 0 -o "$T/r0.mge"
        [ "$status" -eq 1 ]
        [[ "$stderr" == *"--verify failed"* ]]
        [ ! -e "$T/r0.mge" ]
    fi
}

@test "bf16 resnet18 and mobilenet_v2: cosine >= 0.999 against f32 (randomised BatchNorm statistics)" {
    need_numpy
    bf16_here || skip "no bf16 kernels here (MGE_CPU_ISA=${MGE_CPU_ISA:-unset}, or the CPU has neither AMX nor AVX512-BF16)"
    for net in resnet18 mobilenet_v2; do
        # weights with BatchNorm statistics away from 0/1, so fold-bn has work
        "$MGE_OPT" "$SAMPLES/$net.mgt" --seed 5 -o "$T/base.mge"
        "$MGE_DUMP" "$T/base.mge" --params "$T/p.npz" > /dev/null
        py '
d = dict(np.load(sys.argv[1]))
rng = np.random.default_rng(7)
for k in list(d):
    if k.endswith("running_mean"):
        d[k] = (rng.standard_normal(d[k].shape) * 0.1).astype(np.float32)
    if k.endswith("running_var"):
        d[k] = rng.uniform(0.5, 2.0, d[k].shape).astype(np.float32)
np.savez(sys.argv[2], **d)
' "$T/p.npz" "$T/p2.npz"
        "$MGE_OPT" "$T/base.mge" --weights "$T/p2.npz" --allow-unused -O2 -o "$T/f.mge"
        "$MGE_OPT" "$T/base.mge" --weights "$T/p2.npz" --allow-unused -O2 --precision bf16 -o "$T/b.mge"
        py 'np.save(sys.argv[1], np.random.default_rng(2).standard_normal((2,3,224,224)).astype(np.float32))' "$T/x.npy"
        "$MGE_RUN" "$T/f.mge" --input "$T/x.npy" -o "$T/yf.npy"
        "$MGE_RUN" "$T/b.mge" --input "$T/x.npy" -o "$T/yb.npy"
        py '
a = np.load(sys.argv[1]).ravel().astype(np.float64); b = np.load(sys.argv[2]).ravel().astype(np.float64)
cos = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
print(sys.argv[3], "cosine", cos)
assert cos >= 0.999, cos
assert not np.array_equal(a, b)
' "$T/yf.npy" "$T/yb.npy" "$net"
    done
}

@test "mge-train --precision bf16 trains LeNet (loss falls) and writes bf16 layers" {
    DATA="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist/train"
    [ -e "$DATA-images-idx3-ubyte" ] || [ -e "$DATA-images-idx3-ubyte.gz" ] || skip "no sample Fashion-MNIST at $DATA"
    run --separate-stderr "$MGE_BIN/mge-train" "$SAMPLES/lenet.mgt" --data "$DATA" --batch 32 --steps 40 \
        --optimizer adam --lr 1e-3 --precision bf16 --log "$T/log.csv" -o "$T/t.mge"
    assert_success
    pyq '
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("loss")]
first = sum(float(r["loss"]) for r in rows[:5]) / 5
last = sum(float(r["loss"]) for r in rows[-5:]) / 5
print(first, last)
assert last < 0.8 * first, (first, last)
' "$T/log.csv"
    run "$MGE_DUMP" "$T/t.mge"
    [[ "$output" == *"precision=bf16"* ]]
}

@test "LeNet trained on Fashion-MNIST: bf16 and f32 agree on the top-1 class of >= 99% of 1000 test images" {
    need_numpy
    bf16_here || skip "no bf16 kernels here (MGE_CPU_ISA=${MGE_CPU_ISA:-unset}, or the CPU has neither AMX nor AVX512-BF16)"
    D="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
    "$MGE_BIN/mge-train" "$SAMPLES/lenet.mgt" --data "$D/train" --batch 64 --steps 150 --optimizer adam --lr 2e-3 \
        --normalize 0.286,0.353 -q -o "$T/l.mge"
    "$MGE_OPT" "$T/l.mge" -O2 -o "$T/f.mge"
    "$MGE_OPT" "$T/l.mge" -O2 --precision bf16 -o "$T/b.mge"
    "$MGE_RUN" "$T/f.mge" --data "$D/t10k" --normalize 0.286,0.353 -o "$T/yf.npy"
    "$MGE_RUN" "$T/b.mge" --data "$D/t10k" --normalize 0.286,0.353 -o "$T/yb.npy"
    py '
def records(p):
    out = []
    with open(p, "rb") as f:
        while True:
            try:
                out.append(np.load(f))
            except Exception:
                break
    return np.concatenate(out)
a, b = records(sys.argv[1]), records(sys.argv[2])
n = min(len(a), 1000)
agree = (a[:n].argmax(1) == b[:n].argmax(1)).mean()
print(n, "images, top-1 agreement", agree)
assert n >= 1000 and agree >= 0.99, (n, agree)
assert not np.array_equal(a, b)
' "$T/yf.npy" "$T/yb.npy"
}

@test "--emit onnx of a bf16 model warns that its layers go out as f32 ops, and still writes it" {
    "$MGE_OPT" "$SAMPLES/lenet.mgt" --precision bf16 -o "$T/b.mge"
    run --separate-stderr "$MGE_OPT" "$T/b.mge" -o "$T/b.onnx"
    assert_success
    [[ "$stderr" == *"warning: 4 bf16 layers written as f32 ONNX ops"* ]]
    [ -s "$T/b.onnx" ]
    run --separate-stderr "$MGE_OPT" "$SAMPLES/lenet.mgt" -o "$T/f.onnx"
    [[ "$stderr" != *"bf16"* ]]
}
