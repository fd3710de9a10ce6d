#!/usr/bin/env bats
# The man pages render cleanly and document every option --help lists.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    MAN1="$BATS_TEST_DIRNAME/../../man/man1"
}

@test "man pages render without groff warnings" {
    command -v groff > /dev/null || skip "groff not installed"
    for tool in mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant; do
        run groff -man -ww -z "$MAN1/$tool.1"
        assert_success
        assert_output ""
    done
}

@test "every option in --help is documented in the man page" {
    for tool in mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant; do
        page="$MAN1/$tool.1"
        [ -f "$page" ]
        opts=$("$MGE_BIN/$tool" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
        [ -n "$opts" ]
        for o in $opts; do
            grep -qF -- "$(sed 's/-/\\-/g' <<< "$o")" "$page" || { echo "$tool: $o missing from $page"; return 1; }
        done
        for s in EXAMPLES "EXIT STATUS" "SEE ALSO" mge-format mge-text; do
            grep -q "$s" "$page" || { echo "$tool: no $s"; return 1; }
        done
    done
}
