#!/usr/bin/env bats
# Every tool's --help ends with examples, and every example runs as shown
# on the files it names (made here: net.mgt, net.mge, x.npy, y.npy, d.npz,
# w.npz, net.O2.mge).

bats_require_minimum_version 1.5.0

TOOLS="mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant"

setup() {
    load helper
}

# The example lines of TOOL's --help: the indented lines after "Examples:".
examples() {
    "$MGE_BIN/$1" --help | sed -n '/^Examples:$/,$p' | sed -n 's/^  \(mge-.*\)/\1/p'
}

# The files the examples name, in the current directory.
make_fixtures() {
    cat > net.mgt <<'NET'
input x : f32[N,4]
input label : i32[N]
fc1 = linear(x, out=8)
act1 = relu(fc1)
fc2 = linear(act1, out=3)
loss = cross_entropy(fc2, label)
output fc2
minimize loss
NET
    "$MGE_OPT" net.mgt -o net.mge
    "$MGE_OPT" -O2 net.mge -o net.O2.mge
    npys x.npy f32:8x4:rand f32:8x4:rand
    "$MGE_RUN" net.mge < x.npy > y.npy
    "$MGE_DUMP" net.mge --params w.npz > /dev/null
    py 'rng = np.random.default_rng(0)
x = rng.standard_normal((64, 4)).astype(np.float32)
np.savez("d.npz", x=x, label=(x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0).astype(np.int32))'
}

@test "each tool's --help ends with two or three examples of itself" {
    for tool in $TOOLS; do
        help=$("$MGE_BIN/$tool" --help)
        # the examples are the last thing
        last=$(sed -n '/^Examples:$/,$p' <<< "$help")
        [ -n "$last" ] || { echo "$tool: no Examples:"; return 1; }
        n=$(examples "$tool" | wc -l)
        [ "$n" -ge 2 ] && [ "$n" -le 3 ] || { echo "$tool: $n examples"; return 1; }
        # nothing but examples after the heading
        [ "$(sed 1d <<< "$last" | grep -cv "^  $tool ")" = 0 ] || { echo "$tool: stray lines after Examples:"; return 1; }
    done
}

@test "every example in --help runs as shown" {
    need_numpy
    cd "$T"
    make_fixtures
    export PATH="$MGE_BIN:$PATH"
    ran=0
    for tool in $TOOLS; do
        while IFS= read -r cmd; do
            run bash -c "$cmd" < /dev/null
            [ "$status" -eq 0 ] || { echo "$cmd: exit $status: $output"; return 1; }
            ran=$((ran + 1))
        done < <(examples "$tool")
    done
    [ "$ran" -ge 14 ]
    # and they did what they say
    [ -s net.int8.mge ] && [ -s net.f16.mge ] && [ -s tuned.mge ] && [ -s step.json ] && [ -s run.csv ]
    grep -q '"kind":"model"' net.json
}
