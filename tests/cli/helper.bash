# helper.bash — shared setup for the CLI tests (bats).
# make check sets MGE_BIN to the directory of the built tools.
load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load

: "${MGE_BIN:=$BATS_TEST_DIRNAME/../../bin}"
MGE_RUN="$MGE_BIN/mge-run"
MGE_DUMP="$MGE_BIN/mge-dump"
MGE_OPT="$MGE_BIN/mge-opt"
PY=${PYTHON:-/usr/bin/python3}
SAMPLES="$BATS_TEST_DIRNAME/../../samples/nets"
T="$BATS_TEST_TMPDIR"

# Tests that build data with numpy say so visibly when it is missing.
need_numpy() {
    "$PY" -c 'import numpy' 2>/dev/null || skip "numpy not installed ($PY)"
}

# py 'code' ARGS...: runs python with numpy imported as np; sys.argv[1:] = ARGS.
py() {
    local code=$1
    shift
    "$PY" -c "import sys, numpy as np
$code" "$@"
}

# pyq 'code' ARGS...: python without numpy (fast start).
pyq() {
    local code=$1
    shift
    "$PY" -c "import sys
$code" "$@"
}

# A small MLP: x f32[N,4] -> fc2 f32[N,3].
write_mlp() {
    cat > "${1:-$T/mlp.mgt}" <<'NET'
# mlp for the CLI tests
input x : f32[N,4]
fc1 = linear(x, out=8)
act1 = relu(fc1)
fc2 = linear(act1, out=3)
output fc2
NET
}

# Two inputs, two outputs: sum = a + b, prod = a * b (all f32[N,3]).
write_two() {
    cat > "${1:-$T/two.mgt}" <<'NET'
input a : f32[N,3]
input b : f32[N,3]
sum = add(a, b)
prod = mul(a, b)
output sum, prod
NET
}

# A small conv net with a dead branch (for -O1/dce) and a loss.
write_conv() {
    cat > "${1:-$T/conv.mgt}" <<'NET'
input x : f32[N,1,8,8]
input label : i32[N]
conv1 = conv2d(x, out=4, kernel=3, pad=1)
relu1 = relu(conv1)
pool1 = maxpool2d(relu1, kernel=2)
unused = sigmoid(pool1)
flat = flatten(pool1)
fc = linear(flat, out=5)
loss = cross_entropy(fc, label)
output fc
minimize loss
NET
}

# A tiny classifier over x f32[N,4] with labels i32[N] in [0,3).
write_small() {
    cat > "$T/small.mgt" <<'NET'
input x : f32[N,4]
input label : i32[N]
fc1 = linear(x, out=8)
act1 = relu(fc1)
fc2 = linear(act1, out=3)
loss = cross_entropy(fc2, label)
output fc2
minimize loss
NET
}

# mlp.mge built with mge-opt (the tools under test).
make_mlp_mge() {
    write_mlp "$T/mlp.mgt"
    "$MGE_OPT" "$T/mlp.mgt" -o "$T/mlp.mge"
}

# npy FILE 'numpy expression' ...: saves each expression as one record.
npy_records() {
    local f=$1
    shift
    py 'f = open(sys.argv[1], "wb")
for e in sys.argv[2:]:
    np.save(f, eval(e, {"np": np}))
f.close()' "$f" "$@"
}

# Without numpy (tests/cli/npy.py starts fast):
# npys FILE DTYPE:DIMS:FILL ...: one record per spec (FILL: number, arange, rand).
npys() {
    "$PY" "$BATS_TEST_DIRNAME/npy.py" save "$@"
}
# Number of complete NPY records in a file (fails on a truncated one).
npy_count() {
    "$PY" "$BATS_TEST_DIRNAME/npy.py" count "$1"
}
# Per record: dtype, shape (2x3), first value.
npy_show() {
    "$PY" "$BATS_TEST_DIRNAME/npy.py" show "$1"
}
