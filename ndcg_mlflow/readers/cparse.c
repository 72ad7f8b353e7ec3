/* The TREC reader's inner loop, and the id hashes, in C.

   parse_trec() reads a range of a TREC run or qrels file's bytes (whole lines) exactly as the line-by-line
   reader in trec.py does: fields are runs of bytes between runs of ASCII spaces and tabs, lines end with LF or
   CRLF, lines of nothing but spaces and tabs are skipped, a run line has at least six fields (those after the
   sixth are ignored), a qrels line exactly four, numbers follow text.parse_number's grammar and must be finite.
   It writes one row per data line: the query id's code (in order of first appearance within the range), the
   document id's bytes and its 64-bit hash (hashing.string_hashes), the score or grade, and the rank.

   It never chooses what a line means when the line-by-line reader would refuse it: on the first line it is not
   sure of (a field count, a number, a lone CR) it stops and says so, and the caller reads the file line by line,
   which names the line and its problem. Bytes that are not UTF-8 are found by a pass over the range made only
   when a byte above 0x7F was seen.

   Numbers: a decimal with at most 15 significant digits and a power of ten within 10^22 is exact in one
   multiplication or division of two exactly represented doubles (Clinger's fast path); every other number goes
   through strtod in the C locale. Both round correctly, as Python's float() does, so the doubles are the same.
*/
#include "../cbuffers.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ------------------------------------------------------------------------------------------------ hashes */

static inline uint64_t mix64(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBULL;
    h ^= h >> 31;
    return h;
}

#define VECTOR_HASH_MAX 64 /* hashing.py's _VECTOR_HASH_MAX: longer ids are hashed by the caller */

/* hashing.string_hashes of one id; sets *is_long (and returns 0) for an id longer than VECTOR_HASH_MAX */
static inline uint64_t id_hash(const unsigned char *s, Py_ssize_t n, int *is_long)
{
    if (n >= 1 && n <= 18 && (s[0] != '0' || n == 1)) {
        uint64_t v = 0;
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            unsigned d = (unsigned)s[i] - '0';
            if (d > 9)
                break;
            v = v * 10 + d;
        }
        if (i == n)
            return mix64(v + 0x9E3779B97F4A7C15ULL);
    }
    if (n > VECTOR_HASH_MAX) {
        *is_long = 1;
        return 0;
    }
    uint64_t h = 0xCBF29CE484222325ULL ^ (uint64_t)n;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001B3ULL;
    return mix64(h);
}

/* ------------------------------------------------------------------------------------------------ numbers */

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static locale_t c_locale;

/* text.parse_number's grammar, [+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?, over the whole field, and a
   finite value; 0 when the field is not such a number (the caller then lets the line-by-line reader decide) */
static int parse_number(const unsigned char *s, Py_ssize_t n, double *out)
{
    const unsigned char *p = s, *end = s + n;
    int negative = 0;
    if (p < end && (*p == '+' || *p == '-')) {
        negative = *p == '-';
        p++;
    }
    uint64_t m = 0;
    int digits = 0;       /* significant digits in m */
    int exp10 = 0;        /* m * 10^exp10 */
    int int_digits = 0, frac_digits = 0;
    int exact = 1;        /* m holds every significant digit */
    for (; p < end && (unsigned)(*p - '0') <= 9; p++, int_digits++) {
        if (m == 0 && *p == '0')
            continue;
        if (digits < 19) {
            m = m * 10 + (*p - '0');
            digits++;
        } else {
            exact = 0;
        }
    }
    if (p < end && *p == '.') {
        p++;
        for (; p < end && (unsigned)(*p - '0') <= 9; p++, frac_digits++) {
            if (m == 0 && *p == '0') {
                exp10--;
                continue;
            }
            if (digits < 19) {
                m = m * 10 + (*p - '0');
                digits++;
                exp10--;
            } else {
                exact = 0;
            }
        }
    }
    if (int_digits == 0 && frac_digits == 0)
        return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p == end)
            return 0;
        int e = 0;
        for (; p < end && (unsigned)(*p - '0') <= 9; p++)
            if (e < 100000)
                e = e * 10 + (*p - '0');
        if (p != end)
            return 0;
        exp10 += eneg ? -e : e;
    } else if (p != end) {
        return 0;
    }
    double v;
    if (m == 0) {
        v = 0.0;
    } else if (exact && digits <= 15 && exp10 >= -22 && exp10 <= 22) {
        v = (double)m;
        v = exp10 < 0 ? v / POW10[-exp10] : v * POW10[exp10];
    } else {
        char small[64];
        char *buf = n < (Py_ssize_t)sizeof(small) ? small : malloc((size_t)n + 1);
        if (buf == NULL)
            return 0;
        memcpy(buf, s, (size_t)n);
        buf[n] = 0;
        char *stop;
        errno = 0;
        v = strtod_l(buf, &stop, c_locale);
        int whole = stop == buf + n;
        if (buf != small)
            free(buf);
        if (!whole)
            return 0;
        if (!isfinite(v))
            return 0;
        *out = v; /* (strtod took the sign) */
        return 1;
    }
    if (!isfinite(v))
        return 0;
    *out = negative ? -v : v;
    return 1;
}

/* ------------------------------------------------------------------------------------------------ UTF-8 */

static int valid_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        for (Py_ssize_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------------ query ids */

typedef struct {
    Py_ssize_t start; /* offset of the id in the range's bytes */
    Py_ssize_t len;
} Span;

typedef struct {
    int32_t *slots; /* code + 1, 0 for empty */
    Py_ssize_t cap; /* a power of two */
    Span *ids;      /* by code */
    Py_ssize_t n, ids_cap;
} Interner;

static int interner_init(Interner *t)
{
    t->cap = 1024;
    t->slots = calloc((size_t)t->cap, sizeof(int32_t));
    t->ids_cap = 256;
    t->ids = malloc((size_t)t->ids_cap * sizeof(Span));
    t->n = 0;
    return t->slots != NULL && t->ids != NULL;
}

static void interner_free(Interner *t)
{
    free(t->slots);
    free(t->ids);
}

static inline uint64_t bytes_hash(const unsigned char *s, Py_ssize_t n)
{
    uint64_t h = 0xCBF29CE484222325ULL ^ (uint64_t)n;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001B3ULL;
    return mix64(h);
}

/* the code of an id (new ones numbered in order of first appearance); -1 when out of memory */
static int32_t intern(Interner *t, const unsigned char *base, Py_ssize_t start, Py_ssize_t len)
{
    const unsigned char *s = base + start;
    uint64_t mask = (uint64_t)t->cap - 1;
    uint64_t at = bytes_hash(s, len) & mask;
    for (;;) {
        int32_t slot = t->slots[at];
        if (slot == 0)
            break;
        Span *id = &t->ids[slot - 1];
        if (id->len == len && memcmp(base + id->start, s, (size_t)len) == 0)
            return slot - 1;
        at = (at + 1) & mask;
    }
    if (t->n >= INT32_MAX - 1)
        return -1;
    if (t->n == t->ids_cap) {
        Span *grown = realloc(t->ids, (size_t)t->ids_cap * 2 * sizeof(Span));
        if (grown == NULL)
            return -1;
        t->ids = grown;
        t->ids_cap *= 2;
    }
    int32_t code = (int32_t)t->n++;
    t->ids[code].start = start;
    t->ids[code].len = len;
    t->slots[at] = code + 1;
    if (t->n * 2 > t->cap) { /* grow and place every id again */
        Py_ssize_t cap = t->cap * 2;
        int32_t *slots = calloc((size_t)cap, sizeof(int32_t));
        if (slots == NULL)
            return -1;
        for (Py_ssize_t c = 0; c < t->n; c++) {
            uint64_t a = bytes_hash(base + t->ids[c].start, t->ids[c].len) & ((uint64_t)cap - 1);
            while (slots[a] != 0)
                a = (a + 1) & ((uint64_t)cap - 1);
            slots[a] = (int32_t)c + 1;
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    return code;
}

/* ------------------------------------------------------------------------------------------------ lines */

enum { OK = 0, REFUSED = 1, NO_MEMORY = 2 };

typedef struct {
    const unsigned char *data; /* the range */
    Py_ssize_t size;
    int qrels, want_rank;
    Py_ssize_t max_rows;
    int32_t *codes;
    int32_t *doc_offsets; /* max_rows + 1 */
    unsigned char *doc_data; /* size bytes */
    double *values, *ranks;
    uint64_t *doc_hash;
    /* out */
    Py_ssize_t rows, doc_bytes, long_ids, refused_row;
    int high_bytes;
    Interner queries;
} Job;

/* byte classes: a field's byte, a separator, a line feed, a carriage return, a byte above 0x7F */
enum { FIELD = 0, SEP = 1, LF = 2, CR = 3, HIGH = 4 };
static unsigned char CLASS[256];

static void init_classes(void)
{
    for (int c = 0; c < 256; c++)
        CLASS[c] = c >= 0x80 ? HIGH : FIELD;
    CLASS[' '] = CLASS['\t'] = SEP;
    CLASS['\n'] = LF;
    CLASS['\r'] = CR;
}

/* the first byte at or after q that is not printable ASCII (below 0x21 or above 0x7E... or 0x7F: a field byte
   all the same), eight bytes at a time: the lowest flagged byte of a word is exact (a borrow only runs upward) */
static inline const unsigned char *skip_plain(const unsigned char *q, const unsigned char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - q >= 8) {
        uint64_t w;
        memcpy(&w, q, 8);
        uint64_t special = (((w - 0x2121212121212121ULL) & ~w) | w) & 0x8080808080808080ULL;
        if (special)
            return q + (__builtin_ctzll(special) >> 3);
        q += 8;
    }
#endif
    while (q < end && *q > 0x20 && *q < 0x80)
        q++;
    return q;
}

static int parse_range(Job *j)
{
    const unsigned char *p = j->data, *end = j->data + j->size;
    const int need = j->qrels ? 4 : 6;
    const int doc_f = 2, value_f = j->qrels ? 3 : 4;
    Py_ssize_t rows = 0, doc_pos = 0;
    int high = 0;
    int32_t last_code = -1;
    Py_ssize_t last_start = 0, last_len = -1;
    j->doc_offsets[0] = 0;
    while (p < end) {
        /* one line: its fields (the first six kept), up to its LF (or CRLF, or the end of the range) */
        const unsigned char *fs[6];
        Py_ssize_t fl[6];
        int nf = 0;
        const unsigned char *q = p;
        for (;;) {
            while (q < end && CLASS[*q] == SEP)
                q++;
            if (q >= end)
                break;
            unsigned cls = CLASS[*q];
            if (cls == LF)
                break;
            if (cls == CR) {
                if (q + 1 < end && q[1] == '\n') {
                    q++;
                    break;
                }
                j->refused_row = rows; /* a CR not followed by a LF */
                return REFUSED;
            }
            const unsigned char *f = q;
            for (;;) {
                q = skip_plain(q, end);
                if (q >= end)
                    break;
                cls = CLASS[*q];
                if (cls == HIGH) /* (bytes above 0x7F: checked as UTF-8 at the end) */
                    high = 1;
                else if (cls != FIELD)
                    break;
                q++;
            }
            if (nf < 6) {
                fs[nf] = f;
                fl[nf] = q - f;
            }
            nf++;
        }
        p = q < end ? q + 1 : end; /* past the LF */
        if (nf == 0)
            continue; /* a blank line */
        if (nf < need || (j->qrels && nf > need) || rows >= j->max_rows) {
            j->refused_row = rows;
            return REFUSED;
        }
        double value, rank = 0.0;
        if (!parse_number(fs[value_f], fl[value_f], &value) ||
            (!j->qrels && j->want_rank && !parse_number(fs[3], fl[3], &rank))) {
            j->refused_row = rows;
            return REFUSED;
        }
        Py_ssize_t qstart = fs[0] - j->data, qlen = fl[0];
        int32_t code;
        if (qlen == last_len && memcmp(j->data + last_start, fs[0], (size_t)qlen) == 0) {
            code = last_code;
        } else {
            code = intern(&j->queries, j->data, qstart, qlen);
            if (code < 0)
                return NO_MEMORY;
            last_code = code;
            last_start = qstart;
            last_len = qlen;
        }
        j->codes[rows] = code;
        int is_long = 0;
        j->doc_hash[rows] = id_hash(fs[doc_f], fl[doc_f], &is_long);
        j->long_ids += is_long;
        memcpy(j->doc_data + doc_pos, fs[doc_f], (size_t)fl[doc_f]);
        doc_pos += fl[doc_f];
        j->doc_offsets[rows + 1] = (int32_t)doc_pos;
        j->values[rows] = value;
        if (j->ranks != NULL)
            j->ranks[rows] = rank;
        rows++;
    }
    j->rows = rows;
    j->doc_bytes = doc_pos;
    j->high_bytes = high;
    if (high && !valid_utf8(j->data, j->size)) {
        j->refused_row = -1;
        return REFUSED;
    }
    return OK;
}

/* whether an Arrow string array's n + 1 offsets are ascending and within its data's len bytes */
static int offsets_within(const int32_t *off, Py_ssize_t n, Py_ssize_t len)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (off[i] < 0 || off[i] > off[i + 1] || off[i + 1] > len)
            return 0;
    return 1;
}

/* ------------------------------------------------------------------------------------------------ Python */

/* the (offsets(int32, n + 1), data, out) arguments of a pass over an Arrow string array's buffers, ``out`` of
   ``out_item``-byte items for each string: its views taken and checked, n set; 0 (an error set) otherwise */
static int string_args(PyObject *args, Views *vs, Py_buffer **offsets, Py_buffer **data, Py_buffer **out,
                       Py_ssize_t out_item, Py_ssize_t *n)
{
    PyObject *offsets_obj, *data_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &offsets_obj, &data_obj, &out_obj))
        return 0;
    *offsets = view_of(vs, offsets_obj, 0, 4, "offsets");
    *data = view_of(vs, data_obj, 0, 1, "data");
    *out = view_of(vs, out_obj, 1, out_item, "out");
    if (*out == NULL)
        return 0;
    *n = (*offsets)->len / 4 - 1;
    if (*n < 0 || (*out)->len < *n * out_item || !offsets_within((*offsets)->buf, *n, (*data)->len)) {
        PyErr_SetString(PyExc_ValueError, "offsets outside the data, or an output too small");
        return 0;
    }
    return 1;
}

/* parse_trec(data, start, end, qrels, want_rank, codes, doc_offsets, doc_data, values, ranks_or_None, doc_hash)
   -> (status, rows, doc_bytes, long_ids, query_ids) with query_ids the bytes of each query code's id, in code
   order; status 0 ok, 1 refused (read the file line by line) */
static PyObject *parse_trec(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data_obj, *codes_obj, *offsets_obj, *docs_obj, *values_obj, *ranks_obj, *hash_obj;
    Py_ssize_t start, stop;
    int qrels, want_rank;
    if (!PyArg_ParseTuple(args, "OnnppOOOOOO", &data_obj, &start, &stop, &qrels, &want_rank, &codes_obj,
                          &offsets_obj, &docs_obj, &values_obj, &ranks_obj, &hash_obj))
        return NULL;
    int have_ranks = ranks_obj != Py_None;
    Views vs = {.n = 0};
    Py_buffer *data = view_of(&vs, data_obj, 0, 1, "data");
    Py_buffer *codes = view_of(&vs, codes_obj, 1, 4, "codes");
    Py_buffer *offsets = view_of(&vs, offsets_obj, 1, 4, "doc_offsets");
    Py_buffer *docs = view_of(&vs, docs_obj, 1, 1, "doc_data");
    Py_buffer *values = view_of(&vs, values_obj, 1, 8, "values");
    Py_buffer *ranks = have_ranks ? view_of(&vs, ranks_obj, 1, 8, "ranks") : values;
    Py_buffer *hash = view_of(&vs, hash_obj, 1, 8, "doc_hash");
    if (hash == NULL || ranks == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t size = stop - start, max_rows = codes->len / 4;
    if (start < 0 || stop > data->len || start > stop || size > INT32_MAX || offsets->len < (max_rows + 1) * 4 ||
        docs->len < size || values->len < max_rows * 8 || ranks->len < max_rows * 8 || hash->len < max_rows * 8) {
        release_views(&vs);
        PyErr_SetString(PyExc_ValueError, "a range outside the data (or over 2 GiB), or outputs too small");
        return NULL;
    }
    Job j;
    memset(&j, 0, sizeof(j));
    j.data = (const unsigned char *)data->buf + start;
    j.size = size;
    j.qrels = qrels;
    j.want_rank = want_rank;
    j.max_rows = max_rows;
    j.codes = codes->buf;
    j.doc_offsets = offsets->buf;
    j.doc_data = docs->buf;
    j.values = values->buf;
    j.ranks = have_ranks ? ranks->buf : NULL;
    j.doc_hash = hash->buf;
    if (!interner_init(&j.queries)) {
        interner_free(&j.queries);
        release_views(&vs);
        return PyErr_NoMemory();
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = parse_range(&j);
    Py_END_ALLOW_THREADS
    PyObject *ids = status == NO_MEMORY ? PyErr_NoMemory() : PyList_New(status == OK ? j.queries.n : 0);
    for (Py_ssize_t c = 0; ids != NULL && status == OK && c < j.queries.n; c++) {
        PyObject *id = PyBytes_FromStringAndSize((const char *)j.data + j.queries.ids[c].start, j.queries.ids[c].len);
        if (id == NULL)
            Py_CLEAR(ids);
        else
            PyList_SET_ITEM(ids, c, id);
    }
    interner_free(&j.queries);
    release_views(&vs);
    return ids == NULL ? NULL : Py_BuildValue("(innnN)", status, j.rows, j.doc_bytes, j.long_ids, ids);
}

/* string_hashes(offsets(int32, n + 1), data(uint8), out(uint64, n)) -> the number of ids longer than
   VECTOR_HASH_MAX bytes, whose out entries the caller fills (hashing.string_hashes, for an Arrow string array's
   buffers) */
static PyObject *string_hashes(PyObject *self, PyObject *args)
{
    (void)self;
    Views vs = {.n = 0};
    Py_buffer *offsets, *data, *out;
    Py_ssize_t n, long_ids = 0;
    if (!string_args(args, &vs, &offsets, &data, &out, 8, &n)) {
        release_views(&vs);
        return NULL;
    }
    const int32_t *off = offsets->buf;
    const unsigned char *d = data->buf;
    uint64_t *h = out->buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int is_long = 0;
        h[i] = id_hash(d + off[i], off[i + 1] - off[i], &is_long);
        long_ids += is_long;
    }
    Py_END_ALLOW_THREADS
    release_views(&vs);
    return PyLong_FromSsize_t(long_ids);
}

/* count_lines(data, start, stop) -> the LF bytes in data[start:stop] */
static PyObject *count_lines(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data_obj;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "Onn", &data_obj, &start, &stop))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *data = view_of(&vs, data_obj, 0, 1, "data");
    if (data == NULL) {
        release_views(&vs);
        return NULL;
    }
    if (start < 0 || stop > data->len || start > stop) {
        release_views(&vs);
        PyErr_SetString(PyExc_ValueError, "range outside the data");
        return NULL;
    }
    Py_ssize_t count = 0;
    const unsigned char *p = (const unsigned char *)data->buf + start, *end = (const unsigned char *)data->buf + stop;
    Py_BEGIN_ALLOW_THREADS
#if defined(__SSE2__)
    const __m128i lf = _mm_set1_epi8('\n'); /* sixteen bytes at a time, where SSE2 is (every x86-64) */
    for (; end - p >= 16; p += 16)
        count += __builtin_popcount((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p),
                                                                               lf)));
#endif
    for (; p < end; p++)
        count += *p == '\n';
    Py_END_ALLOW_THREADS
    release_views(&vs);
    return PyLong_FromSsize_t(count);
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

/* mix_pairs(keys(uint64, n), codes(int32, n), query_mix(uint64, m)): keys[i] ^= query_mix[codes[i]] */
static PyObject *mix_pairs(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *keys_obj, *codes_obj, *mix_obj;
    if (!PyArg_ParseTuple(args, "OOO", &keys_obj, &codes_obj, &mix_obj))
        return NULL;
    Views vs = {.n = 0};
    Py_buffer *keys = view_of(&vs, keys_obj, 1, 8, "keys");
    Py_buffer *codes = view_of(&vs, codes_obj, 0, 4, "codes");
    Py_buffer *mix = view_of(&vs, mix_obj, 0, 8, "query_mix");
    if (mix == NULL) {
        release_views(&vs);
        return NULL;
    }
    Py_ssize_t n = keys->len / 8, m = mix->len / 8;
    uint64_t *k = keys->buf;
    const int32_t *c = codes->buf;
    const uint64_t *x = mix->buf;
    int bad = codes->len != n * 4;
    for (Py_ssize_t i = 0; !bad && i < n; i++)
        bad = c[i] < 0 || c[i] >= m;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            k[i] ^= x[c[i]];
        Py_END_ALLOW_THREADS
    }
    release_views(&vs);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "a code outside query_mix, or arrays of unequal lengths");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"run_starts", run_starts, METH_VARARGS, "The rows where a string differs from the one before."},
    {"fill_runs", fill_runs, METH_VARARGS, "Each run of rows set to its value."},
    {"mix_pairs", mix_pairs, METH_VARARGS, "keys ^= query_mix[codes], in place."},
    {"count_lines", count_lines, METH_VARARGS, "The LF bytes in a range of bytes."},
    {"parse_trec", parse_trec, METH_VARARGS, "Parse whole TREC lines of a range of bytes (see the module's source)."},
    {"string_hashes", string_hashes, METH_VARARGS, "64-bit hashes of an Arrow string array's ids."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cparse", "The TREC reader's inner loop in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_cparse(void)
{
    init_classes();
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0) {
        PyErr_SetString(PyExc_ImportError, "no C locale");
        return NULL;
    }
    return PyModule_Create(&module);
}
