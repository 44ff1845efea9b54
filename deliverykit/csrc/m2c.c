/* C fast paths owned by the m2c package (twins in m2c/_fast.py).
 *
 *   m2c_ldpc_matrix(k, m, n1, seed) -> (row_ptr, cols)
 *       RFC 5170 Section 6.2 left_matrix_init() with the Section 5.7 PRNG,
 *       as CSR (native uint32 arrays as bytes), rows in insertion order.
 *   m2c_ldpc_graph(k, n, n1, seed) -> (eq_ptr, eq_vars, var_ptr, var_eqs, degrees)
 *       The Tanner graph of H = [left | staircase] for the decoders (CSR both
 *       ways, uint32), from the same left matrix, in one call.
 *   m2c_ldpc_alloc(size) -> bytearray
 *       size bytes left uninitialized, for the decoder's values and partials.
 *   m2c_ldpc_encode(src, symbol_size, row_ptr, cols) -> bytes
 *       RFC 5170 Section 6.3 staircase encoding of the k source symbols
 *       concatenated in src: p_0 = sum(row 0), p_i = sum(row i) ^ p_{i-1}.
 *   m2c_ldpc_add(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial,
 *                values, known, esi, symbol) -> int
 *       One step of the iterative (peeling) decoder, RFC 5170 Appendix A, on
 *       state held in caller-owned buffers; returns how many source symbols
 *       became known.  values holds all n symbols (n*E bytes) or only the k
 *       sources (k*E: repair values are XORed from where they are, never
 *       copied; the decoder's choice).  An equation's partial is written
 *       (not XORed) when its first variable becomes known (unknown == its
 *       degree until then), so partial need not be zeroed.
 *   m2c_ldpc_add_many(..., known, esis, symbols) -> int
 *       The same for a batch: esis is a uint32 array, symbols their
 *       concatenation (one call per received batch instead of per symbol).
 *   m2c_ldpc_peeler(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial,
 *                   values, known, got[, error]) -> peeler
 *       m2c_ldpc_add with the state checked and held once: add(esi, symbol),
 *       take(esi, symbol) (LDPCDecoder.add), take_many(items) and
 *       take_at(esis, offsets, buf) (a batch in one call), source_block(),
 *       source(i); a bytes source symbol is held, not copied (see below).
 *   m2c_ldpc_eliminate(k, E, eq_ptr, eq_vars, unknown, partial, known, values)
 *       -> (deficit, determined, esis, symbols)
 *       The maximum-likelihood step: Gaussian elimination with inactivation
 *       over the equations the iterative decoder left unsolved (see
 *       m2c/fec/ldpc.py and the twin in m2c/_fast.py).
 */
#include "speedups.h"
#include <structmember.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- Park-Miller "minimal standard" PRNG, RFC 5170 Section 5.7 ---------- */

typedef struct { uint32_t state; } pmms_t;

static uint32_t
pmms_raw(pmms_t *p)
{
    /* state * 16807 mod (2^31 - 1) without a division: 2^31 = 1 (mod 2^31 - 1), so the
     * high and low 31-bit halves add up; one subtraction brings it below 2^31 - 1 */
    uint64_t x = (uint64_t)p->state * 16807u;
    x = (x & 0x7FFFFFFFu) + (x >> 31);
    if (x >= 0x7FFFFFFFu)
        x -= 0x7FFFFFFFu;
    p->state = (uint32_t)x;
    return p->state;
}

static uint32_t
pmms_rand(pmms_t *p, uint32_t maxv)
{
    uint32_t raw = pmms_raw(p);
    return (uint32_t)((double)maxv * (double)raw / (double)0x7FFFFFFF);
}

static int
in_list(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* RFC 5170 Section 6.2 left_matrix_init(k, n, N1) after seeding the PRNG,
 * into CSR form (rows in insertion order): *row_ptr (m+1) and *cols (nnz),
 * both malloc'd.  The columns are drawn first (N1 rows each, in column
 * order), then a counting sort by row keeps each row's insertion order (its
 * columns ascending), and the extra 1s of rows of degree 0 or 1 come last,
 * as left_matrix_init appends them.  0, or -1 with an exception set. */
static int
ldpc_left(long long k, long long m, long long n1, long long seed, uint32_t **row_ptr,
          uint32_t **cols)
{
    if (!(k >= 1 && n1 >= 1 && n1 <= m && seed >= 1 && seed <= 0x7FFFFFFE
          && k <= (1 << 20) && m <= (1 << 20))) {
        PyErr_SetString(PyExc_ValueError,
                        "m2c_ldpc_matrix: need k >= 1, 1 <= N1 <= n-k, 1 <= seed <= 2^31-2");
        return -1;
    }
    if (n1 > 16) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_matrix: N1 <= 16");
        return -1;
    }
    pmms_t prng = {(uint32_t)seed};
    uint64_t total = (uint64_t)n1 * (uint64_t)k;
    uint32_t *u = malloc(total * sizeof *u);         /* u[], then each column's rows */
    uint32_t *deg = calloc((size_t)m + 1, sizeof *deg); /* ones per row, then offsets */
    uint32_t *extra = malloc((size_t)m * 2 * sizeof *extra);
    uint8_t *nextra = calloc((size_t)m, 1);
    uint32_t *first = malloc((size_t)m * sizeof *first); /* a row's first column */
    uint32_t *rp = malloc(((size_t)m + 1) * sizeof *rp), *cs = NULL;
    uint32_t *colrows = malloc(total * sizeof *colrows);
    uint32_t col[16];
    int ret = -1;
    if (!u || !deg || !extra || !nextra || !first || !rp || !colrows) {
        PyErr_NoMemory();
        goto out;
    }
    for (uint64_t h = 0, r = 0; h < total; h++) { /* u[h] = h % m */
        u[h] = (uint32_t)r;
        if (++r == (uint64_t)m)
            r = 0;
    }
    uint64_t t = 0;
    for (uint32_t j = 0; j < (uint32_t)k; j++) {
        uint32_t nc = 0;
        for (long long h = 0; h < n1; h++) {
            uint64_t i = t;
            uint32_t r;
            while (i < total && in_list(col, nc, u[i]))
                i++;
            if (i < total) {
                do {
                    i = t + pmms_rand(&prng, (uint32_t)(total - t));
                } while (in_list(col, nc, u[i]));
                r = u[i];
                u[i] = u[t];
                t++;
            } else {
                do {
                    r = pmms_rand(&prng, (uint32_t)m);
                } while (in_list(col, nc, r));
            }
            col[nc++] = r;
            colrows[(uint64_t)j * (uint64_t)n1 + (uint64_t)h] = r;
            if (deg[r]++ == 0)
                first[r] = j;
        }
    }
    /* rows with fewer than two 1s get extra ones (code rates below 2/(2+N1)) */
    for (uint32_t i = 0; i < (uint32_t)m; i++) {
        uint32_t have = deg[i];
        if (have == 0) {
            first[i] = pmms_rand(&prng, (uint32_t)k);
            extra[2 * i + nextra[i]++] = first[i];
            have = 1;
        }
        if (have == 1 && k > 1) {
            uint32_t j;
            do {
                j = pmms_rand(&prng, (uint32_t)k);
            } while (j == first[i]);
            extra[2 * i + nextra[i]++] = j;
        }
    }
    uint64_t nnz = total;
    rp[0] = 0;
    for (uint32_t i = 0; i < (uint32_t)m; i++) {
        nnz += nextra[i];
        rp[i + 1] = rp[i] + deg[i] + nextra[i];
        deg[i] = rp[i]; /* fill position of row i */
    }
    cs = malloc((size_t)(nnz ? nnz : 1) * sizeof *cs);
    if (!cs) {
        PyErr_NoMemory();
        goto out;
    }
    for (uint64_t x = 0; x < total; x++)
        cs[deg[colrows[x]]++] = (uint32_t)(x / (uint64_t)n1);
    for (uint32_t i = 0; i < (uint32_t)m; i++)
        for (uint32_t e = 0; e < nextra[i]; e++)
            cs[deg[i]++] = extra[2 * i + e];
    *row_ptr = rp;
    *cols = cs;
    rp = cs = NULL;
    ret = 0;
out:
    free(u); free(deg); free(extra); free(nextra); free(first); free(rp); free(cs);
    free(colrows);
    return ret;
}

static PyObject *
m2c_ldpc_matrix(PyObject *self, PyObject *args)
{
    long long k, m, n1, seed;
    if (!PyArg_ParseTuple(args, "LLLL:m2c_ldpc_matrix", &k, &m, &n1, &seed))
        return NULL;
    uint32_t *rp, *cs;
    if (ldpc_left(k, m, n1, seed, &rp, &cs) < 0)
        return NULL;
    PyObject *result = Py_BuildValue("(y#y#)", (const char *)rp, (Py_ssize_t)((m + 1) * 4),
                                     (const char *)cs, (Py_ssize_t)rp[m] * 4);
    free(rp);
    free(cs);
    return result;
}

/* The Tanner graph of H = [left | staircase] for the iterative decoder, as
 * m2c/fec/ldpc.py used to build it in Python from staircase_matrix().rows():
 * equation i holds its left row, then repair k+i, then k+i-1 (i > 0);
 * (eq_ptr, eq_vars, var_ptr, var_eqs, degrees), uint32 each, var_eqs of each
 * variable in increasing equation order. */
static PyObject *
m2c_ldpc_graph(PyObject *self, PyObject *args)
{
    long long k, n, n1, seed;
    if (!PyArg_ParseTuple(args, "LLLL:m2c_ldpc_graph", &k, &n, &n1, &seed))
        return NULL;
    if (!(k >= 1 && n > k && n - k <= (1 << 20))) {
        PyErr_SetString(PyExc_ValueError,
                        "m2c_ldpc_graph: need k >= 1, 1 <= N1 <= n-k, 1 <= seed <= 2^31-2");
        return NULL;
    }
    long long m = n - k;
    uint32_t *rp, *cs;
    if (ldpc_left(k, m, n1, seed, &rp, &cs) < 0)
        return NULL;
    uint64_t nnz = (uint64_t)rp[m] + 2 * (uint64_t)m - 1;
    PyObject *eqp = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(m + 1) * 4);
    PyObject *eqv = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nnz * 4);
    PyObject *vp = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n + 1) * 4);
    PyObject *ve = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nnz * 4);
    PyObject *dg = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)m * 4);
    PyObject *result = NULL;
    if (eqp && eqv && vp && ve && dg) {
        uint32_t *EP = (uint32_t *)PyBytes_AsString(eqp), *EV = (uint32_t *)PyBytes_AsString(eqv);
        uint32_t *VP = (uint32_t *)PyBytes_AsString(vp), *VE = (uint32_t *)PyBytes_AsString(ve);
        uint32_t *DG = (uint32_t *)PyBytes_AsString(dg);
        uint32_t pos = 0;
        memset(VP, 0, (size_t)(n + 1) * 4);
        EP[0] = 0;
        for (uint32_t i = 0; i < (uint32_t)m; i++) {
            for (uint32_t x = rp[i]; x < rp[i + 1]; x++) {
                EV[pos++] = cs[x];
                VP[cs[x] + 1]++;
            }
            EV[pos++] = (uint32_t)k + i;
            VP[k + i + 1]++;
            if (i) {
                EV[pos++] = (uint32_t)k + i - 1;
                VP[k + i]++;
            }
            EP[i + 1] = pos;
            DG[i] = pos - EP[i];
        }
        for (long long v = 0; v < n; v++)
            VP[v + 1] += VP[v];
        /* fill, in equation order, with VP[v] as v's cursor; then shift back */
        for (uint32_t e = 0; e < (uint32_t)m; e++)
            for (uint32_t x = EP[e]; x < EP[e + 1]; x++)
                VE[VP[EV[x]]++] = e;
        for (long long v = n; v > 0; v--)
            VP[v] = VP[v - 1];
        VP[0] = 0;
        result = PyTuple_Pack(5, eqp, eqv, vp, ve, dg);
    }
    Py_XDECREF(eqp); Py_XDECREF(eqv); Py_XDECREF(vp); Py_XDECREF(ve); Py_XDECREF(dg);
    free(rp);
    free(cs);
    return result;
}

static inline void
xor_block(uint8_t *restrict d, const uint8_t *restrict s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t a, b;
        memcpy(&a, d + i, 8);
        memcpy(&b, s + i, 8);
        a ^= b;
        memcpy(d + i, &a, 8);
    }
    for (; i < n; i++)
        d[i] ^= s[i];
}

static PyObject *
m2c_ldpc_encode(PyObject *self, PyObject *args)
{
    PyObject *src_o, *rp_o, *cs_o;
    Py_ssize_t E;
    if (!PyArg_ParseTuple(args, "OnOO:m2c_ldpc_encode", &src_o, &E, &rp_o, &cs_o))
        return NULL;
    Py_buffer src, rp, cs;
    if (PyObject_GetBuffer(src_o, &src, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(rp_o, &rp, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    if (PyObject_GetBuffer(cs_o, &cs, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&rp);
        return NULL;
    }
    PyObject *out = NULL;
    if (E <= 0 || src.len % E) {
        PyErr_SetString(PyExc_ValueError,
                        "m2c_ldpc_encode: len(src) must be a multiple of symbol_size > 0");
        goto done;
    }
    Py_ssize_t k = src.len / E;
    if (rp.len < 4 || rp.len % 4 || cs.len % 4) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_encode: malformed matrix for this k");
        goto done;
    }
    Py_ssize_t m = rp.len / 4 - 1, nnz = cs.len / 4;
    /* RFC 5170 4.2.4.1: E is a 16-bit field; and m * E below must not overflow */
    if (E > 0xFFFF || (m > 0 && E > PY_SSIZE_T_MAX / m)) {
        PyErr_SetString(PyExc_ValueError,
                        "m2c_ldpc_encode: m * symbol_size does not fit in memory");
        goto done;
    }
    uint32_t *rpv = malloc((size_t)(m + 1) * 4), *csv = malloc((size_t)(nnz ? nnz : 1) * 4);
    if (!rpv || !csv) {
        free(rpv);
        free(csv);
        PyErr_NoMemory();
        goto done;
    }
    memcpy(rpv, rp.buf, (size_t)rp.len);
    if (nnz)
        memcpy(csv, cs.buf, (size_t)cs.len);
    int bad = rpv[m] != (uint32_t)nnz;
    for (Py_ssize_t i = 0; i < m && !bad; i++)
        bad = rpv[i + 1] < rpv[i];
    for (Py_ssize_t i = 0; i < nnz && !bad; i++)
        bad = csv[i] >= (uint32_t)k;
    if (bad) {
        free(rpv);
        free(csv);
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_encode: malformed matrix for this k");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, m * E);
    if (out) {
        uint8_t *o = (uint8_t *)PyBytes_AsString(out);
        const uint8_t *s = src.buf;
        if (m > 0)
            memset(o, 0, (size_t)E);
        for (Py_ssize_t i = 0; i < m; i++) {
            uint8_t *p = o + i * E;
            if (i > 0)
                memcpy(p, p - E, (size_t)E);
            for (uint32_t x = rpv[i]; x < rpv[i + 1]; x++)
                xor_block(p, s + (Py_ssize_t)csv[x] * E, E);
        }
    }
    free(rpv);
    free(csv);
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&rp);
    PyBuffer_Release(&cs);
    return out;
}

typedef struct {
    Py_buffer b;
    int held;
} buf_t;

static int
get_u32(PyObject *o, buf_t *x, int writable, Py_ssize_t min_items)
{
    if (PyObject_GetBuffer(o, &x->b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    x->held = 1;
    if (x->b.len % 4 || x->b.len / 4 < min_items) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_add: bad uint32 buffer");
        return -1;
    }
    return 0;
}

/* the GIL is held throughout: one reusable stack for every call; from[] says
 * where each stacked variable's value is: FROM_V (values), FROM_SYMBOL (the
 * symbol being added) or an equation whose partial sum it is */
static uint32_t *peel_stack = NULL;
static int32_t *peel_from = NULL;
static size_t peel_cap = 0;
enum { FROM_V = -1, FROM_SYMBOL = -2 };

typedef struct {
    Py_ssize_t k, E, m, n, nev, nve;
    const uint32_t *EP, *EV, *VP, *VE;
    uint32_t *U;
    uint8_t *P, *V, *K;
    int all_values; /* values holds all n symbols (else only the k sources) */
} peel_t;

/* One symbol into the iterative decoder: returns the number of source
 * symbols that became known, -1 on a malformed structure (ValueError set),
 * -2 on memory exhaustion (MemoryError set).  With values of k*E bytes a
 * repair symbol is never copied: its value is XORed from where it is (the
 * symbol added, or the partial sum of the equation that solved it), and
 * that equation's partial is cleared last, so partial and unknown end as
 * with n*E values.  hold: the source symbol is not copied into values (the
 * caller keeps a reference to its bytes).  at (k entries, k*E values only):
 * "pointing", as OpenFEC does: a source solved by equation e is not copied
 * into values either, at[source] = e's partial, and solved equations'
 * partials are not cleared (nothing reads a partial once its unknown count
 * is 0: neither this step nor the elimination). */
static long
peel_one(peel_t *d, Py_ssize_t esi, const uint8_t *symbol, int hold, const uint8_t **at)
{
    Py_ssize_t k = d->k, E = d->E, m = d->m, n = d->n;
    const uint32_t *EP = d->EP, *EV = d->EV, *VP = d->VP, *VE = d->VE;
    uint32_t *U = d->U;
    uint8_t *P = d->P, *V = d->V, *K = d->K;
    if (K[esi])
        return 0;
    if (peel_cap < (size_t)n + 1) {
        uint32_t *ns = realloc(peel_stack, ((size_t)n + 1) * sizeof *ns);
        if (ns)
            peel_stack = ns;
        int32_t *nf = ns ? realloc(peel_from, ((size_t)n + 1) * sizeof *nf) : NULL;
        if (!nf) {
            PyErr_NoMemory();
            return -2;
        }
        peel_from = nf;
        peel_cap = (size_t)n + 1;
    }
    uint32_t *stack = peel_stack;
    int32_t *from = peel_from;
    long newly = 0;
    Py_ssize_t top = 0;
    K[esi] = 1;
    if (esi < k)
        newly++;
    if (!hold && (esi < k || d->all_values)) {
        memcpy(V + esi * E, symbol, (size_t)E);
        from[top] = FROM_V;
    } else { /* a repair symbol, or a source whose caller's bytes the peeler holds */
        from[top] = FROM_SYMBOL;
    }
    stack[top++] = (uint32_t)esi;
    while (top > 0) {
        top--;
        uint32_t v = stack[top];
        int32_t src = from[top];
        const uint8_t *val = src == FROM_V ? V + (Py_ssize_t)v * E
                             : src == FROM_SYMBOL ? symbol : P + (Py_ssize_t)src * E;
        if (VP[v] > VP[v + 1] || VP[v + 1] > (uint32_t)d->nve)
            goto bad;
        for (uint32_t x = VP[v]; x < VP[v + 1]; x++) {
            uint32_t e = VE[x];
            if (e >= (uint32_t)m || EP[e] > EP[e + 1] || EP[e + 1] > (uint32_t)d->nev)
                goto bad;
            if (U[e] == 0 || (int32_t)e == src)
                continue;
            if (U[e] == EP[e + 1] - EP[e]) /* first known variable: partial undefined yet */
                memcpy(P + (Py_ssize_t)e * E, val, (size_t)E);
            else
                xor_block(P + (Py_ssize_t)e * E, val, E);
            U[e]--;
            if (U[e] == 1) {
                for (uint32_t y = EP[e]; y < EP[e + 1]; y++) {
                    uint32_t u = EV[y];
                    if (u >= (uint32_t)n)
                        goto bad;
                    if (!K[u]) {
                        K[u] = 1;
                        if ((Py_ssize_t)u < k)
                            newly++;
                        if (at && (Py_ssize_t)u < k) {
                            /* pointing: the source's value stays in e's partial, which
                             * nothing writes once e is solved */
                            at[u] = P + (Py_ssize_t)e * E;
                            from[top] = (int32_t)e;
                        } else if ((Py_ssize_t)u < k || d->all_values) {
                            memcpy(V + (Py_ssize_t)u * E, P + (Py_ssize_t)e * E, (size_t)E);
                            from[top] = FROM_V;
                        } else {
                            from[top] = (int32_t)e;
                        }
                        stack[top++] = u;
                        break;
                    }
                }
            }
        }
        if (src >= 0 && U[src] != 0) { /* its equation: partial ^ value = 0, no unknown left */
            if (!at) /* pointing: left as it is (a solved equation's partial is never read) */
                memset(P + (Py_ssize_t)src * E, 0, (size_t)E);
            U[src]--;
        }
    }
    return newly;
bad:
    PyErr_SetString(PyExc_ValueError, "m2c_ldpc_add: inconsistent decoder state");
    return -1;
}

/* Shared argument handling of m2c_ldpc_add and m2c_ldpc_add_many. */
static PyObject *
ldpc_add_impl(PyObject *args, int many)
{
    Py_ssize_t k, E, esi = 0;
    PyObject *o[10];
    int ok = many
        ? PyArg_ParseTuple(args, "nnOOOOOOOOOO:m2c_ldpc_add_many", &k, &E, &o[0], &o[1], &o[2],
                           &o[3], &o[4], &o[5], &o[6], &o[7], &o[9], &o[8])
        : PyArg_ParseTuple(args, "nnOOOOOOOOnO:m2c_ldpc_add", &k, &E, &o[0], &o[1], &o[2], &o[3],
                           &o[4], &o[5], &o[6], &o[7], &esi, &o[8]);
    if (!ok)
        return NULL;
    buf_t eqp = {0}, eqv = {0}, vp = {0}, ve = {0}, unk = {0}, part = {0}, val = {0}, kn = {0},
          sym = {0}, es = {0};
    PyObject *ret = NULL;
    if (get_u32(o[0], &eqp, 0, 1) < 0 || get_u32(o[1], &eqv, 0, 0) < 0
        || get_u32(o[2], &vp, 0, 1) < 0 || get_u32(o[3], &ve, 0, 0) < 0
        || get_u32(o[4], &unk, 1, 0) < 0 || (many && get_u32(o[9], &es, 0, 0) < 0))
        goto done;
    if (PyObject_GetBuffer(o[5], &part.b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    part.held = 1;
    if (PyObject_GetBuffer(o[6], &val.b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    val.held = 1;
    if (PyObject_GetBuffer(o[7], &kn.b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    kn.held = 1;
    if (PyObject_GetBuffer(o[8], &sym.b, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    sym.held = 1;
    peel_t d;
    d.k = k;
    d.E = E;
    d.m = eqp.b.len / 4 - 1;
    d.n = vp.b.len / 4 - 1;
    d.nev = eqv.b.len / 4;
    d.nve = ve.b.len / 4;
    d.EP = eqp.b.buf;
    d.EV = eqv.b.buf;
    d.VP = vp.b.buf;
    d.VE = ve.b.buf;
    d.U = unk.b.buf;
    d.P = part.b.buf;
    d.V = val.b.buf;
    d.K = kn.b.buf;
    Py_ssize_t count = many ? es.b.len / 4 : 1;
    /* O(1) size checks here; indices are checked as they are used, so a
     * malformed structure raises ValueError instead of crashing */
    /* the products below must not overflow: E <= PY_SSIZE_T_MAX / max(m, n, count) */
    Py_ssize_t most = d.m > d.n ? d.m : d.n;
    if (count > most)
        most = count;
    if (E <= 0 || E > 0xFFFF || (most > 0 && E > PY_SSIZE_T_MAX / most) || k < 0 || k > d.n || d.m < 0
        || d.n < 1 || unk.b.len / 4 != d.m
        || part.b.len != d.m * E || (val.b.len != d.n * E && val.b.len != k * E)
        || kn.b.len != d.n
        || sym.b.len != count * E || (!many && (esi < 0 || esi >= d.n))) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_add: inconsistent decoder state");
        goto done;
    }
    d.all_values = val.b.len == d.n * E;
    long total = 0;
    const uint8_t *S = sym.b.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t e_i = many ? (Py_ssize_t)((const uint32_t *)es.b.buf)[i] : esi;
        if (e_i >= d.n) {
            PyErr_SetString(PyExc_ValueError, "m2c_ldpc_add: inconsistent decoder state");
            goto done;
        }
        long r = peel_one(&d, e_i, S + i * E, 0, NULL);
        if (r < 0)
            goto done;
        total += r;
    }
    ret = PyLong_FromLong(total);
done:;
    buf_t *all[] = {&eqp, &eqv, &vp, &ve, &unk, &part, &val, &kn, &sym, &es};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->held)
            PyBuffer_Release(&all[i]->b);
    return ret;
}

static PyObject *
m2c_ldpc_add(PyObject *self, PyObject *args)
{
    return ldpc_add_impl(args, 0);
}

static PyObject *
m2c_ldpc_add_many(PyObject *self, PyObject *args)
{
    return ldpc_add_impl(args, 1);
}

/* ---- a peeler: m2c_ldpc_add's state held once, one cheap call per symbol --
 *
 * m2c_ldpc_peeler(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial,
 * values, known, got[, error]) checks the state as m2c_ldpc_add does (got: n
 * bytes) and keeps a view of each buffer, so a symbol costs one METH_FASTCALL
 * instead of parsing twelve arguments and taking ten buffer views (~1.8 us of
 * the ~2 us a call cost at k = 1,000):
 *   add(esi, symbol) -> int      m2c_ldpc_add on that state (source_known += it)
 *   take(esi, symbol) -> bool    LDPCDecoder.add: range and length checks
 *                                (``error`` raised, default ValueError), the
 *                                duplicate check on got, the counters, the
 *                                iterative step; True once every source is known
 *   take_many(items) -> bool     take for each (esi, symbol) of an iterable, or
 *                                (esi, datagram, offset): the E bytes from offset
 *                                (no slice made): one call per received batch
 *   take_at(esis, offsets, buf)  take for each uint32 ESI with its symbol at
 *                                uint32 offset in buf (datagrams as one buffer)
 *   source_block() -> bytes, source(i) -> bytes | None
 * and the counters received, duplicates, source_known as attributes.
 *
 * Zero copy: a source symbol given to take* as a bytes object (immutable: what
 * the ALC codec hands the receiver) is not copied into values; the peeler keeps
 * a reference and its value is read from there (as a repair symbol's is: its
 * value is XORed into the equations from where it is).  values then has holes
 * at those ESIs, which source_block and source fill from the references.  Any
 * other buffer (bytearray, memoryview: its owner may reuse it) is copied. */

typedef struct {
    PyObject_HEAD
    peel_t d;
    Py_buffer views[9];
    int held;
    uint8_t *G;      /* got: one byte per ESI, set on its first receive */
    PyObject *err;   /* the exception class take* raise for a bad ESI or symbol length */
    PyObject **ref;  /* k entries once a source is held: the bytes holding its value */
    const uint8_t **at; /* k entries with ref: where in that bytes the value is */
    Py_ssize_t received, duplicates, source_known;
} peeler_t;

static void
peeler_dealloc(PyObject *o)
{
    peeler_t *p = (peeler_t *)o;
    for (int i = 0; i < p->held; i++)
        PyBuffer_Release(&p->views[i]);
    if (p->ref) {
        for (Py_ssize_t i = 0; i < p->d.k; i++)
            Py_XDECREF(p->ref[i]);
        PyMem_Free(p->ref);
        PyMem_Free(p->at);
    }
    Py_XDECREF(p->err);
    PyTypeObject *tp = Py_TYPE(o);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(o);
    Py_DECREF(tp);
}

static PyObject *
peeler_add(PyObject *o, PyObject *const *args, Py_ssize_t nargs)
{
    peeler_t *p = (peeler_t *)o;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add(esi, symbol) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t esi = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
    if (esi == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer sym;
    if (PyObject_GetBuffer(args[1], &sym, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    long r;
    if (sym.len != p->d.E || esi < 0 || esi >= p->d.n) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_add: inconsistent decoder state");
        r = -1;
    } else {
        r = peel_one(&p->d, esi, sym.buf, 0, NULL);
        if (r > 0)
            p->source_known += r;
    }
    PyBuffer_Release(&sym);
    return r < 0 ? NULL : PyLong_FromLong(r);
}

/* One symbol as LDPCDecoder.add takes it; buf/len given when the caller has them
 * (take_at), else read from sym_o.  0 on success, -1 with an exception set. */
static int
take_one(peeler_t *p, PyObject *esi_o, Py_ssize_t esi, PyObject *sym_o, const uint8_t *buf,
         Py_ssize_t len)
{
    peel_t *d = &p->d;
    Py_buffer view;
    int viewed = 0, hold = 0;
    if (esi_o) {
        esi = PyNumber_AsSsize_t(esi_o, NULL); /* clipped: any out-of-range int is refused */
        if (esi == -1 && PyErr_Occurred())
            return -1;
    }
    if (esi < 0 || esi >= d->n) {
        PyObject *ix = esi_o ? PyNumber_Index(esi_o) : PyLong_FromSsize_t(esi);
        if (ix) {
            PyErr_Format(p->err, "ESI %S out of range for n=%zd", ix, d->n);
            Py_DECREF(ix);
        }
        return -1;
    }
    if (!buf) {
        if (PyBytes_CheckExact(sym_o)) {
            buf = (const uint8_t *)PyBytes_AsString(sym_o);
            len = PyBytes_Size(sym_o);
            hold = 1;
        } else {
            if (PyObject_GetBuffer(sym_o, &view, PyBUF_C_CONTIGUOUS) < 0)
                return -1;
            viewed = 1;
            buf = view.buf;
            len = view.len;
        }
    } else if (sym_o) {
        hold = 1; /* take_at, take_in: sym_o is the bytes holding buf */
    }
    int rc = 0;
    if (len != d->E) {
        PyErr_Format(p->err, "symbol of %zd bytes, expected %zd", len, d->E);
        rc = -1;
    } else if (p->G[esi]) {
        p->duplicates++;
    } else {
        p->G[esi] = 1;
        p->received++;
        if (p->source_known != d->k && !d->K[esi]) {
            hold = hold && esi < d->k && !d->all_values;
            if (!d->all_values && !p->ref
                && (!(p->at = PyMem_Calloc((size_t)d->k + 1, sizeof *p->at))
                    || !(p->ref = PyMem_Calloc((size_t)d->k + 1, sizeof *p->ref)))) {
                PyMem_Free(p->at);
                p->at = NULL;
                PyErr_NoMemory();
                rc = -1;
            } else {
                long r = peel_one(d, esi, buf, hold, p->ref ? p->at : NULL);
                if (r < 0) {
                    rc = -1;
                } else {
                    if (hold) {
                        Py_INCREF(sym_o);
                        p->ref[esi] = sym_o;
                        p->at[esi] = buf;
                    }
                    p->source_known += r;
                }
            }
        }
    }
    if (viewed)
        PyBuffer_Release(&view);
    return rc;
}

static PyObject *
peeler_result(peeler_t *p)
{
    return PyBool_FromLong(p->source_known == p->d.k);
}

static PyObject *
peeler_take(PyObject *o, PyObject *const *args, Py_ssize_t nargs)
{
    peeler_t *p = (peeler_t *)o;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "take(esi, symbol) takes 2 arguments");
        return NULL;
    }
    if (take_one(p, args[0], 0, args[1], NULL, 0) < 0)
        return NULL;
    return peeler_result(p);
}

/* (esi, datagram, offset): the symbol is at offset in datagram (held when it is bytes) */
static int
take_in(peeler_t *p, PyObject *esi_o, PyObject *dgram, PyObject *off_o)
{
    Py_ssize_t at = PyNumber_AsSsize_t(off_o, NULL);
    if (at == -1 && PyErr_Occurred())
        return -1;
    Py_buffer b;
    if (PyObject_GetBuffer(dgram, &b, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (at < 0 || at > b.len)
        at = b.len; /* no bytes there: refused as a symbol of the wrong length */
    Py_ssize_t len = b.len - at < p->d.E ? b.len - at : p->d.E;
    /* take_one's length check refuses a short one; a longer datagram is not an error:
     * the symbol is the E bytes from the offset, as the receive path slices it */
    int rc = take_one(p, esi_o, 0, PyBytes_CheckExact(dgram) ? dgram : NULL,
                      (const uint8_t *)b.buf + at, len);
    PyBuffer_Release(&b);
    return rc;
}

/* take for each item; items taken before a bad one stay taken (as with single takes) */
static int
take_item(peeler_t *p, PyObject *item)
{
    if (PyTuple_Check(item) && PyTuple_Size(item) == 2)
        return take_one(p, PyTuple_GetItem(item, 0), 0, PyTuple_GetItem(item, 1), NULL, 0);
    if (PyTuple_Check(item) && PyTuple_Size(item) == 3)
        return take_in(p, PyTuple_GetItem(item, 0), PyTuple_GetItem(item, 1),
                       PyTuple_GetItem(item, 2));
    PyObject *e = NULL, *s = NULL;
    int rc = -1;
    if (PySequence_Check(item) && PySequence_Size(item) == 2 && (e = PySequence_GetItem(item, 0))
        && (s = PySequence_GetItem(item, 1)))
        rc = take_one(p, e, 0, s, NULL, 0);
    else if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "take_many: items must be (esi, symbol) pairs");
    Py_XDECREF(e);
    Py_XDECREF(s);
    return rc;
}

static PyObject *
peeler_take_many(PyObject *o, PyObject *items)
{
    peeler_t *p = (peeler_t *)o;
    if (PyList_CheckExact(items)) {
        for (Py_ssize_t i = 0; i < PyList_Size(items); i++)
            if (take_item(p, PyList_GetItem(items, i)) < 0)
                return NULL;
        return peeler_result(p);
    }
    PyObject *it = PyObject_GetIter(items), *item;
    if (!it)
        return NULL;
    while ((item = PyIter_Next(it))) {
        int rc = take_item(p, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(it);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    return peeler_result(p);
}

/* take_at(esis, offsets, buf): the i-th uint32 ESI with its symbol at the i-th uint32
 * offset of buf (held when buf is bytes); offsets past the end refuse that symbol. */
static PyObject *
peeler_take_at(PyObject *o, PyObject *const *args, Py_ssize_t nargs)
{
    peeler_t *p = (peeler_t *)o;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "take_at(esis, offsets, buf) takes 3 arguments");
        return NULL;
    }
    buf_t es = {0}, off = {0};
    Py_buffer b;
    int have_b = 0;
    PyObject *ret = NULL;
    if (get_u32(args[0], &es, 0, 0) < 0 || get_u32(args[1], &off, 0, 0) < 0)
        goto done;
    if (PyObject_GetBuffer(args[2], &b, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    have_b = 1;
    if (es.b.len != off.b.len) {
        PyErr_SetString(PyExc_ValueError, "take_at: as many offsets as ESIs");
        goto done;
    }
    PyObject *owner = PyBytes_CheckExact(args[2]) ? args[2] : NULL;
    const uint32_t *E_ = es.b.buf, *O = off.b.buf;
    for (Py_ssize_t i = 0; i < es.b.len / 4; i++) {
        Py_ssize_t at = O[i], len = at <= b.len ? b.len - at : 0;
        if (len > p->d.E)
            len = p->d.E; /* the symbol is E bytes from its offset, if buf has them */
        if (take_one(p, NULL, E_[i], owner, (const uint8_t *)b.buf + (at <= b.len ? at : 0),
                     len) < 0)
            goto done;
    }
    ret = peeler_result(p);
done:
    if (have_b)
        PyBuffer_Release(&b);
    if (es.held)
        PyBuffer_Release(&es.b);
    if (off.held)
        PyBuffer_Release(&off.b);
    return ret;
}

static const uint8_t *
source_at(peeler_t *p, Py_ssize_t i)
{
    if (p->at && p->at[i]) /* held bytes, or the partial of the equation that solved it */
        return p->at[i];
    return p->d.V + i * p->d.E;
}

static PyObject *
peeler_source_block(PyObject *o, PyObject *unused)
{
    peeler_t *p = (peeler_t *)o;
    Py_ssize_t k = p->d.k, E = p->d.E;
    PyObject *out = PyBytes_FromStringAndSize(NULL, k * E);
    if (!out)
        return NULL;
    uint8_t *dst = (uint8_t *)PyBytes_AsString(out);
    if (!p->ref) {
        memcpy(dst, p->d.V, (size_t)(k * E));
        return out;
    }
    for (Py_ssize_t i = 0; i < k; i++)
        memcpy(dst + i * E, source_at(p, i), (size_t)E);
    return out;
}

static PyObject *
peeler_source(PyObject *o, PyObject *arg)
{
    peeler_t *p = (peeler_t *)o;
    Py_ssize_t i = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || i >= p->d.k) {
        PyErr_SetString(PyExc_IndexError, "source: ESI not a source symbol");
        return NULL;
    }
    if (!p->d.K[i])
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)source_at(p, i), p->d.E);
}

static PyMethodDef peeler_methods[] = {
    {"add", (PyCFunction)(void (*)(void))peeler_add, METH_FASTCALL,
     "add(esi, symbol) -> int: m2c_ldpc_add on the state given at creation."},
    {"take", (PyCFunction)(void (*)(void))peeler_take, METH_FASTCALL,
     "take(esi, symbol) -> bool: checks, duplicate check, counters, iterative step; True "
     "once every source is known (a bytes source symbol is held, not copied)."},
    {"take_many", peeler_take_many, METH_O,
     "take_many(items) -> bool: take for each (esi, symbol) or (esi, datagram, offset) of an "
     "iterable (the symbol: E bytes from offset)."},
    {"take_at", (PyCFunction)(void (*)(void))peeler_take_at, METH_FASTCALL,
     "take_at(esis, offsets, buf) -> bool: take for each uint32 ESI with its symbol at the "
     "uint32 offset in buf."},
    {"source_block", peeler_source_block, METH_NOARGS,
     "source_block() -> bytes: the k source values concatenated."},
    {"source", peeler_source, METH_O, "source(i) -> bytes | None: source i if known."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef peeler_members[] = {
    {"received", T_PYSSIZET, offsetof(peeler_t, received), 0,
     "distinct symbols taken (decoded ones taken later count too)"},
    {"duplicates", T_PYSSIZET, offsetof(peeler_t, duplicates), 0,
     "symbols taken more than once"},
    {"source_known", T_PYSSIZET, offsetof(peeler_t, source_known), 0,
     "source symbols known"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot peeler_slots[] = {
    {Py_tp_dealloc, peeler_dealloc},
    {Py_tp_methods, peeler_methods},
    {Py_tp_members, peeler_members},
    {Py_tp_doc, "m2c_ldpc_add's state, held: see m2c_ldpc_peeler."},
    {0, NULL},
};

static PyType_Spec peeler_spec = {
    "deliverykit._speedups.LDPCPeeler", sizeof(peeler_t), 0, Py_TPFLAGS_DEFAULT, peeler_slots,
};

static PyObject *peeler_type = NULL; /* created on first use, kept */

static PyObject *
m2c_ldpc_peeler(PyObject *self, PyObject *args)
{
    Py_ssize_t k, E;
    PyObject *o[9], *err = PyExc_ValueError;
    if (!PyArg_ParseTuple(args, "nnOOOOOOOOO|O:m2c_ldpc_peeler", &k, &E, &o[0], &o[1], &o[2],
                          &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &err))
        return NULL;
    if (!PyType_Check(err) || !PyType_IsSubtype((PyTypeObject *)err,
                                                (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "m2c_ldpc_peeler: error must be an exception class");
        return NULL;
    }
    if (!peeler_type && !(peeler_type = PyType_FromSpec(&peeler_spec)))
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)peeler_type, Py_tp_alloc);
    peeler_t *p = (peeler_t *)alloc((PyTypeObject *)peeler_type, 0);
    if (!p)
        return NULL;
    p->held = 0;
    p->ref = NULL;
    p->at = NULL;
    p->received = p->duplicates = p->source_known = 0;
    Py_INCREF(err);
    p->err = err;
    p->d.k = 0; /* dealloc reads it before the checks below set it */
    /* as ldpc_add_impl: four read-only uint32 tables, unknown (uint32, writable), then
     * partial, values and known (writable bytes); then got (writable, n bytes) */
    for (int i = 0; i < 9; i++) {
        int writable = i >= 4;
        if (PyObject_GetBuffer(o[i], &p->views[i],
                               PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
            goto fail;
        p->held++;
        if (i < 5 && (p->views[i].len % 4 || p->views[i].len / 4 < (i == 0 || i == 2))) {
            PyErr_SetString(PyExc_ValueError, "m2c_ldpc_add: bad uint32 buffer");
            goto fail;
        }
    }
    peel_t *d = &p->d;
    d->k = k;
    d->E = E;
    d->m = p->views[0].len / 4 - 1;
    d->n = p->views[2].len / 4 - 1;
    d->nev = p->views[1].len / 4;
    d->nve = p->views[3].len / 4;
    d->EP = p->views[0].buf;
    d->EV = p->views[1].buf;
    d->VP = p->views[2].buf;
    d->VE = p->views[3].buf;
    d->U = p->views[4].buf;
    d->P = p->views[5].buf;
    d->V = p->views[6].buf;
    d->K = p->views[7].buf;
    Py_ssize_t most = d->m > d->n ? d->m : d->n;
    if (E <= 0 || E > 0xFFFF || (most > 0 && E > PY_SSIZE_T_MAX / most) || k < 0 || k > d->n
        || d->m < 0 || d->n < 1 || p->views[4].len / 4 != d->m
        || p->views[5].len != d->m * E
        || (p->views[6].len != d->n * E && p->views[6].len != k * E)
        || p->views[7].len != d->n || p->views[8].len != d->n) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_add: inconsistent decoder state");
        goto fail;
    }
    d->all_values = p->views[6].len == d->n * E;
    p->G = p->views[8].buf;
    return (PyObject *)p;
fail:
    Py_DECREF(p);
    return NULL;
}

/* ---- maximum-likelihood elimination (inactivation decoding) ------------
 *
 * State is the iterative decoder's: eq_ptr/eq_vars (equation -> variables,
 * CSR uint32), unknown (uint32 per equation: its unknown count; equations
 * with 0 are finished), partial (m*E: XOR of the known variables of each
 * equation; undefined, read as 0, while unknown equals its degree), known
 * (n bytes).  Over the unknown variables:
 *   1. structure: peel degree-1 equations; when stalled, inactivate the
 *      unknown of highest remaining degree in a lightest equation.  Each
 *      resolved variable is (constant) + (combination of inactive ones);
 *      equations left with no unresolved unknown become constraints over the
 *      inactive unknowns, solved by Gauss-Jordan over GF(2) (bit-packed).
 *   2. deficit = inactive - rank: the dimension of the solution space.
 *      A source variable is determined when its combination does not depend
 *      on a free (pivot-less) inactive column.
 *   3. values (only if asked): constants and the pivot values with every free
 *      column set to 0 (a particular solution: determined variables have the
 *      same value in every solution), then the determined sources.
 * Results do not depend on the inactivation choices, so the Python twin
 * (which follows the same plan) returns the same tuple. */

typedef uint64_t word_t;

static inline void
xor_words(word_t *restrict d, const word_t *restrict s, Py_ssize_t w)
{
    for (Py_ssize_t i = 0; i < w; i++)
        d[i] ^= s[i];
}

/* equation e's partial sum into dst: zero while none of its variables is known
 * (unknown == its degree: the decoder leaves that partial undefined) */
static inline void
partial_of(const uint8_t *P, const uint32_t *U, const uint32_t *EP, uint32_t e, Py_ssize_t E,
           uint8_t *dst)
{
    if (U[e] == EP[e + 1] - EP[e])
        memset(dst, 0, (size_t)E);
    else
        memcpy(dst, P + (size_t)e * E, (size_t)E);
}

static PyObject *
m2c_ldpc_eliminate(PyObject *self, PyObject *args)
{
    Py_ssize_t k, E;
    int values;
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "nnOOOOOp:m2c_ldpc_eliminate", &k, &E, &o[0], &o[1], &o[2],
                          &o[3], &o[4], &values))
        return NULL;
    buf_t eqp = {0}, eqv = {0}, unk = {0}, part = {0}, kn = {0};
    PyObject *ret = NULL;
    /* scratch (freed at the end) */
    uint32_t *slot = NULL, *cnt = NULL, *xs = NULL, *vdeg = NULL, *vptr = NULL, *vlist = NULL;
    uint32_t *stamp = NULL, *logv = NULL, *loge = NULL, *stack = NULL, *cons = NULL;
    uint32_t *pivrow = NULL, *fill = NULL;
    uint8_t *alive = NULL, *resolved = NULL;
    word_t *mask = NULL, *rows = NULL, *free_dep = NULL, *dep = NULL, *freecols = NULL;
    uint8_t *sym = NULL, *rrhs = NULL;
    if (get_u32(o[0], &eqp, 0, 1) < 0 || get_u32(o[1], &eqv, 0, 0) < 0
        || get_u32(o[2], &unk, 0, 0) < 0)
        goto done;
    if (PyObject_GetBuffer(o[3], &part.b, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    part.held = 1;
    if (PyObject_GetBuffer(o[4], &kn.b, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    kn.held = 1;
    const uint32_t *EP = eqp.b.buf, *EV = eqv.b.buf, *U = unk.b.buf;
    const uint8_t *P = part.b.buf, *K = kn.b.buf;
    Py_ssize_t m = eqp.b.len / 4 - 1, n = kn.b.len, nev = eqv.b.len / 4;
    /* RFC 5170 4.2.4.1: E is 16 bits (bounds the work space: nu * E, ncons * E); every
     * product with E below is at most max(m, n) * E: check it cannot overflow */
    if (E <= 0 || E > 0xFFFF || E > PY_SSIZE_T_MAX / (m > n ? (m > 1 ? m : 1) : (n > 1 ? n : 1)) || k < 0
        || k > n || n < 1 || unk.b.len / 4 != m || part.b.len != m * E
        || n > 0xFFFFFFF0 || m > 0xFFFFFFF0) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_eliminate: inconsistent decoder state");
        goto done;
    }
    for (Py_ssize_t e = 0; e < m; e++)
        if (EP[e] > EP[e + 1] || EP[e + 1] > (uint32_t)nev)
            goto bad;
    /* unknown variables get slots 0..nu-1 */
    slot = malloc((size_t)n * 4);
    stamp = malloc((size_t)n * 4);
    cnt = calloc((size_t)m + 1, 4);
    xs = calloc((size_t)m + 1, 4);
    alive = calloc((size_t)m + 1, 1);
    if (!slot || !stamp || !cnt || !xs || !alive)
        goto nomem;
    Py_ssize_t nu = 0;
    for (Py_ssize_t v = 0; v < n; v++) {
        slot[v] = K[v] ? UINT32_MAX : (uint32_t)nu++;
        stamp[v] = UINT32_MAX;
    }
    vdeg = calloc((size_t)nu + 1, 4);
    vptr = calloc((size_t)nu + 2, 4);
    resolved = calloc((size_t)nu + 1, 1);
    logv = malloc(((size_t)nu + 1) * 4);
    loge = malloc(((size_t)nu + 1) * 4);
    stack = malloc(((size_t)m + 1) * 4);
    cons = malloc(((size_t)m + 1) * 4);
    if (!vdeg || !vptr || !resolved || !logv || !loge || !stack || !cons)
        goto nomem;
    /* active equations: unknown count > 0; count and XOR their unknowns */
    Py_ssize_t nedges = 0;
    for (Py_ssize_t e = 0; e < m; e++) {
        if (U[e] == 0)
            continue;
        alive[e] = 1;
        for (uint32_t y = EP[e]; y < EP[e + 1]; y++) {
            uint32_t v = EV[y];
            if (v >= (uint32_t)n || stamp[v] == (uint32_t)e)
                goto bad; /* out of range or twice in one equation */
            stamp[v] = (uint32_t)e;
            if (K[v])
                continue;
            cnt[e]++;
            xs[e] ^= v;
            vdeg[slot[v]]++;
            nedges++;
        }
    }
    for (Py_ssize_t s = 0; s < nu; s++)
        vptr[s + 1] = vptr[s] + vdeg[s];
    vlist = malloc(((size_t)nedges + 1) * 4);
    fill = malloc(((size_t)nu + 1) * 4);
    if (!vlist || !fill)
        goto nomem;
    memcpy(fill, vptr, (size_t)nu * 4);
    Py_ssize_t top = 0, ncons = 0, nlog = 0, n_in = 0, unresolved = nu, scan = 0;
    for (Py_ssize_t e = 0; e < m; e++) {
        if (!alive[e])
            continue;
        for (uint32_t y = EP[e]; y < EP[e + 1]; y++)
            if (!K[EV[y]])
                vlist[fill[slot[EV[y]]]++] = (uint32_t)e;
        if (cnt[e] == 1)
            stack[top++] = (uint32_t)e;
    }
    /* 1. structure */
    while (unresolved > 0) {
        uint32_t v = UINT32_MAX, from = UINT32_MAX;
        while (top > 0) {
            uint32_t e = stack[--top];
            if (alive[e] && cnt[e] == 1) {
                v = xs[e];
                from = e;
                break;
            }
        }
        if (v == UINT32_MAX) {
            /* stalled: a lightest live equation, its unknown of highest degree */
            uint32_t best = UINT32_MAX, bc = UINT32_MAX;
            for (Py_ssize_t e = 0; e < m; e++)
                if (alive[e] && cnt[e] >= 2 && cnt[e] < bc) {
                    bc = cnt[e];
                    best = (uint32_t)e;
                    if (bc == 2)
                        break;
                }
            if (best != UINT32_MAX) {
                uint32_t bd = 0;
                for (uint32_t y = EP[best]; y < EP[best + 1]; y++) {
                    uint32_t u = EV[y];
                    if (!K[u] && !resolved[slot[u]] && (v == UINT32_MAX || vdeg[slot[u]] > bd)) {
                        v = u;
                        bd = vdeg[slot[u]];
                    }
                }
            } else {
                while (scan < n && (K[scan] || resolved[slot[scan]]))
                    scan++;
                v = (uint32_t)scan;
            }
            n_in++;
        } else {
            alive[from] = 0; /* consumed by the variable it determines */
            vdeg[slot[v]]--;
        }
        uint32_t s = slot[v];
        resolved[s] = 1;
        unresolved--;
        logv[nlog] = v;
        loge[nlog++] = from;
        for (uint32_t x = vptr[s]; x < vptr[s + 1]; x++) {
            uint32_t e2 = vlist[x];
            if (!alive[e2])
                continue;
            cnt[e2]--;
            xs[e2] ^= v;
            if (cnt[e2] == 1) {
                stack[top++] = e2;
            } else if (cnt[e2] == 0) {
                alive[e2] = 0;
                cons[ncons++] = e2;
            }
        }
    }
    /* combinations over the inactive unknowns, in resolution order */
    Py_ssize_t W = (n_in + 63) / 64;
    if (W == 0)
        W = 1;
    mask = calloc((size_t)nu * W + 1, sizeof(word_t));
    rows = calloc((size_t)ncons * W + 1, sizeof(word_t));
    pivrow = malloc(((size_t)n_in + 1) * 4);
    free_dep = calloc((size_t)n_in * W + 1, sizeof(word_t));
    dep = calloc((size_t)W, sizeof(word_t));
    freecols = calloc((size_t)W, sizeof(word_t));
    if (!mask || !rows || !pivrow || !free_dep || !dep || !freecols)
        goto nomem;
    if (values) {
        sym = calloc((size_t)nu * E + 1, 1);
        rrhs = calloc((size_t)ncons * E + 1, 1);
        if (!sym || !rrhs)
            goto nomem;
    }
    n_in = 0;
    for (Py_ssize_t i = 0; i < nlog; i++) {
        uint32_t v = logv[i], e = loge[i], s = slot[v];
        word_t *mv = mask + (size_t)s * W;
        if (e == UINT32_MAX) {
            mv[n_in / 64] |= (word_t)1 << (n_in % 64);
            n_in++;
            continue;
        }
        if (values)
            partial_of(P, U, EP, e, E, sym + (size_t)s * E);
        for (uint32_t y = EP[e]; y < EP[e + 1]; y++) {
            uint32_t u = EV[y];
            if (u == v || K[u])
                continue;
            xor_words(mv, mask + (size_t)slot[u] * W, W);
            if (values)
                xor_block(sym + (size_t)s * E, sym + (size_t)slot[u] * E, E);
        }
    }
    for (Py_ssize_t c = 0; c < ncons; c++) {
        uint32_t e = cons[c];
        word_t *rv = rows + (size_t)c * W;
        if (values)
            partial_of(P, U, EP, e, E, rrhs + (size_t)c * E);
        for (uint32_t y = EP[e]; y < EP[e + 1]; y++) {
            uint32_t u = EV[y];
            if (K[u])
                continue;
            xor_words(rv, mask + (size_t)slot[u] * W, W);
            if (values)
                xor_block(rrhs + (size_t)c * E, sym + (size_t)slot[u] * E, E);
        }
    }
    /* Gauss-Jordan: pivrow[col] = constraint row holding that pivot */
    for (Py_ssize_t c = 0; c < n_in; c++)
        pivrow[c] = UINT32_MAX;
    Py_ssize_t rank = 0;
    for (Py_ssize_t r = 0; r < ncons; r++) {
        word_t *rv = rows + (size_t)r * W;
        for (Py_ssize_t wi = 0; wi < W; wi++) {
            word_t bits = rv[wi];
            while (bits) {
                int b = __builtin_ctzll(bits);
                bits &= bits - 1;
                Py_ssize_t col = wi * 64 + b;
                uint32_t pr = pivrow[col];
                if (pr != UINT32_MAX && (rv[wi] >> b & 1)) {
                    xor_words(rv, rows + (size_t)pr * W, W);
                    if (values)
                        xor_block(rrhs + (size_t)r * E, rrhs + (size_t)pr * E, E);
                    bits = rv[wi] & ~(((word_t)2 << b) - 1);
                }
            }
        }
        Py_ssize_t col = -1;
        for (Py_ssize_t wi = 0; wi < W && col < 0; wi++)
            if (rv[wi])
                col = wi * 64 + __builtin_ctzll(rv[wi]);
        if (col < 0)
            continue;
        for (Py_ssize_t c2 = 0; c2 < n_in; c2++) {
            uint32_t pr = pivrow[c2];
            if (pr != UINT32_MAX && (rows[(size_t)pr * W + col / 64] >> (col % 64) & 1)) {
                xor_words(rows + (size_t)pr * W, rv, W);
                if (values)
                    xor_block(rrhs + (size_t)pr * E, rrhs + (size_t)r * E, E);
            }
        }
        pivrow[col] = (uint32_t)r;
        rank++;
    }
    Py_ssize_t deficit = n_in - rank;
    for (Py_ssize_t c = 0; c < n_in; c++)
        if (pivrow[c] == UINT32_MAX)
            freecols[c / 64] |= (word_t)1 << (c % 64);
    for (Py_ssize_t c = 0; c < n_in; c++) {
        word_t *fd = free_dep + (size_t)c * W;
        if (pivrow[c] == UINT32_MAX) {
            fd[c / 64] |= (word_t)1 << (c % 64);
        } else {
            const word_t *pv = rows + (size_t)pivrow[c] * W;
            for (Py_ssize_t wi = 0; wi < W; wi++)
                fd[wi] = pv[wi] & freecols[wi];
        }
    }
    /* which unknown sources are determined */
    int determined = 1;
    Py_ssize_t nfound = 0;
    uint8_t *isdet = resolved; /* reuse: 1 = determined source */
    for (Py_ssize_t v = 0; v < k; v++) {
        if (K[v])
            continue;
        uint32_t s = slot[v];
        isdet[s] = 0;
        memset(dep, 0, (size_t)W * sizeof(word_t));
        if (deficit > 0) {
            const word_t *mv = mask + (size_t)s * W;
            for (Py_ssize_t wi = 0; wi < W; wi++) {
                word_t bits = mv[wi];
                while (bits) {
                    int b = __builtin_ctzll(bits);
                    bits &= bits - 1;
                    xor_words(dep, free_dep + (size_t)(wi * 64 + b) * W, W);
                }
            }
        }
        int zero = 1;
        for (Py_ssize_t wi = 0; wi < W; wi++)
            zero &= dep[wi] == 0;
        if (zero) {
            isdet[s] = 1;
            nfound++;
        } else {
            determined = 0;
            if (!values)
                break;
        }
    }
    PyObject *esis = NULL, *syms = NULL;
    if (values) {
        /* particular solution: free columns 0, pivots their reduced rhs */
        for (Py_ssize_t i = 0, c = 0; i < nlog; i++) {
            uint32_t v = logv[i], e = loge[i], s = slot[v];
            uint8_t *dst = sym + (size_t)s * E;
            if (e == UINT32_MAX) {
                if (pivrow[c] == UINT32_MAX)
                    memset(dst, 0, (size_t)E);
                else
                    memcpy(dst, rrhs + (size_t)pivrow[c] * E, (size_t)E);
                c++;
                continue;
            }
            partial_of(P, U, EP, e, E, dst);
            for (uint32_t y = EP[e]; y < EP[e + 1]; y++) {
                uint32_t u = EV[y];
                if (u != v && !K[u])
                    xor_block(dst, sym + (size_t)slot[u] * E, E);
            }
        }
        esis = PyBytes_FromStringAndSize(NULL, nfound * 4);
        syms = PyBytes_FromStringAndSize(NULL, nfound * E);
        if (!esis || !syms) {
            Py_XDECREF(esis);
            Py_XDECREF(syms);
            goto done;
        }
        uint32_t *eo = (uint32_t *)PyBytes_AsString(esis);
        uint8_t *so = (uint8_t *)PyBytes_AsString(syms);
        Py_ssize_t j = 0;
        for (Py_ssize_t v = 0; v < k; v++)
            if (!K[v] && isdet[slot[v]]) {
                eo[j] = (uint32_t)v;
                memcpy(so + j * E, sym + (size_t)slot[v] * E, (size_t)E);
                j++;
            }
    } else {
        esis = PyBytes_FromStringAndSize(NULL, 0);
        syms = PyBytes_FromStringAndSize(NULL, 0);
        if (!esis || !syms) {
            Py_XDECREF(esis);
            Py_XDECREF(syms);
            goto done;
        }
    }
    ret = Py_BuildValue("(nONN)", deficit, determined ? Py_True : Py_False, esis, syms);
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "m2c_ldpc_eliminate: inconsistent decoder state");
    goto done;
nomem:
    PyErr_NoMemory();
done:
    free(slot); free(stamp); free(cnt); free(xs); free(alive); free(vdeg); free(vptr);
    free(resolved); free(logv); free(loge); free(stack); free(cons); free(vlist);
    free(fill); free(mask); free(rows); free(pivrow); free(free_dep); free(dep); free(freecols);
    free(sym); free(rrhs);
    buf_t *all[] = {&eqp, &eqv, &unk, &part, &kn};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->held)
            PyBuffer_Release(&all[i]->b);
    return ret;
}

/* A bytearray of size bytes left uninitialized (no zeroing pass over memory
 * the decoder writes before it reads: its values, and its partial sums, which
 * m2c_ldpc_add starts on an equation's first known variable). */
static PyObject *
m2c_ldpc_alloc(PyObject *self, PyObject *args)
{
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "n:m2c_ldpc_alloc", &size))
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "m2c_ldpc_alloc: negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

PyMethodDef dk_m2c_methods[] = {
    {"m2c_ldpc_alloc", m2c_ldpc_alloc, METH_VARARGS,
     "m2c_ldpc_alloc(size) -> bytearray: size bytes, contents undefined (not zeroed)."},
    {"m2c_ldpc_eliminate", m2c_ldpc_eliminate, METH_VARARGS,
     "m2c_ldpc_eliminate(k, E, eq_ptr, eq_vars, unknown, partial, known, values) -> "
     "(deficit, determined, esis, symbols): maximum-likelihood step."},
    {"m2c_ldpc_matrix", m2c_ldpc_matrix, METH_VARARGS,
     "m2c_ldpc_matrix(k, m, n1, seed) -> (row_ptr, cols): RFC 5170 left matrix (CSR)."},
    {"m2c_ldpc_graph", m2c_ldpc_graph, METH_VARARGS,
     "m2c_ldpc_graph(k, n, n1, seed) -> (eq_ptr, eq_vars, var_ptr, var_eqs, degrees): "
     "the Tanner graph of H (CSR, uint32)."},
    {"m2c_ldpc_encode", m2c_ldpc_encode, METH_VARARGS,
     "m2c_ldpc_encode(src, symbol_size, row_ptr, cols) -> bytes: staircase repair symbols."},
    {"m2c_ldpc_add_many", m2c_ldpc_add_many, METH_VARARGS,
     "m2c_ldpc_add_many(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, "
     "known, esis, symbols) -> int: m2c_ldpc_add for each (uint32 ESI, E-byte symbol)."},
    {"m2c_ldpc_peeler", m2c_ldpc_peeler, METH_VARARGS,
     "m2c_ldpc_peeler(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, "
     "known, got) -> peeler: add(esi, symbol) is m2c_ldpc_add on that state; "
     "receive(esi, symbol, complete) also skips duplicates (-1)."},
    {"m2c_ldpc_add", m2c_ldpc_add, METH_VARARGS,
     "m2c_ldpc_add(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, known, "
     "esi, symbol) -> int: one iterative decoding step."},
    {NULL, NULL, 0, NULL},
};
