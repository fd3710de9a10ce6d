#!/usr/bin/env bats
# --device: the simulated device against the cpu (same bits where the same
# kernels run), placement and copies as mge-dump and mge-prof show them,
# device plugins (loading, a wrong ABI), and bad device names.

bats_require_minimum_version 1.5.0

setup_file() {
    load helper
    export D="$BATS_FILE_TMPDIR"
    for n in lenet mlp resnet18 mobilenet_v2; do
        "$MGE_OPT" "$SAMPLES/$n.mgt" -o "$D/$n.mge"
        "$MGE_OPT" -O2 "$D/$n.mge" -o "$D/$n.O2.mge"
    done
    "$PY" -c 'import sys, numpy as np
r = np.random.default_rng(1)
with open(sys.argv[1], "wb") as f:
    for _ in range(2): np.save(f, r.random((3, 1, 28, 28), dtype=np.float32))
np.save(sys.argv[2], r.random((1, 3, 224, 224), dtype=np.float32))
np.save(sys.argv[3], r.random((5, 784), dtype=np.float32))' "$D/mnist.npy" "$D/img.npy" "$D/flat.npy"
}

setup() {
    load helper
    MGE_TRAIN="$MGE_BIN/mge-train"
    MGE_PROF="$MGE_BIN/mge-prof"
    MGE_BENCH="$MGE_BIN/mge-bench"
    MGE_QUANT="$MGE_BIN/mge-quant"
    FM="$BATS_TEST_DIRNAME/../../samples/data/fashion-mnist"
    PLUGINS=${MGE_TEST_PLUGINS:-$BATS_TEST_DIRNAME/../../build/rel/plugins}
}

# same_on_sim MODEL INPUT [MGE_SIM_OPS]: sim's outputs are cpu's, bit for bit
same_on_sim() {
    "$MGE_RUN" "$D/$1.mge" --threads 1 < "$D/$2" > "$T/cpu.npy"
    MGE_SIM_OPS=${3:-default} "$MGE_RUN" "$D/$1.mge" --threads 1 --device sim < "$D/$2" > "$T/sim.npy"
    cmp "$T/cpu.npy" "$T/sim.npy"
}

@test "mge-run on sim gives cpu's bits: lenet, resnet18, mobilenet_v2 at -O0 and -O2" {
    for m in lenet lenet.O2; do same_on_sim $m mnist.npy; done
    for m in resnet18 resnet18.O2 mobilenet_v2 mobilenet_v2.O2; do same_on_sim $m img.npy; done
}

@test "every op on sim, and none (everything falls back), give cpu's bits" {
    same_on_sim lenet mnist.npy all
    same_on_sim lenet mnist.npy none
    same_on_sim mobilenet_v2.O2 img.npy all
    same_on_sim resnet18 img.npy "all,-conv2d,-batchnorm"
}

@test "mge-dump --device sim shows the placement and the copies" {
    run --separate-stderr "$MGE_DUMP" "$D/lenet.mge" --device sim
    assert_success
    [[ "$output" == *"# placement on sim"* ]]
    [[ "$output" == *"#   cpu   pool1 maxpool2d"* ]]
    [[ "$output" == *"#   sim   conv1 conv2d"* ]]
    [[ "$output" == *"#   up    x.to_dev"* ]]
    [[ "$output" == *"# copies per run: 3 up"*"3 down"* ]]
    run --separate-stderr "$MGE_DUMP" "$D/lenet.mge" --device sim --json
    assert_success
    pyq 'import json
d = json.loads(sys.argv[1])["placement"]
assert d["device"] == "sim", d
nodes = d["nodes"]
assert {n["device"] for n in nodes if n["op"] == "maxpool2d"} == {"cpu"}, nodes
assert {n["device"] for n in nodes if n["op"] == "conv2d"} == {"sim"}, nodes
assert d["copies_up"] == sum(n["op"] == "copy" and n["to"] == "device" for n in nodes)
assert d["device_arena_bytes"] >= d["device_lower_bound"] > 0, d' "$output"
    # nothing claimed: no copies, nothing on the device
    MGE_SIM_OPS=none run --separate-stderr "$MGE_DUMP" "$D/lenet.mge" --device sim
    assert_success
    [[ "$output" == *"0 nodes there"* ]]
    [[ "$output" == *"0 up (0 B), 0 down (0 B)"* ]]
}

@test "the sim arena of resnet18 is within 1.05x of its lower bound" {
    for m in resnet18 resnet18.O2 mobilenet_v2; do
        run --separate-stderr "$MGE_DUMP" "$D/$m.mge" --device sim --json
        assert_success
        pyq 'import json
d = json.loads(sys.argv[1])["placement"]
assert d["device_arena_bytes"] <= 1.05 * d["device_lower_bound"], d' "$output"
    done
}

@test "mge-prof --device sim: copies are rows, and their count is what the device counted" {
    run --separate-stderr "$MGE_PROF" "$D/lenet.mge" --device sim --batch 4 --iters 3 --json
    assert_success
    pyq 'import json
d = json.loads(sys.argv[1])
assert d["device"] == "sim"
copies = [n for n in d["nodes"] if n["op"] == "copy"]
up = [n for n in copies if n["name"].endswith(".to_dev")]
assert len(copies) == 6 and len(up) == 3, copies
c = d["copies"]
assert c["up"] == 3 and c["down"] == 3, c
assert c["device_uploads"] == c["up"] and c["device_downloads"] == c["down"], c
assert c["device_upload_bytes"] == c["bytes_up"] and c["device_download_bytes"] == c["bytes_down"], c
devs = {n["name"]: n["device"] for n in d["nodes"]}
assert devs["conv1"] == "sim" and devs["pool1"] == "cpu", devs
assert d["by_device_ms"]["device"] > 0 and d["by_device_ms"]["copies"] > 0, d["by_device_ms"]' "$output"
    run --separate-stderr "$MGE_PROF" "$D/lenet.mge" --device sim --batch 4 --iters 2
    assert_success
    [[ "$output" == *"by device: cpu "*" ms, sim "*" ms, copies "* ]]
    [[ "$output" == *"copies per run: 3 up"* ]]
}

@test "mge-train on sim gives cpu's weights: lenet and the MLP, SGD and Adam, 50 steps" {
    for net in lenet mlp; do
        for opt in sgd adam; do
            "$MGE_TRAIN" "$SAMPLES/$net.mgt" --data "$FM" --optimizer $opt --steps 50 --batch 16 --threads 1 \
                -q -o "$T/cpu.mge"
            "$MGE_TRAIN" "$SAMPLES/$net.mgt" --data "$FM" --optimizer $opt --steps 50 --batch 16 --threads 1 \
                --device sim -q -o "$T/sim.mge"
            cmp "$T/cpu.mge" "$T/sim.mge"
        done
    done
}

@test "training on sim keeps the params there: a checkpoint mid-run resumes to the same weights" {
    "$MGE_TRAIN" "$SAMPLES/lenet.mgt" --data "$FM" --steps 20 --batch 16 --threads 1 -q -o "$T/full.mge"
    "$MGE_TRAIN" "$SAMPLES/lenet.mgt" --data "$FM" --steps 10 --batch 16 --threads 1 --device sim -q -o "$T/half.mge"
    "$MGE_TRAIN" "$SAMPLES/lenet.mgt" --data "$FM" --steps 20 --batch 16 --threads 1 --device sim -q \
        --resume "$T/half.mge" -o "$T/resumed.mge"
    cmp "$T/full.mge" "$T/resumed.mge"
    run --separate-stderr "$MGE_PROF" "$SAMPLES/lenet.mgt" --train --device sim --batch 8 --iters 2 --json
    assert_success
    # no param or optimizer moment is copied per step: only activations and
    # gradients crossing to the host ops, and the learning rate and step
    # (8 bytes, the one upload that is not a copy node)
    pyq 'import json, re
d = json.loads(sys.argv[1])
copies = [n for n in d["nodes"] if n["op"] == "copy"]
bad = [n["name"] for n in copies if re.search(r"[.](weight|bias|running_mean|running_var)[.]to_", n["name"])]
assert not bad, bad
# what the optimizer ops output (the update norms) are scalars
big = [n["name"] for n in copies if "__opt" in n["name"] and n["bytes_written"] > 4]
assert not big, big
c = d["copies"]
assert c["device_uploads"] == c["up"] + 1 and c["device_upload_bytes"] == c["bytes_up"] + 8, c' "$output"
}

@test "mge-bench --device sim reports the device memory; mge-quant calibrates on sim as on cpu" {
    run --separate-stderr "$MGE_BENCH" "$D/resnet18.mge" --device sim --iters 2 --threads 1 --json
    assert_success
    pyq 'import json
d = json.loads(sys.argv[1])
assert d["config"]["device"] == "sim"
r = d["results"][0]
assert r["device_persistent_bytes"] > 40e6, r          # the weights live in sim memory
assert r["device_peak_bytes"] >= r["device_persistent_bytes"] + r["device_arena_bytes"], r' "$output"
    "$MGE_QUANT" "$D/lenet.mge" --calib "$FM/t10k" --batches 2 --threads 1 -o "$T/q_cpu.mge"
    "$MGE_QUANT" "$D/lenet.mge" --calib "$FM/t10k" --batches 2 --threads 1 --device sim -o "$T/q_sim.mge"
    cmp "$T/q_cpu.mge" "$T/q_sim.mge"
    "$MGE_OPT" -O2 "$D/lenet.mge" --verify --device sim -o "$T/v.mge"
}

@test "bad devices: unknown names are usage errors listing the known ones" {
    for tool in mge-run mge-train mge-bench mge-prof mge-quant mge-dump mge-opt; do
        run --separate-stderr "$MGE_BIN/$tool" --device tpu "$D/lenet.mge"
        assert_failure 2
        [[ "$stderr" == *"unknown device 'tpu' (this build knows: cpu, sim, cuda"* ]]
    done
    run --separate-stderr "$MGE_RUN" "$D/lenet.mge" --device sim:1
    assert_failure 1
    [[ "$stderr" == *"sim has 1 device"* ]]
    run --separate-stderr "$MGE_RUN" "$D/lenet.mge" --device sim:x
    assert_failure 2
}

@test "cuda without its plugin fails saying which plugin was looked for where" {
    [ ! -e "$MGE_BIN/libmge-cuda.so" ] || skip "this build has the cuda plugin"
    run --separate-stderr "$MGE_RUN" "$D/lenet.mge" --device cuda < "$D/mnist.npy"
    assert_failure 1
    [[ "$stderr" == *"no plugin libmge-cuda.so (looked in $MGE_BIN"* ]]
    [[ "$stderr" == *"MGE_BACKEND_PATH"* ]]
}

@test "MGE_SIM_OPS with an unknown op is an error naming it" {
    MGE_SIM_OPS=conv2d,nosuchop run --separate-stderr "$MGE_RUN" "$D/lenet.mge" --device sim < "$D/mnist.npy"
    assert_failure 1
    [[ "$stderr" == *"MGE_SIM_OPS: unknown op 'nosuchop'"* ]]
}

@test "plugins: one without kernels runs everything on the host; a wrong ABI is refused by name" {
    [ -e "$PLUGINS/libmge-testnull.so" ] || skip "test plugins not built (make check builds them)"
    "$MGE_RUN" "$D/lenet.mge" < "$D/mnist.npy" > "$T/cpu.npy"
    MGE_BACKEND_PATH="$PLUGINS" "$MGE_RUN" "$D/lenet.mge" --device testnull < "$D/mnist.npy" > "$T/null.npy"
    cmp "$T/cpu.npy" "$T/null.npy"
    MGE_BACKEND_PATH="$PLUGINS" run --separate-stderr "$MGE_RUN" "$D/lenet.mge" --device badabi < "$D/mnist.npy"
    assert_failure 1
    # the bad plugin claims the ABI plus 100 (tests/plugins/testnull.c)
    local abi
    abi=$(sed -n 's/^#define MGE_BACKEND_ABI \([0-9]*\)u.*/\1/p' "$BATS_TEST_DIRNAME/../../kernels/backend.h")
    [ -n "$abi" ]
    [[ "$stderr" == *"libmge-badabi.so is built for backend ABI version $((abi + 100)); this libmge needs $abi"* ]]
    # without the path the plugin is not found, so the name is unknown
    run --separate-stderr "$MGE_RUN" "$D/lenet.mge" --device testnull
    assert_failure 2
}
