#!/usr/bin/env bats
# Bad input of every kind: damaged .mge files, text errors, usage errors,
# and the promise that a failed tool leaves no partial output file.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    write_conv
    "$MGE_OPT" "$T/conv.mgt" -o "$T/good.mge"
}

# damage IN OUT 'python statement on bytearray d'
damage() {
    pyq 'd = bytearray(open(sys.argv[1], "rb").read())
import struct, zlib
exec(sys.argv[3])
open(sys.argv[2], "wb").write(d)' "$@"
}

# Every tool must fail with exit 1, a one-line "TOOL: FILE: error:" message
# and no output file.
all_tools_reject() {
    local f=$1 want=$2
    for tool in "$MGE_DUMP" "$MGE_OPT"; do
        run --separate-stderr "$tool" "$f" -o "$T/out"
        assert_failure 1
        [[ "$stderr" == "$(basename "$tool"): $f"*"error: "*"$want"* ]] || {
            echo "stderr: $stderr"; return 1; }
        [ ! -e "$T/out" ]
    done
    run --separate-stderr "$MGE_RUN" "$f" -o "$T/out" < /dev/null
    assert_failure 1
    [[ "$stderr" == *"error: "*"$want"* ]]
    [ ! -e "$T/out" ]
    run --separate-stderr "$MGE_BIN/mge-train" "$f" --data "$T/none.npz" -o "$T/out"
    assert_failure 1
    [[ "$stderr" == "mge-train: $f"*"error: "*"$want"* ]] || { echo "stderr: $stderr"; return 1; }
    [ ! -e "$T/out" ]
}

@test "a truncated .mge is rejected" {
    head -c 100 "$T/good.mge" > "$T/cut.mge"
    all_tools_reject "$T/cut.mge" "truncated"
    size=$(stat -c %s "$T/good.mge")
    head -c $((size - 1)) "$T/good.mge" > "$T/cut1.mge"
    all_tools_reject "$T/cut1.mge" ""
}

@test "a bit-flipped .mge fails its checksum" {
    damage "$T/good.mge" "$T/flip.mge" 'd[len(d) - 100] ^= 0x10'
    all_tools_reject "$T/flip.mge" "checksum"
    damage "$T/good.mge" "$T/flip2.mge" 'd[40] ^= 0x01'
    all_tools_reject "$T/flip2.mge" ""
}

@test "a wrong signature is not taken for a .mge" {
    damage "$T/good.mge" "$T/sig.mge" 'd[3] = ord("X")'
    all_tools_reject "$T/sig.mge" ""
}

@test "a newer format version is refused with a clear message" {
    damage "$T/good.mge" "$T/ver.mge" 'd[8:12] = struct.pack("<I", 99); d[32:36] = struct.pack("<I", zlib.crc32(bytes(d[:32])))'
    all_tools_reject "$T/ver.mge" "version 99"
}

@test "an empty file is an error" {
    : > "$T/empty"
    run "$MGE_OPT" "$T/empty" -o "$T/out"
    assert_failure 1
    [ ! -e "$T/out" ]
    run "$MGE_RUN" "$T/empty" < /dev/null
    assert_failure 1
}

@test "a missing file is an error naming it" {
    for tool in "$MGE_DUMP" "$MGE_OPT" "$MGE_RUN"; do
        run "$tool" "$T/nosuch.mge"
        assert_failure 1
        assert_output --partial "$T/nosuch.mge"
    done
}

@test "an unknown op is reported at its line and column" {
    printf 'input x : f32[N,4]\ny = linear(x, out=3)\nz = frobnicate(y)\noutput z\n' > "$T/op.mgt"
    run --separate-stderr "$MGE_OPT" "$T/op.mgt" -o "$T/out"
    assert_failure 1
    [[ "$stderr" == "mge-opt: $T/op.mgt:3:5: error: unknown op 'frobnicate'"* ]]
    [ ! -e "$T/out" ]
    run --separate-stderr "$MGE_DUMP" "$T/op.mgt"
    [[ "$stderr" == "mge-dump: $T/op.mgt:3:5: error:"* ]]
}

@test "an unknown attribute is reported at its line and column" {
    printf 'input x : f32[N,4]\ny = linear(x, out=3, bogus=1)\noutput y\n' > "$T/attr.mgt"
    run --separate-stderr "$MGE_OPT" -S "$T/attr.mgt"
    assert_failure 1
    [[ "$stderr" == "mge-opt: $T/attr.mgt:2:22: error: "*"bogus"* ]]
}

@test "an undefined name is reported at its line and column" {
    printf 'input x : f32[N,4]\n\ny = relu(xx)\noutput y\n' > "$T/name.mgt"
    run --separate-stderr "$MGE_RUN" "$T/name.mgt" < /dev/null
    assert_failure 1
    [[ "$stderr" == "mge-run: $T/name.mgt:3:10: error: "*"'xx'"* ]]
    # from stdin the file is called <stdin>
    run --separate-stderr "$MGE_OPT" -S < "$T/name.mgt"
    [[ "$stderr" == "mge-opt: <stdin>:3:10: error: "* ]]
}

@test "unknown options, missing arguments and bad numbers are usage errors (exit 2)" {
    for tool in mge-run mge-dump mge-opt mge-train mge-bench mge-prof; do
        run --separate-stderr "$MGE_BIN/$tool" --no-such-option
        assert_failure 2
        [[ "$stderr" == *"unrecognized option '--no-such-option'"*"Try '$tool --help'."* ]]
        run --separate-stderr "$MGE_BIN/$tool" -Z
        assert_failure 2
        [[ "$stderr" == *"invalid option -- 'Z'"* ]]
        # -o where the tool has it (mge-prof writes its report to stdout only)
        if "$MGE_BIN/$tool" --help | grep -qE '^ +-o '; then
            run --separate-stderr "$MGE_BIN/$tool" -o
            assert_failure 2
            [[ "$stderr" == *"requires an argument"*"Try '$tool --help'."* ]]
        fi
        run --separate-stderr "$MGE_BIN/$tool" --threads
        assert_failure 2
        [[ "$stderr" == *"requires an argument"*"Try '$tool --help'."* ]]
        run --separate-stderr "$MGE_BIN/$tool" --threads 4x
        assert_failure 2
        [[ "$stderr" == *"'4x' is not an integer"* ]]
        run --separate-stderr "$MGE_BIN/$tool" --threads 300
        assert_failure 2
        run --separate-stderr "$MGE_BIN/$tool" a b
        # mge-bench takes several models: two missing files are a runtime error
        if [ "$tool" = mge-bench ]; then assert_failure 1; else assert_failure 2; fi
        run --separate-stderr "$MGE_BIN/$tool" --device tpu
        assert_failure 2
        run --separate-stderr "$MGE_BIN/$tool" --device cuda:0
        assert_failure 1
        [[ "$stderr" == *"no plugin libmge-cuda.so"* ]]
        run --separate-stderr "$MGE_BIN/$tool" --version
        assert_success
        assert_output "$tool (mge) 0.1.0"
        run --separate-stderr "$MGE_BIN/$tool" --help
        assert_success
        [[ "$output" == "Usage: $tool"* ]]
        [ -z "$stderr" ]
        run --separate-stderr "$MGE_BIN/$tool" -h
        assert_success
        [[ "$output" == "Usage: $tool"* ]]
    done
    run "$MGE_RUN" --seed -3
    assert_failure 2
    run "$MGE_OPT" --seed x
    assert_failure 2
}

@test "--device cpu and --threads are accepted everywhere" {
    npys "$T/x.npy" f32:1x1x8x8:1
    "$MGE_OPT" --device cpu --threads 2 "$T/conv.mgt" -o "$T/a.mge"
    "$MGE_DUMP" --device cpu --threads 2 "$T/a.mge" > /dev/null
    "$MGE_RUN" --device cpu --threads 2 "$T/a.mge" < "$T/x.npy" > "$T/y.npy"
    [ -s "$T/y.npy" ]
}

@test "an interrupted tool leaves no temporary or partial file" {
    make_mlp_mge
    npys "$T/step.npy" f32:2x4:1
    mkfifo "$T/fifo"
    "$MGE_RUN" "$T/mlp.mge" -o "$T/out.npy" < "$T/fifo" 3>&- &
    pid=$!
    # one step, then a writer that keeps the pipe open until it is killed
    (cat "$T/step.npy"; exec sleep 20) > "$T/fifo" 3>&- &
    wpid=$!
    for i in $(seq 100); do
        [ -n "$(ls -A "$T" | grep '^\.out\.npy\.')" ] && break
        sleep 0.1
    done
    [ -n "$(ls -A "$T" | grep '^\.out\.npy\.')" ]   # the temporary file exists meanwhile
    sleep 0.3
    kill -TERM $pid
    st=0
    wait $pid || st=$?
    kill $wpid 2> /dev/null || true
    wait $wpid 2> /dev/null || true
    [ "$st" -eq 143 ]                              # killed by SIGTERM, re-raised after cleanup
    [ ! -e "$T/out.npy" ]
    [ -z "$(ls -A "$T" | grep '^\.out')" ]
}

@test "a failed run with -o removes the partial file but keeps complete steps on stdout" {
    write_mlp
    npys "$T/x.npy" f32:2x4:1 f32:2x5:1
    run "$MGE_RUN" "$T/mlp.mgt" -o "$T/out.npy" < "$T/x.npy"
    assert_failure 1
    [ ! -e "$T/out.npy" ]
    [ -z "$(ls -A "$T" | grep '^\.out')" ]
    "$MGE_RUN" "$T/mlp.mgt" < "$T/x.npy" > "$T/stdout.npy" || true
    run npy_count "$T/stdout.npy"
    assert_output "1"
}

@test "an output in a missing directory fails cleanly" {
    run "$MGE_OPT" "$T/conv.mgt" -o "$T/no/such/dir/out.mge"
    assert_failure 1
    assert_output --partial "error:"
}

@test "binary .mge on stdin works for every tool" {
    npys "$T/x.npy" f32:1x1x8x8:1
    "$MGE_DUMP" < "$T/good.mge" | grep -q '^# ---- summary'
    "$MGE_OPT" -S < "$T/good.mge" | grep -q '^input x'
    "$MGE_RUN" --input "$T/x.npy" < "$T/good.mge" > "$T/y.npy"
    [ "$(npy_count "$T/y.npy")" = 1 ]
}

@test "-o /dev/null and a FIFO are written in place, not replaced" {
    "$MGE_OPT" "$T/conv.mgt" -o /dev/null
    [ -c /dev/null ]
    "$MGE_DUMP" "$T/good.mge" -o /dev/null
    [ -c /dev/null ]
    mkfifo "$T/pipe"
    cat "$T/pipe" > "$T/fromfifo.mge" &
    "$MGE_OPT" "$T/conv.mgt" -o "$T/pipe"
    wait $!
    [ -p "$T/pipe" ]
    cmp "$T/fromfifo.mge" "$T/good.mge"
    run "$MGE_OPT" "$T/conv.mgt" -o "$T"
    assert_failure 1
    assert_output --partial "directory"
}

@test "a tensor file given as a model says what it is" {
    npys "$T/x.npy" f32:2x4:1
    run "$MGE_RUN" "$T/x.npy" < /dev/null
    assert_failure 1
    assert_output --partial "NPY tensor stream, not a model"
    run "$MGE_OPT" "$T/x.npy" -o "$T/out.mge"
    assert_failure 1
    assert_output --partial "not a model"
    [ ! -e "$T/out.mge" ]
}

@test "mge-dump refuses an NPY header claiming 2^60 elements" {
    pyq 'h = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1073741824, 1073741824), }".replace(chr(34), chr(39))
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + b"\0" * 64)' "$T/huge.npy"
    run timeout 20 "$MGE_DUMP" "$T/huge.npy"
    assert_failure 1
    assert_output --partial "mge-dump: $T/huge.npy: error:"
}

@test "a .mge whose graph claims 2^60 elements is refused (checksums intact)" {
    # patch the first parameter's first dim in the GRPH section, then fix its CRC,
    # so only the size check can stop it
    damage "$T/good.mge" "$T/huge.mge" '
pos = 36
for _ in range(3):
    tag, n = bytes(d[pos:pos + 4]), struct.unpack_from("<Q", d, pos + 4)[0]
    if tag == b"GRPH":
        count, p = struct.unpack_from("<I", d, pos + 12)[0], pos + 16
        for _ in range(count):
            p += 4 + struct.unpack_from("<I", d, p)[0]
            kind, nd = d[p], d[p + 2]
            if kind == 1 and nd > 0:
                struct.pack_into("<q", d, p + 3, 1 << 60)
                break
            p += 3 + 8 * nd
            p += 4 + struct.unpack_from("<I", d, p)[0] + 1
        struct.pack_into("<I", d, pos + 12 + n, zlib.crc32(bytes(d[pos:pos + 12 + n])))
    pos += 16 + n'
    ! cmp -s "$T/good.mge" "$T/huge.mge"
    all_tools_reject "$T/huge.mge" "too large"
}
