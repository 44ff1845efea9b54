/* Core hot loops shared by every package.
 *
 *   xor_into(dst, src)                 dst[i] ^= src[i]            (twin: fastpath.py)
 *   recv_batch(sock, max_count, size)  recvmmsg, non-blocking      (twin: fastpath.py)
 *   send_batch(sock, items)            sendmmsg of (data, addr)    (twin: fastpath.py)
 *   send_gso(sock, items, max_segs)    the same, runs as UDP GSO   (twin: fastpath.py)
 *   group_by_destination(items)        stable grouping by address  (twin: fastpath.py)
 *   tx_batch() -> TxBatch              datagrams without objects   (twin: fastpath.PyTxBatch)
 *
 * Written against the limited API (3.11+) so one wheel serves later Pythons.
 */
#define _GNU_SOURCE
#include "speedups.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define DK_MAX_BATCH 1024

static PyObject *
dk_xor_into(PyObject *self, PyObject *args)
{
    PyObject *dst_obj, *src_obj;
    if (!PyArg_ParseTuple(args, "OO:xor_into", &dst_obj, &src_obj))
        return NULL;
    Py_buffer dst, src;
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&dst);
        return NULL;
    }
    if (dst.len != src.len) {
        PyErr_Format(PyExc_ValueError, "xor_into: length mismatch (%zd != %zd)",
                     dst.len, src.len);
        PyBuffer_Release(&dst);
        PyBuffer_Release(&src);
        return NULL;
    }
    uint8_t *d = dst.buf;
    const uint8_t *s = src.buf;
    Py_ssize_t n = dst.len, i = 0;
    /* Word at a time through memcpy (no alignment assumptions); gcc vectorises it. */
    for (; i + 8 <= n; i += 8) {
        uint64_t a, b;
        memcpy(&a, d + i, 8);
        memcpy(&b, s + i, 8);
        a ^= b;
        memcpy(d + i, &a, 8);
    }
    for (; i < n; i++)
        d[i] ^= s[i];
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    Py_RETURN_NONE;
}

/* Socket address <-> Python tuple, with the same shapes the socket module uses
 * (shared with swift.c through speedups.h). */
PyObject *
dk_addr_to_tuple(const struct sockaddr_storage *ss)
{
    char host[INET6_ADDRSTRLEN];
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        return Py_BuildValue("(si)", host, (int)ntohs(a->sin_port));
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        return Py_BuildValue("(siII)", host, (int)ntohs(a->sin6_port),
                             (unsigned int)ntohl(a->sin6_flowinfo),
                             (unsigned int)a->sin6_scope_id);
    }
    Py_RETURN_NONE;
}

static int
tuple_to_addr(PyObject *addr, int family, struct sockaddr_storage *ss, socklen_t *len)
{
    const char *host;
    int port;
    unsigned int flowinfo = 0, scope_id = 0;
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET6) {
        if (!PyArg_ParseTuple(addr, "si|II:address", &host, &port, &flowinfo, &scope_id))
            return -1;
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        a->sin6_flowinfo = htonl(flowinfo);
        a->sin6_scope_id = scope_id;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
            PyErr_Format(PyExc_ValueError, "send_batch: not an IPv6 address: %s", host);
            return -1;
        }
        *len = sizeof *a;
        return 0;
    }
    if (!PyArg_ParseTuple(addr, "si:address", &host, &port))
        return -1;
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
        PyErr_Format(PyExc_ValueError, "send_batch: not an IPv4 address: %s", host);
        return -1;
    }
    *len = sizeof *a;
    return 0;
}

static int
sock_family(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return AF_INET;
    return ss.ss_family;
}

/* recvmmsg(2) of up to max_count datagrams of at most size bytes, without
 * blocking: a list of (data, addr), or with with_ts (data, addr, t), t the
 * kernel arrival time (SCM_TIMESTAMPNS, seconds since the epoch; -1.0 when
 * the socket gives none).  Callers check their own bounds on max_count and
 * size.  Shared with swift.c (recv_batch_ts) through speedups.h. */
PyObject *
dk_recvmmsg(PyObject *sock, Py_ssize_t max_count, Py_ssize_t size, int with_ts)
{
    int fd = PyObject_AsFileDescriptor(sock);
    if (fd < 0)
        return NULL;
    size_t cspace = with_ts ? CMSG_SPACE(sizeof(struct timespec)) + CMSG_SPACE(64) : 0;
    char *arena = PyMem_Malloc((size_t)(max_count * size));
    char *ctl = with_ts ? PyMem_Calloc((size_t)max_count, cspace) : NULL;
    struct mmsghdr *msgs = PyMem_Calloc((size_t)max_count, sizeof *msgs);
    struct iovec *iov = PyMem_Calloc((size_t)max_count, sizeof *iov);
    struct sockaddr_storage *addrs = PyMem_Calloc((size_t)max_count, sizeof *addrs);
    PyObject *out = NULL;
    if (!arena || (with_ts && !ctl) || !msgs || !iov || !addrs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < max_count; i++) {
        iov[i].iov_base = arena + i * size;
        iov[i].iov_len = (size_t)size;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &addrs[i];
        msgs[i].msg_hdr.msg_namelen = sizeof addrs[i];
        if (with_ts) {
            msgs[i].msg_hdr.msg_control = ctl + i * cspace;
            msgs[i].msg_hdr.msg_controllen = cspace;
        }
    }
    int got;
    Py_BEGIN_ALLOW_THREADS
    got = recvmmsg(fd, msgs, (unsigned int)max_count, MSG_DONTWAIT, NULL);
    Py_END_ALLOW_THREADS
    if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            out = PyList_New(0);
        } else {
            PyErr_SetFromErrno(PyExc_OSError);
        }
        goto done;
    }
    out = PyList_New(got);
    if (!out)
        goto done;
    for (int i = 0; i < got; i++) {
        /* A datagram longer than `size` is truncated by the kernel, exactly as
         * recvfrom(size) does in the twin. */
        size_t n = msgs[i].msg_len < (size_t)size ? msgs[i].msg_len : (size_t)size;
        PyObject *data = PyBytes_FromStringAndSize(iov[i].iov_base, (Py_ssize_t)n);
        PyObject *addr = data ? dk_addr_to_tuple(&addrs[i]) : NULL;
        PyObject *ts = NULL, *item = NULL;
        if (addr && with_ts) {
            double t = -1.0;
            struct msghdr *h = &msgs[i].msg_hdr;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
                    c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
                    struct timespec tv;
                    memcpy(&tv, CMSG_DATA(c), sizeof tv);
                    t = (double)tv.tv_sec + (double)tv.tv_nsec * 1e-9;
                }
            }
            ts = PyFloat_FromDouble(t);
            item = ts ? PyTuple_Pack(3, data, addr, ts) : NULL;
        } else if (addr) {
            item = PyTuple_Pack(2, data, addr);
        }
        Py_XDECREF(data);
        Py_XDECREF(addr);
        Py_XDECREF(ts);
        if (!item) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SetItem(out, i, item); /* steals */
    }
done:
    PyMem_Free(arena);
    PyMem_Free(ctl);
    PyMem_Free(msgs);
    PyMem_Free(iov);
    PyMem_Free(addrs);
    return out;
}

static PyObject *
dk_recv_batch(PyObject *self, PyObject *args)
{
    PyObject *sock;
    Py_ssize_t max_count, size;
    if (!PyArg_ParseTuple(args, "Onn:recv_batch", &sock, &max_count, &size))
        return NULL;
    if (max_count < 1 || max_count > DK_MAX_BATCH || size < 1 || size > 65536) {
        PyErr_SetString(PyExc_ValueError, "recv_batch: 1 <= max_count <= 1024, 1 <= size <= 65536");
        return NULL;
    }
    return dk_recvmmsg(sock, max_count, size, 0);
}

/* The largest UDP payload of one GSO message (IPv4: 65,535 - 20 - 8). */
#define DK_GSO_MAX_BYTES 65507
#define DK_GSO_CTL CMSG_SPACE(sizeof(uint16_t))

/* Make h a UDP GSO message: one control message (in ctl, DK_GSO_CTL bytes,
 * zeroed by the caller's calloc or here) setting its segment size. */
static void
set_gso_size(struct msghdr *h, char *ctl, size_t seg)
{
    memset(ctl, 0, DK_GSO_CTL);
    h->msg_control = ctl;
    h->msg_controllen = DK_GSO_CTL;
    struct cmsghdr *cm = CMSG_FIRSTHDR(h);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t gs = (uint16_t)seg;
    memcpy(CMSG_DATA(cm), &gs, sizeof gs);
}

/* sendmmsg(2) of msgs[0:n], repeated until every message went or the kernel
 * refused one (EINTR is retried after the signal handlers ran): returns how
 * many went.  *err_no is the refusal's errno, 0 when none, -1 when a signal
 * handler raised (the Python error is set).  Shared by send_batch, send_gso
 * and TxBatch.send, which each decide what a refusal means for them. */
static Py_ssize_t
sendmmsg_all(int fd, struct mmsghdr *msgs, Py_ssize_t n, int *err_no)
{
    Py_ssize_t done = 0;
    *err_no = 0;
    while (done < n) {
        int rc;
        unsigned int want = (unsigned int)(n - done < DK_MAX_BATCH ? n - done : DK_MAX_BATCH);
        Py_BEGIN_ALLOW_THREADS
        rc = sendmmsg(fd, msgs + done, want, 0);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) {
                    *err_no = -1;
                    break;
                }
                continue;
            }
            *err_no = errno;
            break;
        }
        done += rc;
    }
    return done;
}

/* send_gso(sock, items, max_segs) -> items sent.
 *
 * Like send_batch, but a run of consecutive items with the same address and
 * the same length (the run's last item may be shorter) goes as one UDP GSO
 * message (udp(7) UDP_SEGMENT = that length): the kernel builds one large
 * datagram and cuts it into the run's datagrams at the device, so the stack
 * is crossed once per run instead of once per datagram.  A run holds at most
 * max_segs items (the kernel's UDP_MAX_SEGMENTS is 64, 128 since Linux 6.9)
 * and DK_GSO_MAX_BYTES bytes, and no empty datagram (a zero-length segment
 * would vanish); a run of one is a plain datagram.  The items go
 * out in order, and what went is always a prefix of them: the return value
 * counts items, not messages.  Errors as in send_batch: raised only when
 * nothing went; the kernel's refusal of GSO itself (EIO without checksum
 * offload, EINVAL for a segment above the path MTU) is the caller's cue to
 * fall back to send_batch.  Callers group their items by destination first
 * (deliverykit.aio) so that runs are long.
 *
 * send_batch is this loop with max_segs 1 (every item its own message) and
 * None allowed as an address (a connected socket's). */
static PyObject *
send_items(PyObject *sock, PyObject *items, int max_segs, const char *name, int need_addr)
{
    int fd = PyObject_AsFileDescriptor(sock);
    if (fd < 0)
        return NULL;
    PyObject *seq = PySequence_List(items);
    if (!seq)
        return NULL;
    Py_ssize_t total = PyList_Size(seq), sent_total = 0;
    int family = sock_family(fd);
    struct mmsghdr *msgs = PyMem_Calloc(DK_MAX_BATCH, sizeof *msgs);
    struct iovec *iov = PyMem_Calloc(DK_MAX_BATCH, sizeof *iov);
    struct sockaddr_storage *addrs = PyMem_Calloc(DK_MAX_BATCH, sizeof *addrs);
    Py_buffer *bufs = PyMem_Calloc(DK_MAX_BATCH, sizeof *bufs);
    Py_ssize_t *first = PyMem_Calloc(DK_MAX_BATCH + 1, sizeof *first);
    char *ctl = PyMem_Calloc(DK_MAX_BATCH, DK_GSO_CTL);
    PyObject *result = NULL;
    if (!msgs || !iov || !addrs || !bufs || !first || !ctl) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t base = 0; base < total; base += DK_MAX_BATCH) {
        Py_ssize_t n = total - base < DK_MAX_BATCH ? total - base : DK_MAX_BATCH;
        Py_ssize_t held = 0;
        int err = 0, nmsg = 0;
        PyObject *run_addr = NULL;   /* the open run's address object (borrowed) */
        size_t seg = 0, run_bytes = 0;
        int run_len = 0, run_open = 0;
        for (Py_ssize_t i = 0; i < n && !err; i++) {
            PyObject *item = PyList_GetItem(seq, base + i); /* borrowed */
            if (!PyTuple_Check(item) || PyTuple_Size(item) != 2) {
                PyErr_Format(PyExc_TypeError, "%s: items are (data, address) pairs", name);
                err = 1;
                break;
            }
            PyObject *data = PyTuple_GetItem(item, 0), *addr = PyTuple_GetItem(item, 1);
            if (need_addr && addr == Py_None) {
                PyErr_Format(PyExc_TypeError, "%s: every item needs an address", name);
                err = 1;
                break;
            }
            if (PyObject_GetBuffer(data, &bufs[i], PyBUF_C_CONTIGUOUS) < 0) {
                err = 1;
                break;
            }
            held = i + 1;
            iov[i].iov_base = bufs[i].buf;
            iov[i].iov_len = (size_t)bufs[i].len;
            size_t len = (size_t)bufs[i].len;
            int same = 0;
            /* an empty datagram never joins a run: as a GSO segment it would vanish */
            if (run_open && len > 0 && len <= seg && run_len < max_segs &&
                run_bytes + len <= DK_GSO_MAX_BYTES) {
                if (addr == run_addr)
                    same = 1;
                else {
                    int eq = PyObject_RichCompareBool(addr, run_addr, Py_EQ);
                    if (eq < 0) {
                        err = 1;
                        break;
                    }
                    same = eq;
                }
            }
            if (same) {
                run_len++;
                run_bytes += len;
                if (len < seg)
                    run_open = 0;   /* a shorter datagram ends its run */
            } else {
                struct mmsghdr *m = &msgs[nmsg];
                memset(m, 0, sizeof *m);
                if (addr != Py_None) {
                    socklen_t alen;
                    if (tuple_to_addr(addr, family, &addrs[nmsg], &alen) < 0) {
                        err = 1;
                        break;
                    }
                    m->msg_hdr.msg_name = &addrs[nmsg];
                    m->msg_hdr.msg_namelen = alen;
                }
                m->msg_hdr.msg_iov = &iov[i];
                first[nmsg] = i;
                nmsg++;
                run_addr = addr;
                seg = len;
                run_bytes = len;
                run_len = 1;
                run_open = len > 0;
            }
            msgs[nmsg - 1].msg_hdr.msg_iovlen = (size_t)run_len;
        }
        first[nmsg] = err ? 0 : n;
        if (!err) {
            /* one control message per run of two or more: UDP_SEGMENT = its first length */
            for (int k = 0; k < nmsg; k++) {
                struct msghdr *h = &msgs[k].msg_hdr;
                if (h->msg_iovlen >= 2)
                    set_gso_size(h, ctl + (size_t)k * DK_GSO_CTL, h->msg_iov[0].iov_len);
            }
        }
        Py_ssize_t done = 0;
        if (!err) {
            int eno;
            done = sendmmsg_all(fd, msgs, nmsg, &eno);
            if (eno < 0) {
                err = 1;
            } else if (eno > 0 && done + sent_total == 0) {
                /* once something went, any error (a full buffer, an unreachable
                 * destination) ends the call with the count: the caller's next call
                 * starts at the item that failed and meets its error then.  Raising
                 * would lose the count and make the caller send again what went. */
                errno = eno;
                PyErr_SetFromErrno(PyExc_OSError);
                err = 1;
            }
        }
        for (Py_ssize_t i = 0; i < held; i++)
            PyBuffer_Release(&bufs[i]);
        if (err)
            goto out;
        sent_total += first[done];
        if (done < nmsg)
            break;
    }
    result = PyLong_FromSsize_t(sent_total);
out:
    Py_DECREF(seq);
    PyMem_Free(msgs);
    PyMem_Free(iov);
    PyMem_Free(addrs);
    PyMem_Free(bufs);
    PyMem_Free(first);
    PyMem_Free(ctl);
    return result;
}

static PyObject *
dk_send_batch(PyObject *self, PyObject *args)
{
    PyObject *sock, *items;
    if (!PyArg_ParseTuple(args, "OO:send_batch", &sock, &items))
        return NULL;
    return send_items(sock, items, 1, "send_batch", 0);
}

static PyObject *
dk_send_gso(PyObject *self, PyObject *args)
{
    PyObject *sock, *items;
    int max_segs;
    if (!PyArg_ParseTuple(args, "OOi:send_gso", &sock, &items, &max_segs))
        return NULL;
    if (max_segs < 1 || max_segs > 128) {
        PyErr_SetString(PyExc_ValueError, "send_gso: 1 <= max_segs <= 128");
        return NULL;
    }
    return send_items(sock, items, max_segs, "send_gso", 1);
}

/* group_by_destination(items) -> list: the (data, address) items grouped by
 * address, groups in the order their address first appears, each in its own
 * order (what send_gso needs for long runs; the order towards one address is
 * kept).  One dict of address -> group list, then one flattening pass. */
static PyObject *
dk_group_by_destination(PyObject *self, PyObject *items)
{
    PyObject *seq = PySequence_List(items);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyList_Size(seq);
    PyObject *groups = PyDict_New(), *order = PyList_New(0), *out = NULL;
    if (!groups || !order)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GetItem(seq, i); /* borrowed */
        if (!PyTuple_Check(item) || PyTuple_Size(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "group_by_destination: items are (data, address) pairs");
            goto done;
        }
        PyObject *addr = PyTuple_GetItem(item, 1);
        PyObject *g = PyDict_GetItemWithError(groups, addr); /* borrowed */
        if (!g) {
            if (PyErr_Occurred())
                goto done;
            g = PyList_New(0);
            if (!g || PyDict_SetItem(groups, addr, g) < 0 || PyList_Append(order, g) < 0) {
                Py_XDECREF(g);
                goto done;
            }
            Py_DECREF(g); /* the dict and order hold it */
        }
        if (PyList_Append(g, item) < 0)
            goto done;
    }
    if (PyList_Size(order) <= 1) {
        out = seq; /* one address (or none): already grouped */
        Py_INCREF(out);
        goto done;
    }
    out = PyList_New(n);
    if (!out)
        goto done;
    Py_ssize_t k = 0;
    for (Py_ssize_t j = 0; j < PyList_Size(order); j++) {
        PyObject *g = PyList_GetItem(order, j);
        for (Py_ssize_t i = 0; i < PyList_Size(g); i++) {
            PyObject *item = PyList_GetItem(g, i);
            Py_INCREF(item);
            PyList_SetItem(out, k++, item); /* steals */
        }
    }
done:
    Py_DECREF(seq);
    Py_XDECREF(groups);
    Py_XDECREF(order);
    return out;
}

/* ------------------------------------------------------------------ TxBatch */

/* A batch of datagrams to send, held without a Python object per datagram:
 * each entry is an optional header (bytes) and a body (a slice of a bytes
 * object the entry holds a reference to) to one IPv4/IPv6 address and port.
 * The CoreCast ITR's C batch loop appends to it directly (dk_txbatch_push:
 * no bytes copy, no tuple); Python code appends (data, (host, port)) pairs.
 * send() groups the entries by destination (stable) and sends them in one
 * sendmmsg, each run of same-size datagrams to one address as a UDP GSO
 * message (as send_gso) whose iovecs point at the headers and bodies, so the
 * only copy of a datagram is the kernel's.  Twin: fastpath.PyTxBatch. */

typedef struct {
    PyObject *hdr;      /* bytes, or NULL */
    PyObject *owner;    /* the bytes object the body lies in */
    Py_ssize_t off, len;
    PyObject *host;     /* str */
    int port;
    socklen_t salen;
    union {
        struct sockaddr_in v4;
        struct sockaddr_in6 v6;
    } sa;
    uint8_t sent;
} dk_txent;

typedef struct {
    PyObject_HEAD
    dk_txent *ent;
    Py_ssize_t n, cap;
    int last_errno;
} TxBatch;

static PyTypeObject *TxBatch_Type;

int
dk_txbatch_check(PyObject *o)
{
    return TxBatch_Type != NULL && Py_TYPE(o) == TxBatch_Type;
}

static dk_txent *
txb_new_entry(TxBatch *b)
{
    if (b->n == b->cap) {
        Py_ssize_t nc = b->cap ? b->cap * 2 : 256;
        dk_txent *e = PyMem_Realloc(b->ent, (size_t)nc * sizeof *e);
        if (!e) {
            PyErr_NoMemory();
            return NULL;
        }
        b->ent = e;
        b->cap = nc;
    }
    dk_txent *e = &b->ent[b->n];
    memset(e, 0, sizeof *e);
    return e;
}

/* Append hdr (bytes or NULL) + body[0:len] (inside the bytes object owner) to
 * host:port, whose packed address (4 or 16 bytes) is addr.  The C twin of
 * appending (hdr + body, (host, port)). */
int
dk_txbatch_push(PyObject *batch, PyObject *hdr, PyObject *owner, const unsigned char *body,
                Py_ssize_t len, PyObject *host, const unsigned char *addr, Py_ssize_t alen,
                int port)
{
    TxBatch *b = (TxBatch *)batch;
    if (alen != 4 && alen != 16) {
        PyErr_SetString(PyExc_ValueError, "TxBatch: an address is 4 or 16 bytes");
        return -1;
    }
    dk_txent *e = txb_new_entry(b);
    if (!e)
        return -1;
    if (hdr) {
        Py_INCREF(hdr);
        e->hdr = hdr;
    }
    Py_INCREF(owner);
    e->owner = owner;
    e->off = (Py_ssize_t)(body - (const unsigned char *)PyBytes_AsString(owner));
    e->len = len;
    Py_INCREF(host);
    e->host = host;
    e->port = port;
    if (alen == 4) {
        e->sa.v4.sin_family = AF_INET;
        e->sa.v4.sin_port = htons((uint16_t)port);
        memcpy(&e->sa.v4.sin_addr, addr, 4);
        e->salen = sizeof e->sa.v4;
    } else {
        e->sa.v6.sin6_family = AF_INET6;
        e->sa.v6.sin6_port = htons((uint16_t)port);
        memcpy(&e->sa.v6.sin6_addr, addr, 16);
        e->salen = sizeof e->sa.v6;
    }
    b->n++;
    return 0;
}

static void
txb_clear(TxBatch *b)
{
    for (Py_ssize_t i = 0; i < b->n; i++) {
        Py_XDECREF(b->ent[i].hdr);
        Py_XDECREF(b->ent[i].owner);
        Py_XDECREF(b->ent[i].host);
    }
    b->n = 0;
}

/* append((data, (host, port))): data bytes, host an IPv4 or IPv6 literal */
static PyObject *
TxBatch_append(TxBatch *b, PyObject *item)
{
    PyObject *data, *host;
    int port;
    if (!PyTuple_Check(item) || PyTuple_Size(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "TxBatch.append: a (data, (host, port)) pair");
        return NULL;
    }
    data = PyTuple_GetItem(item, 0);
    PyObject *addr = PyTuple_GetItem(item, 1);
    if (!PyBytes_Check(data) || !PyTuple_Check(addr) || PyTuple_Size(addr) < 2) {
        PyErr_SetString(PyExc_TypeError, "TxBatch.append: a (bytes, (host, port)) pair");
        return NULL;
    }
    host = PyTuple_GetItem(addr, 0);
    port = (int)PyLong_AsLong(PyTuple_GetItem(addr, 1));
    if (port == -1 && PyErr_Occurred())
        return NULL;
    const char *h = PyUnicode_Check(host) ? PyUnicode_AsUTF8AndSize(host, NULL) : NULL;
    if (!h) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "TxBatch.append: the host is a str");
        return NULL;
    }
    unsigned char packed[16];
    Py_ssize_t alen = strchr(h, ':') ? 16 : 4;
    if (port < 0 || port > 65535
        || inet_pton(alen == 16 ? AF_INET6 : AF_INET, h, packed) != 1) {
        PyErr_Format(PyExc_ValueError, "TxBatch.append: not an address and port: %s", h);
        return NULL;
    }
    if (dk_txbatch_push((PyObject *)b, NULL, data, (const unsigned char *)PyBytes_AsString(data),
                        PyBytes_Size(data), host, packed, alen, port) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
txb_entry_item(const dk_txent *e)
{
    Py_ssize_t hl = e->hdr ? PyBytes_Size(e->hdr) : 0;
    PyObject *data = PyBytes_FromStringAndSize(NULL, hl + e->len);
    if (!data)
        return NULL;
    char *d = PyBytes_AsString(data);
    if (hl)
        memcpy(d, PyBytes_AsString(e->hdr), (size_t)hl);
    memcpy(d + hl, PyBytes_AsString(e->owner) + e->off, (size_t)e->len);
    PyObject *item = Py_BuildValue("(N(Oi))", data, e->host, e->port);
    return item;
}

/* items() -> [(data, (host, port))] in the order they were appended */
static PyObject *
TxBatch_items(TxBatch *b, PyObject *noargs)
{
    PyObject *out = PyList_New(b->n);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        PyObject *it = txb_entry_item(&b->ent[i]);
        if (!it) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SetItem(out, i, it);
    }
    return out;
}

static Py_ssize_t
txb_size(const dk_txent *e)
{
    return (e->hdr ? PyBytes_Size(e->hdr) : 0) + e->len;
}

static int
txb_same_dest(const dk_txent *a, const dk_txent *b)
{
    return a->salen == b->salen && memcmp(&a->sa, &b->sa, a->salen) == 0;
}

static uint64_t
txb_hash(const dk_txent *e)
{
    const unsigned char *p = (const unsigned char *)&e->sa;
    uint64_t h = 1469598103934665603ULL;
    for (socklen_t i = 0; i < e->salen; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* order[] <- entry indices grouped by destination, groups in order of first
 * appearance, each in its own order (an open-addressing table of groups) */
static int
txb_group(TxBatch *b, Py_ssize_t *order)
{
    Py_ssize_t n = b->n, size = 64;
    while (size < 2 * n)
        size *= 2;
    Py_ssize_t *slot = PyMem_Malloc((size_t)size * sizeof *slot);   /* -> group */
    Py_ssize_t *gfirst = PyMem_Malloc((size_t)n * sizeof *gfirst);  /* group -> entry */
    Py_ssize_t *glast = PyMem_Malloc((size_t)n * sizeof *glast);
    Py_ssize_t *next = PyMem_Malloc((size_t)n * sizeof *next);
    int rc = -1;
    if (!slot || !gfirst || !glast || !next) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t s = 0; s < size; s++)
        slot[s] = -1;
    Py_ssize_t ng = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        next[i] = -1;
        Py_ssize_t s = (Py_ssize_t)(txb_hash(&b->ent[i]) & (uint64_t)(size - 1));
        while (slot[s] >= 0 && !txb_same_dest(&b->ent[gfirst[slot[s]]], &b->ent[i]))
            s = (s + 1) & (size - 1);
        if (slot[s] < 0) {
            slot[s] = ng;
            gfirst[ng] = glast[ng] = i;
            ng++;
        } else {
            Py_ssize_t g = slot[s];
            next[glast[g]] = i;
            glast[g] = i;
        }
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t g = 0; g < ng; g++)
        for (Py_ssize_t i = gfirst[g]; i >= 0; i = next[i])
            order[k++] = i;
    rc = 0;
out:
    PyMem_Free(slot);
    PyMem_Free(gfirst);
    PyMem_Free(glast);
    PyMem_Free(next);
    return rc;
}

/* send(sock, max_segs) -> entries sent.  Grouped by destination; a run of
 * same-size datagrams to one address (the last may be shorter; no empty ones;
 * at most max_segs and DK_GSO_MAX_BYTES) goes as one UDP GSO message when
 * max_segs > 1.  Never raises for the socket's errors: it stops at the first
 * message the kernel does not take, keeps its errno in last_errno, and leaves
 * the rest to take_rest() (the caller hands them to an endpoint, which knows
 * what each error means). */
static PyObject *
TxBatch_send(TxBatch *b, PyObject *args)
{
    PyObject *sock;
    int max_segs;
    if (!PyArg_ParseTuple(args, "Oi:send", &sock, &max_segs))
        return NULL;
    if (max_segs < 1 || max_segs > 128) {
        PyErr_SetString(PyExc_ValueError, "TxBatch.send: 1 <= max_segs <= 128");
        return NULL;
    }
    int fd = PyObject_AsFileDescriptor(sock);
    if (fd < 0)
        return NULL;
    b->last_errno = 0;
    Py_ssize_t n = b->n, sent = 0;
    if (n == 0)
        return PyLong_FromLong(0);
    Py_ssize_t *order = PyMem_Malloc((size_t)n * sizeof *order);
    Py_ssize_t *mfirst = PyMem_Malloc((size_t)(n + 1) * sizeof *mfirst); /* into order */
    struct mmsghdr *msgs = PyMem_Calloc((size_t)n, sizeof *msgs);
    struct iovec *iov = PyMem_Malloc((size_t)(2 * n) * sizeof *iov);
    char *ctl = PyMem_Calloc((size_t)n, DK_GSO_CTL);
    PyObject *result = NULL;
    if (!order || !mfirst || !msgs || !iov || !ctl) {
        PyErr_NoMemory();
        goto out;
    }
    if (txb_group(b, order) < 0)
        goto out;
    Py_ssize_t nmsg = 0, niov = 0;
    Py_ssize_t seg = 0, run_bytes = 0;
    int run_len = 0, run_open = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        dk_txent *e = &b->ent[order[k]];
        Py_ssize_t len = txb_size(e);
        int join = run_open && max_segs > 1 && len > 0 && len <= seg && run_len < max_segs
                   && run_bytes + len <= DK_GSO_MAX_BYTES
                   && txb_same_dest(e, &b->ent[order[mfirst[nmsg - 1]]]);
        if (join) {
            run_len++;
            run_bytes += len;
            if (len < seg)
                run_open = 0;
        } else {
            struct msghdr *h = &msgs[nmsg].msg_hdr;
            h->msg_name = &e->sa;
            h->msg_namelen = e->salen;
            h->msg_iov = &iov[niov];
            h->msg_iovlen = 0;
            mfirst[nmsg++] = k;
            seg = run_bytes = len;
            run_len = 1;
            run_open = len > 0;
        }
        struct msghdr *h = &msgs[nmsg - 1].msg_hdr;
        if (e->hdr && PyBytes_Size(e->hdr) > 0) {
            iov[niov].iov_base = PyBytes_AsString(e->hdr);
            iov[niov].iov_len = (size_t)PyBytes_Size(e->hdr);
            niov++;
            h->msg_iovlen++;
        }
        iov[niov].iov_base = PyBytes_AsString(e->owner) + e->off;
        iov[niov].iov_len = (size_t)e->len;
        niov++;
        h->msg_iovlen++;
        if (run_len == 2) /* a GSO message: its segment size in a control message */
            set_gso_size(h, ctl + (size_t)(nmsg - 1) * DK_GSO_CTL, (size_t)seg);
    }
    mfirst[nmsg] = n;
    int eno;
    /* a signal handler that raised (eno -1) is raised below, with what went marked sent */
    Py_ssize_t done = sendmmsg_all(fd, msgs, nmsg, &eno);
    if (eno > 0)
        b->last_errno = eno;
    for (Py_ssize_t k = 0; k < mfirst[done]; k++)
        b->ent[order[k]].sent = 1;
    sent = mfirst[done];
    if (!PyErr_Occurred())
        result = PyLong_FromSsize_t(sent);
out:
    PyMem_Free(order);
    PyMem_Free(mfirst);
    PyMem_Free(msgs);
    PyMem_Free(iov);
    PyMem_Free(ctl);
    return result;
}

/* take_rest() -> [(data, (host, port))]: the entries send() did not send, grouped
 * as send() ordered them; the batch is empty after */
static PyObject *
TxBatch_take_rest(TxBatch *b, PyObject *noargs)
{
    PyObject *out = PyList_New(0);
    Py_ssize_t *order = b->n ? PyMem_Malloc((size_t)b->n * sizeof *order) : NULL;
    if (!out || (b->n && !order)) {
        Py_XDECREF(out);
        PyMem_Free(order);
        return b->n ? PyErr_NoMemory() : NULL;
    }
    if (b->n && txb_group(b, order) < 0) {
        Py_DECREF(out);
        PyMem_Free(order);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < b->n; k++) {
        const dk_txent *e = &b->ent[order[k]];
        if (e->sent)
            continue;
        PyObject *it = txb_entry_item(e);
        if (!it || PyList_Append(out, it) < 0) {
            Py_XDECREF(it);
            Py_DECREF(out);
            PyMem_Free(order);
            return NULL;
        }
        Py_DECREF(it);
    }
    PyMem_Free(order);
    txb_clear(b);
    return out;
}

/* counts() -> {host: (datagrams, bytes)} over every entry */
static PyObject *
TxBatch_counts(TxBatch *b, PyObject *noargs)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        const dk_txent *e = &b->ent[i];
        PyObject *old = PyDict_GetItemWithError(d, e->host);
        long long pk = 0, by = 0;
        if (old) {
            pk = PyLong_AsLongLong(PyTuple_GetItem(old, 0));
            by = PyLong_AsLongLong(PyTuple_GetItem(old, 1));
        } else if (PyErr_Occurred()) {
            Py_DECREF(d);
            return NULL;
        }
        PyObject *v = Py_BuildValue("(LL)", pk + 1, by + (long long)txb_size(e));
        if (!v || PyDict_SetItem(d, e->host, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *
TxBatch_clear(TxBatch *b, PyObject *noargs)
{
    txb_clear(b);
    Py_RETURN_NONE;
}

static PyObject *
TxBatch_get_last_errno(TxBatch *b, void *closure)
{
    return PyLong_FromLong(b->last_errno);
}

static Py_ssize_t
TxBatch_len(TxBatch *b)
{
    return b->n;
}

static void
TxBatch_dealloc(TxBatch *b)
{
    txb_clear(b);
    PyMem_Free(b->ent);
    PyTypeObject *tp = Py_TYPE((PyObject *)b);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(b);
    Py_DECREF(tp);
}

static PyObject *
TxBatch_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (!PyArg_ParseTuple(args, ":TxBatch"))
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    TxBatch *b = (TxBatch *)alloc(type, 0);
    if (!b)
        return NULL;
    b->ent = NULL;
    b->n = b->cap = 0;
    b->last_errno = 0;
    return (PyObject *)b;
}

static PyMethodDef TxBatch_methods[] = {
    {"append", (PyCFunction)TxBatch_append, METH_O,
     "append((data, (host, port))): one more datagram."},
    {"send", (PyCFunction)TxBatch_send, METH_VARARGS,
     "send(sock, max_segs) -> sent: grouped by destination, runs as UDP GSO messages."},
    {"take_rest", (PyCFunction)TxBatch_take_rest, METH_NOARGS,
     "take_rest() -> [(data, (host, port))] not sent; empties the batch."},
    {"items", (PyCFunction)TxBatch_items, METH_NOARGS,
     "items() -> [(data, (host, port))] in the order appended."},
    {"counts", (PyCFunction)TxBatch_counts, METH_NOARGS,
     "counts() -> {host: (datagrams, bytes)}."},
    {"clear", (PyCFunction)TxBatch_clear, METH_NOARGS, "clear(): empty the batch."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef TxBatch_getset[] = {
    {"last_errno", (getter)TxBatch_get_last_errno, NULL,
     "the errno at which the last send() stopped, or 0", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot TxBatch_slots[] = {
    {Py_tp_new, TxBatch_new},
    {Py_tp_dealloc, TxBatch_dealloc},
    {Py_tp_methods, TxBatch_methods},
    {Py_tp_getset, TxBatch_getset},
    {Py_sq_length, TxBatch_len},
    {Py_mp_length, TxBatch_len},
    {Py_tp_doc, "Datagrams to send, without a Python object each; send() uses UDP GSO."},
    {0, NULL},
};

static PyType_Spec TxBatch_spec = {
    "deliverykit._speedups.TxBatch", sizeof(TxBatch), 0, Py_TPFLAGS_DEFAULT, TxBatch_slots,
};

/* tx_batch() -> a new, empty TxBatch (the type is made on first use) */
static PyObject *
dk_tx_batch(PyObject *self, PyObject *noargs)
{
    if (TxBatch_Type == NULL) {
        TxBatch_Type = (PyTypeObject *)PyType_FromSpec(&TxBatch_spec);
        if (TxBatch_Type == NULL)
            return NULL;
    }
    return PyObject_CallObject((PyObject *)TxBatch_Type, NULL);
}

PyMethodDef dk_core_methods[] = {
    {"xor_into", dk_xor_into, METH_VARARGS, "xor_into(dst, src): dst[i] ^= src[i] in place."},
    {"recv_batch", dk_recv_batch, METH_VARARGS,
     "recv_batch(sock, max_count, size) -> [(data, address)]: up to max_count datagrams, never blocks."},
    {"send_batch", dk_send_batch, METH_VARARGS,
     "send_batch(sock, [(data, address|None)]) -> count sent with sendmmsg."},
    {"send_gso", dk_send_gso, METH_VARARGS,
     "send_gso(sock, [(data, address)], max_segs) -> count sent; same-address, same-size runs as UDP GSO."},
    {"tx_batch", dk_tx_batch, METH_NOARGS,
     "tx_batch() -> TxBatch: datagrams to send without a Python object each (UDP GSO)."},
    {"group_by_destination", dk_group_by_destination, METH_O,
     "group_by_destination([(data, address)]) -> list grouped by address, stable."},
    {NULL, NULL, 0, NULL},
};
