#!/usr/bin/env python3
"""doc_commands.py FILE... -- the shell commands a document shows, as JSON.

For tests/cli/docs.bats, which runs them. Markdown (.md): every fenced or
indented code block. Man pages (.1): the .nf/.fi blocks of the EXAMPLES
section, roff escapes undone. In a block with "$ " prompts only the prompted
lines are commands and the rest is their shown output; without prompts every
line is. A command goes on over lines that end in a backslash or inside
open quotes. Output: [{"file", "line", "cmd", "error"}], where "error" is an
"error:" line the shown output promises (the command must then fail with
it), else null. Standard library only.
"""
import json
import re
import sys


def open_state(text, state):
    """The quote state after text, starting in state (None, "'" or '"'),
    and whether the command goes on: the line ends in a backslash, or in a
    '|', '&&' or '||' that wants the next line. A '#' starting a word
    outside quotes ends the line (so a comment's apostrophe is no quote)."""
    i, n = 0, len(text)
    code = text
    while i < n:
        c = text[i]
        if state == "'":
            if c == "'":
                state = None
        elif state == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                state = None
        else:
            if c == "\\":
                if i == n - 1:
                    return state, True
                i += 1
            elif c in "'\"":
                state = c
            elif c == "#" and (i == 0 or text[i - 1] in " \t;|&("):
                code = text[:i]
                break
        i += 1
    return state, state is None and code.rstrip().endswith(("|", "&&"))


def join_commands(lines):
    """lines: [(lineno, text, is_prompt)] of one block. Returns
    [(lineno, cmd, output_lines)]."""
    prompted = any(p for _, _, p in lines)
    cmds = []
    cur = None
    state, cont = None, False
    for no, text, is_prompt in lines:
        if cur is not None and (state is not None or cont):
            cur[1].append(text)
        elif (is_prompt or not prompted) and text.strip():
            cur = [no, [text], []]
            cmds.append(cur)
            state = None
        else:
            if cur is not None and text.strip():
                cur[2].append(text)
            continue
        state, cont = open_state(text, state)
        if not cont and state is None and not prompted:
            cur = None
    return [(no, "\n".join(body), out) for no, body, out in cmds]


def markdown_blocks(text):
    """[(lineno, text, is_prompt)] per code block."""
    blocks, cur, fence = [], None, None
    prev_blank = True
    for no, raw in enumerate(text.split("\n"), 1):
        if fence is not None:
            if raw.strip().startswith(fence):
                blocks.append(cur)
                cur, fence = None, None
            else:
                cur.append((no, raw))
            continue
        m = re.match(r"^\s*(```+|~~~+)", raw)
        if m:
            if cur is not None:
                blocks.append(cur)
            fence, cur = m.group(1), []
            continue
        if raw.startswith("    ") and (cur is not None or prev_blank):
            if cur is None:
                cur = []
            cur.append((no, raw[4:]))
        elif cur is not None and not raw.strip():
            cur.append((no, ""))
        else:
            if cur is not None:
                blocks.append(cur)
            cur = None
        prev_blank = not raw.strip()
    if cur is not None:
        blocks.append(cur)
    out = []
    for b in blocks:
        lines = []
        for no, t in b:
            p = t.startswith("$ ")
            lines.append((no, t[2:] if p else t, p))
        out.append(lines)
    return out


ROFF = [("\\-", "-"), ("\\e", "\\"), ("\\&", ""), ("\\(aq", "'"), ("\\(dq", '"'), ("\\(mu", "x"), ("\\(em", "--")]


def unroff(t):
    out, i = [], 0
    while i < len(t):
        for k, v in ROFF:
            if t.startswith(k, i):
                out.append(v)
                i += len(k)
                break
        else:
            out.append(t[i])
            i += 1
    return "".join(out)


def man_blocks(text):
    blocks, cur, in_ex = [], None, False
    for no, raw in enumerate(text.split("\n"), 1):
        if raw.startswith(".SH"):
            in_ex = raw.split(None, 1)[1:] == ["EXAMPLES"]
            continue
        if not in_ex:
            continue
        if raw.startswith(".nf"):
            cur = []
        elif raw.startswith(".fi"):
            if cur is not None:
                blocks.append(cur)
            cur = None
        elif cur is not None and not raw.startswith("."):
            t = unroff(raw)
            p = t.startswith("$ ")
            cur.append((no, t[2:] if p else t, p))
    return blocks


def commands(path):
    text = open(path, encoding="utf-8").read()
    blocks = markdown_blocks(text) if path.endswith(".md") else man_blocks(text)
    res = []
    for b in blocks:
        for no, cmd, out in join_commands(b):
            errs = [o for o in out if " error: " in o]
            res.append({"file": path, "line": no, "cmd": cmd, "error": errs[0] if errs else None})
    return res


def main(argv):
    if len(argv) < 2:
        print("usage: doc_commands.py FILE...", file=sys.stderr)
        return 2
    res = []
    for p in argv[1:]:
        if not (p.endswith(".md") or re.search(r"\.[1-8]$", p)):
            print("doc_commands.py: %s: not a .md file or a man page" % p, file=sys.stderr)
            return 2
        res += commands(p)
    json.dump(res, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
