#!/usr/bin/env bats
# attn.bats — group "attn" through mge-run: causal attention over a
# symbolic sequence length on one stream whose records differ in S
# (checked against numpy's softmax(q k^T / sqrt(D) + mask) v), and the bad
# inputs: an embedding index out of range and NaN in a float attention
# mask each exit 1 naming the value and where it is, leaving no output
# file; a bad attribute is refused when the model loads.
bats_require_minimum_version 1.5.0
load helper

@test "causal attention on records of two sequence lengths matches numpy" {
    need_numpy
    cat > "$T/att.mgt" <<'NET'
input q : f32[B,2,S,8]
input k : f32[B,2,S,8]
input v : f32[B,2,S,4]
y = scaled_dot_product_attention(q, k, v, causal=true)
output y
NET
    py '
rng = np.random.default_rng(5)
with open(sys.argv[1], "wb") as f, open(sys.argv[2], "wb") as r:
    for B, S in [(1, 5), (2, 70)]:
        q, k = (rng.standard_normal((B, 2, S, 8)).astype(np.float32) for _ in range(2))
        v = rng.standard_normal((B, 2, S, 4)).astype(np.float32)
        for a in (q, k, v):
            np.save(f, a)
        s = (q.astype(np.float64) @ k.transpose(0, 1, 3, 2)) / np.sqrt(8)
        s[..., np.triu(np.ones((S, S), bool), 1)] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True))
        np.save(r, ((p / p.sum(-1, keepdims=True)) @ v).astype(np.float32))
' "$T/in.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/att.mgt" -i "$T/in.npy" -o "$T/out.npy" --check "$T/ref.npy" --atol 1e-5 --rtol 1e-5
    assert_success
    run py '
f = open(sys.argv[1], "rb")
print([np.load(f).shape for _ in range(2)])' "$T/out.npy"
    assert_output "[(1, 2, 5, 4), (2, 2, 70, 4)]"
}

@test "embedding and cross_entropy over trailing dims on records of two shapes match numpy" {
    need_numpy
    cat > "$T/ec.mgt" <<'NET'
weights "ew.npz"
input tokens : i64[B,S]
input lab : i64[B,S]
e = embedding(tokens, num=20, dim=5)
lg = transpose(e, perm=[0,2,1])
ce = cross_entropy(lg, lab, ignore_index=4, label_smoothing=0.1)
output e, ce
NET
    py '
rng = np.random.default_rng(2)
w = rng.standard_normal((20, 5)).astype(np.float32)
np.savez(sys.argv[1], **{"e.weight": w})
with open(sys.argv[2], "wb") as f, open(sys.argv[3], "wb") as r:
    for B, S in [(2, 3), (1, 7)]:
        t = rng.integers(0, 20, (B, S)); l = rng.integers(0, 5, (B, S)); l[0, 0] = 4
        np.save(f, t); np.save(f, l)
        e = w[t].astype(np.float64)
        lp = e - np.log(np.exp(e).sum(-1, keepdims=True))
        keep = l != 4
        nll = -np.take_along_axis(lp, l[..., None], -1)[..., 0]
        loss = (0.9 * nll + 0.1 * -lp.mean(-1))[keep].mean()
        np.save(r, w[t]); np.save(r, np.float32(loss))
' "$T/ew.npz" "$T/in.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/ec.mgt" -i "$T/in.npy" -o "$T/out.npy" --check "$T/ref.npy" --atol 1e-6 --rtol 1e-5
    assert_success
    run py '
f = open(sys.argv[1], "rb")
print([np.load(f).shape for _ in range(4)])' "$T/out.npy"
    assert_output "[(2, 3, 5), (), (1, 7, 5), ()]"
}

@test "an embedding index out of range exits 1 naming the index, its position and the table size" {
    need_numpy
    cat > "$T/emb.mgt" <<'NET'
input tokens : i32[B,S]
e = embedding(tokens, num=256, dim=8)
output e
NET
    py '
with open(sys.argv[1], "wb") as f:
    np.save(f, np.array([[1, 2, 3, 4, 5, 300]], np.int32))
' "$T/bad.npy"
    run --separate-stderr "$MGE_RUN" "$T/emb.mgt" -i "$T/bad.npy" -o "$T/out.npy"
    assert_failure 1
    [[ "$stderr" == *"error:"*"embedding: index 300 at [0,5] is out of range for a table of 256 rows"* ]] || { echo "$stderr"; return 1; }
    [ ! -e "$T/out.npy" ]
}

@test "NaN in a float attention mask exits 1 naming its position" {
    need_numpy
    cat > "$T/mask.mgt" <<'NET'
input q : f32[1,3,4]
input k : f32[1,5,4]
input v : f32[1,5,4]
input m : f32[3,5]
y = scaled_dot_product_attention(q, k, v, m)
output y
NET
    py '
with open(sys.argv[1], "wb") as f:
    for s in [(1, 3, 4), (1, 5, 4), (1, 5, 4)]:
        np.save(f, np.ones(s, np.float32))
    m = np.zeros((3, 5), np.float32); m[1, 2] = np.nan
    np.save(f, m)
' "$T/nan.npy"
    run --separate-stderr "$MGE_RUN" "$T/mask.mgt" -i "$T/nan.npy" -o "$T/out.npy"
    assert_failure 1
    [[ "$stderr" == *"error:"*"scaled_dot_product_attention: the mask holds NaN at [1,2]"* ]] || { echo "$stderr"; return 1; }
    [ ! -e "$T/out.npy" ]
}

@test "bad attention and loss attributes are refused at load with exit 1" {
    printf 'input q : f32[2,3,4]\ny = scaled_dot_product_attention(q, q, q, dropout=1.5)\noutput y\n' > "$T/d.mgt"
    run --separate-stderr "$MGE_RUN" "$T/d.mgt" -i /dev/null
    assert_failure 1
    [[ "$stderr" == *"dropout=1.5: expected a probability in [0, 1)"* ]] || { echo "$stderr"; return 1; }
    printf 'input x : f32[2,3]\ninput l : i64[2]\nc = cross_entropy(x, l, label_smoothing=-0.5)\noutput c\n' > "$T/c.mgt"
    run --separate-stderr "$MGE_RUN" "$T/c.mgt" -i /dev/null
    assert_failure 1
    [[ "$stderr" == *"label_smoothing=-0.5: expected a value in [0, 1]"* ]] || { echo "$stderr"; return 1; }
}

@test "mge-train: embedding indices are not class labels; ignore_index labels pass the label check" {
    MGE_TRAIN="$MGE_BIN/mge-train"
    need_numpy
    cat > "$T/cls.mgt" <<'NET'
input tokens : i32[N,4]
input label : i64[N]
e = embedding(tokens, num=50, dim=8)
f = flatten(e)
fc = linear(f, out=3)
loss = cross_entropy(fc, label)
output fc
minimize loss
NET
    py '
rng = np.random.default_rng(1)
t = rng.integers(0, 50, (16, 4)).astype(np.int32)
l = rng.integers(0, 3, 16); l[::5] = -100
np.savez(sys.argv[1], tokens=t, label=l)
l[3] = 5
np.savez(sys.argv[2], tokens=t, label=l)
' "$T/ok.npz" "$T/bad.npz"
    run --separate-stderr "$MGE_TRAIN" "$T/cls.mgt" --data "$T/ok.npz" --batch 8 --steps 2 -q -o "$T/cls.mge"
    assert_success
    [ -s "$T/cls.mge" ]
    run --separate-stderr "$MGE_TRAIN" "$T/cls.mgt" --data "$T/bad.npz" --batch 8 --steps 2 -q -o "$T/bad.mge"
    assert_failure 1
    [[ "$stderr" == *"labels for 'label' range over [-100, 5]: the model has 3 classes (0..2)"* ]] || { echo "$stderr"; return 1; }
}

@test "mge-train: attention with dropout trains (its gradient replays the forward's draws), reproducibly per seed" {
    MGE_TRAIN="$MGE_BIN/mge-train"
    need_numpy
    cat > "$T/att.mgt" <<'NET'
input x : f32[N,6,8]
input label : i64[N]
q = linear(x, out=8)
a = scaled_dot_product_attention(q, x, x, dropout=0.3)
f = flatten(a)
fc = linear(f, out=3)
loss = cross_entropy(fc, label)
output fc
minimize loss
NET
    py '
rng = np.random.default_rng(2)
np.savez(sys.argv[1], x=rng.standard_normal((16, 6, 8)).astype(np.float32), label=rng.integers(0, 3, 16))
' "$T/d.npz"
    run --separate-stderr "$MGE_TRAIN" "$T/att.mgt" --data "$T/d.npz" --batch 8 --steps 4 --seed 5 -q -o "$T/a1.mge"
    assert_success
    run --separate-stderr "$MGE_TRAIN" "$T/att.mgt" --data "$T/d.npz" --batch 8 --steps 4 --seed 5 -q -o "$T/a2.mge"
    assert_success
    cmp "$T/a1.mge" "$T/a2.mge"
    # inference (no dropout) from the trained file runs and gives finite values
    py 'np.save(sys.argv[1], np.random.default_rng(3).standard_normal((2, 6, 8)).astype(np.float32))' "$T/x.npy"
    run -0 "$MGE_RUN" "$T/a1.mge" -i "$T/x.npy" -o "$T/y.npy"
    run -0 py 'y = np.load(sys.argv[1]); assert y.shape == (2, 3) and np.isfinite(y).all(), y; print("ok")' "$T/y.npy"
}
