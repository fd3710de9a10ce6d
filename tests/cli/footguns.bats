#!/usr/bin/env bats
# Silent footguns: a tool whose input would come from a terminal says so
# instead of waiting without a word (cli_stdin_ready), and a printed text
# form, which carries no weights, does not quietly become a model with
# random ones.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    command -v script > /dev/null || skip "script (util-linux) not installed: no pseudo-terminal to test with"
}

# on_tty 'COMMAND': runs it with stdin, stdout and stderr on a pseudo-terminal.
# script ends the terminal's input when its own stdin (here /dev/null)
# ends, so a tool that reads the terminal sees an empty input rather than
# hanging; the timeout only guards the test run itself.
on_tty() {
    run timeout 60 script -qec "$1" /dev/null < /dev/null
}

@test "every tool refuses to read a model, data or weights from a terminal, saying so" {
    write_mlp
    write_small
    make_mlp_mge
    cd "$T"
    for cmd in "$MGE_OPT -o out" "$MGE_RUN -o out" "$MGE_BIN/mge-quant --dtype f16 -o out" \
        "$MGE_BIN/mge-bench -" "$MGE_BIN/mge-prof -" "$MGE_BIN/mge-train - --data x.npz -o out"; do
        on_tty "$cmd"
        assert_failure 1
        assert_output --partial "not reading a model from a terminal"
        assert_output --partial "(-f reads the terminal)"
        [ ! -e out ]
    done
    # mge-dump reads models and tensors alike
    on_tty "$MGE_DUMP"
    assert_output --partial "not reading the input from a terminal"
    on_tty "$MGE_BIN/mge-train small.mgt --data - -o out"
    assert_failure 1
    assert_output --partial "not reading data from a terminal: give --data FILE or redirect stdin"
    on_tty "$MGE_BIN/mge-train small.mgt --data x.npz --weights - -o out"
    assert_failure 1
    assert_output --partial "not reading weights (.npz) from a terminal"
    on_tty "$MGE_OPT mlp.mgt --weights - -o out"
    assert_failure 1
    assert_output --partial "not reading weights (.npz) from a terminal"
    on_tty "$MGE_BIN/mge-quant mlp.mge --calib - -o out"
    assert_failure 1
    assert_output --partial "not reading calibration data from a terminal"
    on_tty "$MGE_RUN mlp.mge --data - -o out"
    assert_failure 1
    assert_output --partial "not reading data from a terminal"
    for cmd in "$MGE_OPT mlp.mge --verify --input - -o out" "$MGE_BIN/mge-bench mlp.mge --input -" \
        "$MGE_BIN/mge-prof mlp.mge --input -"; do
        on_tty "$cmd"
        assert_failure 1
        assert_output --partial "not reading NPY records from a terminal: give --input FILE"
    done
    [ ! -e out ]
}

@test "mge-run still refuses NPY records typed on a terminal, now in the shared words" {
    make_mlp_mge
    on_tty "'$MGE_RUN' '$T/mlp.mge' -o '$T/out.npy'"
    assert_failure 1
    assert_output --partial "not reading NPY records from a terminal: redirect stdin or use --input FILE"
    [ ! -e "$T/out.npy" ]
}

@test "-f reads the terminal anyway and says it does" {
    on_tty "'$MGE_DUMP' -f"
    assert_failure 1
    assert_output --partial "mge-dump: reading the input from the terminal (end it with Ctrl-D)"
    assert_output --partial "the input is empty"
    on_tty "'$MGE_OPT' -f -S"
    assert_output --partial "mge-opt: reading a model from the terminal"
}

@test "a file or a pipe is read as before" {
    write_mlp
    run bash -c "cat '$T/mlp.mgt' | '$MGE_DUMP'"
    assert_success
    assert_output --partial "linear"
    run "$MGE_DUMP" < "$T/mlp.mgt"
    assert_success
    run "$MGE_OPT" -S < "$T/mlp.mgt"
    assert_success
}

@test "mge-dump MODEL.mge | mge-opt warns, without -v, that the weights are not in the text" {
    make_mlp_mge
    run --separate-stderr bash -c "'$MGE_DUMP' '$T/mlp.mge' | '$MGE_OPT' -o '$T/rt.mge'"
    assert_success
    [[ "$stderr" == *"mge-opt: <stdin>: warning: 4 parameters without values initialized at random (seed 0)"* ]] ||
        { echo "$stderr"; false; }
    [[ "$stderr" == *"mge-dump MODEL.mge --params w.npz"*"--weights w.npz"* ]]
    # the same for a printed file, for mge-opt -S's output, and for mge-run
    "$MGE_DUMP" "$T/mlp.mge" > "$T/printed.mgt"
    run --separate-stderr "$MGE_OPT" "$T/printed.mgt" -o "$T/rt.mge"
    [[ "$stderr" == *"mge-opt: $T/printed.mgt: warning: 4 parameters without values"* ]] || { echo "$stderr"; false; }
    "$MGE_OPT" -S "$T/mlp.mge" > "$T/s.mgt" 2> /dev/null
    run --separate-stderr "$MGE_OPT" "$T/s.mgt" -o "$T/rt.mge"
    [[ "$stderr" == *"warning: 4 parameters without values"* ]]
    npys "$T/x.npy" f32:2x4:1
    run --separate-stderr "$MGE_RUN" "$T/printed.mgt" -o "$T/y.npy" < "$T/x.npy"
    assert_success
    [[ "$stderr" == *"mge-run: $T/printed.mgt: warning: 4 parameters without values initialized at random"* ]]
    # -q silences it
    run --separate-stderr bash -c "'$MGE_DUMP' '$T/mlp.mge' | '$MGE_OPT' -q -o '$T/rt.mge'"
    assert_success
    [ -z "$stderr" ]
}

@test "no warning when the weights are bound, or for a text written by hand" {
    need_numpy
    make_mlp_mge
    "$MGE_DUMP" "$T/mlp.mge" --params "$T/w.npz" > "$T/printed.mgt"
    run --separate-stderr "$MGE_OPT" "$T/printed.mgt" --weights "$T/w.npz" -o "$T/rt.mge"
    assert_success
    [ -z "$stderr" ]
    # the round trip keeps the weights
    "$MGE_DUMP" "$T/rt.mge" --params "$T/w2.npz" > /dev/null
    run py 'a = np.load(sys.argv[1]); b = np.load(sys.argv[2]); print(all(np.array_equal(a[k], b[k]) for k in a.files))' "$T/w.npz" "$T/w2.npz"
    assert_output "True"
    # a hand-written text initializes its parameters as its init= say: no warning
    run --separate-stderr "$MGE_OPT" "$T/mlp.mgt" -o "$T/m.mge"
    assert_success
    [ -z "$stderr" ]
}
