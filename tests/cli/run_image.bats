#!/usr/bin/env bats
# mge-run --image: PNG and JPEG into an NCHW input, pixel for pixel what
# PIL (and torchvision's transforms) give; batches, grayscale, errors.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

need_pil() {
    "$PY" -c 'import numpy, PIL' 2>/dev/null || skip "numpy or PIL not installed ($PY)"
}

# A model that outputs its image input as it got it: f32[N,C,H,W].
id_model() {
    printf 'input x : %s[N,%s,%s,%s]\ny = reshape(x, shape=[-1, %s, %s, %s])\noutput y\n' \
        "${5:-f32}" "$2" "$3" "$4" "$2" "$3" "$4" > "$1"
}

# images.py OUT.png|OUT.jpg H W [mode] [seed]: random pixels saved with PIL
make_image() {
    py 'from PIL import Image
h, w = int(sys.argv[2]), int(sys.argv[3]); mode = sys.argv[4] if len(sys.argv) > 4 else "RGB"
r = np.random.default_rng(int(sys.argv[5]) if len(sys.argv) > 5 else 0)
a = r.integers(0, 256, (h, w, 4), dtype=np.uint8)
im = Image.fromarray(a, "RGBA").convert(mode)
im.save(sys.argv[1], **({"quality": 90} if sys.argv[1].endswith(".jpg") else {}))' "$@"
}

# ref.py FILE MODE H W MEAN STD OUT.npy: PIL's pixels resized (bilinear) and
# normalized as torchvision's ToTensor and Normalize do, in f32
pil_ref() {
    py 'from PIL import Image
f, mode, h, w = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
mean = np.array([float(v) for v in sys.argv[5].split(",")], np.float32)
std = np.array([float(v) for v in sys.argv[6].split(",")], np.float32)
im = Image.open(f).convert(mode)
if im.size != (w, h):
    im = im.resize((w, h), Image.BILINEAR)
a = np.asarray(im, np.uint8).reshape(h, w, -1).transpose(2, 0, 1)
x = (a.astype(np.float32) / np.float32(255) - mean[:, None, None]) / std[:, None, None]
np.save(sys.argv[7], x[None])' "$@"
}

# max |a - b| * 255 of two .npy files
maxdiff() {
    py 'a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape, (a.shape, b.shape)
print("%.3g" % (np.abs(a - b).max() * 255))' "$1" "$2"
}

@test "a PNG resized and normalized per channel is PIL's pixels to the bit" {
    need_pil
    make_image "$T/a.png" 41 67
    id_model "$T/m.mgt" 3 24 32
    "$MGE_RUN" "$T/m.mgt" --image "$T/a.png" --resize 24x32 --mean 0.485,0.456,0.406 \
        --std 0.229,0.224,0.225 -o "$T/o.npy"
    pil_ref "$T/a.png" RGB 24 32 0.485,0.456,0.406 0.229,0.224,0.225 "$T/r.npy"
    run maxdiff "$T/o.npy" "$T/r.npy"
    assert_output "0"
    # enlarging too, and no resize at all
    id_model "$T/big.mgt" 3 50 80
    "$MGE_RUN" "$T/big.mgt" --image "$T/a.png" --resize 50x80 -o "$T/o2.npy"
    pil_ref "$T/a.png" RGB 50 80 0 1 "$T/r2.npy"
    run maxdiff "$T/o2.npy" "$T/r2.npy"
    assert_output "0"
    id_model "$T/same.mgt" 3 41 67
    "$MGE_RUN" "$T/same.mgt" --image "$T/a.png" -o "$T/o3.npy"
    pil_ref "$T/a.png" RGB 41 67 0 1 "$T/r3.npy"
    run maxdiff "$T/o3.npy" "$T/r3.npy"
    assert_output "0"
}

@test "JPEG, palette, RGBA and gray PNG decode as PIL decodes them" {
    need_pil
    id_model "$T/m.mgt" 3 20 30
    for f in a.jpg p.png rgba.png g.png; do
        case $f in p.png) mode=P ;; rgba.png) mode=RGBA ;; g.png) mode=L ;; *) mode=RGB ;; esac
        make_image "$T/$f" 20 30 $mode 3
        "$MGE_RUN" "$T/m.mgt" --image "$T/$f" -o "$T/o.npy"
        pil_ref "$T/$f" RGB 20 30 0 1 "$T/r.npy"
        run maxdiff "$T/o.npy" "$T/r.npy"
        # the same libjpeg-turbo and defaults as PIL's: equal; at most 1 level elsewhere
        [ "$output" = 0 ] || [ "$output" = 1 ] || { echo "$f: max diff $output levels"; return 1; }
    done
}

@test "a grayscale model gets PIL's luma of a colour image" {
    need_pil
    make_image "$T/c.png" 28 28 RGB 5
    id_model "$T/g.mgt" 1 28 28
    "$MGE_RUN" "$T/g.mgt" --image "$T/c.png" -o "$T/o.npy"
    pil_ref "$T/c.png" L 28 28 0 1 "$T/r.npy"
    run maxdiff "$T/o.npy" "$T/r.npy"
    assert_output "0"
}

@test "--resize S --crop HxW is torchvision's Resize(S) and CenterCrop" {
    need_pil
    "$PY" -c 'import torchvision' 2>/dev/null || skip "torchvision not installed ($PY)"
    make_image "$T/w.png" 61 90 RGB 7
    make_image "$T/t.png" 95 60 RGB 8
    id_model "$T/m.mgt" 3 24 24
    "$MGE_RUN" "$T/m.mgt" --image "$T/w.png" "$T/t.png" --resize 27 --crop 24x24 -o "$T/o.npy"
    run py 'import torchvision.transforms as T
from PIL import Image
tf = T.Compose([T.Resize(27), T.CenterCrop(24), T.ToTensor()])
o = np.load(sys.argv[1])
r = np.stack([tf(Image.open(f).convert("RGB")).numpy() for f in sys.argv[2:]])
print(o.shape, np.abs(o - r).max())' "$T/o.npy" "$T/w.png" "$T/t.png"
    assert_output "(2, 3, 24, 24) 0.0"
}

@test "several images make one batch, in order; --top-k names them" {
    need_pil
    for i in 1 2 3; do make_image "$T/i$i.png" 8 8 RGB $i; done
    cat > "$T/c.mgt" <<'NET'
input x : f32[N,3,8,8]
m = mean(x, axis=[2, 3])
output m
NET
    "$MGE_RUN" -q "$T/c.mgt" --image "$T/i1.png" --image "$T/i2.png" "$T/i3.png" --batch 2 -o "$T/o.npy"
    run py 'from PIL import Image
o = np.load(sys.argv[1])
r = np.stack([np.asarray(Image.open(f).convert("RGB"), np.float32).mean((0, 1)) / 255 for f in sys.argv[2:]])
print(o.shape, bool(np.allclose(o, r, atol=1e-6)))' "$T/o.npy" "$T/i1.png" "$T/i2.png" "$T/i3.png"
    assert_output "(3, 3) True"
    run "$MGE_RUN" -q "$T/c.mgt" --image "$T/i1.png" "$T/i2.png" "$T/i3.png" --top-k 1 --batch 2
    assert_success
    [ "${#lines[@]}" = 3 ]
    [[ "${lines[0]}" == "$T/i1.png	1	"* ]]
    [[ "${lines[2]}" == "$T/i3.png	1	"* ]]
}

@test "a u8 input gets the pixels as they are" {
    need_pil
    make_image "$T/a.png" 4 5 RGB 9
    id_model "$T/u.mgt" 3 4 5 u8
    "$MGE_RUN" "$T/u.mgt" --image "$T/a.png" -o "$T/o.npy"
    run py 'from PIL import Image
o = np.load(sys.argv[1]); a = np.asarray(Image.open(sys.argv[2]).convert("RGB")).transpose(2, 0, 1)
print(o.dtype, np.array_equal(o[0], a))' "$T/o.npy" "$T/a.png"
    assert_output "uint8 True"
    run "$MGE_RUN" "$T/u.mgt" --image "$T/a.png" --mean 0.5 -o "$T/o.npy"
    assert_failure 1
    assert_output --partial "without --mean/--std"
}

@test "image errors: not an image, truncated, missing, wrong size, crop too large, not an image model" {
    need_pil
    id_model "$T/m.mgt" 3 8 8
    echo "not an image" > "$T/t.png"
    run "$MGE_RUN" "$T/m.mgt" --image "$T/t.png" -o "$T/o.npy"
    assert_failure 1
    assert_output "mge-run: $T/t.png: error: not a PNG or JPEG image"
    [ ! -e "$T/o.npy" ]
    make_image "$T/a.png" 8 8
    make_image "$T/a.jpg" 8 8
    head -c 100 "$T/a.png" > "$T/cut.png"
    run "$MGE_RUN" "$T/m.mgt" --image "$T/cut.png"
    assert_failure 1
    assert_output --partial "cut.png: error: PNG: "
    head -c 300 "$T/a.jpg" > "$T/cut.jpg"
    run "$MGE_RUN" "$T/m.mgt" --image "$T/cut.jpg"
    assert_failure 1
    assert_output --partial "cut.jpg: error: JPEG: the file ends early (truncated)"
    run "$MGE_RUN" "$T/m.mgt" --image "$T/nosuch.png"
    assert_failure 1
    assert_output --partial "nosuch.png"
    make_image "$T/b.png" 10 12
    run "$MGE_RUN" "$T/m.mgt" --image "$T/b.png" -o "$T/o.npy"
    assert_failure 1
    assert_output "mge-run: $T/b.png: error: the image is 10x12 (HxW), and input 'x' takes 8x8: give --resize 8x8"
    run "$MGE_RUN" "$T/m.mgt" --image "$T/a.png" --crop 9x9
    assert_failure 1
    assert_output --partial "--crop 9x9: the image is 8x8, smaller than the crop"
    write_mlp
    run "$MGE_RUN" -q "$T/mlp.mgt" --image "$T/a.png"
    assert_failure 1
    assert_output --partial "input 'x' is f32[N,4]: images go into [N,C,H,W] (NCHW) with C 1 (gray) or 3 (RGB)"
}

@test "image usage errors" {
    run "$MGE_RUN" m.mge --image a.png --mean 1,2
    assert_failure 2
    assert_output --partial "not 2"
    run "$MGE_RUN" m.mge --image a.png --std 0
    assert_failure 2
    run "$MGE_RUN" m.mge --image a.png --resize 0x3
    assert_failure 2
    run "$MGE_RUN" m.mge --image a.png --resize 3x
    assert_failure 2
    run "$MGE_RUN" m.mge --image a.png --crop 5
    assert_failure 2
    run "$MGE_RUN" m.mge --resize 3x3
    assert_failure 2
    assert_output --partial "--resize needs --image"
    run "$MGE_RUN" m.mge --image a.png --data d.npz
    assert_failure 2
    # the model first: an image in its place is a usage error
    need_pil
    make_image "$T/a.png" 8 8
    run "$MGE_RUN" --image "$T/a.png" "$T/a.png"
    assert_failure 2
    assert_output --partial "is an image: the model comes first"
}

@test "a model on stdin with --image" {
    need_pil
    make_image "$T/a.png" 8 8
    id_model "$T/m.mgt" 3 8 8
    "$MGE_OPT" "$T/m.mgt" -o "$T/m.mge"
    run bash -c "'$MGE_RUN' --image '$T/a.png' -o '$T/o.npy' < '$T/m.mge'"
    assert_success
    run npy_show "$T/o.npy"
    assert_output --regexp '^f32 1x3x8x8 '
    # two images: '-' holds the model's place
    run bash -c "'$MGE_RUN' - --image '$T/a.png' '$T/a.png' -o '$T/o2.npy' < '$T/m.mge'"
    assert_success
    run npy_show "$T/o2.npy"
    assert_output --regexp '^f32 2x3x8x8 '
}
