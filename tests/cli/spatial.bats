#!/usr/bin/env bats
# spatial.bats — resize, pad and the group/instance/rms norms through
# mge-run: one stream whose records differ in N, H and W (checked against
# numpy), and every refused attribute with its exact message and exit 1
# (at load time from the text form, at run time for what depends on a
# record's shape), no output file left behind.
bats_require_minimum_version 1.5.0
load helper

@test "resize + pad + instance_norm on records of two shapes matches numpy" {
    need_numpy
    cat > "$T/sp.mgt" <<'NET'
input x : f32[N,3,H,W]
r = resize(x, scales=[2, 2])
p = pad(r, pads=[1, 2, 1, 0], mode=reflect)
c = pad(p, pads=[0, 1], value=-1)
y = instance_norm(c)
output r, y
NET
    py '
rng = np.random.default_rng(7)
with open(sys.argv[1], "wb") as f, open(sys.argv[2], "wb") as ref:
    for shape in [(2, 3, 4, 5), (1, 3, 3, 7)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.save(f, x)
        r = x.repeat(2, axis=2).repeat(2, axis=3)
        p = np.pad(r, ((0, 0), (0, 0), (1, 0), (1, 2)), mode="reflect")
        c = np.pad(p, ((0, 0), (0, 0), (0, 0), (0, 1)), constant_values=-1).astype(np.float64)
        m = c.mean(axis=(2, 3), keepdims=True)
        v = c.var(axis=(2, 3), keepdims=True)
        np.save(ref, r)
        np.save(ref, ((c - m) / np.sqrt(v + 1e-5)).astype(np.float32))
' "$T/in.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/sp.mgt" -i "$T/in.npy" -o "$T/out.npy" --check "$T/ref.npy" --atol 1e-5 --rtol 1e-5
    assert_success
    run py '
f = open(sys.argv[1], "rb")
print([np.load(f).shape for _ in range(4)])' "$T/out.npy"
    assert_output "[(2, 3, 8, 10), (2, 3, 9, 14), (1, 3, 6, 14), (1, 3, 7, 18)]"
}

# refused MODEL_LINE MESSAGE: a model x : f32[N,4,H,W] -> y fails to load
# with exit 1 and exactly that message.
refused() {
    printf 'input x : f32[N,4,H,W]\n%s\noutput y\n' "$1" > "$T/bad.mgt"
    run --separate-stderr "$MGE_RUN" "$T/bad.mgt" -o "$T/out.npy" < /dev/null
    assert_failure 1
    [ "$stderr" = "$2" ] || { printf 'got:      %s\nexpected: %s\n' "$stderr" "$2"; return 1; }
    [ ! -e "$T/out.npy" ]
}

@test "an unknown enum word is refused listing the allowed ones" {
    refused "y = resize(x, mode=cubic, scales=[2, 2])" \
        "mge-run: $T/bad.mgt:2:20: error: resize attribute 'mode': expected one of nearest bilinear constant reflect replicate bicubic, found 'cubic'"
    refused "y = pad(x, pads=[1, 1], mode=nearest)" \
        "mge-run: $T/bad.mgt:2:1: error: y: pad: mode=nearest: expected constant, reflect or replicate (at N=1,H=224,W=256)"
}

@test "resize scales <= 0, sizes <= 0, both or neither are refused" {
    refused "y = resize(x, scales=[0, 2])" \
        "mge-run: $T/bad.mgt:2:1: error: y: resize: scales=[0,2]: expected scales > 0 (at N=1,H=224,W=256)"
    refused "y = resize(x, mode=bilinear, scales=[1.5, -2])" \
        "mge-run: $T/bad.mgt:2:1: error: y: resize: scales=[1.5,-2]: expected scales > 0 (at N=1,H=224,W=256)"
    refused "y = resize(x, size=[4, 0])" \
        "mge-run: $T/bad.mgt:2:1: error: y: resize: size=[4,0]: expected sizes >= 1 (at N=1,H=224,W=256)"
    refused "y = resize(x, size=[4, 4], scales=[2, 2])" \
        "mge-run: $T/bad.mgt:2:1: error: y: resize: needs exactly one of scales=[sh,sw], size=[oh,ow] and a size input, found more than one (at N=1,H=224,W=256)"
    refused "y = resize(x)" \
        "mge-run: $T/bad.mgt:2:1: error: y: resize: needs exactly one of scales=[sh,sw], size=[oh,ow] and a size input (at N=1,H=224,W=256)"
}

@test "negative pads outside constant mode, and reflect pads past the dim, are refused" {
    refused "y = pad(x, pads=[-1, 2], mode=reflect)" \
        "mge-run: $T/bad.mgt:2:1: error: y: pad: pads=[-1,2] for dim 3: mode=reflect needs pads >= 0 (at N=1,H=224,W=256)"
    refused "y = pad(x, pads=[0, 0, 1, -1], mode=replicate)" \
        "mge-run: $T/bad.mgt:2:1: error: y: pad: pads=[1,-1] for dim 2: mode=replicate needs pads >= 0 (at N=1,H=224,W=256)"
    refused "y = pad(x, pads=[0, 0, 0, 0, 0, 5], mode=reflect)" \
        "mge-run: $T/bad.mgt:2:1: error: y: pad: pads=[0,5] for dim 1 of size 4: mode=reflect needs pads < 4 (at N=1,H=224,W=256)"
}

@test "a reflect pad past a record's dim fails that record with exit 1 and no output" {
    need_numpy
    printf 'input x : f32[N,4,H,W]\ny = pad(x, pads=[3, 1], mode=reflect)\noutput y\n' > "$T/pr.mgt"
    py '
with open(sys.argv[1], "wb") as f:
    np.save(f, np.zeros((1, 4, 5, 6), np.float32)); np.save(f, np.zeros((1, 4, 5, 3), np.float32))
' "$T/two.npy"
    run --separate-stderr "$MGE_RUN" "$T/pr.mgt" -i "$T/two.npy" -o "$T/out.npy"
    assert_failure 1
    [ "$stderr" = "mge-run: $T/two.npy: error: step 1: y: pad: pads=[3,1] for dim 3 of size 3: mode=reflect needs pads < 3" ] ||
        { echo "$stderr"; return 1; }
    [ ! -e "$T/out.npy" ]
}

@test "norm attributes out of range are refused: axis, num_groups, eps" {
    refused "y = rms_norm(x, axis=4)" \
        "mge-run: $T/bad.mgt:2:1: error: y: rms_norm: axis=4 is out of range for x f32[1,4,224,256]"
    refused "y = group_norm(x, num_groups=3)" \
        "mge-run: $T/bad.mgt:2:1: error: y: group_norm: num_groups=3 does not divide the 4 channels (at N=1,H=224,W=256)"
    refused "y = instance_norm(x, eps=-1)" \
        "mge-run: $T/bad.mgt:2:1: error: y: instance_norm: eps=-1: expected > 0 (at N=1,H=224,W=256)"
}
