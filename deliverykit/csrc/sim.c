/* C fast path of the packet-level simulator (twin: deliverykit/sim/scheduler.py,
 * PyEventHeap and py_sim_heap).
 *
 *   sim_heap() -> EventHeap
 *       The scheduler's event heap.  An entry is (when, seq, callback, args); entries
 *       leave in the order of (when as a double, seq), and seq is unique, so the order
 *       is the same as heapq's over (when, seq, callback, args) tuples.  The keys are
 *       kept inline in one array, so ordering reads no Python object (a heapq of
 *       200,000 tuples spends most of a pop on cache misses comparing them).
 *       EventHeap.push(when, seq, callback, args)
 *       EventHeap.pop_until(until) -> (when, callback, args) | None
 *           the earliest entry, unless the heap is empty or it is after `until`
 *       EventHeap.peek() -> when | None
 *       len(EventHeap)
 *   `when` is handed back as the very object pushed.  The heap takes part in the
 *   cyclic garbage collector (callbacks are bound methods of objects that own the
 *   scheduler).
 */
#include "speedups.h"

#include <stdlib.h>

typedef struct {
    double key;
    unsigned long long seq;
    PyObject *when;
    PyObject *cb;
    PyObject *args;
} Entry;

typedef struct {
    PyObject_HEAD
    Entry *e;
    Py_ssize_t n, cap;
} EventHeap;

static PyTypeObject *EventHeap_Type;

static inline int
before(const Entry *a, const Entry *b)
{
    return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

static PyObject *
EventHeap_push(EventHeap *h, PyObject *args)
{
    PyObject *when, *cb, *cargs;
    unsigned long long seq;
    if (!PyArg_ParseTuple(args, "OKOO:push", &when, &seq, &cb, &cargs))
        return NULL;
    double key = PyFloat_AsDouble(when);
    if (key == -1.0 && PyErr_Occurred())
        return NULL;
    if (h->n == h->cap) {
        Py_ssize_t cap = h->cap ? h->cap * 2 : 1024;
        if ((size_t)cap > PY_SSIZE_T_MAX / sizeof(Entry))
            return PyErr_NoMemory();
        Entry *e = realloc(h->e, (size_t)cap * sizeof(Entry));
        if (e == NULL)
            return PyErr_NoMemory();
        h->e = e;
        h->cap = cap;
    }
    Entry x = {key, seq, when, cb, cargs};
    Py_INCREF(when);
    Py_INCREF(cb);
    Py_INCREF(cargs);
    Entry *e = h->e;
    Py_ssize_t i = h->n++;
    while (i > 0) { /* sift up */
        Py_ssize_t parent = (i - 1) >> 1;
        if (!before(&x, &e[parent]))
            break;
        e[i] = e[parent];
        i = parent;
    }
    e[i] = x;
    Py_RETURN_NONE;
}

static PyObject *
EventHeap_pop_until(EventHeap *h, PyObject *args)
{
    double until;
    if (!PyArg_ParseTuple(args, "d:pop_until", &until))
        return NULL;
    if (h->n == 0 || h->e[0].key > until)
        Py_RETURN_NONE;
    Entry *e = h->e;
    Entry top = e[0];
    Py_ssize_t n = --h->n;
    if (n > 0) { /* the last entry sifted down from the root */
        Entry x = e[n];
        Py_ssize_t i = 0;
        for (;;) {
            Py_ssize_t c = 2 * i + 1;
            if (c >= n)
                break;
            if (c + 1 < n && before(&e[c + 1], &e[c]))
                c++;
            if (!before(&e[c], &x))
                break;
            e[i] = e[c];
            i = c;
        }
        e[i] = x;
    }
    PyObject *t = PyTuple_New(3);
    if (t == NULL) { /* the entry is gone: release it */
        Py_DECREF(top.when);
        Py_DECREF(top.cb);
        Py_DECREF(top.args);
        return NULL;
    }
    PyTuple_SetItem(t, 0, top.when); /* steals the heap's references */
    PyTuple_SetItem(t, 1, top.cb);
    PyTuple_SetItem(t, 2, top.args);
    return t;
}

static PyObject *
EventHeap_peek(EventHeap *h, PyObject *noargs)
{
    if (h->n == 0)
        Py_RETURN_NONE;
    Py_INCREF(h->e[0].when);
    return h->e[0].when;
}

static Py_ssize_t
EventHeap_len(EventHeap *h)
{
    return h->n;
}

static int
EventHeap_traverse(EventHeap *h, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE((PyObject *)h));
    for (Py_ssize_t i = 0; i < h->n; i++) {
        Py_VISIT(h->e[i].when);
        Py_VISIT(h->e[i].cb);
        Py_VISIT(h->e[i].args);
    }
    return 0;
}

static int
EventHeap_clear(EventHeap *h)
{
    /* the entries leave the heap before their references go: a destructor may
     * push onto this heap (and make it grow) while the old array is released */
    Entry *e = h->e;
    Py_ssize_t n = h->n;
    h->e = NULL;
    h->n = h->cap = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(e[i].when);
        Py_DECREF(e[i].cb);
        Py_DECREF(e[i].args);
    }
    free(e);
    return 0;
}

static void
EventHeap_dealloc(EventHeap *h)
{
    PyTypeObject *tp = Py_TYPE((PyObject *)h);
    PyObject_GC_UnTrack((PyObject *)h);
    EventHeap_clear(h);
    free(h->e); /* what a destructor pushed while the entries were released */
    h->e = NULL;
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(h);
    Py_DECREF(tp);
}

static PyObject *
EventHeap_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (!PyArg_ParseTuple(args, ":EventHeap"))
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    EventHeap *h = (EventHeap *)alloc(type, 0);
    if (h == NULL)
        return NULL;
    h->e = NULL;
    h->n = h->cap = 0;
    return (PyObject *)h;
}

static PyMethodDef EventHeap_methods[] = {
    {"push", (PyCFunction)EventHeap_push, METH_VARARGS,
     "push(when, seq, callback, args): an event at virtual time `when`."},
    {"pop_until", (PyCFunction)EventHeap_pop_until, METH_VARARGS,
     "pop_until(until) -> (when, callback, args) | None: the earliest event, unless the "
     "heap is empty or it is after `until`."},
    {"peek", (PyCFunction)EventHeap_peek, METH_NOARGS,
     "peek() -> when | None: the earliest event's time."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot EventHeap_slots[] = {
    {Py_tp_new, EventHeap_new},
    {Py_tp_dealloc, EventHeap_dealloc},
    {Py_tp_traverse, EventHeap_traverse},
    {Py_tp_clear, EventHeap_clear},
    {Py_tp_methods, EventHeap_methods},
    {Py_sq_length, EventHeap_len},
    {Py_mp_length, EventHeap_len},
    {Py_tp_doc, "The simulator's event heap, ordered by (when, seq)."},
    {0, NULL},
};

static PyType_Spec EventHeap_spec = {
    "deliverykit._speedups.EventHeap", sizeof(EventHeap), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, EventHeap_slots,
};

/* sim_heap() -> a new, empty EventHeap (the type is made on first use) */
static PyObject *
sim_heap(PyObject *self, PyObject *noargs)
{
    if (EventHeap_Type == NULL) {
        EventHeap_Type = (PyTypeObject *)PyType_FromSpec(&EventHeap_spec);
        if (EventHeap_Type == NULL)
            return NULL;
    }
    return PyObject_CallObject((PyObject *)EventHeap_Type, NULL);
}

PyMethodDef dk_sim_methods[] = {
    {"sim_heap", sim_heap, METH_NOARGS,
     "sim_heap() -> EventHeap: the simulator's event heap, ordered by (when, seq)."},
    {NULL, NULL, 0, NULL},
};
