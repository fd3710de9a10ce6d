#!/usr/bin/env bats
# mge-run --data FILE.csv: tabular data, headers, --columns, the labels
# column for --metrics, and errors that name the line and column.

bats_require_minimum_version 1.5.0

setup() {
    load helper
}

# mlp.mgt takes x f32[N,4]; a table of 4 features and a label
table() {
    cat > "$T/t.csv" <<'CSV'
f1,f2,"f 3",f4,label
0.5,1,2,3,0
-1, 2.5 ,3e-1,4,2
7,8,9,10,1
CSV
}

@test "a CSV's features give the outputs of the same numbers as NPY" {
    make_mlp_mge
    table
    pyq 'import struct
rows = [[0.5, 1, 2, 3], [-1, 2.5, 0.3, 4], [7, 8, 9, 10]]
h = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (3, 4), }"
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() +
    struct.pack("<12f", *sum(rows, [])))' "$T/x.npy"
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/ref.npy"
    # label is the labels column, left out of the features by default
    "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv" -o "$T/o.npy"
    cmp "$T/o.npy" "$T/ref.npy"
    # the same columns by name, number and range, and without a header
    "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv" --columns f1,2-3,f4 -o "$T/o2.npy"
    cmp "$T/o2.npy" "$T/ref.npy"
    tail -n +2 "$T/t.csv" | cut -d, -f1-4 > "$T/plain.csv"
    "$MGE_RUN" "$T/mlp.mge" --data "$T/plain.csv" -o "$T/o3.npy"
    cmp "$T/o3.npy" "$T/ref.npy"
    # CRLF line ends, a byte-order mark, blank lines, gzip
    { printf '\xef\xbb\xbf'; sed 's/$/\r/' "$T/t.csv"; printf '\r\n\r\n'; } > "$T/crlf.csv"
    "$MGE_RUN" "$T/mlp.mge" --data "$T/crlf.csv" -o "$T/o4.npy"
    cmp "$T/o4.npy" "$T/ref.npy"
    gzip -c "$T/t.csv" > "$T/t.csv.gz"
    "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv.gz" -o "$T/o5.npy"
    cmp "$T/o5.npy" "$T/ref.npy"
}

@test "the labels column scores --metrics; --target by name or number" {
    write_small
    table
    run "$MGE_RUN" -q "$T/small.mgt" --data "$T/t.csv" --metrics accuracy --json
    assert_success
    [[ "$output" == '{"output": "fc2", "samples": 3, "accuracy": '* ]]
    # the same column by number
    run "$MGE_RUN" -q "$T/small.mgt" --data "$T/t.csv" --metrics accuracy --target 5 --json
    assert_success
    [[ "$output" == '{"output": "fc2", "samples": 3, "accuracy": '* ]]
    # another column as labels: label becomes a feature, and f1 holds no class indices
    run "$MGE_RUN" -q "$T/small.mgt" --data "$T/t.csv" --metrics accuracy --target f1
    assert_failure 1
    assert_output --partial "label 0.5 of sample 0 (column 'f1') is not a class of output 'fc2' (0 to 2)"
    # regression on a float column
    cat > "$T/r.mgt" <<'NET'
input x : f32[N,2]
s = sum(x, axis=1)
output s
NET
    printf 'a,b,price\n1,2,3.5\n2,2,3.5\n3,3,6.5\n0,0,-1\n' > "$T/r.csv"
    run "$MGE_RUN" "$T/r.mgt" --data "$T/r.csv" --target price --metrics mse,mae
    assert_success
    assert_output "$(printf 'mse 0.4375\nmae 0.625')"
}

@test "CSV errors name the line and the column" {
    make_mlp_mge
    printf 'a,b,c,d\n1,2,3,4\n5,6,x7,8\n' > "$T/bad.csv"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/bad.csv" -o "$T/o.npy"
    assert_failure 1
    assert_output "mge-run: $T/bad.csv: error: line 3, column 3 ('c'): 'x7' is not a number"
    [ ! -e "$T/o.npy" ]
    printf 'a,b,c,d\n1,2,,4\n' > "$T/empty.csv"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/empty.csv"
    assert_failure 1
    assert_output --partial "line 2, column 3 ('c'): empty cell"
    printf '1,2,3,4\n5,6,7\n' > "$T/short.csv"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/short.csv"
    assert_failure 1
    assert_output --partial "line 2: 3 cells, but the first row has 4"
    printf 'a,b,c,d\n' > "$T/head.csv"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/head.csv"
    assert_failure 1
    assert_output --partial "no data rows after the header"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/bad.csv" --header no
    assert_failure 1
    assert_output --partial "line 1, column 1: 'a' is not a number"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/nosuch.csv"
    assert_failure 1
    assert_output --partial "nosuch.csv"
}

@test "CSV column errors: unknown, twice, the labels among the features, no labels, too few features" {
    make_mlp_mge
    table
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv" --columns f1,nope
    assert_failure 1
    assert_output --partial "--columns: no column 'nope' (the header has 'f1', 'f2', 'f 3', 'f4', 'label')"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv" --columns f1,1
    assert_failure 1
    assert_output --partial "listed twice"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv" --columns 2-5
    assert_failure 1
    assert_output --partial "column 5 ('label') holds the labels"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv" --columns 1-3
    assert_failure 1
    assert_output --partial "is f32[3,3]: does not fit input 'x' f32[N,4]; the features are 3 columns ('f1', 'f2', 'f 3')"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/t.csv" --target nope --metrics mse
    assert_failure 1
    assert_output --partial "--target: no column 'nope'"
    cut -d, -f1-4 "$T/t.csv" > "$T/nolab.csv"
    run "$MGE_RUN" "$T/mlp.mge" --data "$T/nolab.csv" --metrics accuracy
    assert_failure 1
    assert_output --partial "no labels column: name it with --target"
    write_two
    run "$MGE_RUN" -q "$T/two.mgt" --data "$T/t.csv"
    assert_failure 1
    assert_output --partial "a CSV file feeds one input, and the model needs 2"
}

@test "CSV usage errors" {
    run "$MGE_RUN" m.mge --columns a < /dev/null
    assert_failure 2
    assert_output --partial "--columns needs --data"
    run "$MGE_RUN" m.mge --data d.npz --header yes
    assert_failure 2
    assert_output --partial "--header is for CSV files"
    run "$MGE_RUN" m.mge --data d.csv --header maybe
    assert_failure 2
}
