#!/usr/bin/env bats
# gpt.bats — language modelling from the shell: scripts/make-tokens turns
# the fortunes (Debian's fortunes package) into a byte-level .npz
# (deterministic, targets the tokens shifted by one, a held-out split),
# mge-train trains on it, and mge-run --generate prints text (the prompt
# and N bytes, the same bytes for the same --seed). Models that are not
# language models, and bad sampling options, get clear errors.
bats_require_minimum_version 1.5.0
load helper

FORTUNES=/usr/share/games/fortunes/fortunes
MAKE_TOKENS="$BATS_TEST_DIRNAME/../../scripts/make-tokens"

need_fortunes() {
    [ -r "$FORTUNES" ] || skip "no $FORTUNES (apt install fortunes; scripts/deps installs it)"
}

# A bigram model: the logits of the next byte are a row of a table.
write_bigram() {
    cat > "$T/bigram.mgt" <<'NET'
input tokens : i32[N,S]
input targets : i32[N,S]
param emb : f32[256,256] init=zeros
logits = gather(emb, tokens, axis=0)
lf = reshape(logits, shape=[-1,256])
tf = reshape(targets, shape=[-1])
loss = cross_entropy(lf, tf)
output logits
minimize loss
NET
}

@test "make-tokens: byte tokens, targets shifted by one, a held-out split, deterministic" {
    need_numpy
    need_fortunes
    "$PY" "$MAKE_TOKENS" --seq 32 --val "$T/v.npz" -o "$T/t.npz" "$FORTUNES"
    "$PY" "$MAKE_TOKENS" --seq 32 --val "$T/v2.npz" -o "$T/t2.npz" "$FORTUNES"
    cmp "$T/t.npz" "$T/t2.npz"
    cmp "$T/v.npz" "$T/v2.npz"
    run py '
d, v = np.load(sys.argv[1]), np.load(sys.argv[2])
t, y = d["tokens"], d["targets"]
assert t.dtype == np.int32 and y.dtype == np.int32 and t.shape == y.shape and t.shape[1] == 32
assert (t[:, 1:] == y[:, :-1]).all() and (y[:-1, -1] == t[1:, 0]).all()
assert 0 <= t.min() and t.max() < 256
assert 0 < len(v["tokens"]) < len(t) / 4
text = open(sys.argv[3], "rb").read()
assert bytes(t[0].astype(np.uint8)) in text
print("ok", t.shape[1])' "$T/t.npz" "$T/v.npz" "$FORTUNES"
    assert_success
    assert_output "ok 32"
}

@test "make-tokens: a missing file or a binary one exits 1, a bad --seq 2, no output left" {
    need_numpy
    run --separate-stderr "$PY" "$MAKE_TOKENS" -o "$T/t.npz" "$T/none.txt"
    assert_failure 1
    [[ "$stderr" == "make-tokens: $T/none.txt: error: No such file or directory" ]] || { echo "$stderr"; return 1; }
    printf 'ab\0cd' > "$T/bin.dat"
    run --separate-stderr "$PY" "$MAKE_TOKENS" -o "$T/t.npz" "$T/bin.dat"
    assert_failure 1
    [[ "$stderr" == *"bin.dat: error: a NUL byte at offset 2: not a text file" ]] || { echo "$stderr"; return 1; }
    printf 'tiny' > "$T/tiny.txt"
    run --separate-stderr "$PY" "$MAKE_TOKENS" --seq 8 -o "$T/t.npz" "$T/tiny.txt"
    assert_failure 1
    [[ "$stderr" == *"4 bytes of text: need at least 9 for one sequence of --seq 8" ]] || { echo "$stderr"; return 1; }
    run --separate-stderr "$PY" "$MAKE_TOKENS" --seq 0 -o "$T/t.npz" "$T/tiny.txt"
    assert_failure 2
    [ ! -e "$T/t.npz" ]
}

@test "mge-run --generate: the prompt and N bytes, the same for the same --seed" {
    need_numpy
    need_fortunes
    write_bigram
    "$PY" "$MAKE_TOKENS" --seq 32 -o "$T/t.npz" "$FORTUNES"
    "$MGE_BIN/mge-train" "$T/bigram.mgt" --data "$T/t.npz" --batch 32 --epochs 2 --optimizer adam --lr 0.05 \
        -q -o "$T/bigram.mge"
    "$MGE_RUN" "$T/bigram.mge" --generate 80 --prompt 'The ' --temperature 0.8 --top-k 40 --seed 1 \
        --context 16 > "$T/a.txt"
    "$MGE_RUN" "$T/bigram.mge" --generate 80 --prompt 'The ' --temperature 0.8 --top-k 40 --seed 1 \
        --context 16 --threads 1 > "$T/b.txt"
    "$MGE_RUN" "$T/bigram.mge" --generate 80 --prompt 'The ' --temperature 0.8 --top-k 40 --seed 2 \
        --context 16 > "$T/c.txt"
    cmp "$T/a.txt" "$T/b.txt"
    ! cmp -s "$T/a.txt" "$T/c.txt"
    [ "$(wc -c < "$T/a.txt")" -eq 84 ]
    [ "$(head -c 4 "$T/a.txt")" = "The " ]
    # a trained bigram writes mostly letters and spaces, not uniform noise
    run pyq '
b = open(sys.argv[1], "rb").read()[4:]
print(sum(c == 32 or 97 <= c <= 122 for c in b) > len(b) // 2)' "$T/a.txt"
    assert_output "True"
    # greedy: the best byte each time ("The " is followed by the commonest next bytes)
    run "$MGE_RUN" "$T/bigram.mge" --generate 12 --prompt 'The ' --greedy --context 16
    assert_success
    [ "${#output}" -eq 16 ]
}

@test "--generate refuses a model that is no language model, and bad sampling options" {
    write_bigram
    write_mlp "$T/mlp.mgt"
    run --separate-stderr "$MGE_RUN" "$T/mlp.mgt" --generate 5 --context 4
    assert_failure 1
    [[ "$stderr" == *"error: --generate needs a language model: its input 'x' is f32[N,4]: expected the tokens, i32 or i64 [N,S]" ]] || { echo "$stderr"; return 1; }
    run --separate-stderr "$MGE_RUN" "$T/bigram.mgt" --generate 5 --output loss --context 4
    assert_failure 1
    [[ "$stderr" == *"error: --generate needs a language model: 'loss' should depend on one input, the tokens (i32 or i64 [N,S]); it needs 2" ]] || { echo "$stderr"; return 1; }
    run --separate-stderr "$MGE_RUN" "$T/bigram.mgt" --generate 5
    assert_failure 1
    [[ "$stderr" == *"error: --generate: the context length is not in the model (dim 1 of 'tokens' is symbolic and no position table was found): give --context P" ]] || { echo "$stderr"; return 1; }
    for bad in 0 -1; do
        run --separate-stderr "$MGE_RUN" "$T/bigram.mgt" --generate 5 --temperature "$bad"
        assert_failure 2
        [[ "$stderr" == *"--temperature"* ]] || { echo "$stderr"; return 1; }
    done
    run --separate-stderr "$MGE_RUN" "$T/bigram.mgt" --temperature 0.5
    assert_failure 2
    [[ "$stderr" == *"--temperature needs --generate N"* ]]
    run --separate-stderr "$MGE_RUN" "$T/bigram.mgt" --generate 5 --greedy --top-k 3
    assert_failure 2
    run --separate-stderr "$MGE_RUN" "$T/bigram.mgt" --generate 5 -o "$T/x.npy"
    assert_failure 2
    [ ! -e "$T/x.npy" ]
}

@test "gpt-tiny: mge-train's loss falls on the fortunes, and the model writes text (the README's commands, shorter)" {
    need_numpy
    need_fortunes
    "$PY" "$MAKE_TOKENS" --seq 32 --val "$T/val.npz" -o "$T/tokens.npz" "$FORTUNES"
    "$MGE_BIN/mge-train" "$SAMPLES/gpt-tiny.mgt" --data "$T/tokens.npz" --val "$T/val.npz" --optimizer adamw \
        --lr 0.003 --batch 16 --steps 40 --seed 1 -q -o "$T/gpt.mge" --log "$T/log.jsonl"
    run pyq '
import json
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["loss"] for r in rows if r["kind"] == "step"]
ep = [r for r in rows if r["kind"] == "epoch"]
last = sum(steps[-5:]) / 5
assert len(steps) == 40 and last < 0.7 * steps[0], (steps[0], last)
assert ep and ep[-1]["val_loss"] < 0.8 * steps[0], ep
print("falls")' "$T/log.jsonl"
    assert_output "falls"
    "$MGE_RUN" "$T/gpt.mge" --generate 120 --prompt 'The ' --temperature 0.8 --top-k 40 --seed 1 > "$T/a.txt"
    "$MGE_RUN" "$T/gpt.mge" --generate 120 --prompt 'The ' --temperature 0.8 --top-k 40 --seed 1 \
        --threads 1 > "$T/b.txt"
    cmp "$T/a.txt" "$T/b.txt"
    [ "$(wc -c < "$T/a.txt")" -eq 124 ]
    # the context length comes from the position table (64 rows): 120 bytes
    # go past it, so the last steps feed a window of the last 64
    run pyq '
b = open(sys.argv[1], "rb").read()[4:]
print(sum(c in b" \n.,'\''" or 97 <= c <= 122 or 65 <= c <= 90 for c in b) > 0.8 * len(b))' "$T/a.txt"
    assert_output "True"
    # an explicit context longer than the table fails naming it, before any text
    run --separate-stderr "$MGE_RUN" "$T/gpt.mge" --generate 80 --context 100 --prompt 'The '
    assert_failure 1
    [[ "$stderr" == *"error: --context 100: the position table 'pos_emb.weight' has 64 rows" ]] || { echo "$stderr"; return 1; }
    [ -z "$output" ]
}
