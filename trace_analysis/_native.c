/*
 * dyno.trace_analysis._native: columnar decoding of one batch of Chrome-trace events (optional accelerator).
 *
 * decode_batch(buf) takes the JSON array of whole traceEvents elements that jsonscan cuts ("[" elements "]") and
 * returns a dict of column buffers (bytearrays the caller wraps with numpy.frombuffer) for the complete (ph "X")
 * and flow (ph s/f/t) events, the byte span of every element, and per-field lists of the distinct strings
 * (each event holds a local id into its field's list), so Python touches each distinct string once per batch
 * and no Python object per event is created. Every other element (instant, [memory], metadata, counters, no
 * ph) is only located ("group" 2); the caller re-parses those few from their own bytes, except the metadata
 * events the model does not read (group 3: ph "M" named neither process_name nor thread_name).
 *
 * It returns None (declines) for anything it does not reproduce exactly: invalid JSON, escaped keys, lone
 * surrogates, integers outside int64, duplicate keys the model reads, values of unexpected JSON types (string
 * timestamps, float pids, non-string names/categories, args that are not an object), nesting deeper than 64.
 * The caller then uses the Python decoders, which also produce the error messages. What it accepts is a subset
 * of what the typed msgspec decoder accepts, and the columns equal what the builder makes of msgspec's structs.
*
 * The parse itself calls no Python API and runs without the GIL (the CLI's read-ahead decodes on a second thread
 * while the main thread imports): the string tables record where each distinct string lies in the batch, and
 * their Python objects are made after the parse, with the GIL, in first-seen order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_DEPTH 64

/* ---------------------------------------------------------------------------------------------------------- */
/* growable byte buffers */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_grow(Buf *b, size_t need) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) return -1;
    b->data = d;
    b->cap = cap;
    return 0;
}

#define PUSH(b, T, v)                                                          \
    do {                                                                       \
        if ((b)->len + sizeof(T) > (b)->cap && buf_grow((b), sizeof(T)) < 0) { \
            return -2;                                                         \
        }                                                                      \
        T _v = (v);                                                            \
        memcpy((b)->data + (b)->len, &_v, sizeof(T));                          \
        (b)->len += sizeof(T);                                                 \
    } while (0)

/* ---------------------------------------------------------------------------------------------------------- */
/* per-field tables of distinct strings (keyed by their raw bytes in the batch) */

typedef struct {
    const char *s; /* into the batch (or a static default): the raw bytes, escapes not yet decoded */
    size_t n;
    uint64_t h;
} Entry;

typedef struct {
    Entry *entries;
    uint8_t *esc;       /* per entry: the string has escapes (decoded when its object is made; apart from the
                           entries, which the lookups read, to keep them 24 bytes) */
    size_t count, cap;  /* entries */
    int32_t *slots;     /* open addressing: index + 1, 0 = empty */
    size_t nslots;
    PyObject *list;     /* the distinct values as Python objects, in first-seen order (made after the parse) */
    int as_json;        /* raw JSON texts: their compact JSON (str) when canonical, else the raw bytes */
} StrTable;

static uint64_t hash_bytes(const char *s, size_t n) {
    /* 8 bytes at a time (kernel names are long); quality only matters for the open addressing below */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static void table_free(StrTable *t) {
    free(t->entries);
    free(t->esc);
    free(t->slots);
    Py_XDECREF(t->list);
    memset(t, 0, sizeof(*t));
}

static void table_init(StrTable *t, int as_json) {
    memset(t, 0, sizeof(*t));
    t->as_json = as_json;
}

static int table_rehash(StrTable *t) {
    size_t ns = t->nslots ? t->nslots * 2 : 64;
    int32_t *slots = calloc(ns, sizeof(int32_t));
    if (!slots) return -2;
    for (size_t i = 0; i < t->count; i++) {
        size_t j = t->entries[i].h & (ns - 1);
        while (slots[j]) j = (j + 1) & (ns - 1);
        slots[j] = (int32_t)(i + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

/* decode the escapes of a JSON string body (already validated) into out; -1: lone surrogate (decline) */
static int unescape(const char *s, size_t n, Buf *out) {
    out->len = 0;
    if (out->cap < n + 4 && buf_grow(out, n + 4) < 0) return -2;
    char *o = out->data;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        c = s[++i];
        switch (c) {
            case '"': o[k++] = '"'; break;
            case '\\': o[k++] = '\\'; break;
            case '/': o[k++] = '/'; break;
            case 'b': o[k++] = '\b'; break;
            case 'f': o[k++] = '\f'; break;
            case 'n': o[k++] = '\n'; break;
            case 'r': o[k++] = '\r'; break;
            case 't': o[k++] = '\t'; break;
            case 'u': {
                unsigned cp = (unsigned)strtoul((char[5]){s[i + 1], s[i + 2], s[i + 3], s[i + 4], 0}, NULL, 16);
                i += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (i + 6 >= n || s[i + 1] != '\\' || s[i + 2] != 'u') return -1;
                    unsigned lo =
                        (unsigned)strtoul((char[5]){s[i + 3], s[i + 4], s[i + 5], s[i + 6], 0}, NULL, 16);
                    if (lo < 0xDC00 || lo > 0xDFFF) return -1;
                    i += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return -1;
                }
                if (cp < 0x80) {
                    o[k++] = (char)cp;
                } else if (cp < 0x800) {
                    o[k++] = (char)(0xC0 | (cp >> 6));
                    o[k++] = (char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    o[k++] = (char)(0xE0 | (cp >> 12));
                    o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    o[k++] = (char)(0x80 | (cp & 0x3F));
                } else {
                    o[k++] = (char)(0xF0 | (cp >> 18));
                    o[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                    o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    o[k++] = (char)(0x80 | (cp & 0x3F));
                }
                break;
            }
            default: return -1; /* not reached: validated while scanning */
        }
    }
    out->len = k;
    return 0;
}

/* The compact JSON of a (valid) raw JSON value into out, when it is exactly what orjson.dumps(orjson.loads(raw))
 * gives: arrays, integers of at most 18 digits (not -0), strings without escapes, true/false/null. Anything else
 * (floats, objects, escapes, big integers) returns 0 and the caller keeps the raw text for Python to normalize. */
static int compact_json(const char *s, size_t n, Buf *out) {
    out->len = 0;
    if (out->cap < n + 1 && buf_grow(out, n + 1) < 0) return -2;
    char *o = out->data;
    size_t k = 0, digits = 0;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') return 0;
            if (c == '"') in_str = 0;
            o[k++] = c;
            continue;
        }
        switch (c) {
            case ' ': case '\t': case '\n': case '\r': continue;
            case '"': in_str = 1; digits = 0; break;
            case '{': case '}': case '.': case 'e': case 'E': return 0;
            case '-':
                if (i + 1 < n && s[i + 1] == '0') return 0;
                break;
            default:
                if (c >= '0' && c <= '9') {
                    if (++digits > 18) return 0;
                } else {
                    digits = 0;
                }
        }
        o[k++] = c;
    }
    out->len = k;
    return 1;
}

/* local id of s[0:n] in t (added if new, in first-seen order); -2: out of memory. No Python API: the parse runs
 * without the GIL, and the Python objects are made after it (table_objects), which is also where a string that
 * does not decode declines the batch. */
static int32_t table_id(StrTable *t, const char *s, size_t n, int esc) {
    uint64_t h = hash_bytes(s, n);
    if (t->nslots) {
        size_t j = h & (t->nslots - 1);
        while (t->slots[j]) {
            Entry *e = &t->entries[t->slots[j] - 1];
            if (e->h == h && e->n == n && memcmp(e->s, s, n) == 0) return t->slots[j] - 1;
            j = (j + 1) & (t->nslots - 1);
        }
    }
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        Entry *e = realloc(t->entries, cap * sizeof(Entry));
        if (!e) return -2;
        t->entries = e;
        uint8_t *x = realloc(t->esc, cap);
        if (!x) return -2;
        t->esc = x;
        t->cap = cap;
    }
    t->entries[t->count] = (Entry){s, n, h};
    t->esc[t->count] = (uint8_t)esc;
    t->count++;
    if (t->count * 2 > t->nslots) {
        if (table_rehash(t) < 0) return -2;
    } else {
        size_t j = h & (t->nslots - 1);
        while (t->slots[j]) j = (j + 1) & (t->nslots - 1);
        t->slots[j] = (int32_t)t->count;
    }
    return (int32_t)(t->count - 1);
}

/* One distinct value as a Python object: as_json tables, the compact JSON (str) when canonical and valid UTF-8,
 * else the raw bytes (the Python path normalizes or reports them); other tables, the decoded string. NULL with
 * *decline set: bad UTF-8 or a lone surrogate (the batch declines); NULL alone: a Python error is set. */
static PyObject *entry_object(const StrTable *t, size_t i, Buf *tmp, int *decline) {
    const Entry *e = &t->entries[i];
    PyObject *obj = NULL;
    if (t->as_json) {
        int c = compact_json(e->s, e->n, tmp);
        if (c < 0) return PyErr_NoMemory();
        if (c) {
            obj = PyUnicode_DecodeUTF8(tmp->data, (Py_ssize_t)tmp->len, NULL);
            if (!obj) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return NULL;
                PyErr_Clear(); /* invalid UTF-8: the raw bytes go to the Python path, which reports it */
            }
        }
        return obj ? obj : PyBytes_FromStringAndSize(e->s, (Py_ssize_t)e->n);
    }
    const char *u = e->s;
    size_t un = e->n;
    if (t->esc[i]) {
        int r = unescape(e->s, e->n, tmp);
        if (r == -2) return PyErr_NoMemory();
        if (r < 0) {
            *decline = 1;
            return NULL;
        }
        u = tmp->data;
        un = tmp->len;
    }
    obj = PyUnicode_DecodeUTF8(u, (Py_ssize_t)un, NULL);
    if (!obj && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *decline = 1;
    }
    return obj;
}

/* t->list: the Python objects of t's distinct values in first-seen order (with the GIL, after the parse).
 * 0 ok, -1 decline, -2 a Python error is set. */
static int table_objects(StrTable *t, Buf *tmp) {
    t->list = PyList_New((Py_ssize_t)t->count);
    if (!t->list) return -2;
    for (size_t i = 0; i < t->count; i++) {
        int decline = 0;
        PyObject *obj = entry_object(t, i, tmp, &decline);
        if (!obj) return decline ? -1 : -2;
        PyList_SET_ITEM(t->list, (Py_ssize_t)i, obj);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* JSON scanning (validating; -1 = decline) */

/* V_BIGNUM: an integer outside int64; valid JSON (the typed decoder gives a Python int), declined where read */
enum { V_ABSENT = 0, V_NULL, V_INT, V_FLOAT, V_STR, V_BOOL, V_ARRAY, V_OBJECT, V_BIGNUM };

typedef struct {
    int type;
    int esc;           /* V_STR: has escapes */
    const char *s;     /* V_STR: body; other types: the value's text */
    size_t n;
    int64_t i;
    double d;
} Val;

typedef struct {
    const unsigned char *p, *end;
    int depth;
} Parser;

/* 1: byte ends a plain run inside a string ('"', '\\', control characters) */
static unsigned char STR_STOP[256];
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static const uint64_t POW10_INT[20] = {1ULL,
                                       10ULL,
                                       100ULL,
                                       1000ULL,
                                       10000ULL,
                                       100000ULL,
                                       1000000ULL,
                                       10000000ULL,
                                       100000000ULL,
                                       1000000000ULL,
                                       10000000000ULL,
                                       100000000000ULL,
                                       1000000000000ULL,
                                       10000000000000ULL,
                                       100000000000000ULL,
                                       1000000000000000ULL,
                                       10000000000000000ULL,
                                       100000000000000000ULL,
                                       1000000000000000000ULL,
                                       10000000000000000000ULL};

/* m / 10^k correctly rounded to a double (half to even), exactly, for 0 < m < 2^64 and 1 <= k <= 19: the
 * ns-resolution timestamps (1712195495519703.772: 19 digits, more than a double's 2^53) that Clinger's fast path
 * cannot take; strtod would cost ~120 ns each. Returns 0 when not applicable (then strtod). */
static int div_pow10(uint64_t m, int k, double *out) {
#ifdef __SIZEOF_INT128__
    uint64_t p = POW10_INT[k];
    int bm = 64 - __builtin_clzll(m), bp = 64 - __builtin_clzll(p);
    int s = 55 + bp - bm; /* then 2^54 <= q < 2^56: 55 or 56 bits, 53 kept, the rest (and r) decide rounding */
    if (s < 0) return 0;
    unsigned __int128 num = (unsigned __int128)m << s;
    uint64_t q = (uint64_t)(num / p), r = (uint64_t)(num % p);
    int shift = (64 - __builtin_clzll(q)) - 53;
    uint64_t mant = q >> shift, rem = q & ((1ULL << shift) - 1), half = 1ULL << (shift - 1);
    if (rem > half || (rem == half && (r != 0 || (mant & 1)))) mant++;
    *out = ldexp((double)mant, shift - s);
    return 1;
#else
    (void)m, (void)k, (void)out;
    return 0;
#endif
}

static inline void skip_ws(Parser *P) {
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\n' || *P->p == '\r' || *P->p == '\t')) P->p++;
}

static inline int is_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static inline unsigned hex4(const unsigned char *p) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

/* strict UTF-8 (as Python's decoder: no overlong forms, no surrogates, at most U+10FFFF) */
static int valid_utf8(const unsigned char *p, size_t n) {
    const unsigned char *end = p + n;
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        if ((size_t)(end - p) <= k || p[1] < lo || p[1] > hi) return 0;
        for (size_t i = 2; i <= k; i++)
            if (p[i] < 0x80 || p[i] > 0xBF) return 0;
        p += k + 1;
    }
    return 1;
}

/* P->p at the opening quote; on return after the closing quote; body span in *s, *n. Declines (-1) invalid
 * JSON and, in any string (read or skipped), invalid UTF-8 and lone surrogate escapes: the typed decoder rejects
 * those in the fields it decodes, and the native decoder must never accept a batch the typed decoder rejects. */
static int scan_string(Parser *P, const char **s, size_t *n, int *esc) {
    const unsigned char *p = P->p + 1, *end = P->end;
    int e = 0, high = 0;
    *s = (const char *)p;
    for (;;) {
#ifdef __SSE2__
        /* 16 bytes at a time: stop at '"', '\\' or a control character (< 0x20) */
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), ctl = _mm_set1_epi8(0x1F);
        while (p + 16 <= end) {
            __m128i c = _mm_loadu_si128((const __m128i *)p);
            __m128i stop = _mm_or_si128(_mm_cmpeq_epi8(c, quote), _mm_cmpeq_epi8(c, bslash));
            /* unsigned c <= 0x1F  <=>  min(c, 0x1F) == c */
            stop = _mm_or_si128(stop, _mm_cmpeq_epi8(_mm_min_epu8(c, ctl), c));
            int mask = _mm_movemask_epi8(stop), top = _mm_movemask_epi8(c); /* top: bytes >= 0x80 */
            if (mask) {
                int at = __builtin_ctz((unsigned)mask);
                high |= top & ((1 << at) - 1);
                p += at;
                goto found;
            }
            high |= top;
            p += 16;
        }
#endif
        while (p < end && !STR_STOP[*p]) p++;
#ifdef __SSE2__
    found:
#endif
        if (p >= end) return -1;
        if (*p == '"') break;
        if (*p >= 0x80) {
            high = 1;
            p++;
            continue;
        }
        if (*p < 0x20) return -1;
        /* backslash */
        e = 1;
        if (p + 1 >= end) return -1;
        switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't': p += 2; break;
            case 'u': {
                if (p + 6 > end || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5])) return -1;
                unsigned cu = hex4(p + 2);
                p += 6;
                if (cu >= 0xDC00 && cu <= 0xDFFF) return -1; /* lone low surrogate */
                if (cu >= 0xD800 && cu <= 0xDBFF) {          /* must be followed by a low surrogate */
                    if (p + 6 > end || p[0] != '\\' || p[1] != 'u' || !is_hex(p[2]) || !is_hex(p[3]) ||
                        !is_hex(p[4]) || !is_hex(p[5]))
                        return -1;
                    unsigned lo = hex4(p + 2);
                    if (lo < 0xDC00 || lo > 0xDFFF) return -1;
                    p += 6;
                }
                break;
            }
            default: return -1;
        }
    }
    *n = (size_t)(p - (const unsigned char *)*s);
    if (high && !valid_utf8((const unsigned char *)*s, *n)) return -1;
    *esc = e;
    P->p = p + 1;
    return 0;
}

/* a JSON number at P->p; fills v as V_INT (int64) or V_FLOAT (correctly rounded double) */
static int scan_number(Parser *P, Val *v) {
    const unsigned char *start = P->p, *p = P->p, *end = P->end;
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end) return -1;
    uint64_t m = 0;   /* the first 19 significant digits */
    int nd = 0;       /* significant digits in m */
    int dropped = 0;  /* integer digits past those 19 */
    int lost = 0;     /* fraction digits past those 19 */
    int frac = 0;     /* fraction digits in m */
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            if (nd < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                nd++;
            } else {
                dropped++;
            }
            p++;
        }
    } else {
        return -1;
    }
    int is_float = 0;
    if (p < end && *p == '.') {
        is_float = 1;
        p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') {
            if (nd < 19 && !dropped) {
                m = m * 10 + (uint64_t)(*p - '0');
                nd += m != 0; /* leading zeros of 0.00x are not significant */
                frac++;
            } else {
                lost = 1;
            }
            p++;
        }
    }
    int exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') {
            if (exp < 100000) exp = exp * 10 + (*p - '0');
            p++;
        }
        if (eneg) exp = -exp;
    }
    P->p = p;
    v->s = (const char *)start;
    v->n = (size_t)(p - start);
    if (!is_float) {
        /* int64 range only */
        if (dropped || m > (uint64_t)INT64_MAX) {
            v->type = V_BIGNUM;
            return 0;
        }
        v->i = neg ? -(int64_t)m : (int64_t)m;
        v->type = V_INT;
        return 0;
    }
    v->type = V_FLOAT;
    int e10 = exp - frac + dropped;
    if (!lost && !dropped && m <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {
        /* Clinger's fast path: both operands exact, one correctly rounded operation */
        double d = (double)m;
        d = e10 < 0 ? d / POW10[-e10] : d * POW10[e10];
        v->d = neg ? -d : d;
        return 0;
    }
    if (!lost && !dropped && m != 0 && e10 < 0 && e10 >= -19 && div_pow10(m, -e10, &v->d)) {
        if (neg) v->d = -v->d;
        return 0;
    }
    char tmp[128];
    if (v->n >= sizeof(tmp)) return -1;
    memcpy(tmp, start, v->n);
    tmp[v->n] = 0;
    v->d = strtod(tmp, NULL); /* correctly rounded (glibc); the C locale's "." is the only decimal point */
    /* a float that overflows (1e400): the typed decoder rejects it in the fields it decodes, so decline anywhere */
    return isfinite(v->d) ? 0 : -1;
}

static int skip_value(Parser *P);

static int skip_container(Parser *P, int is_obj) {
    if (++P->depth > MAX_DEPTH) return -1;
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == (is_obj ? '}' : ']')) {
        P->p++;
        P->depth--;
        return 0;
    }
    for (;;) {
        if (is_obj) {
            const char *s;
            size_t n;
            int esc;
            if (P->p >= P->end || *P->p != '"' || scan_string(P, &s, &n, &esc) < 0) return -1;
            skip_ws(P);
            if (P->p >= P->end || *P->p != ':') return -1;
            P->p++;
            skip_ws(P);
        }
        if (skip_value(P) < 0) return -1;
        skip_ws(P);
        if (P->p >= P->end) return -1;
        if (*P->p == ',') {
            P->p++;
            skip_ws(P);
            continue;
        }
        if (*P->p == (is_obj ? '}' : ']')) {
            P->p++;
            P->depth--;
            return 0;
        }
        return -1;
    }
}

static int scan_literal(Parser *P, const char *lit, size_t n) {
    if ((size_t)(P->end - P->p) < n || memcmp(P->p, lit, n) != 0) return -1;
    P->p += n;
    return 0;
}

/* one value at P->p (no leading whitespace); scalars are decoded into v, containers only spanned */
static int scan_value(Parser *P, Val *v) {
    if (P->p >= P->end) return -1;
    const unsigned char *start = P->p;
    switch (*P->p) {
        case '"':
            v->type = V_STR;
            return scan_string(P, &v->s, &v->n, &v->esc);
        case '{':
        case '[':
            v->type = *P->p == '{' ? V_OBJECT : V_ARRAY;
            if (skip_container(P, *start == '{') < 0) return -1;
            break;
        case 't':
            v->type = V_BOOL;
            if (scan_literal(P, "true", 4) < 0) return -1;
            break;
        case 'f':
            v->type = V_BOOL;
            if (scan_literal(P, "false", 5) < 0) return -1;
            break;
        case 'n':
            v->type = V_NULL;
            if (scan_literal(P, "null", 4) < 0) return -1;
            break;
        default:
            return scan_number(P, v);
    }
    v->s = (const char *)start;
    v->n = (size_t)(P->p - start);
    return 0;
}

/* a number nobody reads: check the grammar only; with an exponent (which could overflow: declined) or very
 * many digits, the full parse decides */
static int skip_number(Parser *P) {
    const unsigned char *p = P->p, *end = P->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return -1;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if ((p < end && (*p == 'e' || *p == 'E')) || p - P->p > 300) {
        Val v;
        return scan_number(P, &v);
    }
    P->p = p;
    return 0;
}

static int skip_value(Parser *P) {
    Val v;
    if (P->p < P->end) {
        unsigned char c = *P->p;
        if (c == '"') {
            const char *s;
            size_t n;
            int esc;
            return scan_string(P, &s, &n, &esc);
        }
        if (c == '-' || (c >= '0' && c <= '9')) return skip_number(P);
    }
    return scan_value(P, &v);
}

/* ---------------------------------------------------------------------------------------------------------- */
/* the keys the model reads */

enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ID, K_ARGS, N_TOP };
/* args keys: the integer columns first (their order = the builder's _ARG_INT_COLUMNS), then the others */
enum {
    A_STREAM, A_CORRELATION, A_EXTERNAL_ID, A_DEVICE, A_BYTES, A_SEQ, A_IN_NELEMS, A_OUT_NELEMS, A_GROUP_SIZE,
    A_INPUT_DIMS, A_INPUT_TYPES, A_COLL_NAME, A_DTYPE, N_ARGS
};
#define N_INT_ARGS 9
static const char *INT_ARG_NAMES[N_INT_ARGS] = {"stream", "correlation", "external_id", "device", "bytes",
                                               "seq", "in_nelems", "out_nelems", "group_size"};

static int top_key(const char *s, size_t n) {
    switch (n) {
        case 2:
            if (s[0] == 'p' && s[1] == 'h') return K_PH;
            if (s[0] == 't' && s[1] == 's') return K_TS;
            if (s[0] == 'i' && s[1] == 'd') return K_ID;
            return -1;
        case 3:
            if (!memcmp(s, "cat", 3)) return K_CAT;
            if (!memcmp(s, "pid", 3)) return K_PID;
            if (!memcmp(s, "tid", 3)) return K_TID;
            if (!memcmp(s, "dur", 3)) return K_DUR;
            return -1;
        case 4:
            if (!memcmp(s, "name", 4)) return K_NAME;
            if (!memcmp(s, "args", 4)) return K_ARGS;
            return -1;
        default: return -1;
    }
}

static int arg_key(const char *s, size_t n) {
    switch (n) {
        case 5:
            if (!memcmp(s, "bytes", 5)) return A_BYTES;
            if (!memcmp(s, "dtype", 5)) return A_DTYPE;
            return -1;
        case 6:
            if (!memcmp(s, "stream", 6)) return A_STREAM;
            if (!memcmp(s, "device", 6)) return A_DEVICE;
            return -1;
        case 10:
            if (!memcmp(s, "Input Dims", 10)) return A_INPUT_DIMS;
            if (!memcmp(s, "Input type", 10)) return A_INPUT_TYPES;
            if (!memcmp(s, "Group size", 10)) return A_GROUP_SIZE;
            return -1;
        case 11:
            if (!memcmp(s, "External id", 11)) return A_EXTERNAL_ID;
            if (!memcmp(s, "correlation", 11)) return A_CORRELATION;
            return -1;
        case 13:
            if (!memcmp(s, "In msg nelems", 13)) return A_IN_NELEMS;
            return -1;
        case 14:
            if (!memcmp(s, "Out msg nelems", 14)) return A_OUT_NELEMS;
            return -1;
        case 15:
            if (!memcmp(s, "Sequence number", 15)) return A_SEQ;
            if (!memcmp(s, "Collective name", 15)) return A_COLL_NAME;
            return -1;
        default: return -1;
    }
}

/* ---------------------------------------------------------------------------------------------------------- */
/* output columns */

typedef struct {
    Buf vals;   /* int64 */
    Buf sids;   /* int32: local id into strs, -1 for an integer */
    StrTable strs;
    int any_str;
} ProcCol;

typedef struct {
    Buf spans, group;
    /* complete events */
    size_t x_n;
    int x_float_ts;
    Buf x_ts, x_dur, x_cat, x_name, x_has_args, x_rows;
    StrTable t_cat, t_name;
    ProcCol x_pid, x_tid;
    Buf x_int[N_INT_ARGS];
    Py_ssize_t x_int_count[N_INT_ARGS];
    Buf x_dims, x_types, x_coll, x_dtype;
    StrTable t_dims, t_types, t_coll, t_dtype;
    /* flows */
    size_t f_n;
    Buf f_id, f_ts, f_phase, f_cat;
    StrTable t_fcat;
    ProcCol f_pid, f_tid;
    Buf tmp; /* unescape scratch */
} Out;

static StrTable *out_tables(Out *o, int i) {
    StrTable *all[] = {&o->t_cat, &o->t_name, &o->x_pid.strs, &o->x_tid.strs, &o->t_dims, &o->t_types,
                       &o->t_coll, &o->t_dtype, &o->t_fcat, &o->f_pid.strs, &o->f_tid.strs};
    return i < 11 ? all[i] : NULL;
}

static void out_free(Out *o) {
    Buf *bufs[] = {&o->spans, &o->group, &o->x_ts, &o->x_dur, &o->x_cat, &o->x_name, &o->x_has_args,
                   &o->x_rows, &o->x_pid.vals, &o->x_pid.sids, &o->x_tid.vals, &o->x_tid.sids, &o->x_dims,
                   &o->x_types, &o->x_coll, &o->x_dtype, &o->f_id, &o->f_ts, &o->f_phase, &o->f_cat,
                   &o->f_pid.vals, &o->f_pid.sids, &o->f_tid.vals, &o->f_tid.sids, &o->tmp};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]->data);
    for (int i = 0; i < N_INT_ARGS; i++) free(o->x_int[i].data);
    for (int i = 0; out_tables(o, i); i++) table_free(out_tables(o, i));
}

static const char EMPTY_STR[] = "";
static const char NONE_STR[] = "None";

/* string column value: a string, or (absent / null) -> dflt (NULL: -1); any other type declines */
static int push_str(Buf *col, StrTable *t, const Val *v, const char *dflt) {
    int32_t id;
    if (v->type == V_STR) {
        id = table_id(t, v->s, v->n, v->esc);
        if (id < 0) return id;
    } else if (v->type == V_ABSENT || v->type == V_NULL) {
        if (dflt) {
            id = table_id(t, dflt, strlen(dflt), 0);
            if (id < 0) return id;
        } else {
            id = -1;
        }
    } else {
        return -1;
    }
    PUSH(col, int32_t, id);
    return 0;
}

/* pid / tid: an int, or a string (null / absent read as the string "None", as str(None) in Python) */
static int push_proc(ProcCol *c, const Val *v) {
    if (v->type == V_INT) {
        PUSH(&c->vals, int64_t, v->i);
        PUSH(&c->sids, int32_t, -1);
        return 0;
    }
    if (v->type != V_STR && v->type != V_ABSENT && v->type != V_NULL) return -1;
    int32_t id = v->type == V_STR ? table_id(&c->strs, v->s, v->n, v->esc) : table_id(&c->strs, NONE_STR, 4, 0);
    if (id < 0) return id;
    c->any_str = 1;
    PUSH(&c->vals, int64_t, 0);
    PUSH(&c->sids, int32_t, id);
    return 0;
}

/* a number as float64: int or float; absent -> absent_value; null -> NaN; other types decline */
static int num_value(const Val *v, double absent_value, double *out, int *is_float) {
    switch (v->type) {
        case V_INT: *out = (double)v->i; return 0;
        case V_FLOAT:
            *out = v->d;
            if (is_float) *is_float = 1;
            return 0;
        case V_ABSENT: *out = absent_value; return 0;
        case V_NULL: *out = NAN; return 0;
        default: return -1;
    }
}

/* ---------------------------------------------------------------------------------------------------------- */
/* one element */

typedef struct {
    Val top[N_TOP];
    Val args[N_ARGS];
} Fields;

/* An object member's key and the colon after it; the value follows. Escaped keys decline (matching them would
   need decoding). 0 ok, -1 decline. */
static int member_key(Parser *P, const char **s, size_t *n) {
    int esc;
    if (P->p >= P->end || *P->p != '"' || scan_string(P, s, n, &esc) < 0 || esc) return -1;
    skip_ws(P);
    if (P->p >= P->end || *P->p != ':') return -1;
    P->p++;
    skip_ws(P);
    return 0;
}

/* After a member's value: 1 another member follows (',' consumed), 0 the object ended ('}' consumed), -1 decline. */
static int member_next(Parser *P) {
    skip_ws(P);
    if (P->p >= P->end) return -1;
    if (*P->p == ',') {
        P->p++;
        skip_ws(P);
        return 1;
    }
    if (*P->p == '}') {
        P->p++;
        return 0;
    }
    return -1;
}

/* '{' then optional whitespace; 1 the object has members, 0 it was empty ('}' consumed), -1 decline. */
static int object_open(Parser *P) {
    if (P->p >= P->end || *P->p != '{') return -1;
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
        return 0;
    }
    return 1;
}

static int scan_args(Parser *P, Fields *F) {
    if (++P->depth > MAX_DEPTH) return -1;
    int more = object_open(P);
    while (more > 0) {
        const char *s;
        size_t n;
        if (member_key(P, &s, &n) < 0) return -1;
        int k = arg_key(s, n);
        if (k >= 0) {
            if (F->args[k].type != V_ABSENT) return -1; /* duplicate key */
            if (scan_value(P, &F->args[k]) < 0) return -1;
        } else if (skip_value(P) < 0) {
            return -1;
        }
        more = member_next(P);
    }
    if (more < 0) return -1;
    P->depth--;
    return 0;
}

static int scan_element(Parser *P, Fields *F) {
    for (int i = 0; i < N_TOP; i++) F->top[i].type = V_ABSENT;
    for (int i = 0; i < N_ARGS; i++) F->args[i].type = V_ABSENT;
    P->depth = 1;
    int more = object_open(P);
    while (more > 0) {
        const char *s;
        size_t n;
        if (member_key(P, &s, &n) < 0) return -1;
        int k = top_key(s, n);
        if (k >= 0) {
            Val *v = &F->top[k];
            if (v->type != V_ABSENT) return -1;
            if (k == K_ARGS) {
                if (P->p < P->end && *P->p == '{') {
                    v->type = V_OBJECT;
                    if (scan_args(P, F) < 0) return -1;
                } else {
                    if (scan_value(P, v) < 0) return -1;
                    if (v->type != V_NULL) return -1; /* args must be an object or null */
                }
            } else if (scan_value(P, v) < 0) {
                return -1;
            }
        } else if (skip_value(P) < 0) {
            return -1;
        }
        more = member_next(P);
    }
    return more < 0 ? -1 : 0;
}

/* 0 complete, 1 flow, 2 other; phase code in *phase for flows; -1: decline */
static int classify(Out *o, const Val *ph, int *phase) {
    if (ph->type == V_ABSENT || ph->type == V_NULL) return 2;
    if (ph->type != V_STR) return -1;
    const char *s = ph->s;
    size_t n = ph->n;
    if (ph->esc) {
        int r = unescape(ph->s, ph->n, &o->tmp);
        if (r < 0) return -1;
        s = o->tmp.data;
        n = o->tmp.len;
    }
    if (n != 1) return 2;
    switch (s[0]) {
        case 'X': return 0;
        case 's': *phase = 0; return 1;
        case 'f': *phase = 1; return 1;
        case 't': *phase = 2; return 1;
        default: return 2;
    }
}

/* a metadata event (ph "M") the model does not read: every name but process_name and thread_name (Python would
 * parse it again only to drop it). Group 3: located, never parsed again. Escaped or odd values stay group 2. */
static int ignored_metadata(const Fields *F) {
    const Val *ph = &F->top[K_PH], *name = &F->top[K_NAME];
    if (ph->type != V_STR || ph->esc || ph->n != 1 || ph->s[0] != 'M') return 0;
    if (name->type != V_STR || name->esc) return 0;
    if (name->n == 12 && !memcmp(name->s, "process_name", 12)) return 0;
    if (name->n == 11 && !memcmp(name->s, "thread_name", 11)) return 0;
    return 1;
}

static int commit_complete(Out *o, const Fields *F, int64_t row) {
    double ts, dur, x;
    int r;
    if (num_value(&F->top[K_TS], NAN, &ts, &o->x_float_ts) < 0) return -1;
    if (num_value(&F->top[K_DUR], 0.0, &dur, NULL) < 0) return -1;
    PUSH(&o->x_ts, double, ts);
    PUSH(&o->x_dur, double, dur);
    PUSH(&o->x_rows, int64_t, row);
    if ((r = push_str(&o->x_cat, &o->t_cat, &F->top[K_CAT], EMPTY_STR)) < 0) return r;
    if ((r = push_str(&o->x_name, &o->t_name, &F->top[K_NAME], EMPTY_STR)) < 0) return r;
    if ((r = push_proc(&o->x_pid, &F->top[K_PID])) < 0) return r;
    if ((r = push_proc(&o->x_tid, &F->top[K_TID])) < 0) return r;
    PUSH(&o->x_has_args, uint8_t, F->top[K_ARGS].type == V_OBJECT);
    for (int i = 0; i < N_INT_ARGS; i++) {
        if (num_value(&F->args[i], NAN, &x, NULL) < 0) return -1;
        if (!isnan(x)) o->x_int_count[i]++;
        PUSH(&o->x_int[i], double, x);
    }
    const Val *raw[2] = {&F->args[A_INPUT_DIMS], &F->args[A_INPUT_TYPES]};
    Buf *raw_col[2] = {&o->x_dims, &o->x_types};
    StrTable *raw_t[2] = {&o->t_dims, &o->t_types};
    for (int i = 0; i < 2; i++) {
        int32_t id = -1;
        if (raw[i]->type != V_ABSENT && raw[i]->type != V_NULL) {
            /* the raw JSON text of the value (strings: with their quotes) */
            const char *s = raw[i]->type == V_STR ? raw[i]->s - 1 : raw[i]->s;
            size_t n = raw[i]->type == V_STR ? raw[i]->n + 2 : raw[i]->n;
            id = table_id(raw_t[i], s, n, 0);
            if (id < 0) return id;
        }
        PUSH(raw_col[i], int32_t, id);
    }
    if ((r = push_str(&o->x_coll, &o->t_coll, &F->args[A_COLL_NAME], NULL)) < 0) return r;
    if ((r = push_str(&o->x_dtype, &o->t_dtype, &F->args[A_DTYPE], NULL)) < 0) return r;
    o->x_n++;
    return 0;
}

static int commit_flow(Out *o, const Fields *F, int phase) {
    double id, ts;
    int r;
    if (num_value(&F->top[K_ID], NAN, &id, NULL) < 0) return -1;
    if (num_value(&F->top[K_TS], NAN, &ts, NULL) < 0) return -1;
    PUSH(&o->f_id, double, id);
    PUSH(&o->f_ts, double, ts);
    if ((r = push_proc(&o->f_pid, &F->top[K_PID])) < 0) return r;
    if ((r = push_proc(&o->f_tid, &F->top[K_TID])) < 0) return r;
    PUSH(&o->f_phase, int8_t, (int8_t)phase);
    if ((r = push_str(&o->f_cat, &o->t_fcat, &F->top[K_CAT], EMPTY_STR)) < 0) return r;
    o->f_n++;
    return 0;
}

static int parse_batch(Out *o, const unsigned char *data, size_t len) {
    Parser P = {data, data + len, 0};
    Fields F;
    skip_ws(&P);
    if (P.p >= P.end || *P.p != '[') return -1;
    P.p++;
    skip_ws(&P);
    int64_t n = 0;
    if (P.p < P.end && *P.p == ']') {
        P.p++;
    } else {
        for (;;) {
            const unsigned char *start = P.p;
            if (scan_element(&P, &F) < 0) return -1;
            PUSH(&o->spans, int64_t, (int64_t)(start - data));
            PUSH(&o->spans, int64_t, (int64_t)(P.p - data));
            int phase = 0;
            int g = classify(o, &F.top[K_PH], &phase);
            if (g < 0) return -1;
            int r = g == 0 ? commit_complete(o, &F, n) : g == 1 ? commit_flow(o, &F, phase) : 0;
            if (r < 0) return r;
            if (g == 2 && ignored_metadata(&F)) g = 3;
            PUSH(&o->group, int8_t, (int8_t)g);
            n++;
            skip_ws(&P);
            if (P.p >= P.end) return -1;
            if (*P.p == ',') {
                P.p++;
                skip_ws(&P);
                continue;
            }
            if (*P.p == ']') {
                P.p++;
                break;
            }
            return -1;
        }
    }
    skip_ws(&P);
    return P.p == P.end ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Python interface */

static int set_buf(PyObject *d, const char *key, const Buf *b) {
    PyObject *v = PyByteArray_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static int set_obj(PyObject *d, const char *key, PyObject *v) {
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static int set_proc(PyObject *d, const char *vals_key, const char *sids_key, const char *strs_key,
                    const ProcCol *c) {
    if (set_buf(d, vals_key, &c->vals) < 0) return -1;
    if (c->any_str) {
        if (set_buf(d, sids_key, &c->sids) < 0) return -1;
    } else if (PyDict_SetItemString(d, sids_key, Py_None) < 0) {
        return -1;
    }
    return PyDict_SetItemString(d, strs_key, c->strs.list);
}

static PyObject *build_result(Out *o) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    char key[64];
    if (set_obj(d, "n", PyLong_FromSsize_t((Py_ssize_t)(o->group.len))) < 0 || set_buf(d, "spans", &o->spans) < 0 ||
        set_buf(d, "group", &o->group) < 0 || set_obj(d, "x_n", PyLong_FromSize_t(o->x_n)) < 0 ||
        set_obj(d, "x_float_ts", PyBool_FromLong(o->x_float_ts)) < 0 || set_buf(d, "x_ts", &o->x_ts) < 0 ||
        set_buf(d, "x_dur", &o->x_dur) < 0 || set_buf(d, "x_rows", &o->x_rows) < 0 ||
        set_buf(d, "x_cat", &o->x_cat) < 0 || PyDict_SetItemString(d, "x_cat_u", o->t_cat.list) < 0 ||
        set_buf(d, "x_name", &o->x_name) < 0 || PyDict_SetItemString(d, "x_name_u", o->t_name.list) < 0 ||
        set_proc(d, "x_pid", "x_pid_s", "x_pid_u", &o->x_pid) < 0 ||
        set_proc(d, "x_tid", "x_tid_s", "x_tid_u", &o->x_tid) < 0 || set_buf(d, "x_has_args", &o->x_has_args) < 0 ||
        set_buf(d, "x_input_dims", &o->x_dims) < 0 || PyDict_SetItemString(d, "x_input_dims_u", o->t_dims.list) < 0 ||
        set_buf(d, "x_input_types", &o->x_types) < 0 ||
        PyDict_SetItemString(d, "x_input_types_u", o->t_types.list) < 0 || set_buf(d, "x_coll_name", &o->x_coll) < 0 ||
        PyDict_SetItemString(d, "x_coll_name_u", o->t_coll.list) < 0 || set_buf(d, "x_dtype", &o->x_dtype) < 0 ||
        PyDict_SetItemString(d, "x_dtype_u", o->t_dtype.list) < 0 || set_obj(d, "f_n", PyLong_FromSize_t(o->f_n)) < 0 ||
        set_buf(d, "f_id", &o->f_id) < 0 || set_buf(d, "f_ts", &o->f_ts) < 0 || set_buf(d, "f_phase", &o->f_phase) < 0 ||
        set_buf(d, "f_cat", &o->f_cat) < 0 || PyDict_SetItemString(d, "f_cat_u", o->t_fcat.list) < 0 ||
        set_proc(d, "f_pid", "f_pid_s", "f_pid_u", &o->f_pid) < 0 ||
        set_proc(d, "f_tid", "f_tid_s", "f_tid_u", &o->f_tid) < 0)
        goto fail;
    for (int i = 0; i < N_INT_ARGS; i++) {
        snprintf(key, sizeof(key), "x_%s", INT_ARG_NAMES[i]);
        if (set_buf(d, key, &o->x_int[i]) < 0) goto fail;
        snprintf(key, sizeof(key), "x_%s_n", INT_ARG_NAMES[i]);
        if (set_obj(d, key, PyLong_FromSsize_t(o->x_int_count[i])) < 0) goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* The parse runs without the GIL (no Python API in it: see table_id), so another thread runs Python meanwhile (the
 * CLI's read-ahead decodes while the main thread imports). The Py_buffer export pins a bytearray's size; its bytes
 * must not change until the call returns (jsonscan's batches are its own, touched by no one else meanwhile). */
static PyObject *decode_batch(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Out o;
    memset(&o, 0, sizeof(o));
    for (int i = 0; out_tables(&o, i); i++) {
        table_init(out_tables(&o, i), out_tables(&o, i) == &o.t_dims || out_tables(&o, i) == &o.t_types);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = parse_batch(&o, (const unsigned char *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    for (int i = 0; rc == 0 && out_tables(&o, i); i++) rc = table_objects(out_tables(&o, i), &o.tmp);
    PyObject *result = NULL;
    if (rc == 0) {
        result = build_result(&o);
    } else if (rc == -1) {
        result = Py_NewRef(Py_None);
    } else if (!PyErr_Occurred()) { /* out of memory inside the parse: reported now that the GIL is held */
        PyErr_NoMemory();
    }
    out_free(&o);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_batch", decode_batch, METH_O,
     "decode_batch(buf) -> dict | None: column buffers of a JSON array of trace events; None to decline. The parse "
     "releases the GIL: the caller must not change buf's bytes until it returns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Columnar trace-event decoder.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    for (int c = 0; c < 256; c++) STR_STOP[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
    return PyModule_Create(&module);
}
