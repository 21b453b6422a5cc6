/* ledger.core._native: compiled inner loops of the ledger's hot paths (issue 12).

   Every function here has a pure-Python twin that stays the reference (ledger/core/native.py says
   which); where this module is not built (no C compiler at install time) the twins run instead,
   and tests/test_native.py holds each pair to the same answers.

   1. parse_plain(data, max_depth): the value of canonical JSON (RFC 8785) bytes in the "plain"
      subset every log entry is written in: objects whose keys are printable ASCII without '"'
      or '\\', in strictly increasing order (so no duplicates, and byte order is UTF-16 order),
      strings in valid UTF-8 with exactly the minimal escapes canonical JSON writes, integers
      in canonical form with |i| <= 2**53, true, false, null, no whitespace, nesting at most
      max_depth. Bytes outside that subset give NotImplemented: the caller then runs the full Python
      parse, which accepts or refuses with its precise message. So this function only ever
      accepts bytes the full parse accepts, with the same value.
   2. bundle_view(data): what ``ledger audit`` judges of a bundle entry, in one pass (below).
   3. join_plain(parts, shapes): canonical JSON of plain values joined with bytes, for the
      entries a batch seal encodes, with the bundle shape rules of 2 judged on the way.
   4. sign_many / verify_many: libsodium's Ed25519 over many messages in one call, without the
      GIL, so other threads run Python meanwhile. libsodium is the system's shared library (Debian
      libsodium23), loaded once by bind_sodium through its public C API (issue 30: PyNaCl's
      private extension module is no longer reached into).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <string.h>

#define MAX_SAFE 9007199254740992LL /* 2**53 */

/* -- canonical JSON, plain subset ------------------------------------------------------------ */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    int depth;
    int max_depth;
    unsigned char *scratch; /* unescaped string bytes */
    Py_ssize_t scratch_len;
} Parser;

/* Every parse_* returns a new reference, or NULL: with an exception set (out of memory) the
   caller propagates it, without one the input is outside the subset ("defer"). */
static PyObject *parse_value(Parser *ps);
static int literal(Parser *ps, const char *word, size_t n);

/* Byte tables, filled once when the module loads (init_tables): a lookup where a chain of
   comparisons per character was the hottest code of bundle_view (perf; the same loop over real
   entries took 47% fewer samples with the tables, docs/benchmarks.md). */
static signed char HEX_VALUE[256];     /* '0'-'9', 'a'-'f': 0-15; any other byte: -1 */
static signed char B64_VALUE[256];     /* the base64 alphabet: 0-63; any other byte: -1 */
static unsigned char STRING_PLAIN[256]; /* 1: a byte a JSON string holds as it is, that ends
                                           nothing and starts nothing: ASCII from 0x20, not '"'
                                           or '\\' */

static void init_tables(void) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int c = 0; c < 256; c++) {
        HEX_VALUE[c] = -1;
        B64_VALUE[c] = -1;
        STRING_PLAIN[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
    }
    for (int c = '0'; c <= '9'; c++) HEX_VALUE[c] = (signed char)(c - '0');
    for (int c = 'a'; c <= 'f'; c++) HEX_VALUE[c] = (signed char)(c - 'a' + 10);
    for (int i = 0; i < 64; i++) B64_VALUE[(unsigned char)b64[i]] = (signed char)i;
}

static int hexval(unsigned char c) {
    return HEX_VALUE[c]; /* canonical JSON writes lowercase hex only */
}

/* Strict UTF-8 (what Python's decoder accepts): no overlong forms, no surrogates, at most
   U+10FFFF, no truncated sequence. */
static int utf8_valid(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned int cp;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n) return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

/* Scan a string starting at ps->p (just after the opening quote) to its closing quote; its
   raw text is [*start, *start + *len). 1: a canonical string (minimal escapes, no raw control
   character; UTF-8 not judged yet), 0: outside the subset. */
static int scan_string(Parser *ps, const unsigned char **start, Py_ssize_t *len, int *escaped,
                       int *high) {
    const unsigned char *p = ps->p, *end = ps->end;
    *start = p;
    *escaped = 0;
    *high = 0;
    while (p < end) {
        unsigned char c = *p;
        if (STRING_PLAIN[c]) {
            p++;
            continue;
        }
        if (c == '"') break;
        if (c < 0x20) return 0; /* a raw control character is not JSON */
        if (c == '\\') {
            *escaped = 1;
            if (p + 1 >= end) return 0;
            unsigned char e = p[1];
            if (e == '"' || e == '\\' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                e == 't') {
                p += 2;
                continue;
            }
            if (e != 'u' || p + 6 > end) return 0;
            /* \u00XX, only for a control character without a short form */
            if (p[2] != '0' || p[3] != '0') return 0;
            int h = hexval(p[4]), l = hexval(p[5]);
            if (h < 0 || l < 0) return 0;
            int v = h * 16 + l;
            if (v >= 0x20 || v == 0x08 || v == 0x09 || v == 0x0a || v == 0x0c || v == 0x0d)
                return 0;
            p += 6;
            continue;
        }
        if (c >= 0x80) *high = 1;
        p++;
    }
    if (p >= end) return 0; /* unterminated */
    *len = p - *start;
    ps->p = p + 1;
    return 1;
}

/* The bytes a scanned string stands for, escapes undone, into ps->scratch; their length, or -1
   (out of memory, exception set). */
static Py_ssize_t unescape(Parser *ps, const unsigned char *start, Py_ssize_t n) {
    if (n > ps->scratch_len) {
        unsigned char *grown = PyMem_Realloc(ps->scratch, (size_t)(n > 0 ? n : 1));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        ps->scratch = grown;
        ps->scratch_len = n;
    }
    unsigned char *out = ps->scratch;
    Py_ssize_t k = 0;
    for (const unsigned char *q = start; q < start + n;) {
        if (*q != '\\') {
            out[k++] = *q++;
            continue;
        }
        switch (q[1]) {
        case '"': out[k++] = '"'; q += 2; break;
        case '\\': out[k++] = '\\'; q += 2; break;
        case 'b': out[k++] = 0x08; q += 2; break;
        case 'f': out[k++] = 0x0c; q += 2; break;
        case 'n': out[k++] = 0x0a; q += 2; break;
        case 'r': out[k++] = 0x0d; q += 2; break;
        case 't': out[k++] = 0x09; q += 2; break;
        default: /* 'u', checked by scan_string */
            out[k++] = (unsigned char)(hexval(q[4]) * 16 + hexval(q[5]));
            q += 6;
        }
    }
    return k;
}

/* A string starting at ps->p (just after the opening quote). Returns a str or NULL (defer). */
static PyObject *parse_string(Parser *ps) {
    const unsigned char *start;
    Py_ssize_t n;
    int escaped, high;
    if (!scan_string(ps, &start, &n, &escaped, &high)) return NULL;
    if (!escaped && !high) return PyUnicode_FromStringAndSize((const char *)start, n);
    const unsigned char *text = start;
    if (escaped) {
        n = unescape(ps, start, n);
        if (n < 0) return NULL;
        text = ps->scratch;
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)text, n, "strict");
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return s;
}

/* An integer in canonical form within 2**53 at ps->p into *out: 1, or 0 outside the subset
   (a float, -0, a leading zero, beyond 2**53). */
static int scan_number(Parser *ps, long long *out) {
    const unsigned char *p = ps->p, *end = ps->end;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9') return 0;
    if (*p == '0') {
        p++;
        if (neg) return 0; /* -0 is written 0 */
        if (p < end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')))
            return 0;
        ps->p = p;
        *out = 0;
        return 1;
    }
    long long v = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (++digits > 16) return 0; /* beyond 2**53 (16 digits) */
        v = v * 10 + (*p - '0');
        p++;
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return 0; /* a float */
    if (v > MAX_SAFE) return 0;
    ps->p = p;
    *out = neg ? -v : v;
    return 1;
}

static PyObject *parse_number(Parser *ps) {
    long long v;
    if (!scan_number(ps, &v)) return NULL;
    return PyLong_FromLongLong(v);
}

/* An object key at ps->p (at its opening quote): printable ASCII without '"' or '\\', after
   the previous key (*prev, *prev_len; NULL for the first) in strictly increasing order, then
   ':'. 1 with the key in *k, *klen; 0 outside the subset. */
static int scan_key(Parser *ps, const unsigned char **prev, Py_ssize_t *prev_len,
                    const unsigned char **k, Py_ssize_t *klen) {
    if (ps->p >= ps->end || *ps->p != '"') return 0;
    const unsigned char *s = ++ps->p;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = *ps->p;
        if (c < 0x20 || c > 0x7e || c == '\\') return 0;
        ps->p++;
    }
    if (ps->p >= ps->end) return 0;
    Py_ssize_t n = ps->p - s;
    ps->p++;
    if (*prev != NULL) {
        Py_ssize_t m = n < *prev_len ? n : *prev_len;
        int c = memcmp(*prev, s, (size_t)m);
        if (c > 0 || (c == 0 && *prev_len >= n)) return 0; /* not strictly increasing */
    }
    if (ps->p >= ps->end || *ps->p != ':') return 0;
    ps->p++;
    *prev = *k = s;
    *prev_len = *klen = n;
    return 1;
}

/* ``close`` at ps->p: consumed, and the container's depth given back (1); else 0. */
static int closes(Parser *ps, unsigned char close) {
    if (ps->p >= ps->end || *ps->p != close) return 0;
    ps->p++;
    ps->depth--;
    return 1;
}

/* After a member or an element: 1 when a ',' says another follows (consumed), 0 when ``close``
   ends the container (``closes``), -1 for anything else (outside the subset). */
static int after_item(Parser *ps, unsigned char close) {
    if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        return 1;
    }
    return closes(ps, close) ? 0 : -1;
}

/* Validate one value of the subset at ps->p without building it: 1, or 0 outside. */
static int skip_value(Parser *ps) {
    if (ps->p >= ps->end) return 0;
    unsigned char c = *ps->p;
    if (c == '"') {
        const unsigned char *s;
        Py_ssize_t n;
        int escaped, high;
        ps->p++;
        if (!scan_string(ps, &s, &n, &escaped, &high)) return 0;
        /* escapes are ASCII and stand for ASCII: the raw text is valid UTF-8 iff the string is */
        return !high || utf8_valid(s, n);
    }
    if (c == '{' || c == '[') {
        if (++ps->depth > ps->max_depth) return 0;
        ps->p++;
        unsigned char close = c == '{' ? '}' : ']';
        const unsigned char *prev = NULL, *k;
        Py_ssize_t prev_len = 0, klen;
        if (closes(ps, close)) return 1;
        for (;;) {
            if (c == '{' && !scan_key(ps, &prev, &prev_len, &k, &klen)) return 0;
            if (!skip_value(ps)) return 0;
            int next = after_item(ps, close);
            if (next <= 0) return next == 0;
        }
    }
    if (c == 't') return literal(ps, "true", 4);
    if (c == 'f') return literal(ps, "false", 5);
    if (c == 'n') return literal(ps, "null", 4);
    long long v;
    return scan_number(ps, &v);
}

static int literal(Parser *ps, const char *word, size_t n) {
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return 0;
    ps->p += n;
    return 1;
}

static PyObject *parse_object(Parser *ps) {
    if (++ps->depth > ps->max_depth) return NULL;
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    const unsigned char *prev = NULL, *k;
    Py_ssize_t prev_len = 0, klen;
    if (closes(ps, '}')) return d;
    for (;;) {
        if (!scan_key(ps, &prev, &prev_len, &k, &klen)) goto defer;
        PyObject *key = PyUnicode_FromStringAndSize((const char *)k, klen);
        if (key == NULL) goto fail;
        PyObject *v = parse_value(ps);
        if (v == NULL) {
            Py_DECREF(key);
            goto fail; /* deferred, or an exception: the caller tells them apart */
        }
        int rc = PyDict_SetItem(d, key, v);
        Py_DECREF(key);
        Py_DECREF(v);
        if (rc < 0) goto fail;
        int next = after_item(ps, '}');
        if (next == 0) return d;
        if (next < 0) goto defer;
    }
defer: /* outside the subset, or an exception set by the C API: the caller tells them apart */
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *parse_array(Parser *ps) {
    if (++ps->depth > ps->max_depth) return NULL;
    PyObject *a = PyList_New(0);
    if (a == NULL) return NULL;
    if (closes(ps, ']')) return a;
    for (;;) {
        PyObject *v = parse_value(ps);
        if (v == NULL) goto fail;
        int rc = PyList_Append(a, v);
        Py_DECREF(v);
        if (rc < 0) goto fail;
        int next = after_item(ps, ']');
        if (next == 0) return a;
        if (next < 0) goto fail;
    }
fail:
    Py_DECREF(a);
    return NULL;
}

static PyObject *parse_value(Parser *ps) {
    if (ps->p >= ps->end) return NULL;
    switch (*ps->p) {
    case '{': ps->p++; return parse_object(ps);
    case '[': ps->p++; return parse_array(ps);
    case '"': ps->p++; return parse_string(ps);
    case 't': if (literal(ps, "true", 4)) Py_RETURN_TRUE; return NULL;
    case 'f': if (literal(ps, "false", 5)) Py_RETURN_FALSE; return NULL;
    case 'n': if (literal(ps, "null", 4)) Py_RETURN_NONE; return NULL;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) return parse_number(ps);
        return NULL;
    }
}

static PyObject *parse_plain(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    int max_depth;
    if (!PyArg_ParseTuple(args, "y*i:parse_plain", &buf, &max_depth)) return NULL;
    Parser ps = {buf.buf, (const unsigned char *)buf.buf + buf.len, 0, max_depth, NULL, 0};
    PyObject *v = parse_value(&ps);
    PyMem_Free(ps.scratch);
    PyBuffer_Release(&buf);
    if (v == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED; /* outside the subset (null is a value, so not None) */
    }
    if (ps.p != ps.end) {
        Py_DECREF(v);
        Py_RETURN_NOTIMPLEMENTED;
    }
    return v;
}

/* -- bundle entries ---------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *s; /* raw text of a string member */
    Py_ssize_t n;
    int escaped, high, present;
} Text;

static int is_hex(const Text *t, Py_ssize_t n) {
    if (!t->present || t->escaped || t->n != n) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (hexval(t->s[i]) < 0) return 0;
    return 1;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* YYYY-MM-DDTHH:MM:SSZ with an optional fraction of 1-6 digits, ASCII digits only */
static int is_time(const Text *t) {
    if (!t->present || t->escaped || t->n < 20) return 0;
    const unsigned char *s = t->s;
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    for (int i = 0; i < 19; i++) {
        if (shape[i] == 'd' ? !is_digit(s[i]) : s[i] != (unsigned char)shape[i]) return 0;
    }
    Py_ssize_t i = 19;
    if (s[i] == '.') {
        Py_ssize_t k = 0;
        for (i++; i < t->n && is_digit(s[i]); i++) k++;
        if (k < 1 || k > 6) return 0;
    }
    return i == t->n - 1 && s[i] == 'Z';
}

static int b64val(unsigned char c) { return B64_VALUE[c]; }

/* canonical padded base64 of exactly 64 bytes (88 characters ending "==") into out */
static int b64_64(const Text *t, unsigned char *out) {
    if (!t->present || t->escaped || t->n != 88 || t->s[86] != '=' || t->s[87] != '=') return 0;
    int v[86];
    for (int i = 0; i < 86; i++)
        if ((v[i] = b64val(t->s[i])) < 0) return 0;
    if (v[85] & 0x0f) return 0; /* the unused bits of the last character must be zero */
    for (int g = 0; g < 21; g++) {
        const int *q = v + 4 * g;
        out[3 * g] = (unsigned char)((q[0] << 2) | (q[1] >> 4));
        out[3 * g + 1] = (unsigned char)(((q[1] & 0x0f) << 4) | (q[2] >> 2));
        out[3 * g + 2] = (unsigned char)(((q[2] & 0x03) << 6) | q[3]);
    }
    out[63] = (unsigned char)((v[84] << 2) | (v[85] >> 4));
    return 1;
}

static int key_is(const unsigned char *k, Py_ssize_t n, const char *name) {
    return (size_t)n == strlen(name) && memcmp(k, name, (size_t)n) == 0;
}

/* The shape rules of a bundle entry's kernel, obligations and checks
   (ledger.core.entries.check_bundle_shape), on values already known to be plain canonical JSON. */
#define MAX_KEYS 16
#define MAX_TEXT 1000
#define MAX_DETAIL 10000
#define MAX_OBLIGATIONS 64
#define MAX_CHECKS 512

static int key_name(const unsigned char *k, Py_ssize_t n) { /* [A-Za-z0-9][A-Za-z0-9._-]{0,63} */
    if (n < 1 || n > 64) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = k[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || !(c == '.' || c == '_' || c == '-'))) return 0;
    }
    return 1;
}

static Py_ssize_t code_points(const unsigned char *s, Py_ssize_t n) { /* of a scanned string */
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n;) {
        if (s[i] == '\\') {
            i += s[i + 1] == 'u' ? 6 : 2;
        } else {
            i++;
            while (i < n && (s[i] & 0xc0) == 0x80) i++;
        }
        count++;
    }
    return count;
}

enum { KERNEL, OBLIGATION, CHECK };

/* one string map at ps->p (its opening brace): 1 shaped, 0 not (the value is still skipped to
   its end), -1 outside the subset */
static int shaped_map(Parser *ps, int kind) {
    static const char *const required[3][3] = {
        {"name", "version", NULL}, {"obligation", "theorem", "property"}, {"id", "status", "detail"}};
    if (ps->p >= ps->end || *ps->p != '{') return skip_value(ps) ? 0 : -1;
    if (++ps->depth > ps->max_depth) return -1;
    ps->p++;
    int ok = 1, members = 0, have = 0;
    const unsigned char *prev = NULL, *k;
    Py_ssize_t prev_len = 0, klen;
    if (closes(ps, '}')) return 0; /* no required key */
    for (;;) {
        if (!scan_key(ps, &prev, &prev_len, &k, &klen)) return -1;
        members++;
        if (!key_name(k, klen)) ok = 0;
        for (int r = 0; r < 3; r++)
            if (required[kind][r] != NULL && key_is(k, klen, required[kind][r])) have |= 1 << r;
        if (ps->p < ps->end && *ps->p == '"') {
            const unsigned char *s;
            Py_ssize_t n;
            int escaped, high;
            ps->p++;
            if (!scan_string(ps, &s, &n, &escaped, &high)) return -1;
            if (high && !utf8_valid(s, n)) return -1;
            Py_ssize_t limit = kind == CHECK && key_is(k, klen, "detail") ? MAX_DETAIL : MAX_TEXT;
            if (code_points(s, n) > limit) ok = 0;
            if (kind == CHECK && key_is(k, klen, "status") &&
                (escaped || !((n == 6 && (memcmp(s, "passed", 6) == 0 ||
                                          memcmp(s, "failed", 6) == 0)) ||
                              (n == 7 && memcmp(s, "skipped", 7) == 0))))
                ok = 0;
        } else {
            ok = 0; /* not text */
            if (!skip_value(ps)) return -1;
        }
        int next = after_item(ps, '}');
        if (next < 0) return -1;
        if (next == 0) break;
    }
    int all = required[kind][2] == NULL ? 3 : 7;
    return ok && members <= MAX_KEYS && have == all;
}

/* a list of string maps at ps->p (its opening bracket): as shaped_map */
static int shaped_list(Parser *ps, int kind, Py_ssize_t limit) {
    if (++ps->depth > ps->max_depth) return -1;
    ps->p++;
    int ok = 1;
    Py_ssize_t items = 0;
    if (closes(ps, ']')) return 1;
    for (;;) {
        int r = shaped_map(ps, kind);
        if (r < 0) return -1;
        if (r == 0) ok = 0;
        items++;
        int next = after_item(ps, ']');
        if (next < 0) return -1;
        if (next == 0) return ok && items <= limit;
    }
}

enum { F_TYPE, F_ORIGIN, F_TIME, F_PREV_ROOT, F_SIGNATURE, F_DIGEST, F_MANIFEST, F_SIGNER, NTEXT };
static const char *const TEXT_NAMES[NTEXT] = {"type", "origin", "time", "prev_root",
                                              "signature", "bundle_digest", "manifest", "signer"};
static const size_t TEXT_LENS[NTEXT] = {4, 6, 4, 9, 9, 13, 8, 6};

/* bundle_view(data) -> (origin, prev_size, prev_root, v, digest, manifest, signer, signature,
   signed, files, shaped) or None.

   The members of a bundle entry that ``ledger audit`` judges, read in one pass of the bytes:
   the origin (str), the chain link (prev_size, prev_root as hex text, v: 1 or 2), the bundle
   digest (32 bytes), the manifest (its UTF-8 bytes), the signer's key id (hex text), the
   signature (64 bytes), the signed bytes (the entry without its signature member) and the
   digests the manifest's lines name (``ledger.core.bundle.manifest_digests``), and whether the
   kernel, obligations and checks keep the shape rules (``check_bundle_shape``). Only for bytes that
   ``ledger.core.entries.entry_object`` accepts as a bundle entry, judged by its rules (plain
   canonical JSON; every member of a bundle entry present with its JSON type; a known format
   version; prev_size not negative; hex, base64 and time in their forms); anything else gives
   None and the caller takes entry_object's path, which names what is wrong. */
static PyObject *bundle_view(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*:bundle_view", &buf)) return NULL;
    PyObject *result = NULL;
    Parser ps = {buf.buf, (const unsigned char *)buf.buf + buf.len, 1, 32, NULL, 0};
    Text text[NTEXT];
    memset(text, 0, sizeof text);
    long long prev_size = -1, version = 0;
    int has_prev_size = 0, has_v = 0, has_kernel = 0, has_obligations = 0, has_checks = 0;
    int shaped = 1; /* the shape rules hold */
    const unsigned char *sig_from = NULL, *sig_to = NULL;
    const unsigned char *prev = NULL, *k;
    Py_ssize_t prev_len = 0, klen;
    if (buf.len > 65535 || ps.p >= ps.end || *ps.p != '{') goto done;
    ps.p++;
    for (;;) {
        const unsigned char *member = ps.p; /* the key's opening quote */
        if (!scan_key(&ps, &prev, &prev_len, &k, &klen)) goto done;
        int which = -1;
        for (int i = 0; i < NTEXT && which < 0; i++)
            if ((size_t)klen == TEXT_LENS[i] && memcmp(k, TEXT_NAMES[i], (size_t)klen) == 0)
                which = i;
        if (which >= 0) {
            Text *t = &text[which];
            if (ps.p >= ps.end || *ps.p != '"') goto done; /* not a string */
            ps.p++;
            if (!scan_string(&ps, &t->s, &t->n, &t->escaped, &t->high)) goto done;
            if (t->high && !utf8_valid(t->s, t->n)) goto done;
            t->present = 1;
            if (which == F_SIGNATURE) {
                if (member - 1 < (const unsigned char *)buf.buf || member[-1] != ',') goto done;
                sig_from = member - 1;
                sig_to = ps.p;
            }
        } else if (key_is(k, klen, "prev_size") || key_is(k, klen, "v")) {
            long long n;
            if (ps.p >= ps.end || !(*ps.p == '-' || is_digit(*ps.p)) || !scan_number(&ps, &n))
                goto done;
            if (klen == 1) {
                has_v = 1;
                version = n;
            } else {
                has_prev_size = 1;
                prev_size = n;
            }
        } else {
            int kernel = key_is(k, klen, "kernel");
            int obligations = key_is(k, klen, "obligations"), checks = key_is(k, klen, "checks");
            if ((kernel && (ps.p >= ps.end || *ps.p != '{')) ||
                ((obligations || checks) && (ps.p >= ps.end || *ps.p != '[')))
                goto done; /* the wrong JSON type */
            int r = kernel        ? shaped_map(&ps, KERNEL)
                    : obligations ? shaped_list(&ps, OBLIGATION, MAX_OBLIGATIONS)
                    : checks      ? shaped_list(&ps, CHECK, MAX_CHECKS)
                                  : skip_value(&ps);
            if (r < 0 || (!kernel && !obligations && !checks && r == 0)) goto done;
            if (r == 0) shaped = 0;
            has_kernel |= kernel;
            has_obligations |= obligations;
            has_checks |= checks;
        }
        if (ps.p >= ps.end) goto done;
        if (*ps.p == ',') {
            ps.p++;
            continue;
        }
        if (*ps.p != '}') goto done;
        ps.p++;
        break;
    }
    if (ps.p != ps.end) goto done;
    for (int i = 0; i < NTEXT; i++)
        if (!text[i].present) goto done;
    if (!has_prev_size || prev_size < 0 || !has_kernel || !has_obligations || !has_checks)
        goto done;
    if (has_v && version != 2) goto done;
    const Text *ty = &text[F_TYPE];
    if (ty->escaped || ty->n != 6 || memcmp(ty->s, "bundle", 6) != 0) goto done;
    if (!is_hex(&text[F_PREV_ROOT], 64) || !is_hex(&text[F_DIGEST], 64) ||
        !is_hex(&text[F_SIGNER], 16) || !is_time(&text[F_TIME]))
        goto done;
    unsigned char sig[64], digest[32];
    if (!b64_64(&text[F_SIGNATURE], sig)) goto done;
    for (int i = 0; i < 32; i++)
        digest[i] = (unsigned char)(hexval(text[F_DIGEST].s[2 * i]) * 16 +
                                    hexval(text[F_DIGEST].s[2 * i + 1]));
    /* the origin and the manifest, escapes undone */
    PyObject *origin = NULL, *manifest = NULL, *files = NULL, *signed_bytes = NULL;
    const Text *o = &text[F_ORIGIN];
    if (o->escaped) {
        Py_ssize_t n = unescape(&ps, o->s, o->n);
        if (n < 0) goto done;
        origin = PyUnicode_DecodeUTF8((const char *)ps.scratch, n, "strict");
    } else {
        origin = PyUnicode_DecodeUTF8((const char *)o->s, o->n, "strict");
    }
    if (origin == NULL) goto done;
    const Text *m = &text[F_MANIFEST];
    const unsigned char *mtext = m->s;
    Py_ssize_t mlen = m->n;
    if (m->escaped) {
        mlen = unescape(&ps, m->s, m->n);
        if (mlen < 0) goto fail;
        mtext = ps.scratch;
    }
    manifest = PyBytes_FromStringAndSize((const char *)mtext, mlen);
    files = PyList_New(0);
    if (manifest == NULL || files == NULL) goto fail;
    /* manifest_digests: 64 lowercase hex and two spaces at the start of a line */
    for (Py_ssize_t at = 0; at < mlen;) {
        if (at + 66 <= mlen && mtext[at + 64] == ' ' && mtext[at + 65] == ' ') {
            unsigned char d[32];
            int ok = 1;
            for (int i = 0; i < 32 && ok; i++) {
                int h = hexval(mtext[at + 2 * i]), l = hexval(mtext[at + 2 * i + 1]);
                if (h < 0 || l < 0) ok = 0;
                else d[i] = (unsigned char)(h * 16 + l);
            }
            if (ok) {
                PyObject *b = PyBytes_FromStringAndSize((const char *)d, 32);
                if (b == NULL || PyList_Append(files, b) < 0) {
                    Py_XDECREF(b);
                    goto fail;
                }
                Py_DECREF(b);
            }
        }
        const unsigned char *nl = memchr(mtext + at, '\n', (size_t)(mlen - at));
        if (nl == NULL) break;
        at = nl - mtext + 1;
    }
    Py_ssize_t head = sig_from - (const unsigned char *)buf.buf;
    Py_ssize_t tail = ps.end - sig_to;
    signed_bytes = PyBytes_FromStringAndSize(NULL, head + tail);
    if (signed_bytes == NULL) goto fail;
    memcpy(PyBytes_AS_STRING(signed_bytes), buf.buf, (size_t)head);
    memcpy(PyBytes_AS_STRING(signed_bytes) + head, sig_to, (size_t)tail);
    result = Py_BuildValue("(NLs#iy#Ns#y#NNO)", origin, prev_size,
                           (const char *)text[F_PREV_ROOT].s, (Py_ssize_t)64, has_v ? 2 : 1,
                           (const char *)digest, (Py_ssize_t)32, manifest,
                           (const char *)text[F_SIGNER].s, (Py_ssize_t)16, (const char *)sig,
                           (Py_ssize_t)64, signed_bytes, files, shaped ? Py_True : Py_False);
    goto done; /* Py_BuildValue took the N references, even when it failed */
fail:
    Py_XDECREF(origin);
    Py_XDECREF(manifest);
    Py_XDECREF(files);
    Py_XDECREF(signed_bytes);
done:
    PyMem_Free(ps.scratch);
    PyBuffer_Release(&buf);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    if (result == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return result;
}

/* -- encoding: join_plain ------------------------------------------------------------------ */

/* A growing output buffer (PyMem). */
typedef struct {
    char *b;
    Py_ssize_t n, cap;
} Out;

static int out_room(Out *o, Py_ssize_t more) {
    if (o->n + more <= o->cap) return 1;
    Py_ssize_t cap = o->cap ? o->cap : 2048;
    while (cap < o->n + more) cap *= 2;
    char *b = PyMem_Realloc(o->b, (size_t)cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    o->b = b;
    o->cap = cap;
    return 1;
}

static int out_put(Out *o, const char *s, Py_ssize_t n) {
    if (n == 0) return 1; /* memcpy must not see the NULL of a buffer not yet grown */
    if (!out_room(o, n)) return 0;
    memcpy(o->b + o->n, s, (size_t)n);
    o->n += n;
    return 1;
}

/* A JSON string of the UTF-8 text s[0..n) with the escapes of ``json.encoder.encode_basestring``
   (what canonical JSON writes): '"', '\\', \b \f \n \r \t, other controls below 0x20 as \u00xx
   in lowercase hex; every other byte as it is. */
static int out_string(Out *o, const unsigned char *s, Py_ssize_t n) {
    if (!out_room(o, n + 2)) return 0;
    o->b[o->n++] = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t j = i;
        while (j < n && (STRING_PLAIN[s[j]] || s[j] >= 0x80)) j++;
        if (!out_put(o, (const char *)s + i, j - i)) return 0;
        if (j == n) break;
        unsigned char c = s[j];
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        Py_ssize_t len = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[4] = "0123456789abcdef"[c >> 4];
            esc[5] = "0123456789abcdef"[c & 15];
            len = 6;
        }
        if (!out_put(o, esc, len)) return 0;
        i = j + 1;
    }
    if (!out_room(o, 1)) return 0;
    o->b[o->n++] = '"';
    return 1;
}

/* Canonical JSON of a value in ``ledger.core.canonical.encode_plain``'s subset (exact str without
   lone surrogates, exact int with |i| <= 2**53, True, False, None, exact list, exact dict with
   ASCII str keys; nesting below 32): 1 written, 0 outside the subset (nothing is raised: the
   caller takes the Python path), -1 with an exception set (out of memory). */
static int out_value(Out *o, PyObject *v, int depth) {
    if (v == Py_None) return out_put(o, "null", 4) ? 1 : -1;
    if (v == Py_True) return out_put(o, "true", 4) ? 1 : -1;
    if (v == Py_False) return out_put(o, "false", 5) ? 1 : -1;
    if (PyUnicode_CheckExact(v)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
            PyErr_Clear(); /* a lone surrogate: the Python path refuses it with its message */
            return 0;
        }
        return out_string(o, (const unsigned char *)s, n) ? 1 : -1;
    }
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (overflow || x > MAX_SAFE || x < -MAX_SAFE) return 0;
        char num[24];
        int len = snprintf(num, sizeof num, "%lld", x);
        return out_put(o, num, len) ? 1 : -1;
    }
    if (depth >= 32) return 0;
    if (PyList_CheckExact(v)) {
        if (!out_put(o, "[", 1)) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            if (i && !out_put(o, ",", 1)) return -1;
            PyObject *item = PyList_GET_ITEM(v, i);
            Py_INCREF(item);
            int r = out_value(o, item, depth + 1);
            Py_DECREF(item);
            if (r <= 0) return r;
        }
        return out_put(o, "]", 1) ? 1 : -1;
    }
    if (!PyDict_CheckExact(v)) return 0; /* a float, a subclass, anything else */
    PyObject *keys = PyDict_Keys(v);
    if (keys == NULL) return -1;
    int r = 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys) && r == 1; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_CheckExact(k) || !PyUnicode_IS_ASCII(k)) r = 0;
    }
    /* ASCII keys: Python's str order (code points) is RFC 8785's UTF-16 order */
    if (r == 1 && PyList_Sort(keys) < 0) r = -1;
    if (r == 1 && !out_put(o, "{", 1)) r = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys) && r == 1; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        if ((i && !out_put(o, ",", 1)) ||
            !out_string(o, PyUnicode_1BYTE_DATA(k), PyUnicode_GET_LENGTH(k)) ||
            !out_put(o, ":", 1)) {
            r = -1;
            break;
        }
        PyObject *item = PyDict_GetItemWithError(v, k);
        if (item == NULL) {
            r = PyErr_Occurred() ? -1 : 0;
            break;
        }
        Py_INCREF(item);
        r = out_value(o, item, depth + 1);
        Py_DECREF(item);
    }
    Py_DECREF(keys);
    if (r == 1 && !out_put(o, "}", 1)) r = -1;
    return r;
}

/* join_plain(parts, shapes) -> bytes, None or NotImplemented.

   ``parts`` end to end: a bytes part as it is, any other part as its canonical JSON
   (``out_value``). ``shapes`` pairs the position of a part with a kind (0: a bundle entry's
   kernel, 1: its obligations, 2: its checks), and that part must keep the shape rules of
   ``ledger.core.entries.check_bundle_shape``, judged on the bytes just written by the code that
   judges a stored entry (``shaped_map``, ``shaped_list``). NotImplemented: a part outside the
   plain subset; None: a shape rule not kept. Either way the caller takes the Python path, which
   encodes or refuses with its precise message: this function only ever gives the bytes the
   Python encoder gives, for values its rules accept. */
static PyObject *join_plain(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *parts, *shapes;
    if (!PyArg_ParseTuple(args, "O!O!:join_plain", &PyList_Type, &parts, &PyTuple_Type, &shapes))
        return NULL;
    Py_ssize_t nshapes = PyTuple_GET_SIZE(shapes);
    long at[8], kinds[8];
    if (nshapes > 8) {
        PyErr_SetString(PyExc_ValueError, "join_plain takes at most 8 shapes");
        return NULL;
    }
    for (Py_ssize_t s = 0; s < nshapes; s++)
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(shapes, s), "ll:join_plain", &at[s], &kinds[s]))
            return NULL;
    Out o = {NULL, 0, 0};
    PyObject *result = NULL;
    int verdict = 1; /* 1 written, 0 not plain, 2 not shaped */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts) && verdict == 1; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (PyBytes_CheckExact(part)) {
            if (!out_put(&o, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part))) goto done;
            continue;
        }
        Py_ssize_t from = o.n;
        Py_INCREF(part);
        int r = out_value(&o, part, 0);
        Py_DECREF(part);
        if (r < 0) goto done;
        if (r == 0) verdict = 0;
        for (Py_ssize_t s = 0; s < nshapes && verdict == 1; s++) {
            if (at[s] != i) continue;
            long kind = kinds[s];
            Parser ps = {(const unsigned char *)o.b + from, (const unsigned char *)o.b + o.n, 1,
                         32, NULL, 0};
            int shaped = 0;
            if (kind == KERNEL && *ps.p == '{')
                shaped = shaped_map(&ps, KERNEL);
            else if (kind == OBLIGATION && *ps.p == '[')
                shaped = shaped_list(&ps, OBLIGATION, MAX_OBLIGATIONS);
            else if (kind == CHECK && *ps.p == '[')
                shaped = shaped_list(&ps, CHECK, MAX_CHECKS);
            if (shaped != 1 || ps.p != ps.end) verdict = 2;
        }
    }
    if (verdict == 1)
        result = PyBytes_FromStringAndSize(o.b, o.n);
    else
        result = Py_NewRef(verdict == 0 ? Py_NotImplemented : Py_None);
done:
    PyMem_Free(o.b);
    return result;
}

/* -- Ed25519 through the system's libsodium -------------------------------------------------- */

typedef int (*sign_fn)(unsigned char *sig, unsigned long long *siglen, const unsigned char *m,
                       unsigned long long mlen, const unsigned char *sk);
typedef int (*verify_fn)(const unsigned char *sig, const unsigned char *m,
                         unsigned long long mlen, const unsigned char *pk);
typedef int (*init_fn)(void);
static sign_fn sodium_sign = NULL;
static verify_fn sodium_verify = NULL;

/* bind_sodium(name): load the shared libsodium ``name`` (a soname the dynamic loader finds, or
   a path) through its public C API: sodium_init, then crypto_sign_detached and
   crypto_sign_verify_detached. The library stays loaded for the life of the process. */
static PyObject *bind_sodium(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s:bind_sodium", &name)) return NULL;
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        PyErr_Format(PyExc_OSError, "cannot load libsodium: %s", dlerror());
        return NULL;
    }
    init_fn init = (init_fn)dlsym(h, "sodium_init");
    void *s = dlsym(h, "crypto_sign_detached");
    void *v = dlsym(h, "crypto_sign_verify_detached");
    if (init == NULL || s == NULL || v == NULL) {
        dlclose(h);
        PyErr_Format(PyExc_OSError, "%s does not export libsodium's functions", name);
        return NULL;
    }
    if (init() < 0) { /* 0: initialised now, 1: already; -1: it cannot run */
        dlclose(h);
        PyErr_Format(PyExc_OSError, "%s: sodium_init failed", name);
        return NULL;
    }
    sodium_sign = (sign_fn)s;
    sodium_verify = (verify_fn)v;
    Py_RETURN_NONE;
}

/* sign_many(sk64, messages) -> list of 64-byte signatures, the loop without the GIL. */
static PyObject *sign_many(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer sk;
    PyObject *msgs;
    if (!PyArg_ParseTuple(args, "y*O!:sign_many", &sk, &PyList_Type, &msgs)) return NULL;
    PyObject *out = NULL;
    if (sodium_sign == NULL || sk.len != 64) {
        PyErr_SetString(PyExc_ValueError, "sign_many needs bind_sodium and a 64-byte key");
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    PyObject *items = PySequence_List(msgs); /* our own reference to every message */
    if (items == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyList_GET_ITEM(items, i))) {
            PyErr_SetString(PyExc_TypeError, "sign_many signs bytes");
            Py_DECREF(items);
            goto done;
        }
    }
    unsigned char *sigs = PyMem_Malloc((size_t)(n > 0 ? n : 1) * 64);
    if (sigs == NULL) {
        PyErr_NoMemory();
        Py_DECREF(items);
        goto done;
    }
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(items, i);
        if (sodium_sign(sigs + 64 * i, NULL, (const unsigned char *)PyBytes_AS_STRING(m),
                        (unsigned long long)PyBytes_GET_SIZE(m), sk.buf) != 0)
            bad = 1;
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(items);
    if (bad) {
        PyErr_SetString(PyExc_RuntimeError, "libsodium could not sign");
        PyMem_Free(sigs);
        goto done;
    }
    out = PyList_New(n);
    if (out != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *b = PyBytes_FromStringAndSize((const char *)sigs + 64 * i, 64);
            if (b == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, b);
        }
    }
    PyMem_Free(sigs);
done:
    PyBuffer_Release(&sk);
    return out;
}

/* verify_many(jobs) -> list of the positions whose signature does not verify; a job is
   (public key: 32 bytes, message: bytes, signature: 64 bytes). The loop runs without the GIL. */
static PyObject *verify_many(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *jobs;
    if (!PyArg_ParseTuple(args, "O!:verify_many", &PyList_Type, &jobs)) return NULL;
    if (sodium_verify == NULL) {
        PyErr_SetString(PyExc_ValueError, "verify_many needs bind_sodium first");
        return NULL;
    }
    PyObject *items = PySequence_List(jobs);
    if (items == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *j = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(j) || PyTuple_GET_SIZE(j) != 3 ||
            !PyBytes_Check(PyTuple_GET_ITEM(j, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(j, 1)) ||
            !PyBytes_Check(PyTuple_GET_ITEM(j, 2))) {
            PyErr_SetString(PyExc_TypeError,
                            "verify_many takes (public key, message, signature) tuples of bytes");
            Py_DECREF(items);
            return NULL;
        }
    }
    char *ok = PyMem_Malloc((size_t)(n > 0 ? n : 1));
    if (ok == NULL) {
        Py_DECREF(items);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *j = PyList_GET_ITEM(items, i);
        PyObject *m = PyTuple_GET_ITEM(j, 1);
        /* a key or signature of the wrong length does not verify (PyNaCl refuses it too) */
        ok[i] = PyBytes_GET_SIZE(PyTuple_GET_ITEM(j, 0)) == 32 &&
                PyBytes_GET_SIZE(PyTuple_GET_ITEM(j, 2)) == 64 &&
                sodium_verify((const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(j, 2)),
                              (const unsigned char *)PyBytes_AS_STRING(m),
                              (unsigned long long)PyBytes_GET_SIZE(m),
                              (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(j, 0))) == 0;
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(items);
    PyObject *bad = PyList_New(0);
    for (Py_ssize_t i = 0; bad != NULL && i < n; i++) {
        if (ok[i]) continue;
        PyObject *k = PyLong_FromSsize_t(i);
        if (k == NULL || PyList_Append(bad, k) < 0) Py_CLEAR(bad);
        Py_XDECREF(k);
    }
    PyMem_Free(ok);
    return bad;
}

static PyMethodDef methods[] = {
    {"parse_plain", parse_plain, METH_VARARGS,
     "parse_plain(data, max_depth) -> value, or NotImplemented outside the plain subset"},
    {"bundle_view", bundle_view, METH_VARARGS,
     "bundle_view(data) -> the members of a bundle entry ledger audit judges, or None"},
    {"join_plain", join_plain, METH_VARARGS,
     "join_plain(parts, shapes) -> bytes, None (a shape rule not kept) or NotImplemented"},
    {"bind_sodium", bind_sodium, METH_VARARGS,
     "bind_sodium(name): load the shared libsodium name and take its Ed25519 functions"},
    {"sign_many", sign_many, METH_VARARGS,
     "sign_many(sk64, messages) -> signatures (64 bytes each), without the GIL"},
    {"verify_many", verify_many, METH_VARARGS,
     "verify_many(jobs) -> positions whose (key, message, signature) does not verify"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ledger.core._native",
    "Compiled inner loops of the ledger (see ledger/core/native.py).", -1, methods, NULL, NULL, NULL,
    NULL};

/* the calling convention native.py expects; a build from an older _native.c (a stale .so left
   in a checkout) has another or none, and native.py then runs the pure-Python twins */
#define NATIVE_ABI 2

PyMODINIT_FUNC PyInit__native(void) {
    init_tables();
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", NATIVE_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
