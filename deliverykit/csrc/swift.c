/* C fast paths owned by the swift package (twins in swift/_fast.py).
 *
 * binmap_find: first chunk in [lo, hi) whose bit equals val, or -1, in a
 * binmap stored as swift.core.binmap does (Grishchenko & Pouwelse, "Binmaps"):
 * halves h[2c], h[2c+1] of cell c (uint32 each: a 16-bit bitmap, or a child
 * cell index when deep[2c+side] != 0); a cell at layer L spans 32 << L chunks.
 * Root layers stop at 57 (chunks below 2**62, as Binmap.MAX_LAYER): one more
 * and a half's end (hs + hw) or the span (32 << layer) overflows int64.
 */
#define _GNU_SOURCE
#include "speedups.h"
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* First chunk in [lo, hi) whose bit equals val, -1 if none, -2 on a corrupt
 * tree (the caller raises).  The buffers' sizes are checked by the caller. */
static long long
bm_find(const uint32_t *h, Py_ssize_t nh, const unsigned char *deep, long long root,
        long long root_layer, long long lo, long long hi, int val)
{
    /* explicit DFS stack of (cell, layer, start, next side) */
    long long sc[128], sl[128], ss[128];
    int sside[128];
    int top = 0;
    sc[0] = root; sl[0] = root_layer; ss[0] = 0; sside[0] = 0;
    while (top >= 0) {
        if (sside[top] > 1) { top--; continue; }
        int side = sside[top]++;
        long long c = sc[top], lay = sl[top];
        long long hw = 16LL << lay;
        long long hs = ss[top] + side * hw, he = hs + hw;
        long long a = lo > hs ? lo : hs, b = hi < he ? hi : he;
        if (a >= b) continue;
        Py_ssize_t k = (Py_ssize_t)(2 * c + side);
        if (k >= nh)
            return -2;
        if (deep[k]) {
            if (top + 1 >= 128 || lay == 0 || (Py_ssize_t)h[k] * 2 + 1 >= nh)
                return -2;
            top++;
            sc[top] = h[k]; sl[top] = lay - 1; ss[top] = hs; sside[top] = 0;
            continue;
        }
        uint32_t x = val ? h[k] : (~h[k] & 0xFFFFu);
        int i = (int)((a - hs) >> lay), j = (int)((b - 1 - hs) >> lay);
        uint32_t mask = (uint32_t)(((1ULL << (j + 1)) - 1) ^ ((1ULL << i) - 1));
        x &= mask;
        if (x) {
            int bit = __builtin_ctz(x);
            long long pos = hs + ((long long)bit << lay);
            return pos > a ? pos : a;
        }
    }
    return -1;
}

static int
bm_ok(const Py_buffer *hb, const Py_buffer *db, long long root, long long root_layer)
{
    Py_ssize_t nh = hb->len / 4;
    return !(hb->len % 4 || db->len < nh || root_layer < 0 || root_layer > 57 || root < 0
             || 2 * root + 1 >= nh);
}

/* A C long long from an int (or __index__), as PyArg_ParseTuple's "L" */
static int
ll_arg(PyObject *o, long long *out)
{
    *out = PyLong_AsLongLong(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A buffer argument as PyArg_ParseTuple's "y*" (flags PyBUF_SIMPLE: the
 * exporter's error stands) or "w*" (PyBUF_WRITABLE: any failure a TypeError) */
static int
buf_arg(PyObject *o, Py_buffer *b, int flags, const char *what)
{
    if (PyObject_GetBuffer(o, b, flags) == 0)
        return 0;
    if (flags & PyBUF_WRITABLE) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: a read-write bytes-like object is required", what);
    }
    return -1;
}

/* A Py_ssize_t from an int (or __index__), as PyArg_ParseTuple's "n" */
static int
ss_arg(PyObject *o, Py_ssize_t *out)
{
    PyObject *i = PyNumber_Index(o);
    if (!i)
        return -1;
    *out = PyLong_AsSsize_t(i);
    Py_DECREF(i);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* fc_args(fname, fmt, args, nargs, ...): METH_FASTCALL arguments converted as
 * PyArg_ParseTuple's formats did, for the codes these functions used: "L"
 * (long long), "n" (Py_ssize_t through __index__), "i" (int, getargs'
 * OverflowErrors), "d" (PyFloat_AsDouble), "O" (borrowed) and "y*"
 * (PyBUF_SIMPLE: the exporter's error stands).  Left to right, stopping at
 * the first failure, whose exception is the conversion's own (getargs keeps
 * it too); a wrong count raises getargs' TypeError and message.  On failure
 * every buffer taken is released; on success the caller releases them.
 * PyArg_ParseTuple interpreted its format and built an argument tuple, ~1k
 * instructions per call (docs/swift-perf.md, sessions 17 and 18); this is a
 * switch per argument. */
#define FC_MAX_BUFS 8
static int
fc_args(const char *fname, const char *fmt, PyObject *const *args, Py_ssize_t nargs, ...)
{
    int want = 0;
    for (const char *f = fmt; *f; f++)
        want += *f != '*';
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%.150s() takes exactly %d argument%s (%zd given)", fname,
                     want, want == 1 ? "" : "s", nargs);
        return -1;
    }
    Py_buffer *taken[FC_MAX_BUFS];
    int nt = 0;
    va_list va;
    va_start(va, nargs);
    Py_ssize_t i = 0;
    for (const char *f = fmt; *f; f++, i++) {
        PyObject *o = args[i];
        switch (*f) {
        case 'L':
            if (ll_arg(o, va_arg(va, long long *)) < 0)
                goto fail;
            break;
        case 'n':
            if (ss_arg(o, va_arg(va, Py_ssize_t *)) < 0)
                goto fail;
            break;
        case 'i': {
            int *p = va_arg(va, int *);
            long v = PyLong_AsLong(o);
            if (v == -1 && PyErr_Occurred())
                goto fail;
            if (v > INT_MAX) {
                PyErr_SetString(PyExc_OverflowError, "signed integer is greater than maximum");
                goto fail;
            }
            if (v < INT_MIN) {
                PyErr_SetString(PyExc_OverflowError, "signed integer is less than minimum");
                goto fail;
            }
            *p = (int)v;
            break;
        }
        case 'd': {
            double *p = va_arg(va, double *);
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred())
                goto fail;
            *p = v;
            break;
        }
        case 'O':
            *va_arg(va, PyObject **) = o;
            break;
        case 'y': {
            Py_buffer *b = va_arg(va, Py_buffer *);
            f++;  /* its '*' */
            if (nt == FC_MAX_BUFS) {
                PyErr_SetString(PyExc_SystemError, "fc_args: too many buffers");
                goto fail;
            }
            if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) < 0)
                goto fail;
            taken[nt++] = b;
            break;
        }
        default:
            PyErr_SetString(PyExc_SystemError, "fc_args: bad format");
            goto fail;
        }
    }
    va_end(va);
    return 0;
fail:
    va_end(va);
    while (nt > 0)
        PyBuffer_Release(taken[--nt]);
    return -1;
}

/* binmap_find and binmap_set1 take their arguments as METH_FASTCALL (no
 * argument tuple, no format string to interpret: PyArg_ParseTuple was ~1.1k
 * instructions of each call, and a leecher makes ~6 per chunk; docs/swift-perf.md,
 * session 17), converted left to right as the "y*"/"w*", "L" and "p" formats
 * did, with the same exception types. */
static PyObject *
binmap_find(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    Py_buffer hb, db;
    long long root, root_layer, lo, hi;
    int val;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "binmap_find(halves, deep, root, root_layer, lo, hi, val) takes 7 arguments");
        return NULL;
    }
    if (buf_arg(args[0], &hb, PyBUF_SIMPLE, "binmap_find") < 0)
        return NULL;
    if (buf_arg(args[1], &db, PyBUF_SIMPLE, "binmap_find") < 0) {
        PyBuffer_Release(&hb);
        return NULL;
    }
    PyObject *res = NULL;
    if (ll_arg(args[2], &root) < 0 || ll_arg(args[3], &root_layer) < 0 || ll_arg(args[4], &lo) < 0
            || ll_arg(args[5], &hi) < 0 || (val = PyObject_IsTrue(args[6])) < 0)
        goto done;
    if (!bm_ok(&hb, &db, root, root_layer)) {
        PyErr_SetString(PyExc_ValueError, "binmap_find: bad binmap buffers");
        goto done;
    }
    long long found = bm_find((const uint32_t *)hb.buf, hb.len / 4,
                              (const unsigned char *)db.buf, root, root_layer, lo, hi, val);
    if (found == -2)
        PyErr_SetString(PyExc_ValueError, "binmap_find: corrupt tree");
    else
        res = PyLong_FromLongLong(found);
done:
    PyBuffer_Release(&hb);
    PyBuffer_Release(&db);
    return res;
}

/* uncle_stop(chunk, top, halves_a, deep_a, root_a, layer_a, halves_b, deep_b,
 *            root_b, layer_b) -> layer
 * The lowest layer m in [1, top] whose aligned block of 2**m chunks around
 * `chunk` holds a filled chunk of binmap a or of binmap b, or top if none:
 * where MerkleTree.uncles stops (RFC 7574 5.3: the receiver verified, or
 * has on its way, a chunk under that node, so it holds the node's hash).
 * The test is monotone in m: gallop up from layer 1, then bisect the last
 * step, as the Python it replaces did.  Twin: swift/_fast.py. */
/* uncle_stop's work on parsed arguments: 0 with *out set, -1 with an exception */
static int
us_core(long long chunk, long long top, const Py_buffer *pa, const Py_buffer *qa, long long ra,
        long long la, const Py_buffer *pb, const Py_buffer *qb, long long rb, long long lb,
        long long *out)
{
    if (!bm_ok(pa, qa, ra, la) || !bm_ok(pb, qb, rb, lb) || chunk < 0 || top < 0
            || top > 62 || (top && chunk >> 62)) {
        PyErr_SetString(PyExc_ValueError, "uncle_stop: bad arguments");
        return -1;
    }
    const uint32_t *h1 = (const uint32_t *)pa->buf, *h2 = (const uint32_t *)pb->buf;
    const unsigned char *d1 = (const unsigned char *)qa->buf, *d2 = (const unsigned char *)qb->buf;
    Py_ssize_t n1 = pa->len / 4, n2 = pb->len / 4;
    long long span1 = 32LL << la, span2 = 32LL << lb;
    long long stop = top;
    if (top) {
        long long prev = 0, mid = 1;
        for (;;) {
            /* any chunk of [a, a + 2**m) filled in either binmap (spans clamp hi) */
#define ANY(m, out) do { \
                long long a_ = (chunk >> (m)) << (m), e_ = a_ + (1LL << (m)); \
                long long r1 = a_ < span1 ? bm_find(h1, n1, d1, ra, la, a_, \
                                                    e_ < span1 ? e_ : span1, 1) : -1; \
                long long r2 = r1 == -1 && a_ < span2 ? bm_find(h2, n2, d2, rb, lb, a_, \
                                                    e_ < span2 ? e_ : span2, 1) : -1; \
                if (r1 == -2 || r2 == -2) goto corrupt; \
                (out) = r1 >= 0 || r2 >= 0; \
            } while (0)
            int hit;
            ANY(mid, hit);
            if (hit) {
                long long lo_m = prev + 1, hi_m = mid - 1;
                stop = mid;
                while (lo_m <= hi_m) {
                    long long m = (lo_m + hi_m) >> 1;
                    ANY(m, hit);
                    if (hit) { stop = m; hi_m = m - 1; }
                    else lo_m = m + 1;
                }
                break;
            }
            if (mid == top)
                break;
            prev = mid;
            mid = 2 * mid < top ? 2 * mid : top;
#undef ANY
        }
    }
    *out = stop;
    return 0;
corrupt:
    PyErr_SetString(PyExc_ValueError, "uncle_stop: corrupt tree");
    return -1;
}

static PyObject *
uncle_stop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer ha, da, hb, db;
    long long chunk, top, ra, la, rb, lb, stop;
    if (fc_args("uncle_stop", "LLy*y*LLy*y*LL", args, nargs, &chunk, &top, &ha, &da, &ra, &la,
                &hb, &db, &rb, &lb) < 0)
        return NULL;
    PyObject *res = NULL;
    if (us_core(chunk, top, &ha, &da, ra, la, &hb, &db, rb, lb, &stop) == 0)
        res = PyLong_FromLongLong(stop);
    PyBuffer_Release(&ha);
    PyBuffer_Release(&da);
    PyBuffer_Release(&hb);
    PyBuffer_Release(&db);
    return res;
}

static uint32_t expand8(uint32_t v)
{
    uint32_t x = 0;
    for (int i = 0; i < 8; i++)
        if (v >> i & 1)
            x |= 3u << (2 * i);
    return x;
}

static uint32_t squeeze32(uint32_t x)
{
    uint32_t v = 0;
    for (int i = 0; i < 16; i++)
        if (x >> (2 * i) & 1)
            v |= 1u << i;
    return v;
}

/* binmap_set1(halves, deep, free, st, root, root_layer, i, val) -> 1 changed / 0
 * Set or clear chunk i: descend splitting leaf halves with cells popped from
 * the free stack free[0:st[0]], flip the bit, fold uniform cells back up
 * pushing freed cells.  All buffers are modified in place. */
static PyObject *
binmap_set1(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    Py_buffer hb, db, fb, sb;
    Py_buffer *bufs[4] = {&hb, &db, &fb, &sb};
    long long root, root_layer, i;
    int val, nb = 0;
    PyObject *res = NULL;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "binmap_set1(halves, deep, free, st, root, root_layer, "
                        "i, val) takes 8 arguments");
        return NULL;
    }
    for (; nb < 4; nb++)
        if (buf_arg(args[nb], bufs[nb], PyBUF_WRITABLE, "binmap_set1") < 0)
            goto done;
    if (ll_arg(args[4], &root) < 0 || ll_arg(args[5], &root_layer) < 0 || ll_arg(args[6], &i) < 0
            || (val = PyObject_IsTrue(args[7])) < 0)
        goto done;
    uint32_t *h = (uint32_t *)hb.buf;
    unsigned char *deep = (unsigned char *)db.buf;
    uint32_t *fr = (uint32_t *)fb.buf;
    long long *st = (long long *)sb.buf;
    Py_ssize_t nh = hb.len / 4, nf = fb.len / 4;
    if (hb.len % 4 || fb.len % 4 || sb.len < 8 || db.len < nh || root < 0 || 2 * root + 1 >= nh
            || root_layer < 0 || root_layer > 57 || i < 0 || i >= (32LL << root_layer)
            || st[0] < 0 || st[0] > nf) {
        PyErr_SetString(PyExc_ValueError, "binmap_set1: bad binmap buffers");
        goto done;
    }
    Py_ssize_t path[64];
    int np = 0;
    long long c = root, lay = root_layer;
    for (;;) {
        int side = (int)((i >> (lay + 4)) & 1);
        Py_ssize_t k = (Py_ssize_t)(2 * c + side);
        if (deep[k]) {
            if (lay == 0 || 2 * (Py_ssize_t)h[k] + 1 >= nh || np >= 64) {
                PyErr_SetString(PyExc_ValueError, "binmap_set1: corrupt tree");
                goto done;
            }
            path[np++] = k;
            c = h[k];
            lay--;
            continue;
        }
        uint32_t bit = 1u << ((i >> lay) & 15);
        if (((h[k] & bit) != 0) == (val != 0)) {
            res = PyLong_FromLong(0);
            goto done;
        }
        if (lay == 0) {
            h[k] ^= bit;
            break;
        }
        if (st[0] <= 0) {
            PyErr_SetString(PyExc_ValueError, "binmap_set1: no free cell");
            goto done;
        }
        st[0]--;
        uint32_t ch = fr[st[0]];
        if (2 * (Py_ssize_t)ch + 1 >= nh) {
            PyErr_SetString(PyExc_ValueError, "binmap_set1: corrupt free list");
            goto done;
        }
        uint32_t bm = h[k];
        h[2 * ch] = expand8(bm & 0xFF);
        h[2 * ch + 1] = expand8((bm >> 8) & 0xFF);
        deep[2 * ch] = deep[2 * ch + 1] = 0;
        h[k] = ch;
        deep[k] = 1;
    }
    while (np > 0) {
        Py_ssize_t k = path[--np];
        uint32_t ch = h[k];
        if (deep[2 * ch] || deep[2 * ch + 1])
            break;
        uint32_t x = (h[2 * ch] & 0xFFFFu) | (h[2 * ch + 1] << 16);
        if ((x ^ (x >> 1)) & 0x55555555u)
            break;
        if (st[0] >= nf) {
            PyErr_SetString(PyExc_ValueError, "binmap_set1: free stack full");
            goto done;
        }
        fr[st[0]++] = ch;
        deep[k] = 0;
        h[k] = squeeze32(x);
    }
    res = PyLong_FromLong(1);
done:
    for (int j = 0; j < nb; j++)
        PyBuffer_Release(bufs[j]);
    return res;
}

/* recv_batch_ts(sock, max_count, size) -> [(data, addr, t)]: recvmmsg,
 * non-blocking, with each datagram's kernel arrival time t (SO_TIMESTAMPNS,
 * seconds since the epoch as a float; -1.0 when the socket gives none).
 * The PPSPP one-way delay sample (RFC 7574 8.7) then excludes the time a
 * datagram waited for our event loop.  Twin: swift/_fast.py.
 * The loop is core.c's dk_recvmmsg (recv_batch's) with control messages. */
#define SW_MAX_BATCH 256

static PyObject *
recv_batch_ts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *sock;
    Py_ssize_t max_count, size;
    if (fc_args("recv_batch_ts", "Onn", args, nargs, &sock, &max_count, &size) < 0)
        return NULL;
    if (max_count < 1 || max_count > SW_MAX_BATCH || size < 1 || size > 65536) {
        PyErr_SetString(PyExc_ValueError, "recv_batch_ts: 1 <= max_count <= 256, 1 <= size <= 65536");
        return NULL;
    }
    return dk_recvmmsg(sock, max_count, size, 1);
}

/* decode_msgs(data, pos, addressing, hash_size, sig_size, chunk_size)
 *   -> (messages, pos, error)
 * The PPSPP messages of one datagram from offset pos (RFC 7574 section 8),
 * as the 5-tuples of swift.wire.codec.decode_raw: DATA (1, start, end, ts,
 * payload), ACK (2, start, end, delay, None), HAVE/REQUEST/CANCEL (t, start,
 * end, None, None), INTEGRITY (4, start, end, hash, None), SIGNED_INTEGRITY
 * (7, start, end, ts, sig), PEX_REQ/CHOKE/UNCHOKE (t, 0, 0, None, None).  It
 * stops at any other type (HANDSHAKE, PEX_RES*, unknown: left to Python,
 * pos points at its type octet) or at a truncated message (error says
 * why, pos at that message).  Chunk specs by addressing (7.8): bin32 (0)
 * and bin64 (3) one integer (start == end), chunk32 (2) two uint32,
 * byte64 (1) and chunk64 (4) two uint64.  Twin: swift/_fast.py. */
static uint64_t be(const unsigned char *p, int w)
{
    uint64_t v = 0;
    for (int i = 0; i < w; i++)
        v = (v << 8) | p[i];
    return v;
}

static PyObject *
decode_msgs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer db;
    Py_ssize_t pos, hs, sigs;
    int a;
    PyObject *cs_obj;
    if (fc_args("decode_msgs", "y*ninnO", args, nargs, &db, &pos, &a, &hs, &sigs, &cs_obj) < 0)
        return NULL;
    unsigned long long cs = PyLong_AsUnsignedLongLong(cs_obj);  /* OverflowError if < 0 */
    if (cs == (unsigned long long)-1 && PyErr_Occurred()) {
        PyBuffer_Release(&db);
        return NULL;
    }
    PyObject *out = NULL, *res = NULL;
    const unsigned char *buf = (const unsigned char *)db.buf;
    Py_ssize_t n = db.len;
    const char *error = NULL;
    if (a < 0 || a > 4 || hs < 0 || sigs < 0 || pos < 0 || pos > n) {
        PyErr_SetString(PyExc_ValueError, "decode_msgs: bad arguments");
        goto done;
    }
    int isbin = (a == 0 || a == 3), isbyte = (a == 1);
    int w = (a == 0 || a == 2) ? 4 : 8;           /* bytes per integer */
    Py_ssize_t ss = isbin ? w : 2 * w;           /* bytes per chunk spec */
    out = PyList_New(0);
    if (!out)
        goto done;
    while (pos < n) {
        int t = buf[pos];
        Py_ssize_t p = pos + 1;
        PyObject *item = NULL;
        if ((t >= 1 && t <= 4) || (t >= 7 && t <= 9)) {
            if (p + ss > n) { error = "truncated chunk spec"; break; }
            uint64_t start = be(buf + p, w), end = isbin ? start : be(buf + p + w, w);
            p += ss;
            PyObject *x = NULL, *y = NULL;
            if (t == 1) {
                if (p + 8 > n) { error = "truncated DATA timestamp"; break; }
                uint64_t ts = be(buf + p, 8);
                p += 8;
                Py_ssize_t rem = n - p, ln;
                if (isbyte) {
                    if (end < start || end - start >= (uint64_t)rem) {
                        error = "DATA byte range does not match payload";
                        break;
                    }
                    ln = (Py_ssize_t)(end - start + 1);
                } else if (cs == 0xFFFFFFFFULL || (unsigned long long)rem < cs) {
                    ln = rem;
                } else {
                    ln = (Py_ssize_t)cs;
                }
                x = PyLong_FromUnsignedLongLong(ts);
                y = PyBytes_FromStringAndSize((const char *)buf + p, ln);
                p += ln;
            } else if (t == 2) {
                if (p + 8 > n) { error = "truncated ACK delay"; break; }
                x = PyLong_FromUnsignedLongLong(be(buf + p, 8));
                p += 8;
            } else if (t == 4) {
                if (hs > n - p) { error = "truncated INTEGRITY hash"; break; }
                x = PyBytes_FromStringAndSize((const char *)buf + p, hs);
                p += hs;
            } else if (t == 7) {
                if (n - p < 8 || sigs > n - p - 8) { error = "truncated SIGNED_INTEGRITY"; break; }
                x = PyLong_FromUnsignedLongLong(be(buf + p, 8));
                y = PyBytes_FromStringAndSize((const char *)buf + p + 8, sigs);
                p += 8 + sigs;
            }
            if ((t == 1 || t == 2 || t == 4 || t == 7) && !x) { Py_XDECREF(y); goto fail; }
            if ((t == 1 || t == 7) && !y) { Py_XDECREF(x); goto fail; }
            PyObject *tt = PyLong_FromLong(t), *st = PyLong_FromUnsignedLongLong(start),
                     *en = PyLong_FromUnsignedLongLong(end);
            if (tt && st && en) {
                item = PyTuple_Pack(5, tt, st, en, x ? x : Py_None, y ? y : Py_None);
            }
            Py_XDECREF(tt); Py_XDECREF(st); Py_XDECREF(en); Py_XDECREF(x); Py_XDECREF(y);
        } else if (t == 6 || t == 10 || t == 11) {
            PyObject *tt = PyLong_FromLong(t), *z = PyLong_FromLong(0);
            if (tt && z)
                item = PyTuple_Pack(5, tt, z, z, Py_None, Py_None);
            Py_XDECREF(tt); Py_XDECREF(z);
        } else {
            break;  /* HANDSHAKE, PEX_RES*, unknown: the caller's */
        }
        if (!item)
            goto fail;
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0)
            goto fail;
        pos = p;
    }
    if (error)
        res = Py_BuildValue("(Ons)", out, pos, error);
    else
        res = Py_BuildValue("(OnO)", out, pos, Py_None);
fail:
    Py_XDECREF(out);
done:
    PyBuffer_Release(&db);
    return res;
}

/* merkle_walk(hashes, known, hash_size, n_chunks, root, chunk, leaf, offered,
 *             hasher, zero) -> 1 verified / 0 does not check out / -1 a hash missing
 * The walk of MerkleTree.verify (RFC 7574 5.2) from chunk's leaf digest up to
 * the first trusted node: each sibling from the tree (trusted), the zero hash
 * (past the content) or `offered` (a dict bin -> hash from INTEGRITY
 * messages); each parent hashed with `hasher` (a hashlib constructor).  On
 * success every hash on the path is written into `hashes` and marked in
 * `known`; otherwise nothing changes.  Layout as swift.core.merkle: hash of
 * bin b at hashes[b*hash_size:(b+1)*hash_size], known[b] == 1 when trusted.
 * Twin: swift/_fast.py py_merkle_walk. */
#define MW_MAX 64

/* METH_FASTCALL, its arguments converted as "w*w*nLLLy*OOy*" did (once per
 * verified chunk; see binmap_find) */
static PyObject *
merkle_walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    Py_buffer hb, kb, lb, zb;
    Py_ssize_t hs;
    long long n, root, chunk;
    PyObject *offered, *hasher;
    int taken = 0;  /* of hb, kb, lb, zb, in that order */
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "merkle_walk(hashes, known, hash_size, n_chunks, root, "
                        "chunk, leaf, offered, hasher, zero) takes 10 arguments");
        return NULL;
    }
    if (buf_arg(args[0], &hb, PyBUF_WRITABLE, "merkle_walk") < 0)
        goto early;
    taken = 1;
    if (buf_arg(args[1], &kb, PyBUF_WRITABLE, "merkle_walk") < 0)
        goto early;
    taken = 2;
    if (ss_arg(args[2], &hs) < 0 || ll_arg(args[3], &n) < 0 || ll_arg(args[4], &root) < 0
            || ll_arg(args[5], &chunk) < 0 || buf_arg(args[6], &lb, PyBUF_SIMPLE, "merkle_walk") < 0)
        goto early;
    taken = 3;
    offered = args[7];
    hasher = args[8];
    if (buf_arg(args[9], &zb, PyBUF_SIMPLE, "merkle_walk") < 0)
        goto early;
    PyObject *res = NULL, *d = NULL;
    PyObject *pobj[2 * MW_MAX];
    long long pbin[2 * MW_MAX];
    int np = 0;
    unsigned char *h = (unsigned char *)hb.buf, *kn = (unsigned char *)kb.buf;
    Py_ssize_t nk = kb.len;
    if (hs < 1 || hs > 64 || hb.len != nk * hs || lb.len != hs || zb.len != hs || n < 1
            || chunk < 0 || chunk >= n || chunk >= (1LL << 61) || root < 0 || root >= nk
            || !PyDict_Check(offered)) {
        PyErr_SetString(PyExc_ValueError, "merkle_walk: bad arguments");
        goto done;
    }
    d = PyBytes_FromStringAndSize((const char *)lb.buf, hs);
    if (!d)
        goto done;
    long long b = chunk << 1, o = chunk;
    int lay = 0;
    long result = 1;
    unsigned char cat[128];
    while (!(b < nk && kn[b] == 1)) {
        long long s = b ^ (1LL << (lay + 1));
        const unsigned char *sd;
        if (((o ^ 1) << lay) >= n) {
            sd = (const unsigned char *)zb.buf;
        } else if (s < nk && kn[s] == 1) {
            sd = h + s * hs;
        } else {
            PyObject *key = PyLong_FromLongLong(s);
            if (!key)
                goto fail;
            PyObject *got = PyDict_GetItemWithError(offered, key);  /* borrowed */
            Py_DECREF(key);
            if (!got) {
                if (PyErr_Occurred())
                    goto fail;
                result = -1;  /* missing: lost with an earlier datagram (5.3) */
                goto out;
            }
            if (!PyBytes_Check(got) || PyBytes_Size(got) != hs) {
                result = 0;
                goto out;
            }
            if (np >= 2 * MW_MAX - 2 || s >= nk) {
                result = 0;
                goto out;
            }
            Py_INCREF(got);
            pbin[np] = s; pobj[np++] = got;
            sd = (const unsigned char *)PyBytes_AsString(got);
        }
        if (np >= 2 * MW_MAX - 1) {
            result = 0;
            goto out;
        }
        Py_INCREF(d);
        pbin[np] = b; pobj[np++] = d;
        const unsigned char *dd = (const unsigned char *)PyBytes_AsString(d);
        if (o & 1) { memcpy(cat, sd, hs); memcpy(cat + hs, dd, hs); }
        else { memcpy(cat, dd, hs); memcpy(cat + hs, sd, hs); }
        PyObject *buf = PyBytes_FromStringAndSize((const char *)cat, 2 * hs);
        if (!buf)
            goto fail;
        PyObject *hobj = PyObject_CallFunctionObjArgs(hasher, buf, NULL);
        Py_DECREF(buf);
        if (!hobj)
            goto fail;
        PyObject *nd = PyObject_CallMethod(hobj, "digest", NULL);
        Py_DECREF(hobj);
        if (!nd)
            goto fail;
        if (!PyBytes_Check(nd) || PyBytes_Size(nd) != hs) {
            Py_DECREF(nd);
            PyErr_SetString(PyExc_ValueError, "merkle_walk: hasher gives another digest size");
            goto fail;
        }
        Py_DECREF(d);
        d = nd;
        b = (b & ~(1LL << (lay + 1))) | (1LL << lay);
        lay++;
        o >>= 1;
        if (lay > 62 || (b == root && !(b < nk && kn[b] == 1))) {
            result = 0;
            goto out;
        }
    }
    if (memcmp(h + b * hs, PyBytes_AsString(d), hs) != 0) {
        result = 0;
        goto out;
    }
    for (int i = 0; i < np; i++) {
        memcpy(h + pbin[i] * hs, PyBytes_AsString(pobj[i]), hs);
        kn[pbin[i]] = 1;
    }
out:
    res = PyLong_FromLong(result);
fail:
    for (int i = 0; i < np; i++)
        Py_DECREF(pobj[i]);
    Py_XDECREF(d);
done:
    PyBuffer_Release(&hb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&zb);
    return res;
early:  /* an argument not taken: release what was */
    if (taken > 0)
        PyBuffer_Release(&hb);
    if (taken > 1)
        PyBuffer_Release(&kb);
    if (taken > 2)
        PyBuffer_Release(&lb);
    return NULL;
}

/* merkle_uncles(hashes, known, hash_size, n_chunks, chunk, stop, zero)
 *   -> [(bin, hash)]
 * The uncle hashes of `chunk` below layer `stop` (where uncle_stop ends the
 * search), tree height descending (RFC 7574 5.4): the sibling at each layer,
 * the zero hash where the sibling lies past the content; KeyError when a
 * sibling's hash is not known.  Layout as merkle_walk.  Twin: swift/_fast.py. */
static PyObject *
merkle_uncles(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer hb, kb, zb;
    Py_ssize_t hs;
    long long n, chunk, stop;
    if (fc_args("merkle_uncles", "y*y*nLLLy*", args, nargs, &hb, &kb, &hs, &n, &chunk, &stop,
                &zb) < 0)
        return NULL;
    PyObject *out = NULL;
    const unsigned char *h = (const unsigned char *)hb.buf, *kn = (const unsigned char *)kb.buf;
    Py_ssize_t nk = kb.len;
    if (hs < 1 || hs > 64 || hb.len != nk * hs || zb.len != hs || n < 0 || chunk < 0
            || chunk >= (1LL << 61) || stop < 0 || stop > 62) {
        PyErr_SetString(PyExc_ValueError, "merkle_uncles: bad arguments");
        goto done;
    }
    out = PyList_New(0);
    if (!out)
        goto done;
    for (long long lay = stop - 1; lay >= 0; lay--) {
        long long sib = (chunk >> lay) ^ 1;
        long long s = (sib << (lay + 1)) | ((1LL << lay) - 1);
        const char *src;
        if ((sib << lay) >= n) {
            src = (const char *)zb.buf;
        } else if (s < nk && kn[s] == 1) {
            src = (const char *)h + s * hs;
        } else {
            PyErr_Format(PyExc_KeyError, "hash of bin %lld is not known", s);
            Py_CLEAR(out);
            goto done;
        }
        PyObject *b = PyLong_FromLongLong(s), *d = PyBytes_FromStringAndSize(src, hs), *t = NULL;
        if (b && d)
            t = PyTuple_Pack(2, b, d);
        Py_XDECREF(b);
        Py_XDECREF(d);
        if (!t || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(t);
    }
done:
    PyBuffer_Release(&hb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&zb);
    return out;
}

/* data_datagram(channel, hashes, known, hash_size, n_chunks, chunk, stop, zero, ts, src,
 *               offset, length) -> bytes
 * One whole DATA datagram in chunk32 addressing (RFC 7574 8.3, 8.6, 8.8, 8.4):
 * the 4-byte channel ID, an INTEGRITY message (04 start end hash) for each
 * uncle hash of `chunk` below layer `stop`, height descending (as
 * merkle_uncles: KeyError for one not known), then DATA (01 chunk chunk, the
 * 8-byte timestamp `ts`, the payload).  The payload is `length` bytes at
 * `offset` of `src`: a file descriptor read with pread (the bytes up to end of
 * file if it is shorter) or a buffer (sliced, as buf[offset:offset+length]).
 * One call and one bytes object instead of a list of parts joined in Python.
 * Twin: swift/_fast.py py_data_datagram. */
static void
put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

/* data_datagram's work on parsed arguments (the caller releases the buffers) */
static PyObject *
dd_core(long long channel, const Py_buffer *hbp, const Py_buffer *kbp, Py_ssize_t hs, long long n,
        long long chunk, long long stop, const Py_buffer *zbp, const Py_buffer *tbp, PyObject *src,
        long long offset, long long length)
{
    PyObject *out = NULL;
    const unsigned char *h = (const unsigned char *)hbp->buf, *kn = (const unsigned char *)kbp->buf;
    Py_ssize_t nk = kbp->len;
    if (channel < 0 || channel > 0xFFFFFFFFLL || hs < 1 || hs > 64 || hbp->len != nk * hs
            || zbp->len != hs || tbp->len != 8 || n < 0 || chunk < 0 || chunk > 0xFFFFFFFFLL
            || stop < 0 || stop > 32 || offset < 0 || length < 0 || length > (1 << 24)) {
        PyErr_SetString(PyExc_ValueError, "data_datagram: bad arguments");
        goto done;
    }
    /* the uncles first: an unknown hash raises before anything is read */
    const unsigned char *srcs[33];
    uint32_t los[33], his[33];
    int nu = 0;
    /* chunk < 2**32 and stop <= 32: every uncle's range lies inside [0, 2**32) */
    for (long long lay = stop - 1; lay >= 0; lay--) {
        long long sib = (chunk >> lay) ^ 1;
        long long s = (sib << (lay + 1)) | ((1LL << lay) - 1);
        long long lo = sib << lay, hi = lo + (1LL << lay);
        if (lo >= n) {
            srcs[nu] = (const unsigned char *)zbp->buf;
        } else if (s < nk && kn[s] == 1) {
            srcs[nu] = h + s * hs;
        } else {
            PyErr_Format(PyExc_KeyError, "hash of bin %lld is not known", s);
            goto done;
        }
        los[nu] = (uint32_t)lo;
        his[nu] = (uint32_t)(hi - 1);
        nu++;
    }
    int fd = -1;
    Py_buffer sb;
    int have_sb = 0;
    Py_ssize_t plen = (Py_ssize_t)length;
    if (PyLong_Check(src)) {
        long v = PyLong_AsLong(src);
        if (v == -1 && PyErr_Occurred())
            goto done;
        fd = (int)v;
        if (v < 0 || v > 0x7FFFFFFFL) {
            PyErr_SetString(PyExc_ValueError, "data_datagram: bad file descriptor");
            goto done;
        }
    } else {
        if (PyObject_GetBuffer(src, &sb, PyBUF_SIMPLE) < 0)
            goto done;
        have_sb = 1;
        if (offset >= sb.len)
            plen = 0;
        else if (plen > sb.len - offset)
            plen = sb.len - (Py_ssize_t)offset;
    }
    Py_ssize_t head = 4 + nu * (9 + hs) + 17;
    out = PyBytes_FromStringAndSize(NULL, head + plen);
    if (!out)
        goto release;
    unsigned char *p0 = (unsigned char *)PyBytes_AsString(out), *p = p0;
    put32(p, (uint32_t)channel);
    p += 4;
    for (int i = 0; i < nu; i++) {
        *p++ = 4;
        put32(p, los[i]);
        put32(p + 4, his[i]);
        memcpy(p + 8, srcs[i], hs);
        p += 8 + hs;
    }
    *p++ = 1;
    put32(p, (uint32_t)chunk);
    put32(p + 4, (uint32_t)chunk);
    memcpy(p + 8, tbp->buf, 8);
    p += 16;
    if (have_sb) {
        if (plen)
            memcpy(p, (const char *)sb.buf + offset, plen);
    } else {
        Py_ssize_t got = 0;
        while (got < plen) {
            ssize_t r = pread(fd, p + got, (size_t)(plen - got), (off_t)(offset + got));
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                PyErr_SetFromErrno(PyExc_OSError);
                Py_CLEAR(out);
                goto release;
            }
            if (r == 0)
                break;  /* end of file: a short payload, as a short read gives */
            got += r;
        }
        if (got < plen) {
            PyObject *shorter = PyBytes_FromStringAndSize((const char *)p0, head + got);
            Py_DECREF(out);
            out = shorter;  /* NULL (the error set) if that failed */
        }
    }
release:
    if (have_sb)
        PyBuffer_Release(&sb);
done:
    return out;
}

static PyObject *
data_datagram(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer hb, kb, zb, tb;
    Py_ssize_t hs;
    long long channel, n, chunk, stop, offset, length;
    PyObject *src;
    if (fc_args("data_datagram", "Ly*y*nLLLy*y*OLL", args, nargs, &channel, &hb, &kb, &hs, &n,
                &chunk, &stop, &zb, &tb, &src, &offset, &length) < 0)
        return NULL;
    PyObject *out = dd_core(channel, &hb, &kb, hs, n, chunk, stop, &zb, &tb, src, offset, length);
    PyBuffer_Release(&hb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&zb);
    PyBuffer_Release(&tb);
    return out;
}


/* seed_datagram(channel, tree, chunk, binmap_a, binmap_b, ts, src, offset, length) -> bytes
 * MerkleTree.data_datagram for the upload path's two binmaps (the peer's
 * acknowledged and our sent chunks: the same Binmap twice when only one
 * counts) in one call: the chunk's peak layer from the tree's n_chunks (the
 * highest bit where chunk and n differ; IndexError past the end), uncle_stop
 * over the binmaps' buffers (their _h, _deep, root, root_layer), then
 * data_datagram with the tree's _hashes, _known, hash_size and zero.  Per DATA
 * a seeder sends; it replaces three Python frames (data_datagram, _stop_of,
 * _peak_top).  Twin: swift/_fast.py py_seed_datagram. */
static PyObject *SD_names[9];
enum { SD_n, SD_h, SD_deep, SD_root, SD_layer, SD_hashes, SD_known, SD_hs, SD_zero, SD_N };
static const char *const SD_strs[SD_N] = {
    "n_chunks", "_h", "_deep", "root", "root_layer", "_hashes", "_known", "hash_size", "zero"};

static int
sd_init(void)
{
    if (SD_names[SD_N - 1] != NULL)
        return 0;
    for (int i = 0; i < SD_N; i++)
        if (SD_names[i] == NULL && (SD_names[i] = PyUnicode_InternFromString(SD_strs[i])) == NULL)
            return -1;
    return 0;
}

/* an int attribute; -1 with an exception set */
static int
sd_ll(PyObject *o, int name, long long *out)
{
    PyObject *v = PyObject_GetAttr(o, SD_names[name]);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* a buffer attribute (the caller releases it); -1 with an exception set */
static int
sd_buf(PyObject *o, int name, Py_buffer *b)
{
    PyObject *v = PyObject_GetAttr(o, SD_names[name]);
    if (v == NULL)
        return -1;
    int r = PyObject_GetBuffer(v, b, PyBUF_SIMPLE);
    Py_DECREF(v);
    return r;
}

static PyObject *
seed_datagram(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *tree, *ma, *mb, *src;
    long long channel, chunk, offset, length;
    Py_buffer tb;
    if (fc_args("seed_datagram", "LOLOOy*OLL", args, nargs, &channel, &tree, &chunk, &ma, &mb,
                &tb, &src, &offset, &length) < 0)
        return NULL;
    PyObject *res = NULL;
    Py_buffer bufs[7];
    int nb = 0;
    long long n = 0, ra, la, rb, lb, hs, stop;
    if (sd_init() < 0)
        goto done;
    PyObject *nobj = PyObject_GetAttr(tree, SD_names[SD_n]);
    if (nobj == NULL)
        goto done;
    if (nobj != Py_None)
        n = PyLong_AsLongLong(nobj);
    Py_DECREF(nobj);
    if (n == -1 && PyErr_Occurred())
        goto done;
    if (chunk < 0 || chunk >= n) {
        PyErr_SetString(PyExc_IndexError, "chunk past the end of the content");
        goto done;
    }
    long long top = 63 - __builtin_clzll((unsigned long long)(chunk ^ n));
    if (sd_buf(ma, SD_h, &bufs[nb]) < 0 || (++nb, sd_buf(ma, SD_deep, &bufs[nb]) < 0))
        goto done;
    nb++;
    if (sd_ll(ma, SD_root, &ra) < 0 || sd_ll(ma, SD_layer, &la) < 0)
        goto done;
    if (sd_buf(mb, SD_h, &bufs[nb]) < 0 || (++nb, sd_buf(mb, SD_deep, &bufs[nb]) < 0))
        goto done;
    nb++;
    if (sd_ll(mb, SD_root, &rb) < 0 || sd_ll(mb, SD_layer, &lb) < 0)
        goto done;
    if (us_core(chunk, top, &bufs[0], &bufs[1], ra, la, &bufs[2], &bufs[3], rb, lb, &stop) < 0)
        goto done;
    if (sd_buf(tree, SD_hashes, &bufs[nb]) < 0 || (++nb, sd_buf(tree, SD_known, &bufs[nb]) < 0))
        goto done;
    nb++;
    if (sd_ll(tree, SD_hs, &hs) < 0 || sd_buf(tree, SD_zero, &bufs[nb]) < 0)
        goto done;
    nb++;
    res = dd_core(channel, &bufs[4], &bufs[5], (Py_ssize_t)hs, n, chunk, stop, &bufs[6], &tb, src,
                  offset, length);
done:
    for (int i = 0; i < nb; i++)
        PyBuffer_Release(&bufs[i]);
    PyBuffer_Release(&tb);
    return res;
}

/* picker_next_wanted(have, inflight, peer, pos, hi) -> chunk, or -1
 * swift.core.picker.next_wanted in one call: the first chunk in [pos, hi) that
 * the Binmap `have` lacks, `inflight` lacks and `peer` holds, read from the
 * three binmaps' buffers (_h, _deep, root, root_layer).  A chunk at or past a
 * binmap's span is empty in it, as Binmap.find_empty and find_filled have it.
 * Each turn of the loop moves pos forward (every find returns a chunk >= its
 * lo), so it ends.  The Python loop made three binmap_find calls per turn, and
 * it runs for every candidate chunk of every pick (~20 % of a simulated VoD
 * swarm's CPU).  Unlike the Python, which checks a binmap's buffers when it
 * first reads it, this checks all three first.  Twin: swift/_fast.py
 * py_next_wanted. */
typedef struct {
    Py_buffer h, d;
    long long root, layer;
    int nbuf;
} NwMap;

static int
nw_get(PyObject *m, NwMap *o)
{
    o->nbuf = 0;
    if (sd_buf(m, SD_h, &o->h) < 0)
        return -1;
    o->nbuf = 1;
    if (sd_buf(m, SD_deep, &o->d) < 0)
        return -1;
    o->nbuf = 2;
    if (sd_ll(m, SD_root, &o->root) < 0 || sd_ll(m, SD_layer, &o->layer) < 0)
        return -1;
    if (!bm_ok(&o->h, &o->d, o->root, o->layer)) {
        PyErr_SetString(PyExc_ValueError, "picker_next_wanted: bad binmap buffers");
        return -1;
    }
    return 0;
}

static void
nw_release(NwMap *o)
{
    if (o->nbuf > 1)
        PyBuffer_Release(&o->d);
    if (o->nbuf > 0)
        PyBuffer_Release(&o->h);
}

/* first chunk in [lo, hi) whose bit is val (at or past the span: empty), -1 if
 * none, -2 on a corrupt tree: Binmap.find_empty / find_filled with hi given */
static long long
nw_find(const NwMap *m, long long lo, long long hi, int val)
{
    long long span = 32LL << m->layer;
    if (val && hi > span)
        hi = span;
    if (lo >= hi)
        return -1;
    if (!val && lo >= span)
        return lo;
    long long r = bm_find((const uint32_t *)m->h.buf, m->h.len / 4,
                          (const unsigned char *)m->d.buf, m->root, m->layer, lo,
                          hi < span ? hi : span, val);
    if (r == -1 && !val && hi > span)
        return span;
    return r;
}

static PyObject *
picker_next_wanted(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "picker_next_wanted(have, inflight, peer, pos, hi) takes 5 arguments");
        return NULL;
    }
    long long pos = PyLong_AsLongLong(args[3]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    long long hi = PyLong_AsLongLong(args[4]);
    if (hi == -1 && PyErr_Occurred())
        return NULL;
    NwMap m[3];
    int got = 0;
    long long found = -1;
    PyObject *res = NULL;
    if (sd_init() < 0)
        goto done;
    for (; got < 3; got++)
        if (nw_get(args[got], &m[got]) < 0) {
            got++;  /* release what it took */
            goto done;
        }
    while (pos < hi) {
        long long c = nw_find(&m[0], pos, hi, 0);
        if (c < 0) { found = c; break; }
        long long d = nw_find(&m[1], c, hi, 0);
        if (d < 0) { found = d; break; }
        if (d != c) { pos = d; continue; }
        long long e = nw_find(&m[2], c, hi, 1);
        if (e < 0) { found = e; break; }
        if (e != c) { pos = e; continue; }
        found = c;
        break;
    }
    if (found == -2)
        PyErr_SetString(PyExc_ValueError, "binmap_find: corrupt tree");
    else
        res = PyLong_FromLongLong(found);
done:
    for (int i = 0; i < got; i++)
        nw_release(&m[i]);
    return res;
}

/* ---- ledbat_on_ack: Ledbat.on_ack (swift/core/ledbat.py, RFC 6817 2.4.2) ----
 * Once per ACK; at 1 KiB chunks toward a libswift leecher (an ACK per chunk)
 * the Python version was ~12 % of the seeder's instructions.  It reads and
 * writes the Ledbat object's own attributes, with the twin's arithmetic in the
 * same order (tests/swift/test_swift_ledbat_fast.py runs both side by side). */

/* Attribute access shared by the C functions that work on a Python object's own
 * attributes (ledbat_on_ack, sendside_recv): each keeps its names interned in a
 * table indexed by an enum. */

/* intern strs[i] into names[i], once (names[n - 1] set: done); -1 with an exception set */
static int
intern_names(PyObject **names, const char *const *strs, int n)
{
    if (names[n - 1] != NULL)
        return 0;
    for (int i = 0; i < n; i++)
        if (names[i] == NULL && (names[i] = PyUnicode_InternFromString(strs[i])) == NULL)
            return -1;
    return 0;
}

/* a float (or int) attribute; -1 with an exception set */
static int
attr_double(PyObject *o, PyObject *name, double *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    *out = PyFloat_AsDouble(v);
    Py_DECREF(v);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* an int attribute; with ``strict`` (the caller's name for the error) only an int
 * object, else anything PyLong_AsLongLong takes; -1 with an exception set */
static int
attr_ll(PyObject *o, PyObject *name, const char *strict, long long *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    if (strict != NULL && !PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: %U must be an int", strict, name);
        Py_DECREF(v);
        return -1;
    }
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* an attribute's truth (1 or 0); -1 with an exception set */
static int
attr_true(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* set an attribute to v (a new reference, stolen; NULL: the error of making it) */
static int
attr_set(PyObject *o, PyObject *name, PyObject *v)
{
    if (v == NULL)
        return -1;
    int r = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return r;
}

static PyObject *LA_names[40];
enum { LA_acks, LA_base_delays, LA_last_rollover, LA_base, LA_current_delays, LA_TARGET,
       LA_flightsize, LA_srtt, LA_peak_time, LA_peak_flight, LA_mss, LA_cwnd, LA_min_rtt,
       LA_ssthresh, LA_slow_start, LA_MIN_CWND, LA_DECREASE, LA_ALLOWED_INCREASE, LA_MAX_CWND,
       LA_rttvar, LA_GAIN, LA_GAIN_DIVISOR_MAX, LA_cto, LA_last_ack, LA_append, LA_PEAK_HOLD,
       LA_YOUNG_BASE, LA_YOUNG_S, LA_history_start, LA_first_delay, LA_YOUNG_REVISION,
       LA_CURRENT_FILTER, LA_N };
static const char *const LA_strs[LA_N] = {
    "acks", "base_delays", "last_rollover", "_base", "current_delays", "TARGET",
    "flightsize", "srtt", "peak_time", "peak_flight", "mss", "cwnd", "min_rtt",
    "ssthresh", "slow_start", "MIN_CWND", "DECREASE", "ALLOWED_INCREASE", "MAX_CWND",
    "rttvar", "GAIN", "GAIN_DIVISOR_MAX", "cto", "last_ack", "append", "PEAK_HOLD",
    "YOUNG_BASE", "YOUNG_S", "history_start", "first_delay", "YOUNG_REVISION",
    "CURRENT_FILTER"};

#define la_init() intern_names(LA_names, LA_strs, LA_N)
#define la_double(o, name, out) attr_double((o), LA_names[name], (out))

#define la_ll(o, name, out) attr_ll((o), LA_names[name], "ledbat_on_ack", (out))

#define la_set(o, name, v) attr_set((o), LA_names[name], (v))

#define la_set_double(o, name, x) la_set((o), (name), PyFloat_FromDouble(x))
#define la_set_ll(o, name, x) la_set((o), (name), PyLong_FromLongLong(x))

/* min() of an iterable of floats; -1 with an exception set */
static int
la_min(PyObject *seq, double *out)
{
    PyObject *it = PyObject_GetIter(seq), *x;
    if (it == NULL)
        return -1;
    int first = 1;
    double m = 0.0;
    while ((x = PyIter_Next(it)) != NULL) {
        double v = PyFloat_AsDouble(x);
        Py_DECREF(x);
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(it);
            return -1;
        }
        if (first || v < m)
            m = v;
        first = 0;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    if (first) {
        PyErr_SetString(PyExc_ValueError, "ledbat_on_ack: min() of an empty delay list");
        return -1;
    }
    *out = m;
    return 0;
}

/* Python's float // (floatobject.c _float_div_mod), for the minute of the base delay */
static double
la_floordiv(double vx, double wx)
{
    double mod = fmod(vx, wx), div = (vx - mod) / wx, fl;
    if (mod) {
        if ((wx < 0) != (mod < 0))
            div -= 1.0;
    }
    if (div) {
        fl = floor(div);
        if (div - fl > 0.5)
            fl += 1.0;
    } else {
        fl = copysign(0.0, vx / wx);
    }
    return fl;
}

static int
la_append(PyObject *dq, double x)
{
    PyObject *v = PyFloat_FromDouble(x);
    if (v == NULL)
        return -1;
    PyObject *r = PyObject_CallMethodObjArgs(dq, LA_names[LA_append], v, NULL);
    Py_DECREF(v);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

#define LA_TRY(x) do { if ((x) < 0) goto fail; } while (0)

/* YOUNG_BASE's reference (first_delay): the base delay after each of the first
 * CURRENT_FILTER samples, where ``n`` is this sample's number; 0, or -1 with an
 * exception set.  Called only where the base was set, as the twin does. */
static int
la_first_base(PyObject *led, long long n, double base)
{
    long long filter;
    if (la_ll(led, LA_CURRENT_FILTER, &filter) < 0)
        return -1;
    return n <= filter ? la_set_double(led, LA_first_delay, base) : 0;
}

/* Ledbat.on_ack's work (rtt_o: a float or None): 0, or -1 with an exception set */
static int
lb_on_ack(PyObject *led, double delay, long long bytes_acked, double now, PyObject *rtt_o)
{
    PyObject *bd = NULL, *cur = NULL, *srtt_o = NULL;
    if (la_init() < 0)
        return -1;
    int has_rtt = rtt_o != Py_None;
    double rtt = 0.0;
    if (has_rtt && (rtt = PyFloat_AsDouble(rtt_o)) == -1.0 && PyErr_Occurred())
        return -1;
    long long acks, flight, peak_flight, mss, min_cwnd, allowed, max_cwnd;
    double lr, base, target, peak_time, cwnd, min_rtt, ssthresh, decrease, gain_c, gdm;
    LA_TRY(la_ll(led, LA_acks, &acks));
    LA_TRY(la_set_ll(led, LA_acks, acks + 1));
    /* base delay per minute (update_base_delay) */
    if ((bd = PyObject_GetAttr(led, LA_names[LA_base_delays])) == NULL)
        goto fail;
    LA_TRY(la_double(led, LA_last_rollover, &lr));
    if (lr == -Py_HUGE_VAL || la_floordiv(now, 60.0) != la_floordiv(lr, 60.0)) {
        if (lr == -Py_HUGE_VAL)  /* the first sample: the base delay's age starts */
            LA_TRY(la_set_double(led, LA_history_start, now));
        LA_TRY(la_set_double(led, LA_last_rollover, now));
        LA_TRY(la_append(bd, delay));
        LA_TRY(la_min(bd, &base));
        LA_TRY(la_set_double(led, LA_base, base));
        LA_TRY(la_first_base(led, acks + 1, base));
    } else {
        LA_TRY(la_double(led, LA_base, &base));
        PyObject *last = PySequence_GetItem(bd, -1);
        if (last == NULL)
            goto fail;
        double l = PyFloat_AsDouble(last);
        Py_DECREF(last);
        if (l == -1.0 && PyErr_Occurred())
            goto fail;
        if (delay < l) {
            PyObject *v = PyFloat_FromDouble(delay);
            if (v == NULL)
                goto fail;
            int r = PySequence_SetItem(bd, -1, v);
            Py_DECREF(v);
            LA_TRY(r);
            if (delay < base) {
                base = delay;
                LA_TRY(la_set_double(led, LA_base, base));
                LA_TRY(la_first_base(led, acks + 1, base));
            }
        }
    }
    if ((cur = PyObject_GetAttr(led, LA_names[LA_current_delays])) == NULL)
        goto fail;
    LA_TRY(la_append(cur, delay));
    double cmin;
    LA_TRY(la_min(cur, &cmin));
    LA_TRY(la_double(led, LA_TARGET, &target));
    double qd = cmin - base;
    double off_target = (target - qd) / target;
    LA_TRY(la_ll(led, LA_flightsize, &flight));
    if ((srtt_o = PyObject_GetAttr(led, LA_names[LA_srtt])) == NULL)
        goto fail;
    int has_srtt = srtt_o != Py_None;
    double srtt = 0.0;
    if (has_srtt && (srtt = PyFloat_AsDouble(srtt_o)) == -1.0 && PyErr_Occurred())
        goto fail;
    LA_TRY(la_double(led, LA_peak_time, &peak_time));
    double hold = (has_srtt && srtt != 0.0) ? srtt : 1.0, peak_hold;
    LA_TRY(la_double(led, LA_PEAK_HOLD, &peak_hold));
    if (hold < peak_hold)  /* Ledbat.PEAK_HOLD: the sender's own flush cycle */
        hold = peak_hold;
    if (now - peak_time > hold) {
        LA_TRY(la_set_ll(led, LA_peak_flight, flight));
        LA_TRY(la_set_double(led, LA_peak_time, now));
    }
    LA_TRY(la_ll(led, LA_peak_flight, &peak_flight));
    long long cap_flight = flight > peak_flight ? flight : peak_flight;
    LA_TRY(la_ll(led, LA_mss, &mss));
    LA_TRY(la_double(led, LA_cwnd, &cwnd));
    LA_TRY(la_double(led, LA_min_rtt, &min_rtt));
    if (has_rtt && rtt < min_rtt) {
        min_rtt = rtt;
        if (PyObject_SetAttr(led, LA_names[LA_min_rtt], rtt_o) < 0)
            goto fail;
    }
    double rq = (has_srtt && has_rtt) ? srtt - min_rtt : 0.0;
    int calm = qd < target / 2 && rq < target / 2;
    int slow = attr_true(led, LA_names[LA_slow_start]);
    LA_TRY(slow);
    LA_TRY(la_double(led, LA_ssthresh, &ssthresh));
    LA_TRY(la_ll(led, LA_MIN_CWND, &min_cwnd));
    int recovering = !slow && cwnd < ssthresh && calm;
    if (recovering) {
        double c = cwnd + (double)bytes_acked;
        cwnd = c < ssthresh ? c : ssthresh;  /* min(ssthresh, c) */
    } else if (slow && calm) {
        cwnd += (double)bytes_acked;
    } else {
        if (slow) {
            double h = cwnd / 2, m = (double)(min_cwnd * mss);
            cwnd = m > h ? m : h;
        }
        slow = 0;
        LA_TRY(PyObject_SetAttr(led, LA_names[LA_slow_start], Py_False));
        if (off_target < 0 || rq <= target) {
            double gain;
            LA_TRY(la_double(led, LA_GAIN, &gain_c));
            if (0 < min_rtt && min_rtt < Py_HUGE_VAL) {
                LA_TRY(la_double(led, LA_GAIN_DIVISOR_MAX, &gdm));
                double c = ceil(2 * target / min_rtt);
                gain = gain_c / (c < gdm ? c : gdm);
            } else {
                gain = gain_c;
            }
            /* Ledbat.young_gain: GAIN x age / YOUNG_S while a base delay that has fallen
             * more than YOUNG_REVISION x TARGET below the first sample is young */
            int young = attr_true(led, LA_names[LA_YOUNG_BASE]);
            LA_TRY(young);
            if (young) {
                double fd, yr;
                LA_TRY(la_double(led, LA_first_delay, &fd));
                LA_TRY(la_double(led, LA_YOUNG_REVISION, &yr));
                if (fd - base > yr * target) {
                    double hs, ys;
                    LA_TRY(la_double(led, LA_history_start, &hs));
                    LA_TRY(la_double(led, LA_YOUNG_S, &ys));
                    double age = now - hs;
                    if (age < ys)
                        gain = age > 0 ? gain * age / ys : 0.0;
                }
            }
            if (off_target < 0) {
                LA_TRY(la_double(led, LA_DECREASE, &decrease));
                double w = cwnd / (double)mss;
                double a = gain + decrease * w * off_target, b = -w / 2;
                double per_rtt = b > a ? b : a;
                cwnd += per_rtt * (double)bytes_acked * (double)mss / cwnd;
            } else {
                cwnd += gain * off_target * (double)bytes_acked * (double)mss / cwnd;
            }
        }
    }
    LA_TRY(la_ll(led, LA_ALLOWED_INCREASE, &allowed));
    LA_TRY(la_ll(led, LA_MAX_CWND, &max_cwnd));
    double lim = (double)((slow || recovering ? 2 * cap_flight : cap_flight) + allowed * mss);
    if (lim < cwnd)
        cwnd = lim;
    if ((double)max_cwnd < cwnd)
        cwnd = (double)max_cwnd;
    if ((double)(min_cwnd * mss) > cwnd)
        cwnd = (double)(min_cwnd * mss);
    LA_TRY(la_set_double(led, LA_cwnd, cwnd));
    LA_TRY(la_set_ll(led, LA_flightsize, flight - bytes_acked > 0 ? flight - bytes_acked : 0));
    if (has_rtt) {
        double var, cto;
        if (!has_srtt) {
            srtt = rtt;
            var = rtt / 2;
        } else {
            LA_TRY(la_double(led, LA_rttvar, &var));
            var = 0.75 * var + 0.25 * fabs(srtt - rtt);
            srtt = 0.875 * srtt + 0.125 * rtt;
        }
        cto = srtt + 4 * var;
        LA_TRY(la_set_double(led, LA_srtt, srtt));
        LA_TRY(la_set_double(led, LA_rttvar, var));
        LA_TRY(la_set_double(led, LA_cto, cto > 0.2 ? cto : 0.2));
    } else if (has_srtt) {
        double var;
        LA_TRY(la_double(led, LA_rttvar, &var));
        double cto = srtt + 4 * var;
        LA_TRY(la_set_double(led, LA_cto, cto > 0.2 ? cto : 0.2));
    }
    LA_TRY(la_set_double(led, LA_last_ack, now));
    Py_DECREF(bd);
    Py_DECREF(cur);
    Py_DECREF(srtt_o);
    return 0;
fail:
    Py_XDECREF(bd);
    Py_XDECREF(cur);
    Py_XDECREF(srtt_o);
    return -1;
}

static PyObject *
ledbat_on_ack(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *led, *rtt_o;
    double delay, now;
    long long bytes_acked;
    (void)self;
    if (fc_args("ledbat_on_ack", "OdLdO", args, nargs, &led, &delay, &bytes_acked, &now,
                &rtt_o) < 0)
        return NULL;
    if (lb_on_ack(led, delay, bytes_acked, now, rtt_o) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- sendside_recv: the send side of one ACK or HAVE (swift/core/sendside.py) ----
 * sendside_recv(send, lo, hi, delay_us, now, arrived) -> 0 done, -1 not done
 * delay_us an int: SendSide.on_ack(lo, hi, delay_us, now, arrived) (retire the
 * acknowledged DATA, RACK's newest, pacing's RTT, then Ledbat.on_ack through
 * lb_on_ack); delay_us None: SendSide.delivered_by_have(lo, hi, now).  Per
 * libswift datagram (HAVE i, ACK i) a seeder receives; it replaces the two
 * methods' frames and ledbat_on_ack's call.  -1, with nothing changed, while
 * loss repair has chunks in flight (send.retried not empty: SendSide.spurious
 * is the methods' alone), for chunks not within 0 <= lo <= hi < 2**63 or a
 * delay that is not an int in [0, 2**64): the caller then runs the method.  Attributes read and written as the methods do, with their
 * arithmetic in the same order.  Twin: swift/_fast.py py_sendside_recv. */

static PyObject *SR_names[16];
enum { SR_data_out, SR_ambiguous, SR_retried, SR_acked_sent, SR_acked_seq, SR_acked_rtt,
       SR_pace_rtt, SR_ledbat, SR_srtt, SR_cto, SR_on_delivered, SR_N };
static const char *const SR_strs[SR_N] = {
    "data_out", "ambiguous", "retried", "acked_sent", "acked_seq", "acked_rtt", "pace_rtt",
    "ledbat", "srtt", "cto", "on_delivered"};

#define sr_init() intern_names(SR_names, SR_strs, SR_N)
#define sr_double(o, name, out) attr_double((o), SR_names[name], (out))

#define sr_ll(o, name, out) attr_ll((o), SR_names[name], NULL, (out))

#define sr_set(o, name, v) attr_set((o), SR_names[name], (v))

/* x = (send time, bytes, send order) of a DATA in flight: its fields (order 0
 * when the tuple has two); -1 with an exception set */
static int
sr_entry(PyObject *x, double *t, long long *bytes, long long *q)
{
    Py_ssize_t n = PyTuple_Size(x);
    if (n < 2) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "sendside_recv: a data_out entry is not "
                            "(time, bytes, order)");
        return -1;
    }
    *t = PyFloat_AsDouble(PyTuple_GetItem(x, 0));
    if (*t == -1.0 && PyErr_Occurred())
        return -1;
    if (bytes != NULL) {
        *bytes = PyLong_AsLongLong(PyTuple_GetItem(x, 1));
        if (*bytes == -1 && PyErr_Occurred())
            return -1;
    }
    *q = 0;
    if (n > 2) {
        *q = PyLong_AsLongLong(PyTuple_GetItem(x, 2));
        if (*q == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* SendSide.on_ack with send.retried empty: 0, or -1 with an exception set */
static int
sr_ack(PyObject *send, PyObject *do_, long long lo, long long hi, long long delay_us, double now,
       PyObject *arrived_o)
{
    int rc = -1;
    PyObject *amb = NULL, *newest_o = NULL, *keys = NULL, *key = NULL, *x = NULL;
    PyObject *rtt_o = NULL;
    long long nseq, acked = 0, nseq0;
    double newest, sent_at = 0.0, rtt = 0.0, acked_rtt = 0.0;
    int has_rtt = 0, moved = 0, rtt_moved = 0;
    if ((amb = PyObject_GetAttr(send, SR_names[SR_ambiguous])) == NULL)
        goto done;
    if ((newest_o = PyObject_GetAttr(send, SR_names[SR_acked_sent])) == NULL)
        goto done;
    newest = PyFloat_AsDouble(newest_o);
    if (newest == -1.0 && PyErr_Occurred())
        goto done;
    if (sr_ll(send, SR_acked_seq, &nseq) < 0)
        goto done;
    nseq0 = nseq;
    Py_ssize_t n_do = PyDict_Size(do_);
    Py_ssize_t nk;
    if (hi - lo <= (long long)n_do) {
        nk = hi > lo ? (Py_ssize_t)(hi - lo) : 0;
    } else {  /* the chunks in flight within [lo, hi), in data_out's order */
        if ((keys = PyList_New(0)) == NULL)
            goto done;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(do_, &pos, &k, &v)) {
            int ov = 0;
            long long c = PyLong_AsLongLongAndOverflow(k, &ov);
            if (c == -1 && PyErr_Occurred())
                goto done;
            if (!ov && lo <= c && c < hi && PyList_Append(keys, k) < 0)
                goto done;
        }
        nk = PyList_Size(keys);
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        if (keys != NULL) {
            key = PyList_GetItem(keys, i);
            Py_INCREF(key);
        } else if ((key = PyLong_FromLongLong(lo + i)) == NULL) {
            goto done;
        }
        x = PyDict_GetItemWithError(do_, key);  /* do.pop(c, None) */
        if (x == NULL) {
            if (PyErr_Occurred())
                goto done;
            Py_CLEAR(key);
            continue;
        }
        Py_INCREF(x);
        if (PyDict_DelItem(do_, key) < 0)
            goto done;
        double t;
        long long bytes, q;
        if (sr_entry(x, &t, &bytes, &q) < 0)
            goto done;
        acked += bytes;
        Py_ssize_t na = PySet_Size(amb);
        if (na < 0)
            goto done;
        if (na) {
            int in = PySet_Contains(amb, key);
            if (in < 0)
                goto done;
            if (in) {  /* sent twice: whose ACK is this? (Karn) */
                if (PySet_Discard(amb, key) < 0)
                    goto done;
                Py_CLEAR(key);
                Py_CLEAR(x);
                continue;
            }
        }
        sent_at = t;
        rtt = now - sent_at;
        has_rtt = 1;
        if (t > newest || (t == newest && q > nseq)) {  /* RACK.segment (RFC 8985 6.2 step 2) */
            PyObject *t_o = PyTuple_GetItem(x, 0);
            Py_INCREF(t_o);
            Py_DECREF(newest_o);
            newest_o = t_o;
            newest = t;
            nseq = q;
            moved = 1;
            acked_rtt = rtt;
            rtt_moved = 1;
        }
        Py_CLEAR(key);
        Py_CLEAR(x);
    }
    if (moved) {  /* (the method stores both always: the same objects when unmoved) */
        Py_INCREF(newest_o);
        if (sr_set(send, SR_acked_sent, newest_o) < 0)
            goto done;
        if (nseq != nseq0 && sr_set(send, SR_acked_seq, PyLong_FromLongLong(nseq)) < 0)
            goto done;
    }
    if (rtt_moved && sr_set(send, SR_acked_rtt, PyFloat_FromDouble(acked_rtt)) < 0)
        goto done;
    if (has_rtt) {
        double prt = rtt, p;
        if (arrived_o != Py_None) {
            double arrived = PyFloat_AsDouble(arrived_o);
            if (arrived == -1.0 && PyErr_Occurred())
                goto done;
            if (sent_at <= arrived && arrived <= now)
                prt = arrived - sent_at;
        }
        if (sr_double(send, SR_pace_rtt, &p) < 0)
            goto done;
        if (sr_set(send, SR_pace_rtt, PyFloat_FromDouble(p == 0.0 ? prt : 0.875 * p + 0.125 * prt)) < 0)
            goto done;
    }
    if (acked) {  /* Ledbat.on_ack, without ledbat_on_ack's call */
        PyObject *led = PyObject_GetAttr(send, SR_names[SR_ledbat]);
        if (led == NULL)
            goto done;
        if (has_rtt) {
            if ((rtt_o = PyFloat_FromDouble(rtt)) == NULL) {
                Py_DECREF(led);
                goto done;
            }
        } else {
            rtt_o = Py_None;
            Py_INCREF(rtt_o);
        }
        int r = lb_on_ack(led, (double)delay_us / 1e6, acked, now, rtt_o);
        Py_DECREF(led);
        if (r < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(amb);
    Py_XDECREF(newest_o);
    Py_XDECREF(keys);
    Py_XDECREF(key);
    Py_XDECREF(x);
    Py_XDECREF(rtt_o);
    return rc;
}

/* SendSide.delivered_by_have with send.retried empty: 0, or -1 with an exception set */
static int
sr_have(PyObject *send, PyObject *do_, long long lo, long long hi, double now)
{
    int rc = -1;
    PyObject *led = NULL, *hits = NULL, *srtt_o = NULL, *now_o = NULL;
    if (PyDict_Size(do_) == 0)
        return 0;
    if (hi - lo == 1) {  /* libswift's HAVE right after the ACK for the same chunk */
        PyObject *k = PyLong_FromLongLong(lo);
        if (k == NULL)
            return -1;
        PyObject *v = PyDict_GetItemWithError(do_, k);
        Py_DECREF(k);
        if (v == NULL)
            return PyErr_Occurred() ? -1 : 0;
    }
    if ((led = PyObject_GetAttr(send, SR_names[SR_ledbat])) == NULL)
        goto done;
    if ((srtt_o = PyObject_GetAttr(led, SR_names[SR_srtt])) == NULL)
        goto done;
    double srtt = 0.0, cto, newest;
    long long nseq;
    if (srtt_o != Py_None && (srtt = PyFloat_AsDouble(srtt_o)) == -1.0 && PyErr_Occurred())
        goto done;
    if (sr_double(led, SR_cto, &cto) < 0)
        goto done;
    double m = 1.5 * (srtt != 0.0 ? srtt : 0.5);  /* max(1.5 * (srtt or 0.5), cto) */
    double old = now - (cto > m ? cto : m);
    if (sr_double(send, SR_acked_sent, &newest) < 0 || sr_ll(send, SR_acked_seq, &nseq) < 0)
        goto done;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(do_, &pos, &k, &v)) {  /* a prefix of data_out (send order) */
        double t;
        long long q;
        if (sr_entry(v, &t, NULL, &q) < 0)
            goto done;
        if (!(t < newest || t < old || (t == newest && q < nseq)))
            break;
        int ov = 0;
        long long c = PyLong_AsLongLongAndOverflow(k, &ov);
        if (c == -1 && PyErr_Occurred())
            goto done;
        if (!ov && lo <= c && c < hi) {
            if (hits == NULL && (hits = PyList_New(0)) == NULL)
                goto done;
            if (PyList_Append(hits, k) < 0)
                goto done;
        }
    }
    if (hits != NULL) {
        if ((now_o = PyFloat_FromDouble(now)) == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < PyList_Size(hits); i++) {
            PyObject *c = PyList_GetItem(hits, i);
            PyObject *x = PyDict_GetItemWithError(do_, c);  /* do.pop(c) */
            if (x == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetObject(PyExc_KeyError, c);
                goto done;
            }
            Py_INCREF(x);
            if (PyDict_DelItem(do_, c) < 0) {
                Py_DECREF(x);
                goto done;
            }
            PyObject *b = PyTuple_GetItem(x, 1);
            PyObject *r = b == NULL ? NULL : PyObject_CallMethodObjArgs(
                led, SR_names[SR_on_delivered], b, now_o, NULL);
            Py_DECREF(x);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
        }
    }
    rc = 0;
done:
    Py_XDECREF(led);
    Py_XDECREF(hits);
    Py_XDECREF(srtt_o);
    Py_XDECREF(now_o);
    return rc;
}

static PyObject *
sendside_recv(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "sendside_recv(send, lo, hi, delay_us, now, arrived) takes 6 arguments");
        return NULL;
    }
    PyObject *send = args[0], *delay_o = args[3], *arrived_o = args[5];
    /* chunks 0 <= lo <= hi < 2**63 (a bin64 or byte64 spec may name more: a
     * peer's datagram, so the method takes it) and a delay sample in
     * [0, 2**64) (as decoded), else not done */
    if (!PyLong_Check(args[1]) || !PyLong_Check(args[2]))
        return PyLong_FromLong(-1);
    int ov_lo = 0, ov_hi = 0;
    long long lo = PyLong_AsLongLongAndOverflow(args[1], &ov_lo);
    if (lo == -1 && PyErr_Occurred())
        return NULL;
    long long hi = PyLong_AsLongLongAndOverflow(args[2], &ov_hi);
    if (hi == -1 && PyErr_Occurred())
        return NULL;
    if (ov_lo || ov_hi || lo < 0 || hi < lo)
        return PyLong_FromLong(-1);
    double now = PyFloat_AsDouble(args[4]);
    if (now == -1.0 && PyErr_Occurred())
        return NULL;
    if (sr_init() < 0)
        return NULL;
    int is_ack = delay_o != Py_None;
    long long delay_us = 0;
    if (is_ack) {
        if (!PyLong_Check(delay_o))
            return PyLong_FromLong(-1);
        unsigned long long u = PyLong_AsUnsignedLongLong(delay_o);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return NULL;
            PyErr_Clear();  /* negative or from 2**64 on */
            return PyLong_FromLong(-1);
        }
        /* a libswift clock may run behind: the 64-bit sample read as signed */
        delay_us = (long long)u;
    }
    int busy = attr_true(send, SR_names[SR_retried]);
    if (busy < 0)
        return NULL;
    if (busy)
        return PyLong_FromLong(-1);
    PyObject *do_ = PyObject_GetAttr(send, SR_names[SR_data_out]);
    if (do_ == NULL)
        return NULL;
    if (!PyDict_Check(do_)) {
        Py_DECREF(do_);
        PyErr_SetString(PyExc_TypeError, "sendside_recv: data_out must be a dict");
        return NULL;
    }
    int r = is_ack ? sr_ack(send, do_, lo, hi, delay_us, now, arrived_o)
                   : sr_have(send, do_, lo, hi, now);
    Py_DECREF(do_);
    if (r < 0)
        return NULL;
    return PyLong_FromLong(0);
}

PyMethodDef dk_swift_methods[] = {
    {"recv_batch_ts", (PyCFunction)(void (*)(void))recv_batch_ts, METH_FASTCALL,
     "recv_batch_ts(sock, max_count, size) -> [(data, addr, kernel arrival time or -1.0)]"},
    {"decode_msgs", (PyCFunction)(void (*)(void))decode_msgs, METH_FASTCALL,
     "decode_msgs(data, pos, addressing, hash_size, sig_size, chunk_size) -> (messages, pos, error)"},
    {"binmap_find", (PyCFunction)(void (*)(void))binmap_find, METH_FASTCALL,
     "binmap_find(halves, deep, root, root_layer, lo, hi, val) -> first chunk or -1"},
    {"uncle_stop", (PyCFunction)(void (*)(void))uncle_stop, METH_FASTCALL,
     "uncle_stop(chunk, top, halves_a, deep_a, root_a, layer_a, halves_b, deep_b, root_b, "
     "layer_b) -> the layer where MerkleTree.uncles stops"},
    {"merkle_walk", (PyCFunction)(void (*)(void))merkle_walk, METH_FASTCALL,
     "merkle_walk(hashes, known, hash_size, n_chunks, root, chunk, leaf, offered, hasher, zero) "
     "-> 1 verified, 0 not, -1 a hash missing"},
    {"merkle_uncles", (PyCFunction)(void (*)(void))merkle_uncles, METH_FASTCALL,
     "merkle_uncles(hashes, known, hash_size, n_chunks, chunk, stop, zero) -> [(bin, hash)]"},
    {"data_datagram", (PyCFunction)(void (*)(void))data_datagram, METH_FASTCALL,
     "data_datagram(channel, hashes, known, hash_size, n_chunks, chunk, stop, zero, ts, src, "
     "offset, length) -> one DATA datagram with its INTEGRITY uncles (chunk32)"},
    {"seed_datagram", (PyCFunction)(void (*)(void))seed_datagram, METH_FASTCALL,
     "seed_datagram(channel, tree, chunk, binmap_a, binmap_b, ts, src, offset, length) -> "
     "MerkleTree.data_datagram over the two binmaps, in one call"},
    {"ledbat_on_ack", (PyCFunction)(void (*)(void))ledbat_on_ack, METH_FASTCALL,
     "ledbat_on_ack(ledbat, delay, bytes_acked, now, rtt) -> None (Ledbat.on_ack)"},
    {"sendside_recv", (PyCFunction)(void (*)(void))sendside_recv, METH_FASTCALL,
     "sendside_recv(send, lo, hi, delay_us, now, arrived) -> 0, or -1 not done "
     "(SendSide.on_ack; delay_us None: SendSide.delivered_by_have)"},
    {"binmap_set1", (PyCFunction)(void (*)(void))binmap_set1, METH_FASTCALL,
     "binmap_set1(halves, deep, free, st, root, root_layer, i, val) -> 1 if changed"},
    {"picker_next_wanted", (PyCFunction)(void (*)(void))picker_next_wanted, METH_FASTCALL,
     "picker_next_wanted(have, inflight, peer, pos, hi) -> the first chunk in [pos, hi) "
     "have and inflight lack and peer holds, or -1 (swift.core.picker.next_wanted)"},
    {NULL, NULL, 0, NULL},
};
