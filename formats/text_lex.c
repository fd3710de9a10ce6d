/* text_lex.c — tokens of the text form (.mgt).
 *
 * The source is a byte range that may hold anything (NUL bytes, binary
 * garbage, megabyte lines); every byte is looked at once and nothing is
 * assumed NUL-terminated. Numbers are converted here with overflow checks
 * so the parser only sees values that fit. */
#include "text.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NUMBER_TEXT 256   /* longer number literals are refused */

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int is_name_char(int c)
{
    return is_alpha(c) || is_digit(c) || c == '.';
}

int mge_text_is_name(const char *s)
{
    if (!s || !is_alpha((unsigned char)s[0]))
        return 0;
    for (const char *p = s + 1; *p; p++)
        if (!is_name_char((unsigned char)*p))
            return 0;
    return 1;
}

size_t mge_text_scan_number(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    while (i < n && is_digit((unsigned char)s[i]))
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && is_digit((unsigned char)s[i]))
            i++, digits++;
    }
    if (!digits)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1, ed = 0;
        if (j < n && (s[j] == '-' || s[j] == '+'))
            j++;
        while (j < n && is_digit((unsigned char)s[j]))
            j++, ed++;
        if (!ed)
            return 0; /* "1e" is malformed, not the number 1 and a name */
        i = j;
    }
    return i;
}

int mge_text_is_number(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > MAX_NUMBER_TEXT || mge_text_scan_number(s, n) != n)
        return 0;
    return !isinf(strtod(s, NULL));
}

int mge_text_is_bare_init(const char *s)
{
    if (!s)
        return 0;
    if (strcmp(s, "zeros") == 0 || strcmp(s, "ones") == 0)
        return 1;
    size_t k;
    if (strncmp(s, "uniform(", 8) == 0)
        k = 8;
    else if (strncmp(s, "normal(", 7) == 0)
        k = 7;
    else
        return 0;
    size_t len = strlen(s + k);
    if (len < 2 || s[k + len - 1] != ')' || len - 1 > MAX_NUMBER_TEXT)
        return 0;
    char num[MAX_NUMBER_TEXT + 1];
    memcpy(num, s + k, len - 1);
    num[len - 1] = 0;
    return mge_text_is_number(num);
}

void mge_lex_init(mge_lexer *lx, const char *src, size_t n)
{
    memset(lx, 0, sizeof *lx);
    lx->src = src;
    lx->n = n;
    lx->line = 1;
    lx->col = 1;
}

void mge_tok_clear(mge_tok *t)
{
    free(t->s);
    memset(t, 0, sizeof *t);
}

/* Column arithmetic saturates: a line of gigabytes still gets a position. */
static int col_plus(int col, size_t k)
{
    size_t room = (size_t)(INT_MAX - col);
    return k > room ? INT_MAX : col + (int)k;
}

static void advance(mge_lexer *lx, size_t k)
{
    for (size_t i = 0; i < k && lx->pos < lx->n; i++) {
        if (lx->src[lx->pos] == '\n') {
            if (lx->line < INT_MAX)
                lx->line++;
            lx->col = 1;
        } else if (lx->col < INT_MAX) {
            lx->col++;
        }
        lx->pos++;
    }
}

/* What a token that starts like a number but is none was meant to be: a
 * name with a '-' (x.a-b, a state_dict key like block1-0.weight), an
 * operator the text form does not have (-x), a name that starts with a
 * digit (0.weight, 1x), or an exponent without digits (1e). */
static mge_status bad_number(const mge_lexer *lx, const mge_tok *t, mge_error *err)
{
    const char *s = lx->src;
    size_t at = lx->pos, b = at, e = at + 1;
    while (b > 0 && is_name_char((unsigned char)s[b - 1]))
        b--;
    while (e < lx->n && (is_name_char((unsigned char)s[e]) || s[e] == '-' || s[e] == '+'))
        e++;
    char word[65], fixed[66];
    int len = e - b > 64 ? 64 : (int)(e - b);
    memcpy(word, s + b, (size_t)len);
    word[len] = 0;
    char c = s[at];
    if ((c == '-' || c == '+') && b < at) {
        for (int i = 0; i <= len; i++)
            fixed[i] = word[i] == '-' || word[i] == '+' ? '_' : word[i];
        return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col,
                            "'%s' is not a name: names hold letters, digits, '_' and '.' only, not '%c'; rename "
                            "it, e.g. %s (and the keys of its weights the same way, see mge-opt(1))%s",
                            word, c, fixed,
                            lx->depth > 0 ? "; nor is there a '-' operator: sub(a, b) subtracts" : "");
    }
    if (c == '-' || c == '+')
        return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col,
                            "'%c' before a name: the text form has no operators (neg(x) negates, sub(a, b) "
                            "subtracts, add(a, b) adds)", c);
    size_t i = at;
    while (i < lx->n && (is_digit((unsigned char)s[i]) || s[i] == '.'))
        i++;
    if (i > at && i < lx->n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1 < lx->n && (s[i + 1] == '-' || s[i + 1] == '+') ? i + 2 : i + 1;
        if (j >= lx->n || !is_digit((unsigned char)s[j]))
            return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col,
                                "malformed number '%s' (an exponent needs digits, as in 1e-05)", word);
    }
    if (is_digit((unsigned char)c)) {
        snprintf(fixed, sizeof fixed, "_%s", word);
        return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col,
                            "malformed number '%s' (a name cannot start with a digit: start it with a letter or "
                            "'_', e.g. %s)", word, fixed);
    }
    return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "malformed number '%s'", word);
}

static mge_status lex_number(mge_lexer *lx, mge_tok *t, mge_error *err)
{
    const char *s = lx->src + lx->pos;
    size_t avail = lx->n - lx->pos;
    size_t len = mge_text_scan_number(s, avail);
    if (!len || (len < avail && (is_name_char((unsigned char)s[len]))))
        return bad_number(lx, t, err);
    if (len > MAX_NUMBER_TEXT)
        return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "number literal too long (over %d characters)",
                            MAX_NUMBER_TEXT);
    char buf[MAX_NUMBER_TEXT + 1];
    memcpy(buf, s, len);
    buf[len] = 0;
    t->p = s;
    t->n = len;
    int isfloat = memchr(buf, '.', len) || memchr(buf, 'e', len) || memchr(buf, 'E', len);
    errno = 0;
    double d = strtod(buf, NULL);
    if (isinf(d))
        return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "number %s is out of range", buf);
    t->f = d;
    if (!isfloat) {
        /* exact int64 with overflow check; beyond it the literal is still a valid float */
        const char *q = buf;
        int neg = *q == '-';
        if (*q == '-' || *q == '+')
            q++;
        uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        int over = 0;
        for (; *q; q++) {
            uint64_t dg = (uint64_t)(*q - '0');
            if (v > (lim - dg) / 10) {
                over = 1;
                break;
            }
            v = v * 10 + dg;
        }
        if (!over) {
            t->type = MGE_T_INT;
            t->i = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
            return MGE_OK;
        }
        t->bigint = 1;
    }
    t->type = MGE_T_FLOAT;
    return MGE_OK;
}

static mge_status lex_string(mge_lexer *lx, mge_tok *t, mge_error *err)
{
    const char *s = lx->src;
    size_t i = lx->pos + 1, cap = 16, n = 0;
    char *out = malloc(cap);
    if (!out)
        return mge_error_at(err, MGE_ERR_NOMEM, t->line, t->col, "out of memory");
    for (;;) {
        if (i >= lx->n || s[i] == '\n') {
            free(out);
            return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "unterminated string");
        }
        unsigned char c = (unsigned char)s[i];
        int ecol = col_plus(t->col, i - lx->pos);
        if (c == '"') {
            i++;
            break;
        }
        if (c == 0) {
            free(out);
            return mge_error_at(err, MGE_ERR_FORMAT, t->line, ecol, "NUL byte in a string");
        }
        if (c == '\\') {
            if (i + 1 >= lx->n) {
                free(out);
                return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "unterminated string");
            }
            char e = s[i + 1];
            i += 2;
            switch (e) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'x': {
                int v = 0;
                for (int k = 0; k < 2; k++) {
                    char h = i < lx->n ? s[i] : 0;
                    int d = is_digit((unsigned char)h) ? h - '0'
                            : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                            : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                    if (d < 0) {
                        free(out);
                        return mge_error_at(err, MGE_ERR_FORMAT, t->line, ecol, "\\x needs two hex digits");
                    }
                    v = v * 16 + d;
                    i++;
                }
                if (v == 0) {
                    free(out);
                    return mge_error_at(err, MGE_ERR_FORMAT, t->line, ecol, "NUL byte in a string");
                }
                c = (unsigned char)v;
                break;
            }
            default:
                free(out);
                return mge_error_at(err, MGE_ERR_FORMAT, t->line, ecol,
                                    "unknown escape in string (use \\\" \\\\ \\n \\t \\r \\xHH)");
            }
        } else {
            i++;
        }
        if (n + 2 > cap) {
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(out, cap * 2);
            if (!nb) {
                free(out);
                return mge_error_at(err, MGE_ERR_NOMEM, t->line, t->col, "out of memory");
            }
            out = nb;
            cap *= 2;
        }
        out[n++] = (char)c;
    }
    out[n] = 0;
    t->type = MGE_T_STRING;
    t->p = s + lx->pos;
    t->n = i - lx->pos;
    t->s = out;
    t->slen = n;
    advance(lx, i - lx->pos);
    return MGE_OK;
}

mge_status mge_lex_next(mge_lexer *lx, mge_tok *t, mge_error *err)
{
    memset(t, 0, sizeof *t);
    const char *s = lx->src;
    for (;;) {
        if (lx->pos >= lx->n) {
            t->type = MGE_T_EOF;
            t->line = lx->line;
            t->col = lx->col;
            t->p = s + lx->n;
            return MGE_OK;
        }
        char c = s[lx->pos];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            advance(lx, 1);
        } else if (c == '#') {
            const char *nl = memchr(s + lx->pos, '\n', lx->n - lx->pos);
            size_t k = nl ? (size_t)(nl - (s + lx->pos)) : lx->n - lx->pos;
            lx->pos += k; /* the comment stays on one line: only the column moves */
            lx->col = col_plus(lx->col, k);
        } else if (c == '\n' && lx->depth > 0) {
            advance(lx, 1);
        } else {
            break;
        }
    }
    t->line = lx->line;
    t->col = lx->col;
    t->p = s + lx->pos;
    t->n = 1;
    unsigned char c = (unsigned char)s[lx->pos];
    mge_ttype punct = MGE_T_EOF;
    switch (c) {
    case '\n': punct = MGE_T_NL; break;
    case '(': punct = MGE_T_LPAREN; break;
    case ')': punct = MGE_T_RPAREN; break;
    case '[': punct = MGE_T_LBRACK; break;
    case ']': punct = MGE_T_RBRACK; break;
    case ',': punct = MGE_T_COMMA; break;
    case '=': punct = MGE_T_EQ; break;
    case ':': punct = MGE_T_COLON; break;
    default: break;
    }
    if (punct != MGE_T_EOF) {
        if (punct == MGE_T_LPAREN || punct == MGE_T_LBRACK)
            lx->depth += lx->depth < INT_MAX;
        if ((punct == MGE_T_RPAREN || punct == MGE_T_RBRACK) && lx->depth > 0)
            lx->depth--;
        t->type = punct;
        advance(lx, 1);
        return MGE_OK;
    }
    if (is_alpha(c)) {
        size_t i = lx->pos + 1;
        while (i < lx->n && is_name_char((unsigned char)s[i]))
            i++;
        t->type = MGE_T_NAME;
        t->n = i - lx->pos;
        advance(lx, t->n);
        return MGE_OK;
    }
    if (is_digit(c) || c == '.' || c == '-' || c == '+') {
        /* -inf / +inf: the printer writes infinities that way */
        size_t avail = lx->n - lx->pos;
        if ((c == '-' || c == '+') && avail >= 4 && memcmp(s + lx->pos + 1, "inf", 3) == 0 &&
            (avail == 4 || !is_name_char((unsigned char)s[lx->pos + 4]))) {
            t->type = MGE_T_FLOAT;
            t->f = c == '-' ? -INFINITY : INFINITY;
            t->n = 4;
            advance(lx, 4);
            return MGE_OK;
        }
        mge_status st = lex_number(lx, t, err);
        if (st)
            return st;
        if (t->type == MGE_T_INT && t->i == 0 && c == '-')
            t->f = -0.0; /* keeps the sign of a float zero written as "-0" */
        advance(lx, t->n);
        return MGE_OK;
    }
    if (c == '"')
        return lex_string(lx, t, err);
    if (c == 0)
        return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "unexpected NUL byte (is this a binary file?)");
    if (c < 0x20 || c >= 0x7f)
        return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "unexpected byte 0x%02x", c);
    return mge_error_at(err, MGE_ERR_FORMAT, t->line, t->col, "unexpected character '%c'", c);
}
