#!/usr/bin/env bats
# model-file.bats — the model file is what the application expects: its
# input and output, the ops it uses (those the deployed runtime supports),
# the size of its parameters. Reads mge-dump --json. Set:
#   MODEL            the model (default model.mge)
#   INPUT, OUTPUT    "NAME DTYPE SHAPE" of the input and output the
#                    application uses; SHAPE as JSON, N the batch
#                    (default 'x f32 ["N",1,28,28]' and 'fc2 f32 ["N",10]')
#   ALLOWED_OPS      space-separated (default: LeNet's, and their int8 forms)
#   MAX_PARAM_BYTES  (default 8000000)
# Needs jq.

setup_file() {
    export MODEL=${MODEL:-model.mge}
    mge-dump --json "$MODEL" > "$BATS_FILE_TMPDIR/model.json"
}

setup() {
    J="$BATS_FILE_TMPDIR/model.json"
    INPUT=${INPUT:-'x f32 ["N",1,28,28]'}
    OUTPUT=${OUTPUT:-'fc2 f32 ["N",10]'}
    ALLOWED_OPS=${ALLOWED_OPS:-conv2d batchnorm relu maxpool2d flatten linear cross_entropy
        fused_conv2d quantize dequantize qconv2d qlinear qadd}
    MAX_PARAM_BYTES=${MAX_PARAM_BYTES:-8000000}
}

# has KEY "NAME DTYPE SHAPE": .inputs or .outputs has that entry
has() {
    read -r name dtype shape <<< "$2"
    jq -e --arg n "$name" --arg t "$dtype" --argjson s "$shape" \
        "any(.$1[]; .name == \$n and .dtype == \$t and .shape == \$s)" "$J" > /dev/null ||
        { echo "no $1 entry $2; the model has:"; jq -c ".$1" "$J"; return 1; }
}

@test "the input and output the application uses" {
    has inputs "$INPUT"
    has outputs "$OUTPUT"
}

@test "only ops from ALLOWED_OPS" {
    # op_counts: nodes per op
    extra=$(jq -r --arg a "$ALLOWED_OPS" '.op_counts | keys - [$a | splits("\\s+") | select(. != "")] | join(" ")' "$J")
    echo "ops not allowed: ${extra:-none}"
    [ -z "$extra" ]
}

@test "the parameters fit MAX_PARAM_BYTES" {
    bytes=$(jq -e '.params.bytes' "$J")
    echo "parameters: $bytes bytes, budget $MAX_PARAM_BYTES"
    [ "$bytes" -le "$MAX_PARAM_BYTES" ]
}
