/* The TREC reader's inner loop, and the id hashes, in C: parsing only (the passes over a table's rows are
   ckernel.c's).

   parse_trec() reads a range of a TREC run or qrels file's bytes (whole lines) exactly as the line-by-line
   reader in trec.py does: fields are runs of bytes between runs of ASCII spaces and tabs, lines end with LF or
   CRLF, lines of nothing but spaces and tabs are skipped, a run line has at least six fields (those after the
   sixth are ignored), a qrels line exactly four, numbers follow text.parse_number's grammar and must be finite.
   It writes one row per data line: the query id's code (in order of first appearance within the range), the
   document id's bytes and its 64-bit hash (hashing.string_hashes), the score or grade, and the rank.

   It never chooses what a line means when the line-by-line reader would refuse it: on the first line it does not
   take it stops and reports why (a lone CR, bytes that are not UTF-8, a field count, a number: WHY_*) and where
   (the line's offset); the caller checks that line with readers/accept.py, whose message names the line. Bytes
   that are not UTF-8 are found by a pass over the range made only when a byte above 0x7F was seen (over the
   lines before a refused one too: the first line at fault is reported).

   Numbers: a decimal with at most 15 significant digits and a power of ten within 10^22 is exact in one
   multiplication or division of two exactly represented doubles (Clinger's fast path); every other number goes
   through strtod in the C locale, as does one whose exponent has too many digits to add up exactly (so that no
   count of zeros before or after the digits can bring it back within the fast path by mistake). Both round
   correctly, as Python's float() does, so the doubles are the same (number() gives them to the tests).

   Speed: where 64 bytes are readable from a line's start and the line ends within them (most lines of a run),
   the line is cut into fields from bit masks of its bytes' classes (line feed, carriage return, separator, byte
   above 0x7F; SSE2, every x86-64, or AVX2 where the CPU has it, chosen at import), whose set bits are walked
   with a count of trailing zeros: no branch per byte. Any other line goes byte by byte, with the same rules.
   A number of at most 16 bytes, [+-]?digits.digits, and a decimal id of at most 16 digits are read eight
   digits at a time from one 64-bit word (three multiplications). Without vectors (vector_bits 0: a build
   without SSE2, or NDCG_MLFLOW_SCALAR=1, or vector_width(0)) every line goes byte by byte and every number
   through parse_number. Each is tested against the line reader and float() at every width, 0 included
   (tests/readers/test_native.py).

   string_hashes is the id hash of parse_trec's rows (hashing.string_hashes) applied to an Arrow string
   column's ids, from the other readers: one definition of the hash, beside the parser that makes it.

   A mapped file that another program truncates while it is read raises SIGBUS at the first access past its new
   end. The calls that read a mapping (count_lines, parse_trec) are guarded: the fault ends the call with
   FileCutShort (an OSError) instead of ending the process. (Reading the file with pread into buffers would need
   no handler, but costs the read 10-30% more CPU: benchmarks/README.md.)
*/
#include "../cbuffers.h"

#include <locale.h>
#if defined(__APPLE__)
#include <xlocale.h> /* (strtod_l) */
#endif
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The width in bits of the vectors the reader uses: 256 (AVX2, where the CPU has it), 128 (SSE2: every x86-64) or
   0, the scalar code that a build without SSE2 runs (each line cut into fields a byte at a time, each number by
   parse_number, the line feeds counted a byte at a time). The widest there is at import, or 0 when the
   environment has NDCG_MLFLOW_SCALAR=1; vector_width() switches it (the tests read every file at each width). */
static int vector_bits;

/* ------------------------------------------------------------------------- a mapping cut short (SIGBUS) */

static PyObject *FileCutShort;                /* the error of a guarded call whose mapping was cut short */
/* set while this thread runs a guarded read; static TLS (initial-exec), which a signal handler reads safely */
static _Thread_local sigjmp_buf *guard_jump __attribute__((tls_model("initial-exec")));
static struct sigaction bus_before;          /* the SIGBUS action there was before ours */
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_bus(int sig, siginfo_t *info, void *context)
{
    (void)context;
    sigjmp_buf *jump = guard_jump;
    if (jump != NULL && info != NULL && info->si_code > 0) { /* a fault of this thread's guarded read */
        guard_jump = NULL;
        siglongjmp(*jump, 1);
    }
    /* anything else goes to the action from before: a fault repeats when this returns, a signal sent is sent
       again (held until this returns) */
    sigaction(SIGBUS, &bus_before, NULL);
    if (info == NULL || info->si_code <= 0)
        raise(sig);
}

/* ours the SIGBUS action (again, when something set another since: that one is kept as the one before) */
static void guard_install(void)
{
    struct sigaction now;
    pthread_mutex_lock(&guard_lock);
    if (sigaction(SIGBUS, NULL, &now) == 0 && !((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_bus)) {
        struct sigaction ours;
        memset(&ours, 0, sizeof(ours));
        ours.sa_sigaction = on_bus;
        ours.sa_flags = SA_SIGINFO;
        sigemptyset(&ours.sa_mask);
        (void)sigaction(SIGBUS, &ours, &bus_before);
    }
    pthread_mutex_unlock(&guard_lock);
}

/* fn(arg) with a fault of this thread's reads of a mapping turned into a return: 1 when it faulted (fn did not
   finish; what it wrote through arg is partial), 0 when it ran to its end. The one place that jumps back: fn's
   state lives behind arg, none in locals that the jump would leave indeterminate. */
static int guarded(void (*fn)(void *), void *arg)
{
    sigjmp_buf jump;
    guard_install();
    if (sigsetjmp(jump, 1) != 0)
        return 1;
    guard_jump = &jump;
    fn(arg);
    guard_jump = NULL;
    return 0;
}

static PyObject *cut_short(void)
{
    PyErr_SetString(FileCutShort, "the mapped file was cut short while it was read");
    return NULL;
}

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

/* the value of the ``len`` (0 to 8) decimal digits at p, read as one little-endian word of the 8 bytes at p (all
   of which must be readable); *ok cleared unless every one of them is a digit. The word is shifted so that the
   digits are its last bytes, '0's put before them, and the eight digits combined in three multiplications. */
static inline uint64_t digits8(const unsigned char *p, int len, int *ok)
{
    uint64_t w;
    memcpy(&w, p, 8);
    int drop = 8 * (8 - len);
    uint64_t keep = drop >= 64 ? 0 : ~0ULL << drop;
    w = drop >= 64 ? 0 : w << drop;
    w |= 0x3030303030303030ULL & ~keep;
    if ((((w + 0x4646464646464646ULL) | (w - 0x3030303030303030ULL)) & 0x8080808080808080ULL) != 0)
        *ok = 0;
    w -= 0x3030303030303030ULL;
    w = w * 10 + (w >> 8);
    return (((w & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
            (((w >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
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


/* id_hash of an id with at least 16 readable bytes from s: the decimal test and value a word at a time */
static inline uint64_t id_hash_padded(const unsigned char *s, Py_ssize_t n, int *is_long)
{
    if (n >= 1 && n <= 16 && (s[0] != '0' || n == 1)) {
        int ok = 1;
        uint64_t v = n <= 8 ? digits8(s, (int)n, &ok)
                            : digits8(s, (int)n - 8, &ok) * 100000000ULL + digits8(s + n - 8, 8, &ok);
        if (ok)
            return mix64(v + 0x9E3779B97F4A7C15ULL);
    }
    return id_hash(s, n, is_long);
}

/* ------------------------------------------------------------------------------------------------ numbers */

static const uint64_t POW10_INT[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                      100000000};

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static locale_t c_locale;

/* Past this, an exponent's digits are not added up (the sum could overflow), and the number goes to strtod: every
   exponent below it is exact, and far outside the fast path's 10^22 */
#define EXPONENT_LIMIT 1000000000

/* text.parse_number's grammar, [+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?, over the whole field, and a
   finite value; 0 when the field is not such a number (the caller then lets the line-by-line reader decide).
   The fast path takes m * 10^exp10 only while m holds every significant digit and exp10 is the exact power
   (no digit of the exponent skipped); any other number is strtod's reading of the field's text. */
static int parse_number(const unsigned char *s, Py_ssize_t n, double *out)
{
    const unsigned char *p = s, *end = s + n;
    int negative = 0;
    if (p < end && (*p == '+' || *p == '-')) {
        negative = *p == '-';
        p++;
    }
    uint64_t m = 0;
    int digits = 0;       /* significant digits in m, at most 19 */
    int64_t exp10 = 0;    /* m * 10^exp10 (while exact); at least -n, as one per digit is taken */
    int mantissa = 0;     /* a digit seen before the exponent */
    int exact = 1;        /* m holds every significant digit, and exp10 is the exact power */
    for (; p < end && (unsigned)(*p - '0') <= 9; p++) {
        mantissa = 1;
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
        for (; p < end && (unsigned)(*p - '0') <= 9; p++) {
            mantissa = 1;
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
    if (!mantissa)
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
        int64_t e = 0;
        for (; p < end && (unsigned)(*p - '0') <= 9; p++)
            if (e < EXPONENT_LIMIT)
                e = e * 10 + (*p - '0');
        if (p != end)
            return 0;
        if (e >= EXPONENT_LIMIT)
            exact = 0; /* digits skipped, or as good as: strtod reads it */
        else
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


#if defined(__SSE2__)
/* parse_number of a field of at most 16 bytes with 32 readable bytes from s, when it is [+-]?digits.digits (the
   dot optional, at least one digit) of at most 8 digits on either side and at most 15 in all: 1, *out set to the
   same double (m / 10^k is one exact division, Clinger's fast path); 0 when the field is anything else, which
   parse_number then reads (or refuses) */
static inline int fast_number(const unsigned char *s, Py_ssize_t n, double *out)
{
    if (n > 16)
        return 0;
    __m128i v = _mm_loadu_si128((const __m128i *)s);
    uint32_t within = (1u << n) - 1;
    __m128i d = _mm_sub_epi8(v, _mm_set1_epi8('0'));
    uint32_t digit = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d)) & within;
    uint32_t dot = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('.'))) & within;
    int sign = s[0] == '-' || s[0] == '+';
    if ((digit | dot | (uint32_t)sign) != within || (dot & (dot - 1)) != 0 || digit == 0)
        return 0;
    int at = dot ? __builtin_ctz(dot) : (int)n; /* the dot, or the end */
    int int_len = at - sign, frac_len = dot ? (int)n - at - 1 : 0;
    if (int_len > 8 || frac_len > 8 || int_len + frac_len > 15)
        return 0;
    int ok = 1;
    uint64_t m = digits8(s + sign, int_len, &ok) * POW10_INT[frac_len] + digits8(s + at + 1, frac_len, &ok);
    double x = (double)m / POW10[frac_len];
    *out = s[0] == '-' ? -x : x;
    return ok;
}
#define NUMBER(s, n, padded, out) ((padded) && fast_number(s, n, out) ? 1 : parse_number(s, n, out))
#else
#define NUMBER(s, n, padded, out) parse_number(s, n, out)
#endif

/* ------------------------------------------------------------------------------------------------ UTF-8 */

/* the offset of the first byte of s[0:n] that does not start a valid UTF-8 sequence; n when all is UTF-8 */
static Py_ssize_t utf8_end(const unsigned char *s, Py_ssize_t n)
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
            return i;
        }
        for (Py_ssize_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += k + 1;
    }
    return n;
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
/* why a line is refused: the rules of readers/accept.py's C_RULES */
enum { WHY_LINE_END = 1, WHY_UTF8 = 2, WHY_FIELDS = 3, WHY_NUMBER = 4 };

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
    Py_ssize_t rows, doc_bytes, long_ids;
    Py_ssize_t refused_at; /* the offset of the first line refused (REFUSED) */
    int why;               /* why it was refused (WHY_*) */
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

/* one line's fields from p, a byte at a time (any line): the first six fields in fs/fl, their number in *nf (at
   most 7: 7 for more than six), *next past the line's LF; REFUSED for a CR not followed by a LF */
static int slow_fields(const unsigned char *p, const unsigned char *end, const unsigned char **fs, Py_ssize_t *fl,
                       int *nf_out, const unsigned char **next, int *high)
{
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
            return REFUSED; /* a CR not followed by a LF */
        }
        const unsigned char *f = q;
        for (;;) {
            q = skip_plain(q, end);
            if (q >= end)
                break;
            cls = CLASS[*q];
            if (cls == HIGH) /* (bytes above 0x7F: checked as UTF-8 at the end) */
                *high = 1;
            else if (cls != FIELD)
                break;
            q++;
        }
        if (nf < 6) {
            fs[nf] = f;
            fl[nf] = q - f;
        }
        if (nf < 7)
            nf++;
    }
    *nf_out = nf;
    *next = q < end ? q + 1 : end; /* past the LF */
    return OK;
}

#if defined(__SSE2__)
#define WINDOW 64 /* bytes looked at for a line at once */

/* the classes of the 64 bytes at p that window_fields needs, as bits: line feeds, carriage returns, separators
   (space or tab) and bytes above 0x7F */
typedef struct {
    uint64_t lf, cr, sep, hi;
} Classes;

static inline void class_bits(const unsigned char *p, int shift, Classes *c)
{
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    c->lf |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))) << shift;
    c->cr |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r'))) << shift;
    c->sep |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')),
                                                                _mm_cmpeq_epi8(v, _mm_set1_epi8('\t')))) << shift;
    c->hi |= (uint64_t)(uint32_t)_mm_movemask_epi8(v) << shift;
}

static inline Classes classes_sse2(const unsigned char *p)
{
    Classes c = {0, 0, 0, 0};
    class_bits(p, 0, &c);
    class_bits(p + 16, 16, &c);
    class_bits(p + 32, 32, &c);
    class_bits(p + 48, 48, &c);
    return c;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define HAVE_AVX2_PATH 1
#include <immintrin.h>

/* the same bits, 32 bytes at a time (where the CPU has AVX2: the reader checks at its import) */
__attribute__((target("avx2"))) static inline uint64_t avx2_bits(__m256i a, __m256i b, char c)
{
    __m256i k = _mm256_set1_epi8(c);
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(a, k)) |
           (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, k)) << 32;
}

__attribute__((target("avx2"))) static inline Classes classes_avx2(const unsigned char *p)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)p), b = _mm256_loadu_si256((const __m256i *)(p + 32));
    Classes c;
    c.lf = avx2_bits(a, b, '\n');
    c.cr = avx2_bits(a, b, '\r');
    c.sep = avx2_bits(a, b, ' ') | avx2_bits(a, b, '\t');
    c.hi = (uint64_t)(uint32_t)_mm256_movemask_epi8(a) | (uint64_t)(uint32_t)_mm256_movemask_epi8(b) << 32;
    return c;
}
#endif

/* slow_fields of a line that ends (LF or CRLF) within the 64 bytes at p (all readable), from their classes' bits:
   the fields' starts and ends found by their bits' positions. 0 (nothing set) for a longer line or one with a CR
   before its line end: slow_fields reads it. */
static inline int window_fields(const unsigned char *p, Classes c, const unsigned char **fs, Py_ssize_t *fl,
                                int *nf_out, const unsigned char **next, int *high)
{
    if (c.lf == 0)
        return 0;
    int at = __builtin_ctzll(c.lf);
    uint64_t line = (1ULL << at) - 1; /* the bytes before the LF (at <= 63) */
    uint64_t cr = c.cr & line;
    if (cr != 0) {
        if (cr != 1ULL << (at - 1))
            return 0; /* a CR within the line: slow_fields decides */
        line >>= 1;    /* CRLF: the line ends at the CR */
    }
    uint64_t sep = c.sep & line;
    if (c.hi & line)
        *high = 1;
    uint64_t field = line & ~sep;
    uint64_t starts = field & ~(field << 1), ends = (field << 1) & ~field;
    int nf = 0;
    while (starts != 0 && nf < 6) {
        int a = __builtin_ctzll(starts), b = __builtin_ctzll(ends);
        fs[nf] = p + a;
        fl[nf] = b - a;
        starts &= starts - 1;
        ends &= ends - 1;
        nf++;
    }
    *nf_out = nf + (starts != 0);
    *next = p + at + 1;
    return 1;
}
#endif

#if defined(HAVE_AVX2_PATH)
#define CLASSES(avx2, p) ((avx2) ? classes_avx2(p) : classes_sse2(p))
#elif defined(__SSE2__)
#define CLASSES(avx2, p) classes_sse2(p)
#endif

/* REFUSED, for the line at offset at and reason why; or for the first line of the bytes before offset checked
   (bytes above 0x7F seen: ``high``) that is not UTF-8, which comes first: the lines before, and the refused line
   itself when the reason is checked after its text (readers/accept.py: a CR first, then UTF-8, then its fields) */
static int refuse(Job *j, Py_ssize_t at, Py_ssize_t checked, int why, int high)
{
    Py_ssize_t bad = high ? utf8_end(j->data, checked) : checked;
    if (bad < checked) {
        while (bad > 0 && j->data[bad - 1] != '\n')
            bad--;
        at = bad;
        why = WHY_UTF8;
    }
    j->refused_at = at;
    j->why = why;
    return REFUSED;
}

/* the rows of the range's lines, with vectors of ``width`` bits (vector_bits, chosen by the caller) */
static inline __attribute__((always_inline)) int parse_body(Job *j, int width)
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
        const unsigned char *next;
#if defined(__SSE2__)
        /* padded: 64 bytes are readable from the line's start (and the fast reads of a field check its own) */
        int padded = width != 0 && end - p >= WINDOW;
        if (!(padded && window_fields(p, CLASSES(width == 256, p), fs, fl, &nf, &next, &high)))
#else
        int padded = 0;
#endif
            if (slow_fields(p, end, fs, fl, &nf, &next, &high) != OK)
                return refuse(j, p - j->data, p - j->data, WHY_LINE_END, high);
        if (nf == 0) {
            p = next;
            continue; /* a blank line */
        }
        if (nf < need || (j->qrels && nf > need) || rows >= j->max_rows)
            return refuse(j, p - j->data, next - j->data, WHY_FIELDS, high);
        double value, rank = 0.0;
        if (!NUMBER(fs[value_f], fl[value_f], padded && end - fs[value_f] >= 32, &value) ||
            (!j->qrels && j->want_rank && !NUMBER(fs[3], fl[3], padded && end - fs[3] >= 32, &rank)))
            return refuse(j, p - j->data, next - j->data, WHY_NUMBER, high);
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
        const unsigned char *doc = fs[doc_f];
        Py_ssize_t doc_len = fl[doc_f];
        int doc_padded = padded && end - doc >= 16; /* 16 bytes readable from the id */
        j->doc_hash[rows] = doc_padded ? id_hash_padded(doc, doc_len, &is_long) : id_hash(doc, doc_len, &is_long);
        j->long_ids += is_long;
        /* (the ids copied so far are bytes of the lines before this one: 16 bytes from doc_pos fit in the range's
           size when 64 of its bytes are left) */
        if (doc_padded && doc_len <= 16) {
            memcpy(j->doc_data + doc_pos, doc, 16);
        } else {
            memcpy(j->doc_data + doc_pos, doc, (size_t)doc_len);
        }
        doc_pos += doc_len;
        j->doc_offsets[rows + 1] = (int32_t)doc_pos;
        j->values[rows] = value;
        if (j->ranks != NULL)
            j->ranks[rows] = rank;
        rows++;
        p = next;
    }
    j->rows = rows;
    j->doc_bytes = doc_pos;
    j->high_bytes = high;
    if (high && utf8_end(j->data, j->size) < j->size)
        return refuse(j, j->size, j->size, WHY_UTF8, high);
    return OK;
}

#if defined(HAVE_AVX2_PATH)
__attribute__((target("avx2"))) static int parse_range_avx2(Job *j)
{
    return parse_body(j, 256);
}
#endif

static int parse_range(Job *j)
{
#if defined(HAVE_AVX2_PATH)
    if (vector_bits == 256)
        return parse_range_avx2(j);
#endif
#if defined(__SSE2__)
    if (vector_bits == 128)
        return parse_body(j, 128);
#endif
    return parse_body(j, 0);
}



#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

/* the whole pages of a buffer the parse is about to write, mapped in one call (Linux's MADV_POPULATE_WRITE,
   5.14 and later) rather than a page fault at a time; a no-op elsewhere or where the system refuses */
static void populate(void *buf, Py_ssize_t len)
{
#if defined(__linux__)
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || len < 4 * page)
        return;
    uintptr_t a = ((uintptr_t)buf + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t b = ((uintptr_t)buf + (uintptr_t)len) & ~((uintptr_t)page - 1);
    if (b > a)
        (void)madvise((void *)a, b - a, 23 /* MADV_POPULATE_WRITE */);
#else
    (void)buf;
    (void)len;
#endif
}

/* ------------------------------------------------------------------------------------------------ Python */

typedef struct {
    Job *j;
    int status;
    unsigned char *id_bytes; /* the query ids' bytes, copied out of the mapping (ids[c].start then into this) */
} ParseCall;

/* the range parsed, then its query ids' bytes copied out of the mapping (guarded: both read it) */
static void parse_call(void *arg)
{
    ParseCall *call = arg;
    Job *j = call->j;
    call->status = parse_range(j);
    if (call->status != OK)
        return;
    Py_ssize_t total = 0;
    for (Py_ssize_t c = 0; c < j->queries.n; c++)
        total += j->queries.ids[c].len;
    call->id_bytes = malloc((size_t)total + 1);
    if (call->id_bytes == NULL) {
        call->status = NO_MEMORY;
        return;
    }
    for (Py_ssize_t c = 0, at = 0; c < j->queries.n; c++) {
        memcpy(call->id_bytes + at, j->data + j->queries.ids[c].start, (size_t)j->queries.ids[c].len);
        j->queries.ids[c].start = at;
        at += j->queries.ids[c].len;
    }
}

/* parse_trec(data, start, end, qrels, want_rank, codes, doc_offsets, doc_data, values, ranks_or_None, doc_hash)
   -> (status, rows, doc_bytes, long_ids, query_ids, why, refused_at) with query_ids the bytes of each query
   code's id, in code order; status 0 ok, 1 refused: the line at offset refused_at (from start) for the reason
   why (WHY_*) */
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
    int faulted;
    ParseCall call = {.j = &j, .status = REFUSED, .id_bytes = NULL};
    Py_BEGIN_ALLOW_THREADS
    populate(j.codes, max_rows * 4);
    populate(j.doc_offsets, (max_rows + 1) * 4);
    populate(j.values, max_rows * 8);
    if (j.ranks != NULL)
        populate(j.ranks, max_rows * 8);
    populate(j.doc_hash, max_rows * 8);
    faulted = guarded(parse_call, &call);
    Py_END_ALLOW_THREADS
    int status = faulted ? REFUSED : call.status;
    PyObject *ids = faulted ? cut_short() : status == NO_MEMORY ? PyErr_NoMemory()
                                                                : PyList_New(status == OK ? j.queries.n : 0);
    for (Py_ssize_t c = 0; ids != NULL && status == OK && c < j.queries.n; c++) {
        PyObject *id = PyBytes_FromStringAndSize((const char *)call.id_bytes + j.queries.ids[c].start,
                                                 j.queries.ids[c].len);
        if (id == NULL)
            Py_CLEAR(ids);
        else
            PyList_SET_ITEM(ids, c, id);
    }
    free(call.id_bytes);
    interner_free(&j.queries);
    release_views(&vs);
    return ids == NULL ? NULL
                       : Py_BuildValue("(innnNin)", status, j.rows, j.doc_bytes, j.long_ids, ids, j.why, j.refused_at);
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
    Py_ssize_t len = data->len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int is_long = 0;
        Py_ssize_t at = off[i], size = off[i + 1] - off[i];
        h[i] = len - at >= 16 ? id_hash_padded(d + at, size, &is_long) : id_hash(d + at, size, &is_long);
        long_ids += is_long;
    }
    Py_END_ALLOW_THREADS
    release_views(&vs);
    return PyLong_FromSsize_t(long_ids);
}

typedef struct {
    const unsigned char *p, *end;
    Py_ssize_t count;
} CountCall;

static void count_call(void *arg);

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
    int faulted;
    CountCall call = {(const unsigned char *)data->buf + start, (const unsigned char *)data->buf + stop, 0};
    Py_BEGIN_ALLOW_THREADS
    faulted = guarded(count_call, &call);
    Py_END_ALLOW_THREADS
    release_views(&vs);
    return faulted ? cut_short() : PyLong_FromSsize_t(call.count);
}

/* the LF bytes of [p, end) into count */
static void count_call(void *arg)
{
    CountCall *call = arg;
    const unsigned char *p = call->p, *end = call->end;
    Py_ssize_t count = 0;
#if defined(__SSE2__)
    /* sixteen bytes at a time, where SSE2 is (every x86-64): each byte's LF count summed in a byte lane (up to 255
       blocks), the lanes then added up */
    const __m128i lf = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
    while (vector_bits != 0 && end - p >= 16) {
        __m128i lanes = zero;
        for (int k = 0; k < 255 && end - p >= 16; k++, p += 16)
            lanes = _mm_sub_epi8(lanes, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), lf));
        __m128i sums = _mm_sad_epu8(lanes, zero);
        count += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
    }
#endif
    for (; p < end; p++)
        count += *p == '\n';
    call->count = count;
}

/* the widest vectors of at most ``most`` bits that this build and this CPU have (0: none, the scalar code) */
static int widest(long most)
{
#if defined(HAVE_AVX2_PATH)
    if (most >= 256 && __builtin_cpu_supports("avx2"))
        return 256;
#endif
#if defined(__SSE2__)
    if (most >= 128)
        return 128;
#endif
    (void)most;
    return 0;
}

/* vector_width(wanted or None) -> vector_bits, the reader's vector width in bits; ``wanted`` (0, 128 or 256)
   switched to first, or the widest below it where the build or the CPU lacks it (0, the scalar code, always is) */
static PyObject *vector_width(PyObject *self, PyObject *arg)
{
    (void)self;
    if (arg != Py_None) {
        long wanted = PyLong_AsLong(arg);
        if (wanted == -1 && PyErr_Occurred())
            return NULL;
        if (wanted != 0 && wanted != 128 && wanted != 256) {
            PyErr_SetString(PyExc_ValueError, "a width of 0, 128 or 256");
            return NULL;
        }
        vector_bits = widest(wanted);
    }
    return PyLong_FromLong(vector_bits);
}

/* number(data, n) -> the double parse_trec reads for a number field of data's first n bytes, or None where it
   leaves the line to the line-by-line reader (not a number, or not finite); the bytes after the field stand for
   the rest of the line: with 32 readable from the field's start (and vectors on), the word-at-a-time path first,
   as parse_trec. For the tests against float() */
static PyObject *number(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*n", &b, &n))
        return NULL;
    if (n < 0 || n > b.len) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "a length within the data");
        return NULL;
    }
    double v;
    int ok = NUMBER((const unsigned char *)b.buf, n, vector_bits != 0 && b.len >= 32, &v);
    PyBuffer_Release(&b);
    if (!ok)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}

static PyMethodDef methods[] = {
    {"count_lines", count_lines, METH_VARARGS, "The LF bytes in a range of bytes."},
    {"parse_trec", parse_trec, METH_VARARGS, "Parse whole TREC lines of a range of bytes (see the module's source)."},
    {"string_hashes", string_hashes, METH_VARARGS, "64-bit hashes of an Arrow string array's ids."},
    {"number", number, METH_VARARGS, "parse_trec's reading of a number field, data[:n]; None where it has none."},
    {"vector_width", vector_width, METH_O, "The reader's vector width in bits (0: scalar); switched by a width given."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cparse", "The TREC reader's inner loop in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_cparse(void)
{
    init_classes();
#if defined(HAVE_AVX2_PATH)
    __builtin_cpu_init();
#endif
    const char *scalar = getenv("NDCG_MLFLOW_SCALAR");
    vector_bits = scalar != NULL && scalar[0] != 0 && strcmp(scalar, "0") != 0 ? 0 : widest(256);
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0) {
        PyErr_SetString(PyExc_ImportError, "no C locale");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    FileCutShort = PyErr_NewExceptionWithDoc("ndcg_mlflow.readers.cparse.FileCutShort",
                                             "A mapped file was cut short (truncated) while a call read it.",
                                             PyExc_OSError, NULL);
    if (FileCutShort == NULL || PyModule_AddObjectRef(m, "FileCutShort", FileCutShort) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
