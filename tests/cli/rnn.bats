#!/usr/bin/env bats
# rnn.bats — lstm and gru through mge-run: one stream whose records differ
# in sequence length and batch (S and N symbolic), checked against a numpy
# bidirectional LSTM with the weights bound by PyTorch's names; and the
# errors: a parameter whose shape does not fit hidden_size (named, with
# both shapes), weights of another hidden size, h0 of the wrong shape,
# a bad num_layers: exit 1, no output file left behind; mge-train refusing
# the inference-only forms (rnn, gru linear_before_reset=false, lstm
# peephole=true).
bats_require_minimum_version 1.5.0
load helper

@test "a bidirectional lstm on records of two sequence lengths matches numpy" {
    need_numpy
    cat > "$T/m.mgt" <<NET
weights "$T/w.npz"
input x : f32[S,N,3]
y, h, c = lstm(x, hidden_size=4, bidirectional=true)
output y
output h
NET
    py '
rng = np.random.default_rng(1)
H, I = 4, 3
w = {}
for sfx in ["", "_reverse"]:
    w["y.weight_ih_l0" + sfx] = rng.uniform(-0.5, 0.5, (4 * H, I)).astype(np.float32)
    w["y.weight_hh_l0" + sfx] = rng.uniform(-0.5, 0.5, (4 * H, H)).astype(np.float32)
    w["y.bias_ih_l0" + sfx] = rng.uniform(-0.5, 0.5, 4 * H).astype(np.float32)
    w["y.bias_hh_l0" + sfx] = rng.uniform(-0.5, 0.5, 4 * H).astype(np.float32)
np.savez(sys.argv[1], **w)
sg = lambda v: 1 / (1 + np.exp(-v))
def run(x, sfx, rev):
    S, N, _ = x.shape
    h = np.zeros((N, H)); c = np.zeros((N, H)); ys = np.zeros((S, N, H))
    for t in (range(S - 1, -1, -1) if rev else range(S)):
        a = x[t] @ w["y.weight_ih_l0" + sfx].T + w["y.bias_ih_l0" + sfx] + h @ w["y.weight_hh_l0" + sfx].T + w["y.bias_hh_l0" + sfx]
        i, f, g, o = sg(a[:, :H]), sg(a[:, H:2*H]), np.tanh(a[:, 2*H:3*H]), sg(a[:, 3*H:])
        c = f * c + i * g; h = o * np.tanh(c); ys[t] = h
    return ys, h
with open(sys.argv[2], "wb") as f, open(sys.argv[3], "wb") as r:
    for S, N in [(5, 2), (9, 3)]:
        x = rng.standard_normal((S, N, I)).astype(np.float32)
        np.save(f, x)
        yf, hf = run(x.astype(np.float64), "", False)
        yb, hb = run(x.astype(np.float64), "_reverse", True)
        np.save(r, np.concatenate([yf, yb], axis=2).astype(np.float32))
        np.save(r, np.stack([hf, hb]).astype(np.float32))
' "$T/w.npz" "$T/in.npy" "$T/ref.npy"
    run --separate-stderr "$MGE_RUN" "$T/m.mgt" -i "$T/in.npy" -o "$T/out.npy" --check "$T/ref.npy" --atol 1e-5 --rtol 1e-5
    assert_success
    run py '
f = open(sys.argv[1], "rb")
print([np.load(f).shape for _ in range(4)])' "$T/out.npy"
    assert_output "[(5, 2, 8), (2, 2, 4), (9, 3, 8), (2, 3, 4)]"
}

@test "an lstm parameter that does not fit hidden_size: exit 1 naming it and both shapes" {
    cat > "$T/bad.mgt" <<'NET'
input x : f32[5,2,8]
param lstm1.weight_ih_l0 : f32[64,8]
param lstm1.weight_hh_l0 : f32[64,32]
param lstm1.bias_ih_l0 : f32[64]
param lstm1.bias_hh_l0 : f32[64]
lstm1 = lstm(x, lstm1.weight_ih_l0, lstm1.weight_hh_l0, lstm1.bias_ih_l0, lstm1.bias_hh_l0, hidden_size=16)
output lstm1
NET
    run --separate-stderr "$MGE_RUN" "$T/bad.mgt" -o "$T/out.npy" < /dev/null
    assert_failure 1
    assert_equal "$stderr" "mge-run: $T/bad.mgt:6:1: error: lstm1: lstm1.weight_hh_l0: expected f32[64,16] for hidden_size=16, got f32[64,32]"
    [ ! -e "$T/out.npy" ]
}

@test "weights of another hidden size: exit 1 naming the parameter and both shapes" {
    need_numpy
    py 'np.savez(sys.argv[1], **{"l.weight_ih_l0": np.zeros((128, 8), np.float32), "l.weight_hh_l0": np.zeros((128, 32), np.float32)})' "$T/w.npz"
    printf 'weights "%s"\ninput x : f32[S,N,8]\nl = lstm(x, hidden_size=16, bias=false)\noutput l\n' "$T/w.npz" > "$T/w.mgt"
    run --separate-stderr "$MGE_RUN" "$T/w.mgt" -o "$T/out.npy" < /dev/null
    assert_failure 1
    assert_equal "$stderr" "mge-run: $T/w.mgt:1:1: error: weights \"$T/w.npz\": 'l.weight_ih_l0': expected f32[64,8], got f32[128,8]"
    [ ! -e "$T/out.npy" ]
}

@test "h0 of the wrong shape and a bad num_layers: exit 1 with the expected shape or range" {
    printf 'input x : f32[5,2,8]\ninput h0 : f32[1,2,4]\ng = gru(x, h0, hidden_size=4, bidirectional=true)\noutput g\n' > "$T/h.mgt"
    run --separate-stderr "$MGE_RUN" "$T/h.mgt" -o "$T/out.npy" < /dev/null
    assert_failure 1
    assert_equal "$stderr" "mge-run: $T/h.mgt:3:1: error: g: gru: h0 is f32[1,2,4]: expected f32[2,2,4] ([D*num_layers, N, hidden_size])"
    printf 'input x : f32[5,2,8]\ny = lstm(x, hidden_size=4, num_layers=0)\noutput y\n' > "$T/l.mgt"
    run --separate-stderr "$MGE_RUN" "$T/l.mgt" -o "$T/out.npy" < /dev/null
    assert_failure 1
    assert_equal "$stderr" "mge-run: $T/l.mgt:2:1: error: y: lstm: num_layers=0: expected 1 to 14 (a node takes at most 64 inputs)"
    [ ! -e "$T/out.npy" ]
}

@test "mge-train refuses the inference-only recurrent forms (rnn, gru linear_before_reset=false, lstm peephole=true)" {
    need_numpy
    MGE_TRAIN="$MGE_BIN/mge-train"
    py 'np.savez(sys.argv[1], x=np.random.rand(8, 4, 3).astype(np.float32), t=np.random.rand(8, 4, 5).astype(np.float32))' "$T/d.npz"
    for layer in "rnn(x, hidden_size=5, batch_first=true)" "gru(x, hidden_size=5, batch_first=true, linear_before_reset=false)" \
                 "lstm(x, hidden_size=5, batch_first=true, peephole=true)"; do
        printf 'input x : f32[N,4,3]\ninput t : f32[N,4,5]\nr = %s\nloss = mse(r, t)\noutput r\nminimize loss\n' "$layer" > "$T/m.mgt"
        run --separate-stderr "$MGE_TRAIN" "$T/m.mgt" --data "$T/d.npz" --steps 1 -o "$T/m.mge"
        assert_failure 1
        [[ "$stderr" == *"no gradient rule"*"inference only"* ]] || { echo "$layer: $stderr"; return 1; }
        [ ! -e "$T/m.mge" ]
    done
}
