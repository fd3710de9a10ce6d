/* text.h — the text form's lexer and the parser/printer internals they share
 * (formats/text_lex.c, text_parse.c, text_print.c; grammar in mge-text(5)). */
#ifndef MGE_TEXT_H
#define MGE_TEXT_H

#include "internal.h"

typedef enum mge_ttype {
    MGE_T_EOF = 0,
    MGE_T_NL,       /* end of a statement (newlines inside () and [] are not reported) */
    MGE_T_NAME,     /* [A-Za-z_][A-Za-z0-9_.]* */
    MGE_T_INT,      /* decimal integer that fits int64 (i, and f as a double) */
    MGE_T_FLOAT,    /* number with '.' or an exponent, or an integer beyond int64 (bigint) */
    MGE_T_STRING,   /* "..." with escapes decoded into s (NUL-terminated, owned by the token) */
    MGE_T_LPAREN,
    MGE_T_RPAREN,
    MGE_T_LBRACK,
    MGE_T_RBRACK,
    MGE_T_COMMA,
    MGE_T_EQ,
    MGE_T_COLON
} mge_ttype;

typedef struct mge_tok {
    mge_ttype type;
    const char *p;  /* source text of the token */
    size_t n;
    int line, col;  /* 1-based; columns count bytes */
    int64_t i;
    double f;
    int bigint;     /* MGE_T_FLOAT that was written as an integer too large for int64 */
    char *s;        /* MGE_T_STRING: decoded bytes (no NUL inside) */
    size_t slen;
} mge_tok;

typedef struct mge_lexer {
    const char *src;
    size_t n, pos;
    int line, col;
    int depth;      /* open ( and [ : newlines inside are skipped */
} mge_lexer;

void mge_lex_init(mge_lexer *lx, const char *src, size_t n);
/* Reads the next token into t (freeing nothing: the caller frees t->s with
 * mge_tok_clear). Lexical errors carry line and column. */
mge_status mge_lex_next(mge_lexer *lx, mge_tok *t, mge_error *err);
void mge_tok_clear(mge_tok *t);

/* Length of the number literal at s[0..n) (sign, digits, fraction, exponent),
 * or 0 when s does not start with one. The printer uses it to decide whether
 * text written back re-lexes as a single number. */
size_t mge_text_scan_number(const char *s, size_t n);
int mge_text_is_name(const char *s);   /* a complete NAME token */
int mge_text_is_number(const char *s); /* a complete, finite number token */

/* Init specs written without quotes: zeros, ones, uniform(NUMBER), normal(NUMBER). */
int mge_text_is_bare_init(const char *s);

/* Parser flags for mge_text_parse_ex. */
enum {
    MGE_TEXT_NO_FILES = 1u   /* `weights` statements are an error (fuzzing, untrusted text) */
};
mge_status mge_text_parse_ex(const char *src, size_t n, const char *base_dir, unsigned flags, mge_graph **g,
                             mge_error *err);

#endif
