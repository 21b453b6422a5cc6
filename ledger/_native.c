/* ledger._native: compiled inner loops of the ledger's hot paths (issue 12).

   Every function here has a pure-Python twin that stays the reference (ledger/native.py says
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
   2. sign_many / verify_many: libsodium's Ed25519 over many messages in one call, without the
      GIL, so other threads run Python meanwhile. libsodium is the one PyNaCl carries: its
      functions are looked up once (bind_sodium) in PyNaCl's own extension module.
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

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* canonical JSON writes lowercase hex only */
}

/* A string starting at ps->p (just after the opening quote). Returns a str or NULL (defer). */
static PyObject *parse_string(Parser *ps) {
    const unsigned char *p = ps->p, *end = ps->end, *start = p;
    int escaped = 0, high = 0;
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') break;
        if (c < 0x20) return NULL; /* a raw control character is not JSON */
        if (c == '\\') {
            escaped = 1;
            if (p + 1 >= end) return NULL;
            unsigned char e = p[1];
            if (e == '"' || e == '\\' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                e == 't') {
                p += 2;
                continue;
            }
            if (e != 'u' || p + 6 > end) return NULL;
            /* \u00XX, only for a control character without a short form */
            if (p[2] != '0' || p[3] != '0') return NULL;
            int h = hexval(p[4]), l = hexval(p[5]);
            if (h < 0 || l < 0) return NULL;
            int v = h * 16 + l;
            if (v >= 0x20 || v == 0x08 || v == 0x09 || v == 0x0a || v == 0x0c || v == 0x0d)
                return NULL;
            p += 6;
            continue;
        }
        if (c >= 0x80) high = 1;
        p++;
    }
    if (p >= end) return NULL; /* unterminated */
    Py_ssize_t n = p - start;
    ps->p = p + 1;
    if (!escaped) {
        if (!high) return PyUnicode_FromStringAndSize((const char *)start, n);
        PyObject *s = PyUnicode_DecodeUTF8((const char *)start, n, "strict");
        if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
        return s;
    }
    if (n > ps->scratch_len) {
        unsigned char *grown = PyMem_Realloc(ps->scratch, (size_t)n);
        if (grown == NULL) return PyErr_NoMemory();
        ps->scratch = grown;
        ps->scratch_len = n;
    }
    unsigned char *out = ps->scratch;
    Py_ssize_t k = 0;
    for (const unsigned char *q = start; q < p;) {
        if (*q != '\\') {
            out[k++] = *q++;
            continue;
        }
        unsigned char e = q[1];
        switch (e) {
        case '"': out[k++] = '"'; q += 2; break;
        case '\\': out[k++] = '\\'; q += 2; break;
        case 'b': out[k++] = 0x08; q += 2; break;
        case 'f': out[k++] = 0x0c; q += 2; break;
        case 'n': out[k++] = 0x0a; q += 2; break;
        case 'r': out[k++] = 0x0d; q += 2; break;
        case 't': out[k++] = 0x09; q += 2; break;
        default: /* 'u', checked above */
            out[k++] = (unsigned char)(hexval(q[4]) * 16 + hexval(q[5]));
            q += 6;
        }
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)out, k, "strict");
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return s;
}

static PyObject *parse_number(Parser *ps) {
    const unsigned char *p = ps->p, *end = ps->end;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9') return NULL;
    if (*p == '0') {
        p++;
        if (neg) return NULL; /* -0 is written 0 */
        if (p < end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')))
            return NULL;
        ps->p = p;
        return PyLong_FromLong(0);
    }
    long long v = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (++digits > 16) return NULL; /* beyond 2**53 (16 digits) */
        v = v * 10 + (*p - '0');
        p++;
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return NULL; /* a float */
    if (v > MAX_SAFE) return NULL;
    ps->p = p;
    return PyLong_FromLongLong(neg ? -v : v);
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
    const unsigned char *prev = NULL;
    Py_ssize_t prev_len = 0;
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        ps->depth--;
        return d;
    }
    for (;;) {
        if (ps->p >= ps->end || *ps->p != '"') goto defer;
        const unsigned char *k = ++ps->p;
        while (ps->p < ps->end && *ps->p != '"') {
            unsigned char c = *ps->p;
            if (c < 0x20 || c > 0x7e || c == '\\') goto defer;
            ps->p++;
        }
        if (ps->p >= ps->end) goto defer;
        Py_ssize_t klen = ps->p - k;
        ps->p++;
        if (prev != NULL) {
            Py_ssize_t m = klen < prev_len ? klen : prev_len;
            int c = memcmp(prev, k, (size_t)m);
            if (c > 0 || (c == 0 && prev_len >= klen)) goto defer; /* not strictly increasing */
        }
        prev = k;
        prev_len = klen;
        if (ps->p >= ps->end || *ps->p != ':') goto defer;
        ps->p++;
        PyObject *key = PyUnicode_FromStringAndSize((const char *)k, klen);
        if (key == NULL) goto fail;
        PyObject *v = parse_value(ps);
        if (v == NULL) {
            Py_DECREF(key);
            if (PyErr_Occurred()) goto fail;
            goto defer;
        }
        int rc = PyDict_SetItem(d, key, v);
        Py_DECREF(key);
        Py_DECREF(v);
        if (rc < 0) goto fail;
        if (ps->p >= ps->end) goto defer;
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == '}') {
            ps->p++;
            ps->depth--;
            return d;
        }
        goto defer;
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
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        ps->depth--;
        return a;
    }
    for (;;) {
        PyObject *v = parse_value(ps);
        if (v == NULL) goto fail;
        int rc = PyList_Append(a, v);
        Py_DECREF(v);
        if (rc < 0) goto fail;
        if (ps->p >= ps->end) goto fail;
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == ']') {
            ps->p++;
            ps->depth--;
            return a;
        }
        goto fail;
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

/* -- Ed25519 through PyNaCl's libsodium ------------------------------------------------------ */

typedef int (*sign_fn)(unsigned char *sig, unsigned long long *siglen, const unsigned char *m,
                       unsigned long long mlen, const unsigned char *sk);
typedef int (*verify_fn)(const unsigned char *sig, const unsigned char *m,
                         unsigned long long mlen, const unsigned char *pk);
static sign_fn sodium_sign = NULL;
static verify_fn sodium_verify = NULL;

static PyObject *bind_sodium(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s:bind_sodium", &path)) return NULL;
    /* PyNaCl's extension is loaded already: take its handle, never load another copy */
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) {
        PyErr_Format(PyExc_OSError, "libsodium of PyNaCl is not loaded: %s", dlerror());
        return NULL;
    }
    void *s = dlsym(h, "crypto_sign_detached");
    void *v = dlsym(h, "crypto_sign_verify_detached");
    if (s == NULL || v == NULL) {
        PyErr_SetString(PyExc_OSError, "PyNaCl's module does not export libsodium's functions");
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
    {"bind_sodium", bind_sodium, METH_VARARGS,
     "bind_sodium(path): take libsodium's Ed25519 functions from PyNaCl's loaded module"},
    {"sign_many", sign_many, METH_VARARGS,
     "sign_many(sk64, messages) -> signatures (64 bytes each), without the GIL"},
    {"verify_many", verify_many, METH_VARARGS,
     "verify_many(jobs) -> positions whose (key, message, signature) does not verify"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ledger._native",
    "Compiled inner loops of the ledger (see ledger/native.py).", -1, methods, NULL, NULL, NULL,
    NULL};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
