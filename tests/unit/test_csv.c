/* test_csv.c — the CSV table reader (formats/csv.c): header detection,
 * quoting, line ends, the line and column of every kind of bad cell,
 * column selection and the dataset it makes. */
#include "csv.h"
#include "unit.h"

static mge_status parse(const char *text, int header, mge_csv *t, mge_error *err)
{
    mge_error_clear(err);
    return mge_csv_read_mem(text, strlen(text), header, "t.csv", t, err);
}

static void test_header_auto(void)
{
    mge_csv t;
    mge_error err;
    CHECK_OK(parse("a,b,c\n1,2,3\n4,5,6\n", MGE_CSV_HEADER_AUTO, &t, &err), err);
    CHECK(t.ncols == 3 && t.nrows == 2);
    CHECK(t.names && strcmp(t.names[1], "b") == 0);
    CHECK(t.v[0] == 1 && t.v[5] == 6);
    mge_csv_free(&t);
    /* all numbers: no header */
    CHECK_OK(parse("1,2\n3,4\n", MGE_CSV_HEADER_AUTO, &t, &err), err);
    CHECK(!t.names && t.nrows == 2 && t.v[3] == 4);
    mge_csv_free(&t);
    /* a numeric header when asked for */
    CHECK_OK(parse("1,2\n3,4\n", MGE_CSV_HEADER_YES, &t, &err), err);
    CHECK(t.names && strcmp(t.names[0], "1") == 0 && t.nrows == 1);
    mge_csv_free(&t);
    /* no header asked for: the names are bad numbers of line 1 */
    CHECK(parse("a,b\n3,4\n", MGE_CSV_HEADER_NO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "t.csv: line 1, column 1: 'a' is not a number"), "%s", err.msg);
    CHECK(t.ncols == 0 && !t.v);
}

static void test_syntax(void)
{
    mge_csv t;
    mge_error err;
    /* BOM, CRLF, quotes with a comma, a doubled quote and a newline inside, blank lines, spaces */
    const char *s = "\xef\xbb\xbf\"x, y\",\"say \"\"hi\"\"\",\"two\nlines\"\r\n\r\n 1 , 2,3\r\n   \n4,\"5\",6e1\n\n";
    CHECK_OK(parse(s, MGE_CSV_HEADER_AUTO, &t, &err), err);
    CHECK(t.ncols == 3 && t.nrows == 2);
    CHECK(t.names && strcmp(t.names[0], "x, y") == 0 && strcmp(t.names[1], "say \"hi\"") == 0 &&
          strcmp(t.names[2], "two\nlines") == 0);
    CHECK(t.v[0] == 1 && t.v[1] == 2 && t.v[4] == 5 && t.v[5] == 60);
    mge_csv_free(&t);
    /* no final newline */
    CHECK_OK(parse("a\n7", MGE_CSV_HEADER_AUTO, &t, &err), err);
    CHECK(t.nrows == 1 && t.v[0] == 7);
    mge_csv_free(&t);
}

static void test_errors(void)
{
    mge_csv t;
    mge_error err;
    CHECK(parse("a,b\n1,2\n3,x5\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "line 3, column 2 ('b'): 'x5' is not a number"), "%s", err.msg);
    CHECK(parse("a,b\n1,\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "line 2, column 2 ('b'): empty cell"), "%s", err.msg);
    CHECK(parse("a,b\n1,2,3\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "line 2: 3 cells, but the header has 2"), "%s", err.msg);
    CHECK(parse("1,2\n3\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "line 2: 1 cells, but the first row has 2"), "%s", err.msg);
    /* a line count that includes the newlines inside quotes */
    CHECK(parse("\"a\nb\",c\n1,2\nnan,3\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "line 4, column 1 ('a\nb'): 'nan' is not a number"), "%s", err.msg);
    CHECK(parse("a,b\n1,inf\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK(parse("a,\"b\n1,2\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "never closed"), "%s", err.msg);
    CHECK(parse("\"a\"x,b\n1,2\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "after a closing quote"), "%s", err.msg);
    CHECK(parse("a,b\n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "no data rows after the header"), "%s", err.msg);
    CHECK(parse("", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK(parse("\n\n  \n", MGE_CSV_HEADER_AUTO, &t, &err) == MGE_ERR_FORMAT);
    CHECK(t.ncols == 0 && !t.names && !t.v);
}

static void test_columns(void)
{
    mge_csv t;
    mge_error err;
    CHECK_OK(parse("a,b,c,d,a2\n1,2,3,4,5\n", MGE_CSV_HEADER_AUTO, &t, &err), err);
    int cols[8], n;
    CHECK_OK(mge_csv_columns(&t, "c,1,4-5", cols, &n, &err), err);
    CHECK(n == 4 && cols[0] == 2 && cols[1] == 0 && cols[2] == 3 && cols[3] == 4);
    CHECK(mge_csv_column(&t, "d") == 3 && mge_csv_column(&t, "5") == 4 && mge_csv_column(&t, "6") == -1);
    CHECK(mge_csv_column(&t, "0") == -1 && mge_csv_column(&t, "q") == -1);
    CHECK(mge_csv_columns(&t, "a,q", cols, &n, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "no column 'q' (the header has 'a', 'b', 'c', 'd', 'a2')"), "%s", err.msg);
    CHECK(mge_csv_columns(&t, "a,1", cols, &n, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "listed twice"), "%s", err.msg);
    CHECK(mge_csv_columns(&t, "3-2", cols, &n, &err) == MGE_ERR_INVALID);
    mge_csv_free(&t);
    CHECK_OK(parse("x,x\n1,2\n", MGE_CSV_HEADER_AUTO, &t, &err), err);
    CHECK(mge_csv_column(&t, "x") == -2);
    CHECK(mge_csv_no_column(&t, "x", &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "more than once"), "%s", err.msg);
    mge_csv_free(&t);
}

static void test_dataset(void)
{
    mge_csv t;
    mge_error err;
    mge_dataset ds;
    CHECK_OK(parse("f,g,label,r\n1,2,0,0.5\n3,4,2,1.5\n", MGE_CSV_HEADER_AUTO, &t, &err), err);
    int cols[2] = {1, 0};
    CHECK_OK(mge_csv_dataset(&t, cols, 2, 2, "t.csv", &ds, &err), err);
    CHECK(ds.n == 2 && ds.count == 2 && ds.positional);
    CHECK(ds.t[0].dtype == MGE_F32 && ds.t[0].ndim == 2 && ds.t[0].dims[1] == 2);
    const float *x = ds.t[0].data;
    CHECK(x[0] == 2 && x[1] == 1 && x[2] == 4 && x[3] == 3);
    CHECK(ds.t[1].dtype == MGE_I64 && ((int64_t *)ds.t[1].data)[1] == 2);
    mge_dataset_free(&ds);
    /* a non-integer target stays float */
    CHECK_OK(mge_csv_dataset(&t, cols, 2, 3, "t.csv", &ds, &err), err);
    CHECK(ds.t[1].dtype == MGE_F32 && ((float *)ds.t[1].data)[1] == 1.5f);
    mge_dataset_free(&ds);
    /* no target: features only */
    CHECK_OK(mge_csv_dataset(&t, cols, 1, -1, "t.csv", &ds, &err), err);
    CHECK(ds.n == 1 && ds.t[0].dims[1] == 1);
    mge_dataset_free(&ds);
    mge_csv_free(&t);
}

int main(void)
{
    RUN(test_header_auto);
    RUN(test_syntax);
    RUN(test_errors);
    RUN(test_columns);
    RUN(test_dataset);
    return unit_done();
}
