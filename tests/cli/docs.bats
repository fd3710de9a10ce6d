#!/usr/bin/env bats
# Every shell command in README.md's code blocks and in the EXAMPLES of
# man/man1/*.1 runs, in order, in a scratch directory, and succeeds (or
# fails with the error the page shows). tests/cli/doc_commands.py extracts
# them. README's commands make their own files; the man pages name files
# (net.mge, x.npy, ...) that fixtures() below provides. A directory called
# fashion-mnist in the scratch directory is the bundled 4000-image sample,
# which mge-train and mge-run read instead of the Debian package's
# (mge-train(1), DATA).

bats_require_minimum_version 1.5.0

setup_file() {
    export REPO="$BATS_TEST_DIRNAME/../.."
    export FX="$BATS_FILE_TMPDIR/fx"
    # the pages say python3: the one with numpy and torch
    mkdir -p "$BATS_FILE_TMPDIR/shim"
    ln -sf "${PYTHON:-/usr/bin/python3}" "$BATS_FILE_TMPDIR/shim/python3"
}

setup() {
    load helper
    export PATH="$BATS_FILE_TMPDIR/shim:$MGE_BIN:$PATH"
    export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache"   # mge-prof's peak, not the user's
    EXTRACT="$BATS_TEST_DIRNAME/doc_commands.py"
}

# Not run, by pattern (an extended regex on the command) :: the reason the
# last test prints as its skip. Keep this short.
NOT_RUN=(
    '^make( |$) :: build and run this test suite or the benchmarks (make check runs this file)'
    '^scripts/ :: install packages (root, a network) or run minutes-long benchmarks'
    '(pkg-config .*mge|^[.]/embed) :: need `make install` (tests/cli/embed.bats builds and runs them from a staged install)'
    '(tokens|val)[.]npz|gpt[.]mge :: the tiny transformer: the fortunes package and a minute of training (tests/cli/gpt.bats runs these commands, shorter)'
)
# A timing gate (a command matching the first part) that exits 1 with the
# second part on stderr gave a verdict on this machine's load, not a broken
# command; any other failure still fails.
VERDICT='--baseline :: more than the allowed'

not_run_reason() {
    local e
    for e in "${NOT_RUN[@]}"; do
        if grep -qE -- "${e%% :: *}" <<< "$1"; then
            echo "${e#* :: }"
            return 0
        fi
    done
    if grep -qE -- '\| *dot ' <<< "$1" && ! command -v dot > /dev/null; then
        echo "needs Graphviz's dot (apt install graphviz; scripts/deps installs it)"
        return 0
    fi
    if grep -qE -- '(^|\| *)jq ' <<< "$1" && ! command -v jq > /dev/null; then
        echo "needs jq (apt install jq; scripts/deps installs it)"
        return 0
    fi
    return 1
}

# The files the man pages' examples name, made once.
fixtures() {
    [ -d "$FX" ] && return 0
    mkdir -p "$FX.tmp"
    cd "$FX.tmp"
    cp "$REPO/samples/nets/lenet.mgt" "$REPO/samples/nets/resnet18.mgt" .
    "$MGE_OPT" lenet.mgt -o lenet.mge
    cp lenet.mge m.mge
    npys x.npy f32:8x1x28x28:rand f32:8x1x28x28:rand f32:8x1x28x28:rand f32:8x1x28x28:rand
    cp x.npy test.npy
    cp x.npy batches.npy
    cp x.npy calib.npy
    "$MGE_RUN" lenet.mge < x.npy > ref.npy
    # the two-input model of mge-run(1), mge-opt(1), mge-train(1), mge-prof(1), mge-bench(1)
    cat > net.mgt <<'NET'
input a : f32[N,3]
input b : f32[N,3]
input label : i32[N]
s = add(a, b)
hidden = linear(s, out=8)
act = relu(hidden)
out = linear(act, out=3)
loss = cross_entropy(out, label)
output out
minimize loss
NET
    printf 'input x : f32[N,4]\ny = relu(x)\nz = frobnicate(y)\noutput z\n' > bad.mgt
    "$MGE_OPT" net.mgt -o net.mge
    "$MGE_DUMP" net.mge --params state_dict.npz > /dev/null
    npys a.npy f32:4x3:rand f32:4x3:rand
    npys b.npy f32:4x3:rand f32:4x3:rand
    py 'r = np.random.default_rng(0)
np.savez("d.npz", a=r.random((64, 3), dtype=np.float32), b=r.random((64, 3), dtype=np.float32),
         label=r.integers(0, 3, 64).astype(np.int32))'
    npys batch.npy f32:1x3x224x224:rand
    "$MGE_OPT" resnet18.mgt -o resnet18.mge
    "$MGE_DUMP" resnet18.mge --params resnet18.npz > /dev/null
    # mge-run(1)'s images and table, mge-opt(1)'s state_dict with a head the model lacks
    py 'from PIL import Image
r = np.random.default_rng(1)
Image.fromarray(r.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save("cat.jpg")
Image.fromarray(r.integers(0, 256, (256, 256, 3), dtype=np.uint8)).save("dog.png")
Image.fromarray(r.integers(0, 256, (40, 40), dtype=np.uint8)).save("digit.png")
open("imagenet_classes.txt", "w").write("".join("class%d\n" % i for i in range(1000)))
x = r.random((20, 3))
with open("houses.csv", "w") as f:
    f.write("rooms,area,age,price\n")
    for row in x:
        f.write("%g,%g,%g,%g\n" % (row[0], row[1], row[2], row.sum()))
sd = dict(np.load("state_dict.npz"))
sd["head.weight"] = np.zeros((2, 2), np.float32)
np.savez("backbone.npz", **sd)'
    printf 'input x : f32[N,3]\nh = linear(x, out=4)\ny = linear(h, out=1)\noutput y\n' > house.mgt
    "$MGE_OPT" house.mgt -o house.mge
    cd - > /dev/null
    mv "$FX.tmp" "$FX"
}

# scratch [with-fixtures]: a fresh working directory in $W.
scratch() {
    W="$BATS_TEST_TMPDIR/work"
    mkdir -p "$W"
    ln -s "$(cd "$REPO" && pwd)/samples" "$W/samples"
    ln -s "$(cd "$REPO" && pwd)/samples/data/fashion-mnist" "$W/fashion-mnist"
    if [ "${1:-}" = with-fixtures ]; then
        fixtures
        cp "$FX"/* "$W"/
        # the large ones by link: every command writes these by renaming over them
        for f in resnet18.mge resnet18.npz; do
            rm "$W/$f" && ln -s "$FX/$f" "$W/$f"
        done
    fi
}

# run_doc FILE: every command of FILE in order in $W; stops at the first failure.
run_doc() {
    local doc=$1 list="$BATS_TEST_TMPDIR/cmds" n i src cmd want reason rc ran=0
    "$PY" "$EXTRACT" "$doc" > "$list.json"
    n=$(pyq 'import json; print(len(json.load(open(sys.argv[1]))))' "$list.json")
    [ "$n" -gt 0 ] || { echo "$doc: no commands found"; return 1; }
    for ((i = 0; i < n; i++)); do
        src=$(pyq 'import json; c = json.load(open(sys.argv[1]))[int(sys.argv[2])]; print("%s:%d" % (c["file"].split("/")[-1], c["line"]))' "$list.json" "$i")
        cmd=$(pyq 'import json; sys.stdout.write(json.load(open(sys.argv[1]))[int(sys.argv[2])]["cmd"])' "$list.json" "$i")
        want=$(pyq 'import json; sys.stdout.write(json.load(open(sys.argv[1]))[int(sys.argv[2])]["error"] or "")' "$list.json" "$i")
        if reason=$(not_run_reason "$cmd"); then
            continue
        fi
        rc=0
        (cd "$W" && timeout 600 bash -o pipefail -c "$cmd") < /dev/null > "$BATS_TEST_TMPDIR/out" 2> "$BATS_TEST_TMPDIR/err" || rc=$?
        ran=$((ran + 1))
        if [ -n "$want" ]; then
            # the page shows this command failing with that message
            if [ "$rc" -ne 1 ] || ! grep -qxF -- "$want" "$BATS_TEST_TMPDIR/err"; then
                printf '%s: expected exit 1 with\n  %s\ngot exit %d:\n%s\n  $ %s\n' "$src" "$want" "$rc" "$(tail -5 "$BATS_TEST_TMPDIR/err")" "$cmd"
                return 1
            fi
        elif [ "$rc" -ne 0 ]; then
            if [ "$rc" -eq 1 ] && grep -qE -- "${VERDICT%% :: *}" <<< "$cmd" &&
                grep -qF -- "${VERDICT#* :: }" "$BATS_TEST_TMPDIR/err"; then
                echo "$src: a timing verdict, not a failure: $(grep -F -- "${VERDICT#* :: }" "$BATS_TEST_TMPDIR/err" | head -1)"
                continue
            fi
            printf '%s: exit %d\n  $ %s\n%s\n' "$src" "$rc" "$cmd" "$(tail -15 "$BATS_TEST_TMPDIR/err")"
            return 1
        fi
    done
    echo "$doc: $ran of $n commands ran"
}

@test "the extractor: indented and fenced markdown blocks, man EXAMPLES with prompts, continuations, roff escapes" {
    cat > "$T/t.md" <<'MD'
Text with `inline code` that is no command.

    echo one   # it's a comment with a quote
    printf '%s\n' 'two
    lines' \
      | cat

```sh
$ echo three
three
```
MD
    cat > "$T/t.1" <<'MAN'
.SH DESCRIPTION
.nf
not an example
.fi
.SH EXAMPLES
.nf
.RS
echo \-\-four \e
    five
.fi
.nf
$ false x
prog: x: error: it failed
output
.RE
.fi
.SH SEE ALSO
MAN
    run --separate-stderr "$PY" "$EXTRACT" "$T/t.md" "$T/t.1"
    assert_success
    echo "$output" > "$T/c.json"
    pyq 'import json
c = json.load(open(sys.argv[1]))
got = [(x["file"].split("/")[-1], x["line"], x["cmd"], x["error"]) for x in c]
want = [("t.md", 3, "echo one   # it'"'"'s a comment with a quote", None),
        ("t.md", 4, "printf '"'"'%s\\n'"'"' '"'"'two\nlines'"'"' \\\n  | cat", None),
        ("t.md", 9, "echo three", None),
        ("t.1", 8, "echo --four \\\n    five", None),
        ("t.1", 12, "false x", "prog: x: error: it failed")]
assert got == want, "\n".join(map(repr, got))' "$T/c.json"
    # what the commands do when run
    run bash -o pipefail -c "$(pyq 'import json; print(json.load(open(sys.argv[1]))[1]["cmd"])' "$T/c.json")"
    assert_output $'two\nlines'
    run --separate-stderr "$PY" "$EXTRACT" "$T/t.txt"
    assert_failure 2
}

@test "README.md: every command in its code blocks works, in order" {
    "$PY" -c 'import torch, torchvision' 2> /dev/null || skip "README's ResNet-18 needs PyTorch and torchvision ($PY)"
    scratch
    run_doc "$REPO/README.md"
    [ -s "$W/lenet.int8.mge" ] && [ -s "$W/r18.O2.mge" ] && [ -s "$W/step.json" ] && [ -s "$W/base.json" ]
}

@test "mge-run(1) EXAMPLES work" {
    scratch with-fixtures
    run_doc "$REPO/man/man1/mge-run.1"
    [ "$(npy_count "$W/out.npy")" -eq 4 ]   # two steps of hidden and out
}

@test "mge-opt(1) EXAMPLES work (and the error one fails as shown)" {
    scratch with-fixtures
    run_doc "$REPO/man/man1/mge-opt.1"
}

@test "mge-dump(1) EXAMPLES work" {
    scratch with-fixtures
    run_doc "$REPO/man/man1/mge-dump.1"
}

@test "mge-train(1) EXAMPLES work" {
    scratch with-fixtures
    run_doc "$REPO/man/man1/mge-train.1"
    [ -s "$W/trained.npz" ]
}

@test "mge-quant(1) EXAMPLES work" {
    scratch with-fixtures
    run_doc "$REPO/man/man1/mge-quant.1"
}

@test "mge-bench(1) EXAMPLES work" {
    scratch with-fixtures
    run_doc "$REPO/man/man1/mge-bench.1"
}

@test "mge-prof(1) EXAMPLES work" {
    scratch with-fixtures
    run_doc "$REPO/man/man1/mge-prof.1"
    [ -s "$W/r18.trace.json" ]
}

@test "every man page in man/man1 has a test above" {
    for page in "$REPO"/man/man1/*.1; do
        name=$(basename "$page" .1)
        grep -qF "@test \"$name(1) EXAMPLES work" "$BATS_TEST_FILENAME" || { echo "no test for $name(1)"; return 1; }
    done
}

@test "commands the docs show that these tests do not run, and why" {
    local cmd reason list="$T/not-run"
    : > "$list"
    "$PY" "$EXTRACT" "$REPO/README.md" "$REPO"/man/man1/*.1 > "$T/all.json"
    while IFS= read -r cmd; do
        if reason=$(not_run_reason "$cmd"); then
            printf '%s\t%s\n' "$reason" "$(awk '{print $1 ($2 ~ /^(#|$)/ ? "" : " " $2)}' <<< "$cmd")" >> "$list"
        fi
    done < <(pyq 'import json
for c in json.load(open(sys.argv[1])): print(c["cmd"].split("\n")[0])' "$T/all.json")
    [ -s "$list" ] || return 0
    # one line: the commands grouped by reason
    skip "$(awk -F'\t' '!seen[$0]++ { if (!($1 in r)) o[++n] = $1; r[$1] = r[$1] (r[$1] ? ", " : "") $2 }
        END { for (i = 1; i <= n; i++) printf "%s%s: %s", (i > 1 ? "; " : ""), r[o[i]], o[i] }' "$list")"
}
