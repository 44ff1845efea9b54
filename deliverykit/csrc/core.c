/* Core hot loops shared by every package.
 *
 *   xor_into(dst, src)                 dst[i] ^= src[i]            (twin: fastpath.py)
 *   recv_batch(sock, max_count, size)  recvmmsg, non-blocking      (twin: fastpath.py)
 *   send_batch(sock, items)            sendmmsg of (data, addr)    (twin: fastpath.py)
 *   send_gso(sock, items, max_segs)    the same, runs as UDP GSO   (twin: fastpath.py)
 *   group_by_destination(items)        stable grouping by address  (twin: fastpath.py)
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

static PyObject *
dk_send_batch(PyObject *self, PyObject *args)
{
    PyObject *sock, *items;
    if (!PyArg_ParseTuple(args, "OO:send_batch", &sock, &items))
        return NULL;
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
    PyObject *result = NULL;
    if (!msgs || !iov || !addrs || !bufs) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t base = 0; base < total; base += DK_MAX_BATCH) {
        Py_ssize_t n = total - base < DK_MAX_BATCH ? total - base : DK_MAX_BATCH;
        Py_ssize_t held = 0;
        int err = 0;
        for (Py_ssize_t i = 0; i < n && !err; i++) {
            PyObject *item = PyList_GetItem(seq, base + i); /* borrowed */
            PyObject *data = NULL, *addr = NULL;
            if (!PyTuple_Check(item) || PyTuple_Size(item) != 2) {
                PyErr_SetString(PyExc_TypeError, "send_batch: items are (data, address) pairs");
                err = 1;
                break;
            }
            data = PyTuple_GetItem(item, 0);
            addr = PyTuple_GetItem(item, 1);
            if (PyObject_GetBuffer(data, &bufs[i], PyBUF_C_CONTIGUOUS) < 0) {
                err = 1;
                break;
            }
            held = i + 1;
            memset(&msgs[i], 0, sizeof msgs[i]);
            iov[i].iov_base = bufs[i].buf;
            iov[i].iov_len = (size_t)bufs[i].len;
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            if (addr != Py_None) {
                socklen_t alen;
                if (tuple_to_addr(addr, family, &addrs[i], &alen) < 0) {
                    err = 1;
                    break;
                }
                msgs[i].msg_hdr.msg_name = &addrs[i];
                msgs[i].msg_hdr.msg_namelen = alen;
            }
        }
        int done = 0;
        while (!err && done < n) {
            int rc;
            Py_BEGIN_ALLOW_THREADS
            rc = sendmmsg(fd, msgs + done, (unsigned int)(n - done), 0);
            Py_END_ALLOW_THREADS
            if (rc < 0) {
                if (errno == EINTR) {
                    if (PyErr_CheckSignals() < 0)
                        err = 1;
                    continue;
                }
                /* Once something went, any error (a full buffer, an unreachable
                 * destination) ends the call with the count: the caller's next call
                 * starts at the item that failed and sees its error then.  Raising
                 * here would lose the count and make the caller send again what
                 * already went. */
                if (done + sent_total > 0)
                    break;
                PyErr_SetFromErrno(PyExc_OSError);
                err = 1;
                break;
            }
            done += rc;
        }
        for (Py_ssize_t i = 0; i < held; i++)
            PyBuffer_Release(&bufs[i]);
        if (err)
            goto out;
        sent_total += done;
        if (done < n)
            break;
    }
    result = PyLong_FromSsize_t(sent_total);
out:
    Py_DECREF(seq);
    PyMem_Free(msgs);
    PyMem_Free(iov);
    PyMem_Free(addrs);
    PyMem_Free(bufs);
    return result;
}

/* The largest UDP payload of one GSO message (IPv4: 65,535 - 20 - 8). */
#define DK_GSO_MAX_BYTES 65507
#define DK_GSO_CTL CMSG_SPACE(sizeof(uint16_t))

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
 * (deliverykit.aio) so that runs are long. */
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
                PyErr_SetString(PyExc_TypeError, "send_gso: items are (data, address) pairs");
                err = 1;
                break;
            }
            PyObject *data = PyTuple_GetItem(item, 0), *addr = PyTuple_GetItem(item, 1);
            if (addr == Py_None) {
                PyErr_SetString(PyExc_TypeError, "send_gso: every item needs an address");
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
                socklen_t alen;
                memset(m, 0, sizeof *m);
                if (tuple_to_addr(addr, family, &addrs[nmsg], &alen) < 0) {
                    err = 1;
                    break;
                }
                m->msg_hdr.msg_name = &addrs[nmsg];
                m->msg_hdr.msg_namelen = alen;
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
                if (h->msg_iovlen < 2)
                    continue;
                char *c = ctl + (size_t)k * DK_GSO_CTL;
                memset(c, 0, DK_GSO_CTL);
                h->msg_control = c;
                h->msg_controllen = DK_GSO_CTL;
                struct cmsghdr *cm = CMSG_FIRSTHDR(h);
                cm->cmsg_level = SOL_UDP;
                cm->cmsg_type = UDP_SEGMENT;
                cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                uint16_t gs = (uint16_t)h->msg_iov[0].iov_len;
                memcpy(CMSG_DATA(cm), &gs, sizeof gs);
            }
        }
        int done = 0;
        while (!err && done < nmsg) {
            int rc;
            Py_BEGIN_ALLOW_THREADS
            rc = sendmmsg(fd, msgs + done, (unsigned int)(nmsg - done), 0);
            Py_END_ALLOW_THREADS
            if (rc < 0) {
                if (errno == EINTR) {
                    if (PyErr_CheckSignals() < 0)
                        err = 1;
                    continue;
                }
                if (done + sent_total > 0)
                    break; /* the count so far; the caller's next call meets the error */
                PyErr_SetFromErrno(PyExc_OSError);
                err = 1;
                break;
            }
            done += rc;
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

PyMethodDef dk_core_methods[] = {
    {"xor_into", dk_xor_into, METH_VARARGS, "xor_into(dst, src): dst[i] ^= src[i] in place."},
    {"recv_batch", dk_recv_batch, METH_VARARGS,
     "recv_batch(sock, max_count, size) -> [(data, address)]: up to max_count datagrams, never blocks."},
    {"send_batch", dk_send_batch, METH_VARARGS,
     "send_batch(sock, [(data, address|None)]) -> count sent with sendmmsg."},
    {"send_gso", dk_send_gso, METH_VARARGS,
     "send_gso(sock, [(data, address)], max_segs) -> count sent; same-address, same-size runs as UDP GSO."},
    {"group_by_destination", dk_group_by_destination, METH_O,
     "group_by_destination([(data, address)]) -> list grouped by address, stable."},
    {NULL, NULL, 0, NULL},
};
