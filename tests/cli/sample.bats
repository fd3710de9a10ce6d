#!/usr/bin/env bats
# sample.bats — grid_sample, roi_align and deform_conv2d through the
# tools: records of two shapes through mge-run (an identity grid gives x
# back; a zero offset makes deform_conv2d conv2d), the text form and .mge
# round trip of their enum attributes, and the run-time refusal of a
# roi's batch index with its exact message, exit 1 and no output.
bats_require_minimum_version 1.5.0
load helper

@test "grid_sample of an identity grid and deform_conv2d with zero offsets on records of two shapes" {
    need_numpy
    cat > "$T/gs.mgt" <<'NET'
input x : f32[N,2,H,W]
input g : f32[N,H,W,2]
input w : f32[3,2,3,3]
input o : f32[N,18,H,W]
y = grid_sample(x, g, align_corners=true, padding_mode=border)
z = deform_conv2d(x, w, o, pad=1)
c = conv2d(x, w, out=3, kernel=3, pad=1, bias=false)
output y, z, c
NET
    py '
rng = np.random.default_rng(3)
w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
with open(sys.argv[1], "wb") as f, open(sys.argv[2], "wb") as ref:
    for n, h, wd in [(2, 4, 5), (1, 6, 3)]:
        x = rng.standard_normal((n, 2, h, wd)).astype(np.float32)
        gx, gy = np.meshgrid(np.linspace(-1, 1, wd), np.linspace(-1, 1, h))
        g = np.broadcast_to(np.stack([gx, gy], -1), (n, h, wd, 2)).astype(np.float32)
        for a in (x, g, w, np.zeros((n, 18, h, wd), np.float32)):
            np.save(f, a)
        np.save(ref, x)
' "$T/in.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/gs.mgt" -i "$T/in.npy" -o "$T/out.npy"
    assert_success
    run py '
f = open(sys.argv[1], "rb"); r = open(sys.argv[2], "rb")
for _ in range(2):
    y, z, c = np.load(f), np.load(f), np.load(f)
    x = np.load(r)
    assert np.abs(y - x).max() < 1e-5, np.abs(y - x).max()
    assert np.abs(z - c).max() < 1e-4, np.abs(z - c).max()
print("ok")' "$T/out.npy" "$T/ref.npy"
    assert_output "ok"
}

@test "the enum attributes of grid_sample and roi_align print as words and survive .mge" {
    cat > "$T/e.mgt" <<'NET'
input x : f32[1,2,5,6]
input g : f32[1,3,4,2]
input r : f32[2,4]
input b : i64[2]
y = grid_sample(x, g, mode=bicubic, padding_mode=reflection)
z = roi_align(x, r, b, output_size=[2, 2], pooling=max, aligned=true)
output y, z
NET
    run --separate-stderr "$MGE_OPT" "$T/e.mgt" -o "$T/e.mge"
    assert_success
    run --separate-stderr "$MGE_DUMP" "$T/e.mge"
    assert_success
    [[ "$output" == *"grid_sample(x, g, mode=bicubic, padding_mode=reflection)"* ]] || { echo "$output"; return 1; }
    [[ "$output" == *"roi_align(x, r, b, output_size=[2, 2], pooling=max, aligned=true)"* ]] || { echo "$output"; return 1; }
}

@test "a roi whose batch index is outside x fails that record with exit 1 and no output" {
    need_numpy
    printf 'input x : f32[2,1,4,4]\ninput r : f32[1,4]\ninput b : i64[1]\ny = roi_align(x, r, b, output_size=[2, 2])\noutput y\n' > "$T/ra.mgt"
    py '
with open(sys.argv[1], "wb") as f:
    np.save(f, np.zeros((2, 1, 4, 4), np.float32)); np.save(f, np.array([[0, 0, 2, 2]], np.float32))
    np.save(f, np.array([5], np.int64))
' "$T/bad.npy"
    run --separate-stderr "$MGE_RUN" "$T/ra.mgt" -i "$T/bad.npy" -o "$T/out.npy"
    assert_failure 1
    [ "$stderr" = "mge-run: $T/bad.npy: error: step 0: y: roi_align: batch_indices[0] = 5: expected 0..1" ] ||
        { echo "$stderr"; return 1; }
    [ ! -e "$T/out.npy" ]
}
