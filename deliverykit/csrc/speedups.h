/* Shared declarations for the deliverykit._speedups C module.
 *
 * The module is one extension built from several files: module.c owns the
 * module object and concatenates the method tables that each file exports.
 * Every function here has a pure-Python twin (see deliverykit/fastpath.py and
 * each package's _fast.py); tests prove both give identical results.
 */
#ifndef DELIVERYKIT_SPEEDUPS_H
#define DELIVERYKIT_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* One table per file, each terminated by a {NULL} sentinel. */
extern PyMethodDef dk_core_methods[];      /* core.c: xor, recvmmsg/sendmmsg */
extern PyMethodDef dk_corecast_methods[];  /* corecast.c */
extern PyMethodDef dk_m2c_methods[];       /* m2c.c */
extern PyMethodDef dk_swift_methods[];     /* swift.c */
extern PyMethodDef dk_sim_methods[];       /* sim.c: the simulator's event heap */

/* core.c: a socket address as the tuple the socket module gives
 * ((host, port) or (host, port, flowinfo, scope_id)); None for other families. */
struct sockaddr_storage;
PyObject *dk_addr_to_tuple(const struct sockaddr_storage *ss);

/* core.c: recvmmsg without blocking, [(data, addr)] or with with_ts
 * [(data, addr, kernel arrival time or -1.0)] (SCM_TIMESTAMPNS); the
 * callers (recv_batch, swift's recv_batch_ts) check their own bounds. */
#define DK_HAVE_RECVMMSG 1
PyObject *dk_recvmmsg(PyObject *sock, Py_ssize_t max_count, Py_ssize_t size, int with_ts);

/* core.c: the TxBatch type (tx_batch()); the CoreCast ITR's batch loop appends
 * hdr (bytes or NULL) + body[0:len] (inside the bytes object owner) to
 * host:port, addr its packed form (4 or 16 bytes), without a Python object. */
int dk_txbatch_check(PyObject *o);
int dk_txbatch_push(PyObject *batch, PyObject *hdr, PyObject *owner, const unsigned char *body,
                    Py_ssize_t len, PyObject *host, const unsigned char *addr, Py_ssize_t alen,
                    int port);

#endif
