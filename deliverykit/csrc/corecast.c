/* C fast paths owned by the corecast package (twins in corecast/_fast.py).
 *
 *   cc_parse(pkt, ranges) -> tuple
 *       Classify one inner IP packet at the ITR and validate its CoreCast PDU
 *       (paper section 3.3; layout in docs/wire-corecast.md).  Same results as
 *       corecast._fast.py_cc_parse.
 *   cc_trie_lookup(root, addr) -> (prefix_len, value) | None
 *       Longest-prefix walk over corecast.core.maptrie node lists
 *       [child0, child1, value, has_value].
 */
#include "speedups.h"

#include <stdint.h>
#include <string.h>

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

PyMethodDef dk_corecast_methods[] = {
    {"cc_parse", cc_parse, METH_VARARGS,
     "cc_parse(pkt, ranges) -> tuple: classify an inner packet at the CoreCast ITR."},
    {"cc_trie_lookup", cc_trie_lookup, METH_VARARGS,
     "cc_trie_lookup(root, addr) -> (prefix_len, value) | None: longest-prefix walk."},
    {NULL, NULL, 0, NULL},
};
