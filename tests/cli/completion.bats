#!/usr/bin/env bats
# completion/mge.bash: sourced, its completion function completes each
# tool's options (read from its --help), the values of options with a fixed
# set, and file names by the kind each place reads.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    COMPLETION="$BATS_TEST_DIRNAME/../../completion/mge.bash"
    # shellcheck source=/dev/null
    source "$COMPLETION"
    PATH="$MGE_BIN:$PATH"
    cd "$T"
    touch net.mgt net.mge x.npy w.npz notes.txt run.csv
    mkdir -p models
}

# complete WORD...: completes the last word of the command line WORD...;
# COMPREPLY's entries, sorted, one per line, in $output.
complete_line() {
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _mge_complete
    output=$(printf '%s\n' "${COMPREPLY[@]}" | sort)
}

@test "the script registers a completion for all seven tools" {
    for tool in mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant; do
        run complete -p "$tool"
        assert_success
        assert_output --partial "_mge_complete"
    done
}

@test "options come from each tool's --help" {
    complete_line mge-opt --we
    [ "$output" = "--weights" ]
    complete_line mge-opt --allow
    [ "$output" = "--allow-unused" ]
    complete_line mge-train --opt
    [ "$output" = "--optimizer" ]
    complete_line mge-prof --s
    [ "$output" = "$(printf '%s\n' --seed --shape --sort)" ]
    # every option of every tool is offered, and none from its examples or prose only
    for tool in mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant; do
        complete_line "$tool" -
        for o in $("$tool" --help | sed '/^Examples:/,$d' | grep -oE -- '^ +(-[a-zA-Z0-9], )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+'); do
            grep -qx -- "$o" <<< "$output" || { echo "$tool: $o not offered"; return 1; }
        done
    done
}

@test "values of options with a fixed set" {
    complete_line mge-run --device s
    [ "$output" = "sim" ]
    complete_line mge-train --optimizer a
    [ "$output" = "$(printf '%s\n' adam adamw)" ]
    complete_line mge-quant --method ""
    [ "$output" = "$(printf '%s\n' entropy minmax percentile)" ]
    complete_line mge-quant --dtype b
    [ "$output" = "bf16" ]
    # --opt=VALUE, which bash splits at '='
    complete_line mge-bench --device = c
    [ "$output" = "$(printf '%s\n' cpu cuda cuda:0)" ]
    # passes from mge-opt --list-passes, the last item of a list
    complete_line mge-opt --passes fold-b
    [ "$output" = "fold-bn" ]
    complete_line mge-opt --passes dce,cs
    [ "$output" = "dce,cse" ]
    # numbers: nothing to offer
    complete_line mge-run --threads ""
    [ -z "$output" ]
}

@test "file names by kind: models, weights, NPY, anything for -o" {
    complete_line mge-opt ""
    [ "$output" = "$(printf '%s\n' models net.mge net.mgt)" ]
    complete_line mge-dump ""
    [ "$output" = "$(printf '%s\n' models net.mge net.mgt w.npz x.npy)" ]
    complete_line mge-opt net.mgt --weights ""
    [ "$output" = "$(printf '%s\n' models w.npz)" ]
    complete_line mge-run net.mge --check ""
    [ "$output" = "$(printf '%s\n' models x.npy)" ]
    complete_line mge-run net.mge -i x = ""
    [ "$output" = "$(printf '%s\n' models x.npy)" ]
    complete_line mge-train net.mgt --log r
    [ "$output" = "run.csv" ]
    complete_line mge-opt net.mgt -o n
    [ "$output" = "$(printf '%s\n' net.mge net.mgt notes.txt)" ]
    complete_line mge-train net.mgt --data fash
    [ "$output" = "$(printf '%s\n' fashion-mnist fashion-mnist:test)" ]
    # no file of the kind: any file rather than nothing
    rm -f net.mge
    complete_line mge-train --resume n
    [ "$output" = "$(printf '%s\n' net.mgt notes.txt)" ]
}

@test "make install puts it where bash-completion looks, under every tool's name" {
    [ "$MGE_BIN" -ef "$BATS_TEST_DIRNAME/../../bin" ] || skip "MGE_BIN is not this checkout's bin/ (a sanitizer build): make install installs bin/"
    root="$BATS_TEST_DIRNAME/../.."
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" install DESTDIR="$T/root" > "$T/install.log" 2>&1 ||
        { cat "$T/install.log"; false; }
    dir="$T/root/usr/local/share/bash-completion/completions"
    for tool in mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant; do
        [ -f "$dir/$tool" ] || { echo "no $dir/$tool"; ls -l "$dir"; return 1; }
        cmp "$dir/$tool" "$COMPLETION"
    done
}
