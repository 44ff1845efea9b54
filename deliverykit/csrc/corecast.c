/* C fast paths owned by the corecast package (twins in corecast/_fast.py).
 *
 *   cc_parse(pkt, ranges) -> tuple
 *       Classify one inner IP packet at the ITR and validate its CoreCast PDU
 *       (paper section 3.3; layout in docs/wire-corecast.md).  Same results as
 *       corecast._fast.py_cc_parse.
 *   cc_trie_lookup(root, addr) -> (prefix_len, value) | None
 *       Longest-prefix walk over corecast.core.maptrie node lists
 *       [child0, child1, value, has_value].
 *   cc_itr_table() -> ItrTable
 *       The ITR's data-path state (twin: corecast._fast.PyItrTable): the
 *       map-cache's entries as compact rows under a binary trie, and the
 *       payloadBuffer, changed through set_entry/remove_entry and
 *       add_channel/set_payload.  ItrTable.batch(frames, start, l2, ctx, now,
 *       out, ctr) -> next index is the data path for a batch (paper section
 *       3.4, Algorithm 1's header step, and plain LISP encapsulation, RFC 9300
 *       section 5); it stops at the first packet that needs the Python core.
 *       `ctx` is corecast._fast.ItrPath.ctx() (the state's one owner lays it
 *       out; nothing else builds it), its last two items the section 6
 *       ablations (linear search, per-client hash check); `ctr` is indexed as
 *       _fast.CTR_NAMES (the enum below, same order).
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
#include <stdlib.h>
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

/* ------------------------------------------------------------------ ITR table */

/* The ITR's data-path state, owned here (issue 16 item 2): the map-cache's
 * entries as a compact table (locator, flags, expiry, own header, hit counter)
 * under a binary trie per address family, and the payloadBuffer (one entry per
 * channel: hash, sequence number, payload packet, servedRLOC).  Python code
 * changes it only through the methods below (corecast.core.mapcache.MapCache,
 * corecast.core.itr.Itr); `batch` reads it with no attribute lookup.  The pure
 * twin is corecast._fast.PyItrTable (same methods, same results). */

#define CC_MAX_RANGES 16
#define CC_NCTR 11
/* Py_XSETREF is not in the limited API: replace *dst by src (a new reference) */
#define CC_XSETREF(dst, src) do { PyObject *_cc_old = (dst); (dst) = (src); Py_XDECREF(_cc_old); } while (0)

enum { ROW_USED = 1, ROW_FAST = 2 }; /* FAST: exactly one usable locator */

typedef struct {
    int32_t child[2];
    int32_t row; /* -1: no prefix ends here */
} cc_node;

typedef struct {
    unsigned char net[16];
    uint8_t nb, plen, flags;
    double expires;
    PyObject *rlocs, *rloc_strs; /* tuples, as given */
    PyObject *rloc, *rloc_str;   /* the one locator (ROW_FAST), borrowed from the tuples */
    PyObject *header;            /* bytes, or NULL: the ITR's default */
    unsigned long long hits;
} cc_row;

typedef struct {
    PyObject *chan, *hash, *packet, *served; /* served: dict or NULL (no payload yet) */
    long long seq;
} cc_chan;

typedef struct {
    PyObject_HEAD
    cc_node *nodes;
    Py_ssize_t n_nodes, cap_nodes;
    int32_t free_node;
    cc_row *rows;
    Py_ssize_t n_rows, cap_rows, count;
    int32_t free_row;
    int32_t *order; /* linear search: used rows, longest prefix first */
    Py_ssize_t n_order;
    int order_dirty;
    PyObject *chan_index; /* dict: channel EID -> index into chans */
    cc_chan *chans;
    Py_ssize_t n_chans, cap_chans;
} ItrTable;

static PyTypeObject *ItrTable_Type;

static int
grow(void **arr, Py_ssize_t *cap, Py_ssize_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *p = PyMem_Realloc(*arr, (size_t)nc * size);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    *arr = p;
    *cap = nc;
    return 0;
}

static int32_t
new_node(ItrTable *t)
{
    int32_t n;
    if (t->free_node >= 0) {
        n = t->free_node;
        t->free_node = t->nodes[n].child[0];
    } else {
        if (grow((void **)&t->nodes, &t->cap_nodes, t->n_nodes + 1, sizeof(cc_node)) < 0)
            return -1;
        n = (int32_t)t->n_nodes++;
    }
    t->nodes[n].child[0] = t->nodes[n].child[1] = t->nodes[n].row = -1;
    return n;
}

static int
prefix_args(PyObject *prefix, int plen, const unsigned char **net, Py_ssize_t *nb)
{
    *nb = PyBytes_Size(prefix);
    if (*nb != 4 && *nb != 16) {
        PyErr_SetString(PyExc_ValueError, "ItrTable: an address is 4 or 16 bytes");
        return -1;
    }
    if (plen < 0 || plen > *nb * 8) {
        PyErr_SetString(PyExc_ValueError, "ItrTable: bad prefix length");
        return -1;
    }
    *net = (const unsigned char *)PyBytes_AsString(prefix);
    return 0;
}

#define BIT(a, i) (((a)[(i) >> 3] >> (7 - ((i) & 7))) & 1)

static void
clear_row(cc_row *r)
{
    Py_CLEAR(r->rlocs);
    Py_CLEAR(r->rloc_strs);
    Py_CLEAR(r->header);
    r->rloc = r->rloc_str = NULL;
    r->flags = 0;
}

static PyObject *
ItrTable_set_entry(ItrTable *t, PyObject *args)
{
    PyObject *prefix, *rlocs, *strs, *header;
    int plen;
    double expires;
    if (!PyArg_ParseTuple(args, "SiO!O!dO:set_entry", &prefix, &plen, &PyTuple_Type, &rlocs,
                          &PyTuple_Type, &strs, &expires, &header))
        return NULL;
    const unsigned char *net;
    Py_ssize_t nb;
    if (prefix_args(prefix, plen, &net, &nb) < 0)
        return NULL;
    Py_ssize_t nl = PyTuple_Size(rlocs);
    if (PyTuple_Size(strs) != nl || (header != Py_None && !PyBytes_Check(header))) {
        PyErr_SetString(PyExc_TypeError, "set_entry: rlocs and rloc_strs of one length; "
                                         "header bytes or None");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nl; k++)
        if (!PyBytes_Check(PyTuple_GetItem(rlocs, k)) || !PyUnicode_Check(PyTuple_GetItem(strs, k))) {
            PyErr_SetString(PyExc_TypeError, "set_entry: rlocs are bytes, rloc_strs str");
            return NULL;
        }
    int32_t n = nb == 4 ? 0 : 1;
    for (int i = 0; i < plen; i++) {
        int b = BIT(net, i);
        if (t->nodes[n].child[b] < 0) {
            int32_t c = new_node(t);
            if (c < 0)
                return NULL;
            t->nodes[n].child[b] = c;
        }
        n = t->nodes[n].child[b];
    }
    int32_t r = t->nodes[n].row;
    if (r < 0) {
        if (t->free_row >= 0) {
            r = t->free_row;
            t->free_row = (int32_t)t->rows[r].hits; /* the free list runs through hits */
        } else {
            if (grow((void **)&t->rows, &t->cap_rows, t->n_rows + 1, sizeof(cc_row)) < 0)
                return NULL;
            r = (int32_t)t->n_rows++;
        }
        memset(&t->rows[r], 0, sizeof(cc_row));
        t->nodes[n].row = r;
        t->count++;
        t->order_dirty = 1;
    }
    cc_row *row = &t->rows[r];
    clear_row(row);
    memset(row->net, 0, sizeof row->net);
    for (int i = 0; i < plen; i++)
        row->net[i >> 3] |= (unsigned char)(BIT(net, i) << (7 - (i & 7)));
    row->nb = (uint8_t)nb;
    row->plen = (uint8_t)plen;
    row->expires = expires;
    Py_INCREF(rlocs);
    row->rlocs = rlocs;
    Py_INCREF(strs);
    row->rloc_strs = strs;
    if (header != Py_None) {
        Py_INCREF(header);
        row->header = header;
    }
    row->flags = ROW_USED;
    if (nl == 1) {
        row->flags |= ROW_FAST;
        row->rloc = PyTuple_GetItem(rlocs, 0);
        row->rloc_str = PyTuple_GetItem(strs, 0);
    }
    Py_RETURN_NONE;
}

static PyObject *
ItrTable_remove_entry(ItrTable *t, PyObject *args)
{
    PyObject *prefix;
    int plen;
    if (!PyArg_ParseTuple(args, "Si:remove_entry", &prefix, &plen))
        return NULL;
    const unsigned char *net;
    Py_ssize_t nb;
    if (prefix_args(prefix, plen, &net, &nb) < 0)
        return NULL;
    int32_t path[129];
    int32_t n = nb == 4 ? 0 : 1;
    path[0] = n;
    for (int i = 0; i < plen; i++) {
        n = t->nodes[n].child[BIT(net, i)];
        if (n < 0)
            Py_RETURN_FALSE;
        path[i + 1] = n;
    }
    int32_t r = t->nodes[n].row;
    if (r < 0)
        Py_RETURN_FALSE;
    clear_row(&t->rows[r]);
    t->rows[r].hits = (unsigned long long)(uint32_t)t->free_row;
    t->free_row = r;
    t->nodes[n].row = -1;
    t->count--;
    t->order_dirty = 1;
    /* prune the branch that leads nowhere now */
    for (int i = plen; i > 0; i--) {
        cc_node *c = &t->nodes[path[i]];
        if (c->row >= 0 || c->child[0] >= 0 || c->child[1] >= 0)
            break;
        t->nodes[path[i - 1]].child[BIT(net, i - 1)] = -1;
        c->child[0] = t->free_node;
        t->free_node = path[i];
    }
    Py_RETURN_TRUE;
}

static PyObject *
row_tuple(const cc_row *r)
{
    return Py_BuildValue("(y#iOOdOK)", (const char *)r->net, (Py_ssize_t)r->nb, (int)r->plen,
                         r->rlocs, r->rloc_strs, r->expires, r->header ? r->header : Py_None,
                         r->hits);
}

/* entries() -> [(net, plen, rlocs, rloc_strs, expires, header, hits)], by prefix */
static PyObject *
ItrTable_entries(ItrTable *t, PyObject *noargs)
{
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (Py_ssize_t r = 0; r < t->n_rows; r++) {
        if (!(t->rows[r].flags & ROW_USED))
            continue;
        PyObject *it = row_tuple(&t->rows[r]);
        if (!it || PyList_Append(out, it) < 0) {
            Py_XDECREF(it);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(it);
    }
    if (PyList_Sort(out) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static int32_t
lpm(const ItrTable *t, const unsigned char *a, Py_ssize_t nb)
{
    int32_t n = nb == 4 ? 0 : 1, best = t->nodes[n].row;
    for (Py_ssize_t i = 0; i < nb * 8; i++) {
        n = t->nodes[n].child[BIT(a, i)];
        if (n < 0)
            break;
        if (t->nodes[n].row >= 0)
            best = t->nodes[n].row;
    }
    return best;
}

static cc_row *qrows; /* for the comparator; set only while sorting (the GIL is held) */

static int
cmp_rows(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    int pa = qrows[a].plen, pb = qrows[b].plen;
    return pa != pb ? pb - pa : a - b;
}

/* the section 6 ablation's linear EID-to-RLOC search: used rows scanned longest
 * prefix first; the first whose prefix covers the address wins */
static int32_t
scan(ItrTable *t, const unsigned char *a, Py_ssize_t nb)
{
    if (t->order_dirty) {
        Py_ssize_t cap = 0;
        int32_t *o = PyMem_Malloc((size_t)(t->count ? t->count : 1) * sizeof(int32_t));
        if (!o) {
            PyErr_NoMemory();
            return -2;
        }
        for (Py_ssize_t r = 0; r < t->n_rows; r++)
            if (t->rows[r].flags & ROW_USED)
                o[cap++] = (int32_t)r;
        qrows = t->rows;
        qsort(o, (size_t)cap, sizeof(int32_t), cmp_rows);
        PyMem_Free(t->order);
        t->order = o;
        t->n_order = cap;
        t->order_dirty = 0;
    }
    for (Py_ssize_t k = 0; k < t->n_order; k++) {
        const cc_row *r = &t->rows[t->order[k]];
        if (r->nb != nb)
            continue;
        int full = r->plen >> 3, rest = r->plen & 7;
        if (memcmp(r->net, a, (size_t)full) != 0)
            continue;
        if (rest && ((a[full] ^ r->net[full]) & (0xFF << (8 - rest)) & 0xFF))
            continue;
        return t->order[k];
    }
    return -1;
}

/* ---- channels (payloadBuffer) */

static Py_ssize_t
chan_find(ItrTable *t, const unsigned char *eid, Py_ssize_t len)
{
    PyObject *k = PyBytes_FromStringAndSize((const char *)eid, len);
    if (!k)
        return -2;
    PyObject *v = PyDict_GetItem(t->chan_index, k); /* borrowed */
    Py_DECREF(k);
    return v ? PyLong_AsSsize_t(v) : -1;
}

static PyObject *
ItrTable_add_channel(ItrTable *t, PyObject *args)
{
    PyObject *chan;
    if (!PyArg_ParseTuple(args, "S:add_channel", &chan))
        return NULL;
    if (PyDict_GetItem(t->chan_index, chan))
        Py_RETURN_FALSE;
    if (grow((void **)&t->chans, &t->cap_chans, t->n_chans + 1, sizeof(cc_chan)) < 0)
        return NULL;
    PyObject *ix = PyLong_FromSsize_t(t->n_chans);
    if (!ix || PyDict_SetItem(t->chan_index, chan, ix) < 0) {
        Py_XDECREF(ix);
        return NULL;
    }
    Py_DECREF(ix);
    cc_chan *c = &t->chans[t->n_chans++];
    Py_INCREF(chan);
    c->chan = chan;
    c->hash = PyBytes_FromStringAndSize(NULL, 0);
    c->packet = PyBytes_FromStringAndSize(NULL, 0);
    c->served = NULL;
    c->seq = -1;
    if (!c->hash || !c->packet)
        return NULL;
    Py_RETURN_TRUE;
}

/* a new payload: hash, sequence number, packet and a fresh, empty servedRLOC */
static int
chan_set(cc_chan *c, PyObject *hash, long long seq, PyObject *packet)
{
    PyObject *d = PyDict_New();
    if (!d)
        return -1;
    Py_INCREF(hash);
    CC_XSETREF(c->hash, hash);
    Py_INCREF(packet);
    CC_XSETREF(c->packet, packet);
    CC_XSETREF(c->served, d);
    c->seq = seq;
    return 0;
}

static PyObject *
ItrTable_set_payload(ItrTable *t, PyObject *args)
{
    PyObject *chan, *hash, *packet;
    long long seq;
    if (!PyArg_ParseTuple(args, "SSLS:set_payload", &chan, &hash, &seq, &packet))
        return NULL;
    Py_ssize_t ci = chan_find(t, (const unsigned char *)PyBytes_AsString(chan), PyBytes_Size(chan));
    if (ci == -2 || (ci == -1 && PyErr_Occurred()))
        return NULL;
    if (ci < 0) {
        PyErr_SetString(PyExc_KeyError, "set_payload: not a channel of this table");
        return NULL;
    }
    if (chan_set(&t->chans[ci], hash, seq, packet) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* channel(eid) -> (hash, seq, packet, served dict or None) | None; served is the
 * table's own dict (the Python core adds to it as the C loop does) */
static PyObject *
ItrTable_channel(ItrTable *t, PyObject *args)
{
    PyObject *chan;
    if (!PyArg_ParseTuple(args, "S:channel", &chan))
        return NULL;
    Py_ssize_t ci = chan_find(t, (const unsigned char *)PyBytes_AsString(chan), PyBytes_Size(chan));
    if (ci == -2 || (ci == -1 && PyErr_Occurred()))
        return NULL;
    if (ci < 0)
        Py_RETURN_NONE;
    cc_chan *c = &t->chans[ci];
    return Py_BuildValue("(OLOO)", c->hash, c->seq, c->packet, c->served ? c->served : Py_None);
}

static PyObject *
ItrTable_channels(ItrTable *t, PyObject *noargs)
{
    PyObject *out = PyList_New(t->n_chans);
    if (!out)
        return NULL;
    for (Py_ssize_t k = 0; k < t->n_chans; k++) {
        Py_INCREF(t->chans[k].chan);
        PyList_SetItem(out, k, t->chans[k].chan);
    }
    return out;
}

static Py_ssize_t
ItrTable_len(ItrTable *t)
{
    return t->count;
}

/* ---- the batch loop */

struct cc_range {
    Py_ssize_t len;
    unsigned char net[16], mask[16];
};

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

/* append (hdr + body, (rs, port)) to out: a list, or another object's append
 * (a new bytes and tuple), or a TxBatch (deliverykit core.c: references to hdr
 * and to owner, the bytes object body lies in, and the packed locator; nothing
 * copied) */
static int
emit(PyObject *out, int tx, PyObject *hdr, PyObject *owner, const unsigned char *body,
     Py_ssize_t blen, const cc_row *row, PyObject *port, int port_i)
{
    if (tx == 1)
        return dk_txbatch_push(out, hdr, owner, body, blen, row->rloc_str,
                               (const unsigned char *)PyBytes_AsString(row->rloc),
                               PyBytes_Size(row->rloc), port_i);
    Py_ssize_t hl = PyBytes_Size(hdr);
    PyObject *data = PyBytes_FromStringAndSize(NULL, hl + blen);
    if (!data)
        return -1;
    char *d = PyBytes_AsString(data);
    memcpy(d, PyBytes_AsString(hdr), (size_t)hl);
    memcpy(d + hl, body, (size_t)blen);
    PyObject *dest = PyTuple_Pack(2, row->rloc_str, port);
    PyObject *item = dest ? PyTuple_Pack(2, data, dest) : NULL;
    Py_DECREF(data);
    Py_XDECREF(dest);
    if (!item)
        return -1;
    int rc;
    if (tx == 0)
        rc = PyList_Append(out, item);
    else {
        PyObject *r = PyObject_CallMethod(out, "append", "(O)", item); /* one tuple argument */
        rc = r ? 0 : -1;
        Py_XDECREF(r);
    }
    Py_DECREF(item);
    return rc;
}

enum { C_IN, C_PLAIN, C_HDR, C_PAYLOAD, C_EXTRA, C_UNKNOWN_HASH, C_HITS, C_L2_SKIP, C_L2_IP,
       C_CC_PAYLOADS, C_BAD_HASH };

/* batch(frames, start, l2, ctx, now, out, ctr) -> index of the first packet left
 * to the Python core; ctx = corecast._fast.ItrPath.ctx():
 * (ranges, lisp_header, port, extra_every, max_served, own, headers_by_rloc,
 *  digest, linear, check_hash) */
static PyObject *
ItrTable_batch(ItrTable *t, PyObject *args)
{
    PyObject *frames, *ctx, *out, *ctr;
    Py_ssize_t start, l2;
    double now;
    if (!PyArg_ParseTuple(args, "O!nnO!dOO!:batch", &PyList_Type, &frames, &start, &l2,
                          &PyTuple_Type, &ctx, &now, &out, &PyList_Type, &ctr))
        return NULL;
    /* 0: a list; 1: a TxBatch (references, no objects); 2: anything else with an
     * append method (the twin's PyTxBatch) */
    int tx = dk_txbatch_check(out) ? 1 : PyList_Check(out) ? 0 : 2;
    if (tx == 2 && !PyObject_HasAttrString(out, "append")) {
        PyErr_SetString(PyExc_TypeError, "cc_itr_batch: out is a list, a TxBatch or has append");
        return NULL;
    }
    PyObject *ranges, *lh, *port, *own, *hdrs, *digest;
    int use_linear, check_hash;
    Py_ssize_t extra, max_served;
    if (!PyArg_ParseTuple(ctx, "O!SOnnO!O!Opp:batch ctx", &PyTuple_Type, &ranges, &lh, &port,
                          &extra, &max_served, &PyTuple_Type, &own, &PyDict_Type, &hdrs, &digest,
                          &use_linear, &check_hash))
        return NULL;
    if (PyList_Size(ctr) != CC_NCTR) {
        PyErr_SetString(PyExc_ValueError, "cc_itr_batch: ctr must be a list of 11 ints");
        return NULL;
    }
    if (l2 != 0 && l2 != 14) {
        PyErr_SetString(PyExc_ValueError, "cc_itr_batch: l2 must be 0 or 14");
        return NULL;
    }
    int port_i = (int)PyLong_AsLong(port);
    if (port_i == -1 && PyErr_Occurred())
        return NULL;
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
    Py_INCREF((PyObject *)t); /* digest() could drop the last other reference */
    int has_hdrs = PyDict_Size(hdrs) > 0, failed = 0;
    /* The last channel and map-cache row, remembered by index: only digest()
     * (Python code, in the payload step) can change the table during the loop, and
     * both are forgotten after it runs. */
    unsigned char last_chan[16];
    Py_ssize_t last_chan_len = 0, ci = -1;
    int32_t last_row = -1;

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
        const unsigned char *key = dst;
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
                Py_ssize_t pc = chan_find(t, dst, ld);
                if (pc == -2 || (pc == -1 && PyErr_Occurred())) { failed = 1; break; }
                if (pc < 0)
                    break; /* a new channel: the Python core applies its bounds */
                PyObject *d = PyObject_CallFunction(digest, "iy#", (int)p[off + 1],
                                                    (const char *)p + off + 12 + ph, plen);
                /* digest() is Python code: whatever was remembered may be stale */
                last_chan_len = 0;
                last_row = -1;
                if (!d) { failed = 1; break; }
                int good = PyBytes_Check(d) && PyBytes_Size(d) == ph
                           && memcmp(PyBytes_AsString(d), p + off + 12, (size_t)ph) == 0;
                Py_DECREF(d);
                c[C_IN]++;
                c[C_CC_PAYLOADS]++;
                if (!good) { c[C_BAD_HASH]++; continue; }
                pc = chan_find(t, dst, ld); /* again: digest() may have changed the table */
                if (pc == -2 || (pc == -1 && PyErr_Occurred())) { failed = 1; break; }
                if (pc < 0)
                    continue; /* the channel went away meanwhile: the payload has no entry */
                long long sq = ((long long)p[off + 4] << 24) | ((long long)p[off + 5] << 16)
                               | ((long long)p[off + 6] << 8) | p[off + 7];
                PyObject *nh = PyBytes_FromStringAndSize((const char *)p + off + 12, ph);
                PyObject *np;
                if (l2 == 0) { np = data; Py_INCREF(np); }
                else np = PyBytes_FromStringAndSize((const char *)p, n);
                int bad = !nh || !np || chan_set(&t->chans[pc], nh, sq, np) < 0;
                Py_XDECREF(nh);
                Py_XDECREF(np);
                if (bad) { failed = 1; break; }
                continue;
            }
            if (n < off + 12 || (p[off] >> 4) != 1 || (p[off] & 0x0F) != 2)
                break; /* malformed: the Python core */
            Py_ssize_t hlen = p[off + 2];
            if (hash_len(p[off + 1]) != (int)hlen)
                break;
            unsigned afi = (p[off + 10] << 8) | p[off + 11];
            Py_ssize_t elen = afi == 1 ? 4 : afi == 2 ? 16 : 0;
            if (!elen || off + 12 + hlen + elen != n)
                break;
            const unsigned char *h = p + off + 12;
            key = h + hlen;
            if (!(last_chan_len == ld && memcmp(last_chan, dst, (size_t)ld) == 0)) {
                ci = chan_find(t, dst, ld);
                if (ci == -2 || (ci == -1 && PyErr_Occurred())) { failed = 1; break; }
                if (ci < 0)
                    break; /* unknown channel: the Python core decides and counts */
                memcpy(last_chan, dst, (size_t)ld);
                last_chan_len = ld;
            }
            ld = elen;
            const cc_chan *ch = &t->chans[ci];
            Py_ssize_t bl = PyBytes_Size(ch->hash);
            /* Algorithm 1: a header whose hash is unknown is dropped; without the
             * per-client check (the section 6 ablation) only one of a channel with
             * no payload yet */
            int same = bl > 0 && (!check_hash || (bl == hlen
                                  && memcmp(PyBytes_AsString(ch->hash), h, (size_t)hlen) == 0));
            if (!same) {
                c[C_IN]++;
                c[C_UNKNOWN_HASH]++;
                continue;
            }
        }
        int32_t r = use_linear ? scan(t, key, ld) : lpm(t, key, ld);
        if (r == -2) { failed = 1; break; }
        if (r < 0)
            break; /* miss: the Python core queues and resolves */
        cc_row *row = &t->rows[r];
        if (r != last_row) {
            if (!(row->flags & ROW_FAST) || row->expires <= now)
                break; /* expired, negative or several locators: the Python core */
            last_row = r;
        }
        PyObject *hdr = row->header ? row->header : lh;
        if (has_hdrs) {
            PyObject *o = PyDict_GetItem(hdrs, row->rloc);
            if (o && PyBytes_Check(o))
                hdr = o;
        }
        if (!in) {
            if (emit(out, tx, hdr, data, p, n, row, port, port_i) < 0) { failed = 1; break; }
            row->hits++;
            c[C_IN]++; c[C_HITS]++; c[C_PLAIN]++;
            continue;
        }
        const cc_chan *ch = &t->chans[ci];
        PyObject *served = ch->served;
        if (served == NULL)
            break; /* no servedRLOC (cannot happen with a valid hash): the Python core */
        PyObject *cnt = PyDict_GetItem(served, row->rloc);
        int send_payload = 1, extra_copy = 0;
        if (cnt) {
            long count = PyLong_AsLong(cnt);
            if (count == -1 && PyErr_Occurred()) { failed = 1; break; }
            if (!extra || count < extra) {
                send_payload = 0;
                if (extra) {
                    PyObject *nc = PyLong_FromLong(count + 1);
                    if (!nc || PyDict_SetItem(served, row->rloc, nc) < 0) {
                        Py_XDECREF(nc); failed = 1; break;
                    }
                    Py_DECREF(nc);
                }
            } else
                extra_copy = 1;
        } else if (PyDict_Size(served) >= max_served)
            break; /* served_limit: the Python core drops and counts */
        if (send_payload) {
            PyObject *one = PyLong_FromLong(1);
            int bad = !one || PyDict_SetItem(served, row->rloc, one) < 0
                      || emit(out, tx, hdr, ch->packet,
                              (const unsigned char *)PyBytes_AsString(ch->packet),
                              PyBytes_Size(ch->packet), row, port, port_i) < 0;
            Py_XDECREF(one);
            if (bad) { failed = 1; break; }
            c[extra_copy ? C_EXTRA : C_PAYLOAD]++;
        }
        if (emit(out, tx, hdr, data, p, n, row, port, port_i) < 0) { failed = 1; break; }
        row->hits++;
        c[C_IN]++; c[C_HITS]++; c[C_HDR]++;
    }
    /* with l2, the frame we stop at was counted as IP above; the Python core takes it */
    Py_DECREF(fr);
    Py_DECREF((PyObject *)t);
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

static void
ItrTable_dealloc(ItrTable *t)
{
    for (Py_ssize_t r = 0; r < t->n_rows; r++)
        clear_row(&t->rows[r]);
    for (Py_ssize_t k = 0; k < t->n_chans; k++) {
        Py_XDECREF(t->chans[k].chan);
        Py_XDECREF(t->chans[k].hash);
        Py_XDECREF(t->chans[k].packet);
        Py_XDECREF(t->chans[k].served);
    }
    PyMem_Free(t->nodes);
    PyMem_Free(t->rows);
    PyMem_Free(t->order);
    PyMem_Free(t->chans);
    Py_XDECREF(t->chan_index);
    PyTypeObject *tp = Py_TYPE((PyObject *)t);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(t);
    Py_DECREF(tp);
}

static PyObject *
ItrTable_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (!PyArg_ParseTuple(args, ":ItrTable"))
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    ItrTable *t = (ItrTable *)alloc(type, 0);
    if (!t)
        return NULL;
    t->free_node = t->free_row = -1;
    t->chan_index = PyDict_New();
    if (!t->chan_index || new_node(t) != 0 || new_node(t) != 1) { /* the v4 and v6 roots */
        Py_DECREF((PyObject *)t);
        return NULL;
    }
    return (PyObject *)t;
}

static PyMethodDef ItrTable_methods[] = {
    {"set_entry", (PyCFunction)ItrTable_set_entry, METH_VARARGS,
     "set_entry(prefix, plen, rlocs, rloc_strs, expires, header): add or replace an entry."},
    {"remove_entry", (PyCFunction)ItrTable_remove_entry, METH_VARARGS,
     "remove_entry(prefix, plen) -> bool: remove an entry."},
    {"entries", (PyCFunction)ItrTable_entries, METH_NOARGS,
     "entries() -> [(net, plen, rlocs, rloc_strs, expires, header, hits)], sorted."},
    {"add_channel", (PyCFunction)ItrTable_add_channel, METH_VARARGS,
     "add_channel(eid) -> bool: a payloadBuffer entry with no payload yet."},
    {"set_payload", (PyCFunction)ItrTable_set_payload, METH_VARARGS,
     "set_payload(eid, hash, seq, packet): a channel's new payload, with a fresh servedRLOC."},
    {"channel", (PyCFunction)ItrTable_channel, METH_VARARGS,
     "channel(eid) -> (hash, seq, packet, served) | None."},
    {"channels", (PyCFunction)ItrTable_channels, METH_NOARGS,
     "channels() -> [eid]: the channels, in the order they were added."},
    {"batch", (PyCFunction)ItrTable_batch, METH_VARARGS,
     "batch(frames, start, l2, ctx, now, out, ctr) -> index of the first packet left to "
     "the Python core; out a list or a TxBatch."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot ItrTable_slots[] = {
    {Py_tp_new, ItrTable_new},
    {Py_tp_dealloc, ItrTable_dealloc},
    {Py_tp_methods, ItrTable_methods},
    {Py_sq_length, ItrTable_len},
    {Py_mp_length, ItrTable_len},
    {Py_tp_doc, "The CoreCast ITR's data-path state: map-cache rows and payloadBuffer."},
    {0, NULL},
};

static PyType_Spec ItrTable_spec = {
    "deliverykit._speedups.ItrTable", sizeof(ItrTable), 0, Py_TPFLAGS_DEFAULT, ItrTable_slots,
};

/* cc_itr_table() -> a new, empty ItrTable (the type is made on first use, so the
 * module's init, shared with the other packages, needs no change) */
static PyObject *
cc_itr_table(PyObject *self, PyObject *noargs)
{
    if (ItrTable_Type == NULL) {
        ItrTable_Type = (PyTypeObject *)PyType_FromSpec(&ItrTable_spec);
        if (ItrTable_Type == NULL)
            return NULL;
    }
    return PyObject_CallObject((PyObject *)ItrTable_Type, NULL);
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
    {"cc_itr_table", cc_itr_table, METH_NOARGS,
     "cc_itr_table() -> ItrTable: the ITR's data-path state, with its batch loop."},
    {"cc_ring_read", cc_ring_read, METH_VARARGS,
     "cc_ring_read(ring, frame_size, frame_nr, start, max) -> (frames, next, truncated)."},
    {"cc_blast", cc_blast, METH_VARARGS,
     "cc_blast(sock, items, count, seconds) -> sent: sendmmsg prebuilt items, cycling."},
    {NULL, NULL, 0, NULL},
};
