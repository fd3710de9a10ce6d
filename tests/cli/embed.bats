#!/usr/bin/env bats
# libmge in a program of its own: samples/embed/embed.c, built from a
# `make install` (DESTDIR) through pkg-config, once against libmge.so and
# once fully static, runs a model on an NPY input and prints what mge-run
# computes.

bats_require_minimum_version 1.5.0

setup_file() {
    ROOT="$BATS_TEST_DIRNAME/../.."
    : "${MGE_BIN:=$ROOT/bin}"
    # bats cannot skip from setup_file: setup() skips each test with the reason
    EMBED_SKIP=
    [ "$MGE_BIN" -ef "$ROOT/bin" ] ||
        EMBED_SKIP="MGE_BIN is not this checkout's bin/ (a sanitizer build has no libmge.so to install)"
    command -v pkg-config > /dev/null || EMBED_SKIP="pkg-config not installed"
    export EMBED_SKIP
    [ -z "$EMBED_SKIP" ] || return 0
    # the install under a staging root (once for the file), its mge.pc pointed at it
    R="$BATS_FILE_TMPDIR/root"
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$ROOT" install DESTDIR="$R" > "$BATS_FILE_TMPDIR/install.log" 2>&1 ||
        { cat "$BATS_FILE_TMPDIR/install.log"; return 1; }
    mkdir -p "$BATS_FILE_TMPDIR/pc"
    sed "s|^prefix=.*|prefix=$R/usr/local|" "$R/usr/local/lib/pkgconfig/mge.pc" > "$BATS_FILE_TMPDIR/pc/mge.pc"
}

setup() {
    [ -z "$EMBED_SKIP" ] || skip "$EMBED_SKIP"
    load helper
    ROOT="$BATS_TEST_DIRNAME/../.."
    P="$BATS_FILE_TMPDIR/root/usr/local"
    export PKG_CONFIG_PATH="$BATS_FILE_TMPDIR/pc"
    write_mlp "$T/mlp.mgt"
    "$MGE_OPT" "$T/mlp.mgt" --seed 3 -o "$T/mlp.mge"
    npys "$T/x.npy" f32:2x4:rand
}

# What embed prints for mge-run's output on the same input.
expected() {
    "$MGE_RUN" "$T/mlp.mge" < "$T/x.npy" > "$T/y.npy"
    py 'y = np.load(sys.argv[1]); print("fc2 f32[%s] = %s" % (",".join(map(str, y.shape)), " ".join("%.6g" % v for v in y.ravel())))' "$T/y.npy"
}

@test "make install lays out the library, the header, mge.pc and the man(3) pages" {
    [ -f "$P/lib/libmge.a" ] && [ -f "$P/lib/libmge.so.0" ] && [ -L "$P/lib/libmge.so" ]
    [ -f "$P/include/mge/mge.h" ] && [ -f "$P/include/mge/ops.def" ]
    run readelf -d "$P/lib/libmge.so.0"
    assert_output --partial "Library soname: [libmge.so.0]"
    [ -f "$P/share/man/man3/mge.3" ]
    # a function's name finds its page (mge-text(5) cites mge_text_print(3))
    [ "$(cat "$P/share/man/man3/mge_text_print.3")" = ".so man3/mge_text.3" ]
    [ "$(cat "$P/share/man/man3/mge_exec_run.3")" = ".so man3/mge_exec.3" ]
    run pkg-config --modversion mge
    assert_output "0.1.0"
}

@test "the sample builds against libmge.so through pkg-config, warning-free, and prints mge-run's output" {
    need_numpy
    cc -Wall -Wextra -Werror -std=c11 "$ROOT/samples/embed/embed.c" $(pkg-config --cflags --libs mge) \
        -Wl,-rpath,"$P/lib" -o "$T/embed"
    run readelf -d "$T/embed"
    assert_output --partial "Shared library: [libmge.so.0]"
    # the installed copy, found through the rpath (not LD_LIBRARY_PATH)
    run env -u LD_LIBRARY_PATH ldd "$T/embed"
    assert_output --partial "libmge.so.0 => $P/lib/libmge.so.0"
    want=$(expected)
    run env -u LD_LIBRARY_PATH "$T/embed" "$T/mlp.mge" "$T/x.npy"
    assert_success
    assert_output "$want"
    # errors are the program's, from the library's messages
    run "$T/embed" "$T/x.npy" "$T/x.npy"
    assert_failure 1
    assert_output --partial "this is an NPY tensor stream, not a model"
}

@test "the sample links fully static through pkg-config --static and prints the same" {
    need_numpy
    # the linker's notes about dlopen and getaddrinfo in static programs are expected
    cc -static -std=c11 "$ROOT/samples/embed/embed.c" $(pkg-config --static --cflags --libs mge) \
        -o "$T/embed-static" 2> "$T/ld.log" || { cat "$T/ld.log"; return 1; }
    # no dynamic section: nothing for the loader to find, libmge.so.0 least of all
    run readelf -d "$T/embed-static"
    assert_output --partial "There is no dynamic section"
    want=$(expected)
    run "$T/embed-static" "$T/mlp.mge" "$T/x.npy"
    assert_success
    assert_output "$want"
    # a text model works too (parameters from their init, seed 0, as mge-run without --seed)
    "$MGE_RUN" "$T/mlp.mgt" < "$T/x.npy" > "$T/yt.npy"
    run "$T/embed-static" "$T/mlp.mgt" "$T/x.npy"
    assert_success
    run py 'y = np.load(sys.argv[1]); print(" ".join("%.6g" % v for v in y.ravel()))' "$T/yt.npy"
    [[ "$(sed -n 's/.* = //p' <<< "$("$T/embed-static" "$T/mlp.mgt" "$T/x.npy")")" == "$output" ]]
}

@test "mge(3)'s example, run as the page shows it, prints what the page shows" {
    page="$ROOT/man/man3/mge.3"
    want=$(sed -n 's/^fc3 f32\[1,10\] = /&/p' "$page" | sed 's/\\-/-/g')
    [ -n "$want" ]
    cd "$T"
    cp "$ROOT/samples/embed/embed.c" .
    cc embed.c $(pkg-config --cflags --libs mge) -Wl,-rpath,"$P/lib" -o embed
    "$MGE_OPT" "$ROOT/samples/nets/mlp.mgt" -o mlp.mge
    "$PY" -c 'import numpy as np; np.save("x.npy", np.ones((1, 1, 28, 28), np.float32))'
    run ./embed mlp.mge x.npy
    assert_success
    assert_output "$want"
}
