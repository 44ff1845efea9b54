/* C fast paths owned by the swift package (twins in swift/_fast.py).
 *
 * binmap_find: first chunk in [lo, hi) whose bit equals val, or -1, in a
 * binmap stored as swift.core.binmap does (Grishchenko & Pouwelse, "Binmaps"):
 * halves h[2c], h[2c+1] of cell c (uint32 each: a 16-bit bitmap, or a child
 * cell index when deep[2c+side] != 0); a cell at layer L spans 32 << L chunks.
 */
#include "speedups.h"
#include <stdint.h>

static PyObject *
binmap_find(PyObject *self, PyObject *args)
{
    Py_buffer hb, db;
    long long root, root_layer, lo, hi;
    int val;
    if (!PyArg_ParseTuple(args, "y*y*LLLLp", &hb, &db, &root, &root_layer, &lo, &hi, &val))
        return NULL;
    PyObject *res = NULL;
    const uint32_t *h = (const uint32_t *)hb.buf;
    const unsigned char *deep = (const unsigned char *)db.buf;
    Py_ssize_t nh = hb.len / 4;
    if (hb.len % 4 || db.len < nh || root_layer < 0 || root_layer > 58 || root < 0
            || 2 * root + 1 >= nh) {
        PyErr_SetString(PyExc_ValueError, "binmap_find: bad binmap buffers");
        goto done;
    }
    /* explicit DFS stack of (cell, layer, start, next side) */
    long long sc[128], sl[128], ss[128];
    int sside[128];
    int top = 0;
    long long found = -1;
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
        if (k >= nh) { PyErr_SetString(PyExc_ValueError, "binmap_find: index"); goto done; }
        if (deep[k]) {
            if (top + 1 >= 128 || lay == 0 || (Py_ssize_t)h[k] * 2 + 1 >= nh) {
                PyErr_SetString(PyExc_ValueError, "binmap_find: corrupt tree");
                goto done;
            }
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
            found = pos > a ? pos : a;
            break;
        }
    }
    res = PyLong_FromLongLong(found);
done:
    PyBuffer_Release(&hb);
    PyBuffer_Release(&db);
    return res;
}

PyMethodDef dk_swift_methods[] = {
    {"binmap_find", binmap_find, METH_VARARGS,
     "binmap_find(halves, deep, root, root_layer, lo, hi, val) -> first chunk or -1"},
    {NULL, NULL, 0, NULL},
};
