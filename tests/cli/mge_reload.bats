#!/usr/bin/env bats
# A model whose node shapes depend on const values (range with const bounds,
# reshape by a const shape) survives mge-opt to .mge and mge-run from it:
# the reader binds const data before it rebuilds the nodes.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

@test "mge-opt -O0 to .mge then mge-run: range and reshape from consts, two batches in one stream" {
    need_numpy
    cat > "$T/r.mgt" <<'M'
input x : f32[N,4]
const zero : i64[] = [0]
const lim : i64[] = [4]
const one : i64[] = [1]
const sh : i64[3] = [-1, 2, 2]
r = range(zero, lim, one)
rf = cast(r, dtype=f32)
y = add(x, rf)
z = reshape(y, sh)
output z
M
    run -0 "$MGE_OPT" -O0 "$T/r.mgt" -o "$T/r.mge"
    "$PY" -c 'import numpy as np, sys
with open(sys.argv[1], "wb") as f:
    np.save(f, np.ones((1, 4), np.float32)); np.save(f, np.full((3, 4), 2, np.float32))' "$T/x.npy"
    run -0 "$MGE_RUN" "$T/r.mge" -i "$T/x.npy" -o "$T/z.npy"
    run -0 "$PY" -c 'import numpy as np, sys
with open(sys.argv[1], "rb") as f:
    a = np.load(f); b = np.load(f)
r = np.arange(4, dtype=np.float32)
assert a.shape == (1, 2, 2) and np.array_equal(a, (1 + r).reshape(1, 2, 2)), a
assert b.shape == (3, 2, 2) and np.array_equal(b, np.tile(2 + r, (3, 1)).reshape(3, 2, 2)), b
print("ok")' "$T/z.npy"
    [ "$output" = ok ]
}
