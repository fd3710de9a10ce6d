# mge.bash — bash completion for the mge tools (mge-run, mge-dump, mge-opt,
# mge-train, mge-bench, mge-prof, mge-quant).
#
# Options come from each tool's own --help (read once per shell and tool),
# so they follow the tool as it changes; what is known here is what the
# values are: the device names, optimizers, passes (mge-opt --list-passes)
# and the kinds of file each option reads. `make install` puts this file in
# share/bash-completion/completions under each tool's name; to try it from
# a checkout: source completion/mge.bash

declare -gA _mge_opts_cache _mge_args_cache

# _mge_opts TOOL: the tool's options (cached) in _mge_opts_cache[TOOL], and
# the ones taking a value in _mge_args_cache[TOOL], both " a b c ".
_mge_opts() {
    local tool=$1
    [[ -n ${_mge_opts_cache[$tool]+set} ]] && return 0
    local parsed
    # an option line starts with spaces and '-'; a value placeholder is the
    # next word in capitals (--weights W.npz, -o FILE) or follows '='
    parsed=$("$tool" --help 2> /dev/null | awk '
        /^Examples:/ { exit }
        /^ +-/ {
            n = split($0, w, /[ ,]+/)
            line = ""   # the options of this line ("-i, --input FILE": both take FILE)
            for (i = 1; i <= n; i++) {
                if (w[i] == "") continue
                if (w[i] ~ /^-/) {
                    o = w[i]
                    if (o ~ /=/) { sub(/=.*/, "", o); opts = opts " " o; args = args " " o; continue }
                    opts = opts " " o; line = line " " o; continue
                }
                if (line != "" && w[i] ~ /^[A-Z]/) args = args line
                break
            }
        }
        END { print opts " |" args " " }')
    _mge_opts_cache[$tool]="${parsed%%|*}"
    _mge_args_cache[$tool]=" ${parsed#*|}"
}

# _mge_files CUR [EXT...]: directories and the files ending in .EXT (any
# file when no EXT is given, or when none of those kinds is there).
_mge_files() {
    local cur=$1 f e nfiles=0
    shift
    local IFS=$'\n' found=()
    for f in $(compgen -f -- "$cur"); do
        if [[ -d $f ]]; then
            found+=("$f")
            continue
        fi
        for e in "$@"; do
            [[ $f == *."$e" ]] && break
        done
        if (($# == 0)) || [[ $f == *."$e" ]]; then
            found+=("$f")
            nfiles=$((nfiles + 1))
        fi
    done
    if (($# > 0 && nfiles == 0)); then
        found=($(compgen -f -- "$cur" || :))
    fi
    COMPREPLY=("${found[@]}")
    # quoting and a '/' after directory names, when bash is completing
    compopt -o filenames 2> /dev/null || :
    return 0
}

# _mge_values TOOL OPTION CUR: fills COMPREPLY with values for OPTION.
_mge_values() {
    local tool=$1 opt=$2 cur=$3 words
    case $opt in
    --device) words="cpu sim cuda cuda:0" ;;
    --optimizer) words="sgd adam adamw" ;;
    --method) words="minmax percentile entropy" ;;
    --dtype) words="int8 f16 bf16" ;;
    --loss) words="cross_entropy mse" ;;
    --emit) words="mge text onnx" ;;
    --sort) words="time flops name" ;;
    --schedule) words="constant step: cosine cosine:" ;;
    --passes)
        # a comma-separated list: complete its last item
        local head="" last=$cur p
        if [[ $cur == *,* ]]; then
            head="${cur%,*},"
            last=${cur##*,}
        fi
        COMPREPLY=()
        for p in $("$tool" --list-passes 2> /dev/null | awk '$1 !~ /^-O/ { print $1 }'); do
            [[ $p == "$last"* ]] && COMPREPLY+=("$head$p")
        done
        compopt -o nospace 2> /dev/null || :
        return 0
        ;;
    --data | --val | --calib)
        _mge_files "$cur" npz npy tar zip gz idx1-ubyte idx3-ubyte
        local d
        for d in fashion-mnist fashion-mnist:test; do
            [[ $d == "$cur"* && " ${COMPREPLY[*]} " != *" $d "* ]] && COMPREPLY+=("$d")
        done
        return 0
        ;;
    --weights | --params) _mge_files "$cur" npz; return 0 ;;
    --input | -i | --check)
        # mge-run --input NAME=FILE: the file after '='
        if [[ $cur == *=* ]]; then
            local name=${cur%%=*}=
            _mge_files "${cur#*=}" npy
            COMPREPLY=("${COMPREPLY[@]/#/$name}")
        else
            _mge_files "$cur" npy
        fi
        return 0
        ;;
    --resume) _mge_files "$cur" mge; return 0 ;;
    --baseline | --report | --trace) _mge_files "$cur" json; return 0 ;;
    --log) _mge_files "$cur" jsonl csv; return 0 ;;
    -o | --output) _mge_files "$cur"; return 0 ;;
    *) COMPREPLY=(); return 0 ;;   # numbers, names, shapes: nothing to offer
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur" || :))
}

# The completion function of every tool (complete -F).
_mge_complete() {
    local tool=${COMP_WORDS[0]##*/} cur=${COMP_WORDS[COMP_CWORD]} prev="" opt=""
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()
    _mge_opts "${COMP_WORDS[0]}"
    local args=${_mge_args_cache[${COMP_WORDS[0]}]}
    # --opt=VALUE arrives as "--opt" "=" "VALUE" (or "--opt" "=" while empty)
    if [[ $cur == "=" ]]; then
        opt=$prev
        cur=""
    elif [[ $prev == "=" ]] && ((COMP_CWORD > 1)); then
        opt=${COMP_WORDS[COMP_CWORD - 2]}
        # --input NAME=FILE: the file after NAME=
        if [[ $opt != -* ]] && ((COMP_CWORD > 2)) && [[ $args == *" ${COMP_WORDS[COMP_CWORD - 3]} "* ]]; then
            _mge_files "$cur" npy
            return 0
        fi
    elif [[ $args == *" $prev "* ]]; then
        opt=$prev
    fi
    if [[ -n $opt ]]; then
        _mge_values "${COMP_WORDS[0]}" "$opt" "$cur"
        return 0
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "${_mge_opts_cache[${COMP_WORDS[0]}]}" -- "$cur" || :))
        return 0
    fi
    # the model (mge-dump also shows tensor files)
    case $tool in
    mge-dump) _mge_files "$cur" mgt mge onnx npy npz ;;
    *) _mge_files "$cur" mgt mge onnx ;;
    esac
}

complete -F _mge_complete mge-run mge-dump mge-opt mge-train mge-bench mge-prof mge-quant
