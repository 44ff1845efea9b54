/* C fast paths owned by the corecast package (twins in corecast/_fast.py).
 *
 *   cc_parse(pkt, ranges) -> tuple
 *       Classify one inner IP packet at the ITR and validate its CoreCast PDU
 *       (paper section 3.3; layout in docs/wire-corecast.md).  Same results as
 *       corecast._fast.py_cc_parse.
 *   cc_trie_lookup(root, addr) -> (prefix_len, value) | None
 *       Longest-prefix walk over corecast.core.maptrie node lists
 *       [child0, child1, value, has_value].
 *   cc_itr_batch(frames, start, l2, ctx, now, out, ctr) -> next index
 *       The ITR's data path for a batch (paper section 3.4, Algorithm 1's
 *       header step, and plain LISP encapsulation, RFC 9300 section 5); stops
 *       at the first packet that needs the Python core (see corecast/_fast.py).
 *       `ctx` is corecast._fast.ItrPath.ctx() (the state's one owner lays it
 *       out; nothing else builds it); `ctr` is indexed as _fast.CTR_NAMES (the
 *       enum below, same order).  Two optional ctx items are the section 6
 *       ablations: a linear lookup table (_fast.LinearTable.ctx(), None: the
 *       trie) and the per-client hash check (default on).
 *   cc_blast(sock, items, count, seconds) -> sent
 *       A benchmark sender: sendmmsg of prebuilt (data, (host, port)) items,
 *       cycling, until `count` are sent or `seconds` have passed.
 *   cc_ring_read(ring, frame_size, frame_nr, start, max) -> (frames, next, truncated)
 *       Frames the kernel handed to user space in an AF_PACKET TPACKET_V2 RX
 *       ring (packet(7), PACKET_RX_RING), from slot `start`, each given back.
 */
#include "speedups.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define CC_UDP_PORT 54341
#define CC_PROTO 253

static PyObject *
err(int code)
{
    return Py_BuildValue("(ii)", -1, code);
}

static int
hash_len(unsigned hid)
{
    return hid == 1 ? 20 : hid == 2 ? 32 : -1;
}

/* 1 if dst is in one of ranges ((net, mask) bytes pairs), 0 if not, -1 on error */
static int
in_ranges(const unsigned char *dst, Py_ssize_t ld, PyObject *ranges)
{
    Py_ssize_t nr = PyTuple_Size(ranges);
    if (nr < 0)
        return -1;
    for (Py_ssize_t r = 0; r < nr; r++) {
        PyObject *item = PyTuple_GetItem(ranges, r);
        if (item == NULL || !PyTuple_Check(item) || PyTuple_Size(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "ranges: tuple of (net, mask) bytes pairs");
            return -1;
        }
        PyObject *net = PyTuple_GetItem(item, 0), *mask = PyTuple_GetItem(item, 1);
        if (!PyBytes_Check(net) || !PyBytes_Check(mask)) {
            PyErr_SetString(PyExc_TypeError, "ranges: tuple of (net, mask) bytes pairs");
            return -1;
        }
        if (PyBytes_Size(net) != ld || PyBytes_Size(mask) != ld)
            continue;
        const unsigned char *nb = (const unsigned char *)PyBytes_AsString(net);
        const unsigned char *mb = (const unsigned char *)PyBytes_AsString(mask);
        Py_ssize_t i = 0;
        while (i < ld && (dst[i] & mb[i]) == nb[i])
            i++;
        if (i == ld)
            return 1;
    }
    return 0;
}

static PyObject *
cc_parse(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *ranges;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyTuple_Type, &ranges))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, ihl, ld;
    const unsigned char *dst;
    unsigned proto;
    PyObject *res = NULL;

    if (n < 20) { res = err(1); goto done; }
    unsigned v = p[0] >> 4;
    if (v == 4) {
        ihl = (Py_ssize_t)(p[0] & 0x0F) * 4;
        if (ihl < 20 || ihl > n) { res = err(1); goto done; }
        dst = p + 16; ld = 4; proto = p[9];
    } else if (v == 6 && n >= 40) {
        ihl = 40; dst = p + 24; ld = 16; proto = p[6];
    } else { res = err(1); goto done; }

    int in = in_ranges(dst, ld, ranges);
    if (in < 0) goto done;
    if (!in) {
        res = Py_BuildValue("(iy#)", 0, (const char *)dst, ld);
        goto done;
    }
    Py_ssize_t off;
    if (proto == CC_PROTO)
        off = ihl;
    else if (proto == 17 && n >= ihl + 8 && ((p[ihl + 2] << 8) | p[ihl + 3]) == CC_UDP_PORT)
        off = ihl + 8;
    else { res = err(2); goto done; }
    if (n < off + 12) { res = err(1); goto done; }
    unsigned vt = p[off], hid = p[off + 1], hlen = p[off + 2];
    if ((vt >> 4) != 1 || hash_len(hid) != (int)hlen) { res = err(1); goto done; }
    Py_ssize_t h0 = off + 12;
    if ((vt & 0x0F) == 1) {
        Py_ssize_t plen = (p[off + 8] << 8) | p[off + 9];
        if (h0 + (Py_ssize_t)hlen + plen != n) { res = err(1); goto done; }
        unsigned long seq = ((unsigned long)p[off + 4] << 24) | ((unsigned long)p[off + 5] << 16)
                            | ((unsigned long)p[off + 6] << 8) | p[off + 7];
        res = Py_BuildValue("(iy#iy#nk)", 1, (const char *)dst, ld, (int)hid,
                            (const char *)p + h0, (Py_ssize_t)hlen, h0 + (Py_ssize_t)hlen, seq);
    } else if ((vt & 0x0F) == 2) {
        unsigned afi = (p[off + 10] << 8) | p[off + 11];
        Py_ssize_t elen = afi == 1 ? 4 : afi == 2 ? 16 : 0;
        if (!elen || h0 + (Py_ssize_t)hlen + elen != n) { res = err(1); goto done; }
        res = Py_BuildValue("(iy#y#y#)", 2, (const char *)dst, ld, (const char *)p + h0,
                            (Py_ssize_t)hlen, (const char *)p + h0 + hlen, elen);
    } else
        res = err(1);
done:
    PyBuffer_Release(&view);
    return res;
}

static PyObject *
node_item(PyObject *node, Py_ssize_t i)
{
    if (!PyList_Check(node) || PyList_Size(node) < 4) {
        PyErr_SetString(PyExc_TypeError, "trie node must be a list [c0, c1, value, has]");
        return NULL;
    }
    return PyList_GetItem(node, i); /* borrowed */
}

static PyObject *
cc_trie_lookup(PyObject *self, PyObject *args)
{
    PyObject *root;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Oy*", &root, &view))
        return NULL;
    const unsigned char *a = (const unsigned char *)view.buf;
    Py_ssize_t nbits = view.len * 8, depth = 0, best_depth = -1;
    PyObject *node = root, *best = NULL, *has;

    if ((has = node_item(node, 3)) == NULL)
        goto fail;
    if (PyObject_IsTrue(has) == 1) {
        best = node;
        best_depth = 0;
    }
    for (Py_ssize_t i = 0; i < nbits; i++) {
        int bit = (a[i >> 3] >> (7 - (i & 7))) & 1;
        PyObject *child = node_item(node, bit);
        if (child == NULL)
            goto fail;
        if (child == Py_None)
            break;
        node = child;
        depth++;
        if ((has = node_item(node, 3)) == NULL)
            goto fail;
        if (PyObject_IsTrue(has) == 1) {
            best = node;
            best_depth = depth;
        }
    }
    PyBuffer_Release(&view);
    if (best == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(nO)", best_depth, PyList_GetItem(best, 2));
fail:
    PyBuffer_Release(&view);
    return NULL;
}

/* ------------------------------------------------------------------ ITR batch */

#define CC_MAX_RANGES 16

/* Py_XSETREF is not in the limited API: replace *dst by src (a new reference) */
#define CC_XSETREF(dst, src) do { PyObject *_cc_old = (dst); (dst) = (src); Py_XDECREF(_cc_old); } while (0)
#define CC_NCTR 11

struct cc_range {
    Py_ssize_t len;
    unsigned char net[16], mask[16];
};

static PyObject *s_hash, *s_packet, *s_served, *s_rlocs, *s_rloc_strs, *s_expires, *s_lisp_header,
    *s_seq;

static int
intern_names(void)
{
    if (s_hash)
        return 0;
    s_hash = PyUnicode_InternFromString("hash");
    s_packet = PyUnicode_InternFromString("packet");
    s_served = PyUnicode_InternFromString("served");
    s_rlocs = PyUnicode_InternFromString("rlocs");
    s_rloc_strs = PyUnicode_InternFromString("rloc_strs");
    s_expires = PyUnicode_InternFromString("expires");
    s_lisp_header = PyUnicode_InternFromString("lisp_header");
    s_seq = PyUnicode_InternFromString("seq");
    if (!s_hash || !s_packet || !s_served || !s_rlocs || !s_rloc_strs || !s_expires
        || !s_lisp_header || !s_seq) {
        s_hash = NULL;
        return -1;
    }
    return 0;
}

static int
load_ranges(PyObject *ranges, struct cc_range *r, int *nr)
{
    Py_ssize_t n = PyTuple_Size(ranges);
    if (n < 0)
        return -1;
    if (n > CC_MAX_RANGES) {
        PyErr_SetString(PyExc_ValueError, "cc_itr_batch: at most 16 reserved ranges");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(ranges, i);
        PyObject *net, *mask;
        if (!item || !PyTuple_Check(item) || PyTuple_Size(item) != 2
            || !PyBytes_Check(net = PyTuple_GetItem(item, 0))
            || !PyBytes_Check(mask = PyTuple_GetItem(item, 1))
            || PyBytes_Size(net) != PyBytes_Size(mask)
            || (PyBytes_Size(net) != 4 && PyBytes_Size(net) != 16)) {
            PyErr_SetString(PyExc_TypeError, "ranges: tuple of (net, mask) bytes pairs");
            return -1;
        }
        r[i].len = PyBytes_Size(net);
        memcpy(r[i].net, PyBytes_AsString(net), (size_t)r[i].len);
        memcpy(r[i].mask, PyBytes_AsString(mask), (size_t)r[i].len);
    }
    *nr = (int)n;
    return 0;
}

/* Longest-prefix walk; returns the value (borrowed) or NULL with no error set
 * when nothing matches; NULL with an error set on a malformed trie. */
static PyObject *
walk(PyObject *root, const unsigned char *a, Py_ssize_t nbytes)
{
    PyObject *node = root, *best = NULL;
    if (!PyList_Check(node) || PyList_Size(node) < 4) {
        PyErr_SetString(PyExc_TypeError, "trie node must be a list [c0, c1, value, has]");
        return NULL;
    }
    if (PyList_GetItem(node, 3) == Py_True)
        best = PyList_GetItem(node, 2);
    for (Py_ssize_t i = 0; i < nbytes * 8; i++) {
        PyObject *child = PyList_GetItem(node, (a[i >> 3] >> (7 - (i & 7))) & 1);
        if (child == Py_None)
            break;
        if (!PyList_Check(child) || PyList_Size(child) < 4) {
            PyErr_SetString(PyExc_TypeError, "trie node must be a list [c0, c1, value, has]");
            return NULL;
        }
        node = child;
        if (PyList_GetItem(node, 3) == Py_True)
            best = PyList_GetItem(node, 2);
    }
    return best;
}

/* The section 6 ablation's linear EID-to-RLOC search: one family's prefixes as
 * (net, mask) pairs packed back to back, longest first; the first that covers the
 * address wins. */
struct cc_linear {
    const unsigned char *packed;
    Py_ssize_t n, nb;
    PyObject *entries; /* list, borrowed from ctx (a tuple: alive for the call) */
};

static int
load_linear(PyObject *t, struct cc_linear *lin)
{
    if (!PyTuple_Check(t) || PyTuple_Size(t) != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "cc_itr_batch: linear is (packed4, entries4, packed6, entries6)");
        return -1;
    }
    for (int f = 0; f < 2; f++) {
        PyObject *pk = PyTuple_GetItem(t, 2 * f), *en = PyTuple_GetItem(t, 2 * f + 1);
        Py_ssize_t nb = f ? 16 : 4;
        if (!PyBytes_Check(pk) || !PyList_Check(en)) {
            PyErr_SetString(PyExc_TypeError,
                            "cc_itr_batch: linear is (packed4, entries4, packed6, entries6)");
            return -1;
        }
        if (PyBytes_Size(pk) != 2 * nb * PyList_Size(en)) {
            PyErr_SetString(PyExc_ValueError, "cc_itr_batch: linear table and entries disagree");
            return -1;
        }
        lin[f].packed = (const unsigned char *)PyBytes_AsString(pk);
        lin[f].n = PyList_Size(en);
        lin[f].nb = nb;
        lin[f].entries = en;
    }
    return 0;
}

/* the entry (borrowed) of the first prefix covering a, or NULL (no error) */
static PyObject *
scan(const struct cc_linear *lin, const unsigned char *a)
{
    Py_ssize_t nb = lin->nb;
    if (nb == 4) {
        uint32_t k;
        memcpy(&k, a, 4);
        for (Py_ssize_t i = 0; i < lin->n; i++) {
            uint32_t net, mask;
            memcpy(&net, lin->packed + 8 * i, 4);
            memcpy(&mask, lin->packed + 8 * i + 4, 4);
            if ((k & mask) == net)
                return PyList_GetItem(lin->entries, i);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < lin->n; i++) {
        const unsigned char *net = lin->packed + 2 * nb * i, *mask = net + nb;
        Py_ssize_t j = 0;
        while (j < nb && (a[j] & mask[j]) == net[j])
            j++;
        if (j == nb)
            return PyList_GetItem(lin->entries, i);
    }
    return NULL;
}

/* (rloc bytes, rloc str) of a usable single-locator, unexpired entry (borrowed
 * through rloc and rs, references held by the entry's tuples); 0 = not for the fast path,
 * -1 = error. */
static int
entry_rloc(PyObject *entry, double now, PyObject **rloc, PyObject **rs)
{
    PyObject *exp = PyObject_GetAttr(entry, s_expires);
    if (!exp)
        return -1;
    double e = PyFloat_AsDouble(exp);
    Py_DECREF(exp);
    if (e == -1.0 && PyErr_Occurred())
        return -1;
    if (e <= now)
        return 0;
    PyObject *rl = PyObject_GetAttr(entry, s_rlocs);
    if (!rl)
        return -1;
    PyObject *st = PyObject_GetAttr(entry, s_rloc_strs);
    if (!st) {
        Py_DECREF(rl);
        return -1;
    }
    int ok = PyTuple_Check(rl) && PyTuple_Size(rl) == 1 && PyTuple_Check(st)
             && PyTuple_Size(st) == 1 && PyBytes_Check(PyTuple_GetItem(rl, 0));
    if (ok) {
        *rloc = PyTuple_GetItem(rl, 0);
        *rs = PyTuple_GetItem(st, 0);
    }
    /* the entry keeps both tuples alive while we use them (it is in the trie) */
    Py_DECREF(rl);
    Py_DECREF(st);
    return ok;
}

/* append (hdr + body, (rs, port)) to out */
static int
emit(PyObject *out, PyObject *hdr, const unsigned char *body, Py_ssize_t blen,
     PyObject *rs, PyObject *port)
{
    Py_ssize_t hl = PyBytes_Size(hdr);
    PyObject *data = PyBytes_FromStringAndSize(NULL, hl + blen);
    if (!data)
        return -1;
    char *d = PyBytes_AsString(data);
    memcpy(d, PyBytes_AsString(hdr), (size_t)hl);
    memcpy(d + hl, body, (size_t)blen);
    PyObject *dest = PyTuple_Pack(2, rs, port);
    PyObject *item = dest ? PyTuple_Pack(2, data, dest) : NULL;
    Py_DECREF(data);
    Py_XDECREF(dest);
    if (!item)
        return -1;
    int rc = PyList_Append(out, item);
    Py_DECREF(item);
    return rc;
}

enum { C_IN, C_PLAIN, C_HDR, C_PAYLOAD, C_EXTRA, C_UNKNOWN_HASH, C_HITS, C_L2_SKIP, C_L2_IP,
       C_CC_PAYLOADS, C_BAD_HASH };

static PyObject *
cc_itr_batch(PyObject *self, PyObject *args)
{
    PyObject *frames, *ctx, *out, *ctr;
    Py_ssize_t start, l2;
    double now;
    if (!PyArg_ParseTuple(args, "O!nnO!dO!O!:cc_itr_batch", &PyList_Type, &frames, &start, &l2,
                          &PyTuple_Type, &ctx, &now, &PyList_Type, &out, &PyList_Type, &ctr))
        return NULL;
    if (intern_names() < 0)
        return NULL;
    PyObject *ranges, *root4, *root6, *buffers, *lh, *port, *own, *hdrs, *digest;
    PyObject *linear = Py_None;
    int check_hash = 1;
    Py_ssize_t extra, max_served;
    if (!PyArg_ParseTuple(ctx, "O!OOO!SOnnO!O!O|Op:cc_itr_batch ctx", &PyTuple_Type, &ranges,
                          &root4, &root6, &PyDict_Type, &buffers, &lh, &port, &extra,
                          &max_served, &PyTuple_Type, &own, &PyDict_Type, &hdrs, &digest,
                          &linear, &check_hash))
        return NULL;
    struct cc_linear lin[2];
    int use_linear = linear != Py_None;
    if (use_linear && load_linear(linear, lin) < 0)
        return NULL;
    if (PyList_Size(ctr) != CC_NCTR) {
        PyErr_SetString(PyExc_ValueError, "cc_itr_batch: ctr must be a list of 11 ints");
        return NULL;
    }
    if (l2 != 0 && l2 != 14) {
        PyErr_SetString(PyExc_ValueError, "cc_itr_batch: l2 must be 0 or 14");
        return NULL;
    }
    struct cc_range rg[CC_MAX_RANGES];
    int nr = 0;
    if (load_ranges(ranges, rg, &nr) < 0)
        return NULL;
    long long c[CC_NCTR] = {0};
    Py_ssize_t nf = PyList_Size(frames), i = start < 0 ? 0 : start;
    /* our own references to the frames from i on: digest() is Python code that
     * could change the caller's list while we read a frame's bytes */
    Py_ssize_t base = i < nf ? i : nf;
    PyObject *fr = PyList_GetSlice(frames, base, nf);
    if (!fr)
        return NULL;
    int has_hdrs = PyDict_Size(hdrs) > 0, failed = 0;
    /* Within one call nothing but this loop touches the ITR's state, and this
     * loop never replaces a payloadBuffer entry or a map-cache entry: remember
     * the last channel (its buffer, hash and servedRLOC) and the last map-cache
     * entry (its locator) instead of looking them up again for every packet. */
    unsigned char last_chan[16];
    Py_ssize_t last_chan_len = 0;
    PyObject *last_buf = NULL, *last_served = NULL;
    const unsigned char *last_hash = NULL;
    Py_ssize_t last_hlen = -1;
    PyObject *last_hash_obj = NULL;
    PyObject *last_entry = NULL, *last_rloc = NULL, *last_rs = NULL, *last_ehdr = NULL;

    for (; i < nf; i++) {
        PyObject *item = PyList_GetItem(fr, i - base), *data = item;
        if (PyTuple_Check(item) && PyTuple_Size(item) >= 1)
            data = PyTuple_GetItem(item, 0);
        if (!PyBytes_Check(data)) {
            PyErr_SetString(PyExc_TypeError, "cc_itr_batch: frames are bytes or (bytes, addr)");
            failed = 1;
            break;
        }
        const unsigned char *p = (const unsigned char *)PyBytes_AsString(data);
        Py_ssize_t n = PyBytes_Size(data);
        if (l2) {  /* Ethernet frame from AF_PACKET: IP to someone else only */
            unsigned et = n >= 14 ? (unsigned)(p[12] << 8 | p[13]) : 0;
            const unsigned char *dst;
            Py_ssize_t dl;
            if (et == 0x0800 && n >= 34) {
                dst = p + 30; dl = 4;
                if (dst[0] >= 224) { c[C_L2_SKIP]++; continue; }
            } else if (et == 0x86DD && n >= 54) {
                dst = p + 38; dl = 16;
                if (dst[0] == 0xFF || (dst[0] == 0xFE && (dst[1] & 0xC0) == 0x80)) {
                    c[C_L2_SKIP]++; continue;
                }
            } else
                continue; /* not IP: not counted, as the Python reader does */
            int self_addr = 0;
            for (Py_ssize_t k = 0; k < PyTuple_Size(own) && !self_addr; k++) {
                PyObject *o = PyTuple_GetItem(own, k);
                self_addr = PyBytes_Check(o) && PyBytes_Size(o) == dl
                            && memcmp(PyBytes_AsString(o), dst, (size_t)dl) == 0;
            }
            if (self_addr) { c[C_L2_SKIP]++; continue; }
            c[C_L2_IP]++;
            p += 14;
            n -= 14;
            /* Ethernet pads short frames to 60 bytes: the IP length says where the
             * packet ends (as l2_inner in corecast/_fast.py) */
            if (et == 0x0800) {
                Py_ssize_t tot = (Py_ssize_t)(p[2] << 8 | p[3]);
                if (tot >= 20 && tot < n)
                    n = tot;
            } else {
                Py_ssize_t tot = 40 + (Py_ssize_t)(p[4] << 8 | p[5]);
                if (tot < n)
                    n = tot;
            }
        }
        /* classify (same rules as cc_parse) */
        if (n < 20) break;
        Py_ssize_t ihl, ld;
        const unsigned char *dst;
        unsigned proto, v = p[0] >> 4;
        if (v == 4) {
            ihl = (Py_ssize_t)(p[0] & 0x0F) * 4;
            if (ihl < 20 || ihl > n) break;
            dst = p + 16; ld = 4; proto = p[9];
        } else if (v == 6 && n >= 40) {
            ihl = 40; dst = p + 24; ld = 16; proto = p[6];
        } else
            break;
        int in = 0;
        for (int r = 0; r < nr && !in; r++) {
            if (rg[r].len != ld)
                continue;
            Py_ssize_t k = 0;
            while (k < ld && (dst[k] & rg[r].mask[k]) == rg[r].net[k])
                k++;
            in = k == ld;
        }
        const unsigned char *key = dst, *h = NULL;
        Py_ssize_t hlen = 0;
        PyObject *buf = NULL;
        if (in) {
            Py_ssize_t off;
            if (proto == CC_PROTO)
                off = ihl;
            else if (proto == 17 && n >= ihl + 8 && ((p[ihl + 2] << 8) | p[ihl + 3]) == CC_UDP_PORT)
                off = ihl + 8;
            else
                break;
            if (n >= off + 12 && p[off] == 0x11) {
                /* payload PDU (Algorithm 1): hash checked, then the channel's single
                 * payloadBuffer entry overwritten with a fresh servedRLOC; nothing sent */
                Py_ssize_t ph = p[off + 2], plen = (p[off + 8] << 8) | p[off + 9];
                if (hash_len(p[off + 1]) != (int)ph || off + 12 + ph + plen != n)
                    break; /* malformed: the Python core counts it */
                PyObject *chan = PyBytes_FromStringAndSize((const char *)dst, ld);
                if (!chan) { failed = 1; break; }
                PyObject *pb = PyDict_GetItem(buffers, chan); /* borrowed */
                Py_DECREF(chan);
                if (pb == NULL)
                    break; /* a new channel: the Python core applies its bounds */
                Py_INCREF(pb); /* digest() runs Python code: hold the entry */
                PyObject *d = PyObject_CallFunction(digest, "iy#", (int)p[off + 1],
                                                    (const char *)p + off + 12 + ph, plen);
                if (!d) { Py_DECREF(pb); failed = 1; break; }
                int good = PyBytes_Check(d) && PyBytes_Size(d) == ph
                           && memcmp(PyBytes_AsString(d), p + off + 12, (size_t)ph) == 0;
                Py_DECREF(d);
                c[C_IN]++;
                c[C_CC_PAYLOADS]++;
                if (!good) { Py_DECREF(pb); c[C_BAD_HASH]++; continue; }
                unsigned long sq = ((unsigned long)p[off + 4] << 24) | ((unsigned long)p[off + 5] << 16)
                                   | ((unsigned long)p[off + 6] << 8) | p[off + 7];
                PyObject *nh = PyBytes_FromStringAndSize((const char *)p + off + 12, ph);
                PyObject *ns = PyLong_FromUnsignedLong(sq);
                PyObject *np;
                if (l2 == 0) { np = data; Py_INCREF(np); }
                else np = PyBytes_FromStringAndSize((const char *)p, n);
                PyObject *nd = PyDict_New();
                int bad = !nh || !ns || !np || !nd || PyObject_SetAttr(pb, s_hash, nh) < 0
                          || PyObject_SetAttr(pb, s_seq, ns) < 0
                          || PyObject_SetAttr(pb, s_packet, np) < 0
                          || PyObject_SetAttr(pb, s_served, nd) < 0;
                Py_XDECREF(nh); Py_XDECREF(ns); Py_XDECREF(np); Py_XDECREF(nd);
                Py_DECREF(pb);
                if (bad) { failed = 1; break; }
                /* the remembered map-cache entry may be stale after Python code ran */
                Py_CLEAR(last_entry); Py_CLEAR(last_rloc); Py_CLEAR(last_rs); Py_CLEAR(last_ehdr);
                /* the remembered channel state is stale now */
                Py_CLEAR(last_buf); Py_CLEAR(last_served); Py_CLEAR(last_hash_obj);
                last_chan_len = 0;
                continue;
            }
            if (n < off + 12 || (p[off] >> 4) != 1 || (p[off] & 0x0F) != 2)
                break; /* malformed: the Python core */
            hlen = p[off + 2];
            if (hash_len(p[off + 1]) != (int)hlen)
                break;
            unsigned afi = (p[off + 10] << 8) | p[off + 11];
            Py_ssize_t elen = afi == 1 ? 4 : afi == 2 ? 16 : 0;
            if (!elen || off + 12 + hlen + elen != n)
                break;
            h = p + off + 12;
            key = h + hlen;
            Py_ssize_t cl = ld;
            ld = elen;
            if (!(last_buf && last_chan_len == cl && memcmp(last_chan, dst, (size_t)cl) == 0)) {
                PyObject *chan = PyBytes_FromStringAndSize((const char *)dst, cl);
                if (!chan) { failed = 1; break; }
                buf = PyDict_GetItem(buffers, chan); /* borrowed */
                Py_DECREF(chan);
                if (buf == NULL)
                    break; /* unknown channel: the Python core decides and counts */
                PyObject *bh = PyObject_GetAttr(buf, s_hash);
                if (!bh) { failed = 1; break; }
                PyObject *sv = PyObject_GetAttr(buf, s_served);
                if (!sv) { Py_DECREF(bh); failed = 1; break; }
                if (!PyBytes_Check(bh)) {
                    Py_DECREF(bh); Py_DECREF(sv);
                    break;
                }
                Py_XDECREF(last_buf); Py_XDECREF(last_served); Py_XDECREF(last_hash_obj);
                Py_INCREF(buf);
                last_buf = buf;
                last_served = sv;
                last_hash_obj = bh;
                last_hash = (const unsigned char *)PyBytes_AsString(bh);
                last_hlen = PyBytes_Size(bh);
                memcpy(last_chan, dst, (size_t)cl);
                last_chan_len = cl;
            }
            buf = last_buf;
            /* Algorithm 1: a header whose hash is unknown is dropped; without the
             * per-client check (the section 6 ablation) only one of a channel with
             * no payload yet */
            int same = last_hlen > 0 && (!check_hash || (last_hlen == hlen
                                         && memcmp(last_hash, h, (size_t)hlen) == 0));
            if (!same) {
                c[C_IN]++;
                c[C_UNKNOWN_HASH]++;
                continue;
            }
        }
        PyObject *entry = use_linear ? scan(&lin[ld == 4 ? 0 : 1], key)
                                     : walk(ld == 4 ? root4 : root6, key, ld);
        if (!entry) {
            if (PyErr_Occurred())
                failed = 1;
            break; /* miss: the Python core queues and resolves */
        }
        PyObject *rloc = NULL, *rs = NULL;
        if (entry == last_entry) {
            rloc = last_rloc;
            rs = last_rs;
        } else {
            int ok = entry_rloc(entry, now, &rloc, &rs);
            if (ok < 0) { failed = 1; break; }
            if (!ok)
                break; /* expired, negative or several locators: the Python core */
            /* the entry's own LISP header (map-versioning, RFC 9302), if it has one */
            PyObject *eh = PyObject_GetAttr(entry, s_lisp_header);
            if (!eh)
                PyErr_Clear();
            else if (!PyBytes_Check(eh))
                Py_CLEAR(eh);
            /* our own references: Python code (digest) may run before the next use */
            CC_XSETREF(last_ehdr, eh);
            Py_INCREF(entry);
            CC_XSETREF(last_entry, entry);
            Py_INCREF(rloc);
            CC_XSETREF(last_rloc, rloc);
            Py_INCREF(rs);
            CC_XSETREF(last_rs, rs);
        }
        PyObject *hdr = last_ehdr ? last_ehdr : lh;
        if (has_hdrs) {
            PyObject *o = PyDict_GetItem(hdrs, rloc);
            if (o && PyBytes_Check(o))
                hdr = o;
        }
        if (!in) {
            if (emit(out, hdr, p, n, rs, port) < 0) { failed = 1; break; }
            c[C_IN]++; c[C_HITS]++; c[C_PLAIN]++;
            continue;
        }
        PyObject *served = last_served;
        if (!PyDict_Check(served))
            break; /* no servedRLOC (cannot happen with a valid hash): the Python core */
        Py_INCREF(served);
        PyObject *cnt = PyDict_GetItem(served, rloc);
        int send_payload = 1, extra_copy = 0;
        if (cnt) {
            long count = PyLong_AsLong(cnt);
            if (count == -1 && PyErr_Occurred()) { Py_DECREF(served); failed = 1; break; }
            if (!extra || count < extra) {
                send_payload = 0;
                if (extra) {
                    PyObject *nc = PyLong_FromLong(count + 1);
                    if (!nc || PyDict_SetItem(served, rloc, nc) < 0) {
                        Py_XDECREF(nc); Py_DECREF(served); failed = 1; break;
                    }
                    Py_DECREF(nc);
                }
            } else
                extra_copy = 1;
        } else if (PyDict_Size(served) >= max_served) {
            Py_DECREF(served);
            break; /* served_limit: the Python core drops and counts */
        }
        if (send_payload) {
            PyObject *pk = PyObject_GetAttr(buf, s_packet);
            PyObject *one = pk ? PyLong_FromLong(1) : NULL;
            int bad = !pk || !one || !PyBytes_Check(pk) || PyDict_SetItem(served, rloc, one) < 0
                      || emit(out, hdr, (const unsigned char *)PyBytes_AsString(pk),
                              PyBytes_Size(pk), rs, port) < 0;
            Py_XDECREF(pk);
            Py_XDECREF(one);
            if (bad) {
                Py_DECREF(served);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "cc_itr_batch: bad payloadBuffer entry");
                failed = 1;
                break;
            }
            c[extra_copy ? C_EXTRA : C_PAYLOAD]++;
        }
        Py_DECREF(served);
        if (emit(out, hdr, p, n, rs, port) < 0) { failed = 1; break; }
        c[C_IN]++; c[C_HITS]++; c[C_HDR]++;
    }
    /* with l2, the frame we stop at was counted as IP above; the Python core takes it */
    Py_XDECREF(last_buf);
    Py_XDECREF(last_served);
    Py_XDECREF(last_hash_obj);
    Py_XDECREF(last_entry);
    Py_XDECREF(last_rloc);
    Py_XDECREF(last_rs);
    Py_XDECREF(last_ehdr);
    Py_DECREF(fr);
    if (failed) /* as the twin: counters are left alone when it raises */
        return NULL;
    for (int k = 0; k < CC_NCTR; k++) {
        if (!c[k])
            continue;
        PyObject *old = PyList_GetItem(ctr, k);
        if (!old)
            return NULL;
        long long o = PyLong_AsLongLong(old);
        if (o == -1 && PyErr_Occurred())
            return NULL;
        PyObject *nv = PyLong_FromLongLong(o + c[k]);
        if (!nv || PyList_SetItem(ctr, k, nv) < 0)
            return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* ------------------------------------------------------------------ sender */

static PyObject *
cc_blast(PyObject *self, PyObject *args)
{
    PyObject *sock, *items;
    Py_ssize_t count;
    double seconds;
    if (!PyArg_ParseTuple(args, "OO!nd:cc_blast", &sock, &PyList_Type, &items, &count, &seconds))
        return NULL;
    int fd = PyObject_AsFileDescriptor(sock);
    if (fd < 0)
        return NULL;
    Py_ssize_t L = PyList_Size(items);
    if (L == 0 || count <= 0)
        return PyLong_FromLong(0);
    int family = AF_INET;
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
            family = ss.ss_family;
    }
    struct mmsghdr *msgs = PyMem_Calloc((size_t)L, sizeof *msgs);
    struct iovec *iov = PyMem_Calloc((size_t)L, sizeof *iov);
    struct sockaddr_storage *addrs = PyMem_Calloc((size_t)L, sizeof *addrs);
    PyObject *res = NULL;
    if (!msgs || !iov || !addrs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < L; k++) {
        PyObject *it = PyList_GetItem(items, k), *data, *addr;
        const char *host;
        int port;
        if (!PyTuple_Check(it) || PyTuple_Size(it) != 2 || !PyBytes_Check(data = PyTuple_GetItem(it, 0))
            || !PyArg_ParseTuple(addr = PyTuple_GetItem(it, 1), "si", &host, &port)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "cc_blast: items are (bytes, (host, port))");
            goto done;
        }
        (void)addr;
        iov[k].iov_base = PyBytes_AsString(data); /* the list keeps it alive */
        iov[k].iov_len = (size_t)PyBytes_Size(data);
        msgs[k].msg_hdr.msg_iov = &iov[k];
        msgs[k].msg_hdr.msg_iovlen = 1;
        msgs[k].msg_hdr.msg_name = &addrs[k];
        if (family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&addrs[k];
            a->sin6_family = AF_INET6;
            a->sin6_port = htons((uint16_t)port);
            if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
                PyErr_Format(PyExc_ValueError, "cc_blast: not an IPv6 address: %s", host);
                goto done;
            }
            msgs[k].msg_hdr.msg_namelen = sizeof *a;
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&addrs[k];
            a->sin_family = AF_INET;
            a->sin_port = htons((uint16_t)port);
            if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
                PyErr_Format(PyExc_ValueError, "cc_blast: not an IPv4 address: %s", host);
                goto done;
            }
            msgs[k].msg_hdr.msg_namelen = sizeof *a;
        }
    }
    Py_ssize_t sent = 0, pos = 0;
    int err = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    Py_BEGIN_ALLOW_THREADS
    while (sent < count) {
        Py_ssize_t want = L - pos;
        if (want > 1024) want = 1024;
        if (want > count - sent) want = count - sent;
        int rc = sendmmsg(fd, msgs + pos, (unsigned int)want, 0);
        if (rc < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
                rc = 0;
            else {
                err = errno;
                break;
            }
        }
        sent += rc;
        pos = (pos + rc) % L;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) >= seconds)
            break;
    }
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    res = PyLong_FromSsize_t(sent);
done:
    PyMem_Free(msgs);
    PyMem_Free(iov);
    PyMem_Free(addrs);
    return res;
}

/* ------------------------------------------------------------------ RX ring */

static PyObject *
cc_ring_read(PyObject *self, PyObject *args)
{
    PyObject *ring;
    Py_ssize_t fsize, fnr, start, maxn;
    if (!PyArg_ParseTuple(args, "Onnnn:cc_ring_read", &ring, &fsize, &fnr, &start, &maxn))
        return NULL;
    if (fsize < (Py_ssize_t)sizeof(struct tpacket2_hdr) || fnr < 1 || start < 0 || start >= fnr
        || maxn < 0 || fnr > PY_SSIZE_T_MAX / fsize) {
        PyErr_SetString(PyExc_ValueError, "cc_ring_read: bad frame size, count or start");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(ring, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *out = NULL;
    if (view.len < fsize * fnr) {
        PyErr_SetString(PyExc_ValueError, "cc_ring_read: ring smaller than frame_size * frame_nr");
        goto done;
    }
    out = PyList_New(0);
    if (!out)
        goto done;
    Py_ssize_t idx = start, n = 0, truncated = 0;
    unsigned char *base = (unsigned char *)view.buf;
    while (n < maxn) {
        unsigned char *slot = base + idx * fsize;
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)slot;
        if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
            break;
        Py_ssize_t off = h->tp_mac, len = h->tp_snaplen;
        if (off + len > fsize || h->tp_snaplen < h->tp_len) {
            truncated++; /* never hand on a cut frame */
        } else {
            PyObject *b = PyBytes_FromStringAndSize((const char *)slot + off, len);
            if (!b || PyList_Append(out, b) < 0) {
                Py_XDECREF(b);
                Py_CLEAR(out);
                goto done;
            }
            Py_DECREF(b);
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        idx = (idx + 1) % fnr;
        n++;
    }
    {
        PyObject *res = Py_BuildValue("(Onn)", out, idx, truncated);
        Py_DECREF(out);
        out = res;
    }
done:
    PyBuffer_Release(&view);
    return out;
}

PyMethodDef dk_corecast_methods[] = {
    {"cc_parse", cc_parse, METH_VARARGS,
     "cc_parse(pkt, ranges) -> tuple: classify an inner packet at the CoreCast ITR."},
    {"cc_trie_lookup", cc_trie_lookup, METH_VARARGS,
     "cc_trie_lookup(root, addr) -> (prefix_len, value) | None: longest-prefix walk."},
    {"cc_itr_batch", cc_itr_batch, METH_VARARGS,
     "cc_itr_batch(frames, start, l2, ctx, now, out, ctr) -> index of the first packet left "
     "to the Python core."},
    {"cc_ring_read", cc_ring_read, METH_VARARGS,
     "cc_ring_read(ring, frame_size, frame_nr, start, max) -> (frames, next, truncated)."},
    {"cc_blast", cc_blast, METH_VARARGS,
     "cc_blast(sock, items, count, seconds) -> sent: sendmmsg prebuilt items, cycling."},
    {NULL, NULL, 0, NULL},
};
