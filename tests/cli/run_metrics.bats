#!/usr/bin/env bats
# mge-run --metrics/--accuracy on models with and without their loss
# (optimized, quantized), --top-k with class names, --json for scripts,
# and the errors of each.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
}

# lenet trained a little (30 steps) on the bundled sample, as $T/m.mge, and
# -O2 (which strips the loss) as $T/o2.mge
train_lenet() {
    "$MGE_BIN/mge-train" -q "$SAMPLES/lenet.mgt" --data "$FM/train" --steps 30 --optimizer adam -o "$T/m.mge"
    "$MGE_OPT" -O2 "$T/m.mge" -o "$T/o2.mge"
}

# numpy's accuracy and top-5 of logits file $1 against the t10k labels
np_scores() {
    py 'import gzip
y = np.load(sys.argv[1])
lab = np.frombuffer(gzip.open(sys.argv[2]).read()[8:], np.uint8).astype(np.int64)
acc = int((y.argmax(1) == lab).sum())
rank = (y > y[np.arange(len(lab)), lab][:, None]).sum(1)
print(acc, int((rank < 5).sum()), len(lab))' "$1" "$FM/t10k-labels-idx1-ubyte.gz"
}

@test "an -O2 model without its loss is scored from its output and the data's labels" {
    need_numpy
    train_lenet
    run "$MGE_DUMP" --json "$T/o2.mge"
    refute_output --partial cross_entropy
    run --separate-stderr "$MGE_RUN" "$T/o2.mge" --data "$FM/t10k" --accuracy
    assert_success
    [[ "$output" =~ ^accuracy\ 0\.[0-9]{4}\ \(([0-9]+)\ of\ 1000\)$ ]]
    n=${BASH_REMATCH[1]}
    # the same as the model with its loss, and as numpy on the logits
    run "$MGE_RUN" "$T/m.mge" --data "$FM/t10k" --accuracy
    [[ "$output" == *"($n of 1000)" ]]
    "$MGE_RUN" "$T/o2.mge" --data "$FM/t10k" -o "$T/y.npy"
    run np_scores "$T/y.npy"
    [[ "$output" == "$n "* ]]
}

@test "--metrics accuracy,top5 --json matches numpy; keys for scripts" {
    need_numpy
    train_lenet
    "$MGE_RUN" "$T/o2.mge" --data "$FM/t10k" -o "$T/y.npy"
    read -r acc top5 n < <(np_scores "$T/y.npy")
    run --separate-stderr "$MGE_RUN" "$T/o2.mge" --data "$FM/t10k" --metrics accuracy,top5 --json --batch 100
    assert_success
    run pyq 'import json
d = json.loads(sys.argv[1])
print(d["output"], d["samples"], d["accuracy_correct"], d["top5_correct"], round(d["accuracy"] * d["samples"]))' "$output"
    assert_output "fc2 1000 $acc $top5 $acc"
    # the text form, one line each
    run "$MGE_RUN" "$T/o2.mge" --data "$FM/t10k" --metrics top5,accuracy
    assert_line --index 0 --regexp "^top5 0\.[0-9]{4} \($top5 of 1000\)$"
    assert_line --index 1 --regexp "^accuracy 0\.[0-9]{4} \($acc of 1000\)$"
}

@test "a quantized model is scored like the f32 one" {
    train_lenet
    "$MGE_BIN/mge-quant" -q "$T/o2.mge" --calib "$FM/train" --batches 2 -o "$T/q.mge"
    run "$MGE_RUN" "$T/q.mge" --data "$FM/t10k" --metrics accuracy --json
    assert_success
    run pyq 'import json; d = json.loads(sys.argv[1]); print(d["samples"], d["accuracy"] > 0.3)' "$output"
    assert_output "1000 True"
}

@test "regression metrics mse, rmse, mae, r2 match numpy; --target names the labels" {
    need_numpy
    cat > "$T/reg.mgt" <<'NET'
input x : f32[N,2]
s = sum(x, axis=1)
output s
NET
    py 'r = np.random.default_rng(0)
x = r.normal(size=(50, 2)).astype(np.float32)
y = (x.sum(1) + 0.1 * r.normal(size=50)).astype(np.float32)
np.savez(sys.argv[1], x=x, y=y, other=np.zeros(50, np.float32))
p = x.sum(1).astype(np.float64); y = y.astype(np.float64)
e = p - y
print("%.6g %.6g %.6g %.6g" % ((e**2).mean(), np.sqrt((e**2).mean()), abs(e).mean(),
      1 - (e**2).sum() / ((y - y.mean())**2).sum()))' "$T/d.npz" > "$T/want"
    run "$MGE_RUN" -q "$T/reg.mgt" --data "$T/d.npz" --metrics mse,rmse,mae,r2 --batch 7
    assert_success
    read -r mse rmse mae r2 < "$T/want"
    assert_output "$(printf 'mse %s\nrmse %s\nmae %s\nr2 %s' "$mse" "$rmse" "$mae" "$r2")"
    # --target picks another array: all-zero targets
    run "$MGE_RUN" -q "$T/reg.mgt" --data "$T/d.npz" --metrics mae --target other --json
    assert_success
    [[ "$output" == *'"samples": 50, "mae": '* ]]
    run "$MGE_RUN" -q "$T/reg.mgt" --data "$T/d.npz" --metrics mae --target nosuch
    assert_failure 1
    assert_output --partial "--target: no array 'nosuch' (the arrays: 'x', 'y', 'other')"
}

@test "--metrics errors: outputs that do not fit the labels, labels out of range, no labels" {
    need_numpy
    write_mlp
    # labels [N] and a 3-class output: a label 7 is not a class
    py 'np.savez(sys.argv[1], x=np.zeros((4, 4), np.float32), label=np.array([0, 1, 7, 2]))' "$T/c.npz"
    run "$MGE_RUN" -q "$T/mlp.mgt" --data "$T/c.npz" --accuracy
    assert_failure 1
    assert_output --partial "label 7 of sample 2 ('label') is not a class of output 'fc2' (0 to 2)"
    # regression labels [N,2] against a 3-value output
    py 'np.savez(sys.argv[1], x=np.zeros((4, 4), np.float32), y=np.zeros((4, 2), np.float32))' "$T/r.npz"
    run "$MGE_RUN" -q "$T/mlp.mgt" --data "$T/r.npz" --metrics mse
    assert_failure 1
    assert_output --partial "output 'fc2' is f32[4,3] but the labels ('y') are f32[4,2]: mse needs one label per output value"
    # accuracy on [N,2] labels
    run "$MGE_RUN" -q "$T/mlp.mgt" --data "$T/r.npz" --metrics top2
    assert_failure 1
    assert_output --partial "needs one class index per sample"
    # top5 of 3 classes
    run "$MGE_RUN" -q "$T/mlp.mgt" --data "$T/c.npz" --metrics top5
    assert_failure 1
    assert_output --partial "output 'fc2' has 3 classes, fewer than 5"
    # a dataset without labels
    py 'np.savez(sys.argv[1], x=np.zeros((4, 4), np.float32))' "$T/x.npz"
    run "$MGE_RUN" -q "$T/mlp.mgt" --data "$T/x.npz" --metrics accuracy
    assert_failure 1
    assert_output --partial "no labels"
    # an IDX file alone: one array for one input
    run "$MGE_RUN" -q "$SAMPLES/lenet.mgt" --data "$FM/t10k-images-idx3-ubyte.gz" --metrics accuracy
    assert_failure 1
    assert_output --partial "no labels: 1 array for the model's 1 input"
}

@test "--metrics usage errors" {
    make_mlp_mge
    run "$MGE_RUN" "$T/mlp.mge" --metrics accuracy
    assert_failure 2
    assert_output --partial "--metrics needs --data"
    run "$MGE_RUN" "$T/mlp.mge" --data x.npz --metrics f1
    assert_failure 2
    assert_output --partial "unknown metric 'f1'"
    run "$MGE_RUN" "$T/mlp.mge" --data x.npz --metrics accuracy,accuracy
    assert_failure 2
    run "$MGE_RUN" "$T/mlp.mge" --data x.npz --metrics top0
    assert_failure 2
    run "$MGE_RUN" "$T/mlp.mge" --data x.npz --json
    assert_failure 2
    assert_output --partial "--json needs --metrics"
    run "$MGE_RUN" "$T/mlp.mge" --target y < /dev/null
    assert_failure 2
}

@test "--top-k prints the K best classes with names; matches numpy's order" {
    need_numpy
    train_lenet
    "$MGE_RUN" "$T/o2.mge" --data "$FM/t10k" -o "$T/y.npy"
    printf '%s\n' tshirt trouser pullover dress coat sandal shirt sneaker bag boot > "$T/names.txt"
    run --separate-stderr "$MGE_RUN" "$T/o2.mge" --data "$FM/t10k" --top-k 3 --labels "$T/names.txt" --batch 300
    assert_success
    [ "${#lines[@]}" = 3000 ]
    printf '%s\n' "${lines[@]}" > "$T/top.txt"
    run py 'y = np.load(sys.argv[1]); names = open(sys.argv[3]).read().split()
rows = [l.split("\t") for l in open(sys.argv[2]).read().splitlines()]
bad = 0
for i, r in enumerate(rows):
    s, k = divmod(i, 3)
    want = np.argsort(-y[s], kind="stable")[k]
    bad += r[0] != str(s) or r[1] != str(k + 1) or r[2] != str(want) or r[4] != names[want] \
        or abs(float(r[3]) - y[s, want]) > 1e-4 * max(1, abs(y[s, want]))
print(len(rows), bad)' "$T/y.npy" "$T/top.txt" "$T/names.txt"
    assert_output "3000 0"
}

@test "--top-k --softmax --json on a stream: probabilities, classes, names" {
    need_numpy
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:rand f32:1x4:1
    printf 'a\nb\nc\n' > "$T/n.txt"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/y.npy"
    run "$MGE_RUN" "$T/mlp.mge" --top-k 2 --softmax --labels "$T/n.txt" --json < "$T/x.npy"
    assert_success
    run py 'import json
d = json.loads(sys.argv[2]); f = open(sys.argv[1], "rb")
y = np.concatenate([np.load(f), np.load(f)])
p = np.exp(y - y.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
assert d["samples"] == 3 and len(d["top_k"]) == 3, d
for i, t in enumerate(d["top_k"]):
    o = np.argsort(-p[i], kind="stable")[:2]
    assert t["sample"] == i and t["classes"] == o.tolist(), (t, o)
    assert np.allclose(t["scores"], p[i, o], atol=1e-6), t
    assert t["names"] == ["abc"[c] for c in o], t
print("ok")' "$T/y.npy" "$output"
    assert_output "ok"
}

@test "--top-k errors: K 0, K above the classes, a labels file with too few names, not [N,C]" {
    make_mlp_mge
    npys "$T/x.npy" f32:2x4:1
    run "$MGE_RUN" "$T/mlp.mge" --top-k 0 < "$T/x.npy"
    assert_failure 2
    assert_output --partial "--top-k: 0 is out of range"
    run "$MGE_RUN" "$T/mlp.mge" --top-k 4 < "$T/x.npy"
    assert_failure 1
    assert_output --partial "--top-k 4: output 'fc2' has only 3 classes"
    printf 'a\nb\n' > "$T/two.txt"
    run "$MGE_RUN" "$T/mlp.mge" --top-k 1 --labels "$T/two.txt" < "$T/x.npy"
    assert_failure 1
    assert_output --partial "two.txt: error: 2 class names, but output 'fc2' has 3 classes"
    printf 'a\nb\nc\nd\n' > "$T/four.txt"
    run --separate-stderr "$MGE_RUN" "$T/mlp.mge" --top-k 1 --labels "$T/four.txt" < "$T/x.npy"
    assert_success
    [[ "$stderr" == *"warning: 4 class names, but output 'fc2' has 3 classes"* ]]
    run "$MGE_RUN" "$T/mlp.mge" --top-k 1 --labels "$T/nosuch.txt" < "$T/x.npy"
    assert_failure 1
    assert_output --partial "nosuch.txt"
    run "$MGE_RUN" "$T/mlp.mge" --labels "$T/two.txt" < "$T/x.npy"
    assert_failure 2
    assert_output --partial "--labels needs --top-k"
    cat > "$T/vec.mgt" <<'NET'
input x : f32[N,4]
s = sum(x, axis=1)
output s
NET
    run "$MGE_RUN" -q "$T/vec.mgt" --top-k 1 < "$T/x.npy"
    assert_failure 1
    assert_output --partial "--top-k: output 's' is f32[2]: class scores [N,C] are needed"
}
