#!/usr/bin/env bats
# index.bats — the indexing and logic ops through mge-run: a model with
# symbolic S and K gathering rows and masking them with where(less(...)),
# on one stream whose records differ in S and K (checked against numpy),
# and an out-of-range index: exit 1 naming the index, its position and the
# bound, no output file left behind.
bats_require_minimum_version 1.5.0
load helper

write_model() {
    cat > "$T/gm.mgt" <<'NET'
input x : f32[N,S,8]
input idx : i64[K]
const lim : f32[] = [0.25]
const zero : f32[] = [0]
g = gather(x, idx, axis=1)
m = less(g, lim)
y = where(m, zero, g)
output y
NET
}

@test "gather + where(less) on records of two shapes matches numpy" {
    need_numpy
    write_model
    py '
rng = np.random.default_rng(3)
with open(sys.argv[1], "wb") as f, open(sys.argv[2], "wb") as r:
    for N, S, idx in [(2, 5, [0, 4, -1]), (1, 9, [8, 0, 3, -9, 2])]:
        x = rng.standard_normal((N, S, 8)).astype(np.float32)
        i = np.array(idx, dtype=np.int64)
        np.save(f, x); np.save(f, i)
        g = np.take(x, i, axis=1)
        np.save(r, np.where(g < 0.25, np.float32(0), g))
' "$T/in.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/gm.mgt" -i "$T/in.npy" -o "$T/out.npy" --check "$T/ref.npy" --atol 0 --rtol 0
    assert_success
    run py '
f = open(sys.argv[1], "rb")
print([np.load(f).shape for _ in range(2)])' "$T/out.npy"
    assert_output "[(2, 3, 8), (1, 5, 8)]"
}

@test "an out-of-range index exits 1 naming the index, its position and the bound" {
    need_numpy
    write_model
    py '
with open(sys.argv[1], "wb") as f:
    np.save(f, np.zeros((2, 5, 8), np.float32)); np.save(f, np.array([1, 5], np.int64))
' "$T/bad.npy"
    run --separate-stderr "$MGE_RUN" "$T/gm.mgt" -i "$T/bad.npy" -o "$T/out.npy"
    assert_failure 1
    [[ "$stderr" == *"error:"*"gather: index 5 at [1] is out of range for axis 1 of size 5"* ]] || { echo "$stderr"; return 1; }
    [ ! -e "$T/out.npy" ]
}

@test "one_hot, comparisons and the bool ops through mge-run" {
    need_numpy
    cat > "$T/oh.mgt" <<'NET'
input i : i32[K]
input a : f32[K]
const vals : f32[2] = [0, 3]
const one : f32[] = [1]
oh = one_hot(i, vals, depth=4)
gt = greater(a, one)
le = less_equal(a, one)
x = xor(gt, le)
n = not(x)
o = or(n, gt)
output oh, o
NET
    py '
with open(sys.argv[1], "wb") as f:
    np.save(f, np.array([0, 3, -1, 7], np.int32)); np.save(f, np.array([0.5, 1, 2, 3], np.float32))
' "$T/oh_in.npy"
    run --separate-stderr "$MGE_RUN" "$T/oh.mgt" -i "$T/oh_in.npy" -o "$T/oh_out.npy"
    assert_success
    run py '
f = open(sys.argv[1], "rb")
oh, o = np.load(f), np.load(f)
print(oh.astype(int).tolist(), o.dtype, o.tolist())' "$T/oh_out.npy"
    assert_output "[[3, 0, 0, 0], [0, 0, 0, 3], [0, 0, 0, 3], [0, 0, 0, 0]] bool [False, False, True, True]"
}
