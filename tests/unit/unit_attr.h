/* unit_attr.h — attribute shorthands for the unit tests. */
#ifndef MGE_UNIT_ATTR_H
#define MGE_UNIT_ATTR_H
#include <string.h>

#include "mge.h"

/* key = v (INT, BOOL, DTYPE, or an INTS of one value) */
static inline mge_attr A(int key, int64_t v)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = 1;
    a.i[0] = v;
    return a;
}

/* key = [v0, ..., v(n-1)] (INTS) */
static inline mge_attr A_ints(int key, int n, const int64_t *v)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = n;
    for (int i = 0; i < n; i++)
        a.i[i] = v[i];
    return a;
}

/* key = f (FLOAT) */
static inline mge_attr A_f(int key, double f)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = 1;
    a.f = f;
    return a;
}
#endif
