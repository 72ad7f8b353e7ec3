/* Passes over a table's rows in C, each the same as a few numpy (or scipy) expressions in the module that calls
   it (readers/table.py, readers/hashing.py, readers/trec.py, join.py, kernel.py, stats.py), made in one pass with
   no row-length temporaries (those forms stay, where this module is not built). Text is parsed in readers/cparse.c,
   not here; nor is there vector code here (NDCG_MLFLOW_SCALAR, cparse's switch, has nothing to switch off).

   For the readers (through readers.text.native_reader):
   run_starts(offsets, data, out)          -> k: out[:k] the rows whose string differs from the one before
   fill_runs(values, starts, out)          out[starts[j]:starts[j + 1]] = values[j] (an id column's codes)
   mix_pairs(keys, codes, query_mix[, q_map])
                                           keys ^= query_mix[codes] (the (query, doc) keys; codes mapped first)
   repeats(keys, codes, start, stop[, max_rows])
                                           the duplicate check: a key twice within a run of equal codes
   copy_ranges(source, starts, lengths, dest, at)
                                           the bytes of a few rows of a string column (readers.table.take_rows)

   For the join, the kernel and the bootstrap (through kernel.native_kernel):
   map_codes(codes, q_map, out)            out = q_map[codes]; -> the rows whose q_map entry is negative
   probe(keys, bits, shift, sorted, starts, rows, at)
                                           the rows i whose key is one of the sorted keys, in order, each with
                                           its position there -> their number (a bit per key prefix first, then
                                           the keys of its 16-bit prefix: sorted[starts[p]:starts[p + 1]])
   rank_check(query, score, n_q, tied, starts)
                                           -> (-1, 0) unless each query's rows are one block in non-increasing
                                           score order; else (k, b): tied[:k] the positions i with
                                           query[i] == query[i + 1] and score[i] == score[i + 1], starts[:b] the
                                           blocks' first rows
   group_order(offsets, data, sizes, desc, out)   each string's place in its group, in byte order (see below)
   resampled_sums(draws, indices, n, mat, out)
                                           out[r] = the rows of mat drawn by resample r, added in draw order (the
                                           bootstrap's sums: stats.py's sparse product, with no sparse matrix)

   group_order sorts each group on its own (a stable merge sort; insertion sort for its runs of 16 rows): tied
   groups are mostly a few rows, and no sort of every tied row at once is needed.
*/
#include "cbuffers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX_BITS 16 /* join.py's PROBE_PREFIX_BITS */

static PyObject *map_codes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *codes_obj, *map_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &codes_obj, &map_obj, &out_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *codes = view_of(&vs, codes_obj, 0, 4, "codes");
    Py_buffer *map = view_of(&vs, map_obj, 0, 4, "q_map");
    Py_buffer *out = view_of(&vs, out_obj, 1, 4, "out");
    if (out == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t n = codes->len / 4, m = map->len / 4, unmapped = 0;
    const int32_t *c = codes->buf, *q = map->buf;
    int32_t *o = out->buf;
    int bad = out->len < codes->len;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            int32_t k = c[i];
            if (k < 0 || k >= m) {
                bad = 1;
                break;
            }
            o[i] = q[k];
            unmapped += q[k] < 0;
        }
        Py_END_ALLOW_THREADS
    }
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "a code outside q_map, or an output too small");
        return NULL;
    }
    return PyLong_FromSsize_t(unmapped);
}

static PyObject *probe(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *keys_obj, *bits_obj, *sorted_obj, *starts_obj, *rows_obj, *at_obj;
    int shift;
    if (!PyArg_ParseTuple(args, "OOiOOOO", &keys_obj, &bits_obj, &shift, &sorted_obj, &starts_obj, &rows_obj,
                          &at_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *keys = view_of(&vs, keys_obj, 0, 8, "keys");
    Py_buffer *bits = view_of(&vs, bits_obj, 0, 1, "bits");
    Py_buffer *sorted = view_of(&vs, sorted_obj, 0, 8, "sorted");
    Py_buffer *starts = view_of(&vs, starts_obj, 0, 4, "starts");
    Py_buffer *rows = view_of(&vs, rows_obj, 1, 8, "rows");
    Py_buffer *at = view_of(&vs, at_obj, 1, 8, "at");
    if (at == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t n = keys->len / 8, m = sorted->len / 8, found = 0;
    const int32_t *st = starts->buf;
    int bad = shift < 1 || shift > 64 - PREFIX_BITS || bits->len < ((Py_ssize_t)1 << (64 - shift)) / 8 ||
              starts->len != ((Py_ssize_t)1 << PREFIX_BITS) * 4 + 4 || rows->len < keys->len || at->len < keys->len;
    for (Py_ssize_t p = 0; !bad && p < ((Py_ssize_t)1 << PREFIX_BITS); p++)
        bad = st[p] < 0 || st[p] > st[p + 1] || st[p + 1] > m;
    if (!bad) {
        const uint64_t *k = keys->buf, *sk = sorted->buf;
        const unsigned char *f = bits->buf;
        int64_t *r = rows->buf, *a = at->buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t key = k[i], b = key >> shift;
            if (!((f[b >> 3] >> (b & 7)) & 1))
                continue; /* (most rows: no judged key has these top bits) */
            uint64_t p = key >> (64 - PREFIX_BITS);
            for (int32_t j = st[p]; j < st[p + 1]; j++) {
                if (sk[j] == key) {
                    r[found] = i;
                    a[found] = j;
                    found++;
                    break;
                }
            }
        }
        Py_END_ALLOW_THREADS
    }
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "a shift outside 1-48, bits or starts not of their sizes, starts outside "
                                          "the sorted keys, or outputs too small");
        return NULL;
    }
    return PyLong_FromSsize_t(found);
}

static PyObject *rank_check(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *query_obj, *score_obj, *tied_obj, *starts_obj;
    Py_ssize_t n_queries;
    if (!PyArg_ParseTuple(args, "OOnOO", &query_obj, &score_obj, &n_queries, &tied_obj, &starts_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *query = view_of(&vs, query_obj, 0, 4, "query");
    Py_buffer *score = view_of(&vs, score_obj, 0, 8, "score");
    Py_buffer *tied = view_of(&vs, tied_obj, 1, 8, "tied");
    Py_buffer *starts = view_of(&vs, starts_obj, 1, 8, "starts");
    if (starts == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t n = query->len / 4, n_tied = 0, n_blocks = 0;
    int bad = score->len != n * 8 || tied->len < n * 8 || n_queries < 0 || starts->len < n_queries * 8;
    unsigned char *seen = bad ? NULL : calloc((size_t)n_queries + 1, 1);
    if (!bad && seen == NULL) {
        release_views(&vs);
        return PyErr_NoMemory();
    }
    if (!bad) {
        const int32_t *q = query->buf;
        const double *s = score->buf;
        int64_t *t = tied->buf, *st = starts->buf;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t i = 0;
        while (i < n) { /* a block of rows of one query */
            int32_t c = q[i];
            if (c < 0 || c >= n_queries) {
                bad = 1;
                break;
            }
            if (seen[c]) {
                n_tied = -1; /* the query's rows are in two blocks */
                break;
            }
            seen[c] = 1;
            st[n_blocks++] = i; /* (at most n_queries blocks: each query's one) */
            double before = s[i];
            Py_ssize_t j = i + 1;
            for (; j < n && q[j] == c; j++) {
                double x = s[j];
                if (x > before) {
                    n_tied = -1; /* a row scored above the one before it */
                    break;
                }
                if (x == before)
                    t[n_tied++] = j - 1;
                before = x;
            }
            if (n_tied < 0)
                break;
            i = j;
        }
        Py_END_ALLOW_THREADS
    }
    free(seen);
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "a query code outside 0-n_queries, arrays of unequal lengths, or outputs "
                                          "too small");
        return NULL;
    }
    return Py_BuildValue("(nn)", n_tied, n_tied < 0 ? (Py_ssize_t)0 : n_blocks);
}

/* group_order(offsets, data, sizes, descending, out): for each run of ``sizes[g]`` consecutive strings (an Arrow
   string array's int32 offsets and bytes), out[j] = j's place in its group in byte order (code point order for
   UTF-8), equal strings in their order; ``descending``: the reverse of that order. The same as numpy's lexsort
   by (group, sign * the strings' stable ranks), for groups of a few strings. */
static int less_than(const unsigned char *d, const int32_t *off, int64_t a, int64_t b)
{
    int32_t la = off[a + 1] - off[a], lb = off[b + 1] - off[b];
    int c = memcmp(d + off[a], d + off[b], (size_t)(la < lb ? la : lb));
    return c < 0 || (c == 0 && la < lb);
}

/* rows start .. start + m - 1 into p in stable string order: insertion sort for a few, merge sort beyond (tmp: m
   free slots) */
static void sort_rows(const unsigned char *d, const int32_t *off, int64_t *p, int64_t *tmp, int64_t start,
                      int64_t m)
{
    for (int64_t j = 0; j < m; j++)
        p[j] = start + j;
    const int64_t run = 16;
    for (int64_t lo = 0; lo < m; lo += run) { /* sorted runs of 16 */
        int64_t hi = lo + run < m ? lo + run : m;
        for (int64_t j = lo + 1; j < hi; j++) {
            int64_t row = p[j], at = j;
            while (at > lo && less_than(d, off, row, p[at - 1])) {
                p[at] = p[at - 1];
                at--;
            }
            p[at] = row;
        }
    }
    for (int64_t width = run; width < m; width *= 2) { /* merged pairwise, the left run first on equal strings */
        for (int64_t lo = 0; lo < m; lo += 2 * width) {
            int64_t mid = lo + width < m ? lo + width : m, hi = lo + 2 * width < m ? lo + 2 * width : m;
            int64_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                tmp[k++] = less_than(d, off, p[b], p[a]) ? p[b++] : p[a++];
            while (a < mid)
                tmp[k++] = p[a++];
            while (b < hi)
                tmp[k++] = p[b++];
            memcpy(p + lo, tmp + lo, sizeof(int64_t) * (size_t)(hi - lo));
        }
    }
}

static PyObject *group_order(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *offsets_obj, *data_obj, *sizes_obj, *out_obj;
    int descending;
    if (!PyArg_ParseTuple(args, "OOOpO", &offsets_obj, &data_obj, &sizes_obj, &descending, &out_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *offsets = view_of(&vs, offsets_obj, 0, 4, "offsets");
    Py_buffer *data = view_of(&vs, data_obj, 0, 1, "data");
    Py_buffer *sizes = view_of(&vs, sizes_obj, 0, 8, "sizes");
    Py_buffer *out = view_of(&vs, out_obj, 1, 8, "out");
    if (out == NULL) {
        release_views(&vs);
        return NULL;
    }
    const int32_t *off = offsets->buf;
    const int64_t *sz = sizes->buf;
    int64_t *o = out->buf;
    Py_ssize_t n = offsets->len / 4 - 1, g = sizes->len / 8, total = 0;
    int bad = n < 0 || out->len < n * 8;
    for (Py_ssize_t k = 0; !bad && k < g; k++) {
        bad = sz[k] < 1;
        total += sz[k];
    }
    bad = bad || total != n;
    for (Py_ssize_t i = 0; !bad && i < n; i++)
        bad = off[i] < 0 || off[i] > off[i + 1] || off[i + 1] > data->len;
    int64_t *perm = bad ? NULL : malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    int64_t *tmp = bad ? NULL : malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!bad && (perm == NULL || tmp == NULL)) {
        free(perm);
        free(tmp);
        release_views(&vs);
        return PyErr_NoMemory();
    }
    if (!bad) {
        const unsigned char *d = data->buf;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t start = 0;
        for (Py_ssize_t k = 0; k < g; k++) {
            int64_t m = sz[k];
            int64_t *p = perm + start;
            sort_rows(d, off, p, tmp + start, start, m);
            for (int64_t j = 0; j < m; j++)
                o[p[j]] = descending ? m - 1 - j : j;
            start += m;
        }
        Py_END_ALLOW_THREADS
    }
    free(perm);
    free(tmp);
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "group sizes that do not add up to the strings, or bad offsets");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *resampled_sums(PyObject *self, PyObject *args)
/* out[r, :] = the sum of mat[j, :] over the n draws j of resample r, added in draw order from 0.0 (the rows of a
   sparse matrix of ones times mat, as scipy's CSR product adds them). The draws are (c x n) indices (int64), or
   (c x n) uniforms u in [0, 1) (float64), each meaning the index min((int64)(u * n), n - 1). */
{
    (void)self;
    PyObject *draws_obj, *mat_obj, *out_obj;
    int indices;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OpnOO", &draws_obj, &indices, &n, &mat_obj, &out_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *draws = view_of(&vs, draws_obj, 0, 8, "draws");
    Py_buffer *mat = view_of(&vs, mat_obj, 0, 8, "mat");
    Py_buffer *out = view_of(&vs, out_obj, 1, 8, "out");
    if (out == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t cells = draws->len / 8, width = n > 0 ? mat->len / 8 / n : 0, c = n > 0 ? cells / n : 0;
    int bad = n < 1 || width < 1 || cells % n != 0 || mat->len / 8 != n * width || out->len / 8 != c * width;
    if (!bad) {
        const int64_t *idx = draws->buf;
        const double *u = draws->buf, *x = mat->buf;
        double *o = out->buf, scale = (double)n;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < c && !bad; r++) {
            double *y = o + r * width;
            for (Py_ssize_t q = 0; q < width; q++)
                y[q] = 0.0;
            for (Py_ssize_t t = r * n; t < (r + 1) * n; t++) {
                int64_t j;
                if (indices) {
                    j = idx[t];
                    if (j < 0 || j >= n) {
                        bad = 1;
                        break;
                    }
                } else {
                    double v = u[t] * scale;
                    if (!(v >= 0.0)) { /* (a negative or NaN draw) */
                        bad = 1;
                        break;
                    }
                    j = v < scale ? (int64_t)v : (int64_t)n - 1;
                }
                const double *row = x + j * width;
                for (Py_ssize_t q = 0; q < width; q++)
                    y[q] += row[q];
            }
        }
        Py_END_ALLOW_THREADS
    }
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "draws outside [0, n), or buffers whose sizes do not agree");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* run_starts(offsets(int32, n + 1), data, out(int64, n)) -> k: out[:k] the rows i where string i differs from
   string i - 1 (row 0 included) of an Arrow string array's buffers */
static PyObject *run_starts(PyObject *self, PyObject *args)
{
    (void)self;
    Views vs = {.n = 0};
    Py_buffer *offsets, *data, *out;
    Py_ssize_t n, k = 0;
    if (!string_args(args, &vs, &offsets, &data, &out, 8, &n)) {
        release_views(&vs);
        return NULL;
    }
    const int32_t *off = offsets->buf;
    const unsigned char *d = data->buf;
    int64_t *o = out->buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t len = off[i + 1] - off[i];
        if (i == 0 || len != off[i] - off[i - 1] || memcmp(d + off[i], d + off[i - 1], (size_t)len) != 0)
            o[k++] = i;
    }
    Py_END_ALLOW_THREADS
    release_views(&vs);
    return PyLong_FromSsize_t(k);
}

/* fill_runs(values(int32, k), starts(int64, k + 1), out(int32)): out[starts[j]:starts[j + 1]] = values[j] */
static PyObject *fill_runs(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *values_obj, *starts_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &values_obj, &starts_obj, &out_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *values = view_of(&vs, values_obj, 0, 4, "values");
    Py_buffer *starts = view_of(&vs, starts_obj, 0, 8, "starts");
    Py_buffer *out = view_of(&vs, out_obj, 1, 4, "out");
    if (out == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t k = values->len / 4, n = out->len / 4;
    const int32_t *v = values->buf;
    const int64_t *st = starts->buf;
    int32_t *o = out->buf;
    int bad = starts->len != (k + 1) * 8;
    for (Py_ssize_t j = 0; !bad && j < k; j++)
        bad = st[j] < 0 || st[j] > st[j + 1] || st[j + 1] > n;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < k; j++)
            for (int64_t i = st[j]; i < st[j + 1]; i++)
                o[i] = v[j];
        Py_END_ALLOW_THREADS
    }
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "run starts outside the output");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* mix_pairs(keys(uint64, n), codes(int32, n), query_mix(uint64, m)[, q_map(int32)]): keys[i] ^= query_mix[codes[i]];
   with q_map, codes[i] = q_map[codes[i]] first (in place): a part's codes made the whole file's */
static PyObject *mix_pairs(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *keys_obj, *codes_obj, *mix_obj, *map_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O", &keys_obj, &codes_obj, &mix_obj, &map_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *keys = view_of(&vs, keys_obj, 1, 8, "keys");
    Py_buffer *codes = view_of(&vs, codes_obj, map_obj != Py_None, 4, "codes");
    Py_buffer *mix = view_of(&vs, mix_obj, 0, 8, "query_mix");
    Py_buffer *map = map_obj != Py_None ? view_of(&vs, map_obj, 0, 4, "q_map") : mix;
    if (map == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t n = keys->len / 8, m = mix->len / 8, k = map_obj != Py_None ? map->len / 4 : 0;
    uint64_t *key = keys->buf;
    int32_t *c = codes->buf;
    const uint64_t *x = mix->buf;
    const int32_t *q = map_obj != Py_None ? map->buf : NULL;
    int bad = codes->len != n * 4;
    for (Py_ssize_t i = 0; !bad && i < n; i++)
        bad = q != NULL ? c[i] < 0 || c[i] >= k || q[c[i]] < 0 || q[c[i]] >= m : c[i] < 0 || c[i] >= m;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        if (q != NULL) {
            for (Py_ssize_t i = 0; i < n; i++) {
                int32_t g = q[c[i]];
                c[i] = g;
                key[i] ^= x[g];
            }
        } else {
            for (Py_ssize_t i = 0; i < n; i++)
                key[i] ^= x[c[i]];
        }
        Py_END_ALLOW_THREADS
    }
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "a code outside q_map or query_mix, or arrays of unequal lengths");
        return NULL;
    }
    Py_RETURN_NONE;
}

#define REPEAT_ROWS_MAX (1 << 20) /* the longest run of equal codes repeats() looks into (a 16 MB table) */

/* repeats(keys, codes, start, stop[, max_rows]) -> 1 when, within some run of equal codes in rows [start, stop), a
   key occurs twice; 0 when none does; -1 when a run is longer than max_rows (at most, and by default,
   REPEAT_ROWS_MAX) rows and no repeat was found before it (the caller sorts those rows). Each run's keys go into
   an open-addressing table of at least twice its rows (linear probing; 0 marks an empty slot, a key 0 is flagged
   apart), cleared for the next run: a query's table stays in the cache, and no sort is made. */
static PyObject *repeats(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *keys_obj, *codes_obj;
    Py_ssize_t start, stop, max_rows = REPEAT_ROWS_MAX;
    if (!PyArg_ParseTuple(args, "OOnn|n", &keys_obj, &codes_obj, &start, &stop, &max_rows))
        return NULL;
    if (max_rows < 0 || max_rows > REPEAT_ROWS_MAX)
        max_rows = REPEAT_ROWS_MAX;
    Views vs = {.n = 0};
    Py_buffer *keys = view_of(&vs, keys_obj, 0, 8, "keys");
    Py_buffer *codes = view_of(&vs, codes_obj, 0, 4, "codes");
    if (codes == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t n = keys->len / 8;
    if (codes->len != n * 4 || start < 0 || start > stop || stop > n) {
        release_views(&vs);
        PyErr_SetString(PyExc_ValueError, "keys and codes of unequal lengths, or a range outside them");
        return NULL;
    }
    const uint64_t *key = keys->buf;
    const int32_t *c = codes->buf;
    int found = 0, memory = 0;
    Py_BEGIN_ALLOW_THREADS
    uint64_t *table = NULL;
    Py_ssize_t capacity = 0;
    for (Py_ssize_t lo = start, hi; lo < stop && !found; lo = hi) {
        for (hi = lo + 1; hi < stop && c[hi] == c[lo]; hi++)
            ;
        Py_ssize_t rows = hi - lo;
        if (rows > max_rows) {
            found = -1;
            break;
        }
        int bits = 4;
        while (((Py_ssize_t)1 << bits) < 2 * rows)
            bits++;
        Py_ssize_t size = (Py_ssize_t)1 << bits;
        if (size > capacity) {
            free(table);
            capacity = size;
            table = malloc((size_t)capacity * 8);
            if (table == NULL) {
                memory = 1;
                break;
            }
        }
        memset(table, 0, (size_t)size * 8);
        uint64_t mask = (uint64_t)size - 1;
        int zero = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            uint64_t k = key[i];
            if (k == 0) {
                found = zero;
                zero = 1;
                if (found)
                    break;
                continue;
            }
            uint64_t s = (k * 0x9E3779B97F4A7C15ULL) >> (64 - bits);
            while (table[s] != 0 && table[s] != k)
                s = (s + 1) & mask;
            if (table[s] == k) {
                found = 1;
                break;
            }
            table[s] = k;
        }
    }
    free(table);
    Py_END_ALLOW_THREADS
    release_views(&vs);
    if (memory)
        return PyErr_NoMemory();
    return PyLong_FromLong(found);
}

/* copy_ranges(source, starts, lengths, dest, at): dest[at[i]:at[i] + lengths[i]] = source[starts[i]:starts[i] +
   lengths[i]] for every i (int64 arrays of one length), each range checked to lie within its buffer first: the
   bytes of a few rows of a string column, gathered (readers.table.gather_strings) */
static PyObject *copy_ranges(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *source_obj, *starts_obj, *lengths_obj, *dest_obj, *at_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &source_obj, &starts_obj, &lengths_obj, &dest_obj, &at_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *source = view_of(&vs, source_obj, 0, 1, "source");
    Py_buffer *starts = view_of(&vs, starts_obj, 0, 8, "starts");
    Py_buffer *lengths = view_of(&vs, lengths_obj, 0, 8, "lengths");
    Py_buffer *dest = view_of(&vs, dest_obj, 1, 1, "dest");
    Py_buffer *at = view_of(&vs, at_obj, 0, 8, "at");
    if (at == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t n = starts->len / 8;
    const int64_t *s = starts->buf, *l = lengths->buf, *a = at->buf;
    int bad = lengths->len != starts->len || at->len != starts->len;
    for (Py_ssize_t i = 0; !bad && i < n; i++)
        bad = s[i] < 0 || l[i] < 0 || a[i] < 0 || s[i] > source->len - l[i] || a[i] > dest->len - l[i];
    if (!bad) {
        const unsigned char *src = source->buf;
        unsigned char *dst = dest->buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            memcpy(dst + a[i], src + s[i], (size_t)l[i]);
        Py_END_ALLOW_THREADS
    }
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "arrays of unequal lengths, or a range outside its buffer");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"group_order", group_order, METH_VARARGS, "Each string's place in its group of consecutive strings."},
    {"map_codes", map_codes, METH_VARARGS, "out = q_map[codes]; the number of negative entries met."},
    {"probe", probe, METH_VARARGS, "The rows whose key's top bits are flagged, in order; their number."},
    {"resampled_sums", resampled_sums, METH_VARARGS, "Each resample's sums of the drawn rows, in draw order."},
    {"rank_check", rank_check, METH_VARARGS, "-1, or the tied positions of rows in query blocks by score."},
    {"run_starts", run_starts, METH_VARARGS, "The rows where a string differs from the one before."},
    {"fill_runs", fill_runs, METH_VARARGS, "Each run of rows set to its value."},
    {"mix_pairs", mix_pairs, METH_VARARGS, "keys ^= query_mix[codes], in place (codes = q_map[codes] first)."},
    {"repeats", repeats, METH_VARARGS, "1 when a key occurs twice in a run of equal codes of a range of rows."},
    {"copy_ranges", copy_ranges, METH_VARARGS, "dest[at[i]:at[i] + lengths[i]] = source[starts[i]:...], each i."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ckernel", "Passes over a table's rows for the readers, the join and the kernel, in C.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_ckernel(void) { return PyModule_Create(&module); }
