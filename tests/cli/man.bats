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

@test "every page of a tool that writes output files says what kill -9 leaves behind" {
    # the wording of mge-train(1): at most a stray .OUT.XXXXXX, which may be deleted
    for tool in mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant; do
        page="$MAN1/$tool.1"
        grep -q 'kill \\-9' "$page" || { echo "$tool: no kill -9"; return 1; }
        grep -qE '^\.BI? \. ?[A-Z][A-Za-z.]* ?\.XXXXXX' "$page" || { echo "$tool: no .OUT.XXXXXX"; return 1; }
        grep -q "which may be deleted" "$page" || { echo "$tool: no 'which may be deleted'"; return 1; }
    done
}
