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

# The function names a man(3) page's NAME line lists.
names_of() {
    sed -n '/^\.SH NAME/{n;s/ \\-.*//;s/,//g;p;q}' "$1"
}

@test "man(3): an overview and a page per area of the C API, rendering cleanly" {
    MAN3="$BATS_TEST_DIRNAME/../../man/man3"
    for page in mge mge_error mge_tensor mge_npy mge_graph mge_text mge_exec mge_trainer mge_dataset; do
        [ -f "$MAN3/$page.3" ] || { echo "no $page.3"; return 1; }
        for s in NAME SYNOPSIS DESCRIPTION EXAMPLES "SEE ALSO"; do
            grep -q "^\.SH $s" "$MAN3/$page.3" || { echo "$page.3: no $s"; return 1; }
        done
        if command -v groff > /dev/null; then
            run groff -man -ww -z "$MAN3/$page.3"
            assert_success
            assert_output ""
        fi
    done
}

@test "man(3): every function a page names is in mge.h, and every (3) reference finds a page" {
    MAN3="$BATS_TEST_DIRNAME/../../man/man3"
    H="$BATS_TEST_DIRNAME/../../lib/mge.h"
    all=""
    for p in "$MAN3"/*.3; do
        for f in $(names_of "$p"); do
            [ "$(basename "$p")" = mge.3 ] && continue
            grep -qE "[ *]$f\(" "$H" || { echo "$(basename "$p"): $f is not declared in mge.h"; return 1; }
            all="$all $f"
        done
        all="$all $(basename "$p" .3)"
    done
    # mge-text(5) cites mge_text_print(3)
    for p in "$MAN3"/*.3 "$BATS_TEST_DIRNAME"/../../man/man5/*.5; do
        for ref in $(grep -ohE '^\.BR? mge[a-z_]* \(3\)' "$p" | awk '{print $2}'); do
            [[ " $all " == *" $ref "* ]] || { echo "$(basename "$p"): $ref(3) is no page and no function a page names"; return 1; }
        done
    done
    [[ " $all " == *" mge_text_print "* ]]
    # the execution page describes the calls the tools are built on
    for f in mge_exec_create mge_exec_run mge_exec_result mge_model_load mge_trainer_step mge_npy_read; do
        [[ " $all " == *" $f "* ]] || { echo "$f has no page"; return 1; }
    done
}

@test "mge(3)'s example program is samples/embed/embed.c" {
    page="$BATS_TEST_DIRNAME/../../man/man3/mge.3"
    # the first .EX block, with groff's escapes undone
    sed -n '/^\.EX$/,/^\.EE$/{/^\.E[XE]$/d;p}' "$page" | awk '/^\$ /{exit} {print}' |
        sed -e 's/^\\&//' -e 's/\\-/-/g' -e 's/\\(em/—/g' -e 's/\\e/\\/g' > "$BATS_TEST_TMPDIR/page.c"
    diff -u "$BATS_TEST_DIRNAME/../../samples/embed/embed.c" "$BATS_TEST_TMPDIR/page.c"
}
