/*
 * The DUE's merge passes: due_sort_unique, due_find_new, due_write_buckets
 * (file I/O with the GIL released) and due_pick.  due_files.c has the
 * file-system calls a merge ends with (fsync, unlink).
 *
 * The merge of crawler.due.disk.DiskDUE, each pass one call that does its
 * work with the GIL released (crawler/due/merge_pass.py has the numpy twins;
 * tests/unit/test_due_merge_pass.py checks both give the same arrays and the
 * same files).  Why: a background merge used to be ~20 numpy calls per bucket
 * with Python in between, and every one of those steps took the GIL from the
 * thread calling submit(); that doubled submit's wall time while a merge ran.
 * Now a merge holds the GIL for a few short Python steps, and its sort,
 * membership pass and file writing run on the other core.
 *
 *   due_sort_unique(fps, keys, first) -> u
 *       keys[:u] = the distinct fingerprints sorted, first[:u] = the earliest
 *       index of each in fps (a radix sort of (fingerprint, index) is stable,
 *       so the first of a run of equal keys is the earliest).
 *   due_find_new(keys, bounds, base_paths, base_counts, delta_paths,
 *                delta_counts, window_entries, new_mask, new_counts)
 *       keys: sorted distinct; bucket b's keys are keys[bounds[b]:bounds[b+1]].
 *       They are checked against the bucket's delta (read whole) and base
 *       (mapped window_entries fingerprints at a time, searched by galloping
 *       from the last position: the keys come sorted).  new_mask[i] = 1 for a
 *       key in neither, new_counts[b] = how many in bucket b.
 *   due_write_buckets(keys, new_mask, bounds, base_paths, base_counts,
 *                     delta_paths, delta_counts, buckets, out_paths, folds, window_entries)
 *       for each bucket buckets[i]: adds = its delta merged with its new keys;
 *       writes adds to out_paths[i] or, when folds[i], its base merged with
 *       adds (streamed through two fixed buffers).  Files are not fsynced here.
 *   due_pick(urls, positions) -> [urls[p] for p in positions]  (holds the GIL)
 *
 * Paths are bytes (None: the bucket has no such file).  A bucket file whose
 * size is not 8 bytes per fingerprint of its count makes the call return
 * (path, size, expected size) without going on (the caller raises
 * CorruptSetError); a failed system call raises OSError naming the file.
 * Scratch memory is mapped and unmapped here (not malloc), so it goes back to
 * the OS when the pass ends.
 */
#include "native.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MSD_BITS 8                           /* the sort's first pass: by the top byte */
#define MSD_SIZE ((size_t)1 << MSD_BITS)
#define LSD_BITS 8                           /* then the other 7 bytes, one pass each */
#define LSD_PASSES 7
#define LSD_SIZE ((size_t)1 << LSD_BITS)
#define SEEK_LINE_STEPS 4                    /* a lookup steps this many cache lines before it gallops */
#define DENSE_FPS_PER_KEY 8192               /* a base window is mapped whole (MAP_POPULATE) when it has a
                                                key to look up per this many fingerprints or fewer */
#define STREAM_ENTRIES ((size_t)1 << 17)     /* 1 MiB buffers for a fold's base in and its output */

typedef struct {
    int err;                 /* errno of a failed system call */
    int corrupt;             /* a file of the wrong size */
    const char *path;        /* the file either concerns */
    int64_t have, want;      /* its size and the size its count implies */
} MergeStatus;

/* Scratch memory, its pages mapped at once (one system call, not a page
 * fault per 4 KiB: faults are dear on a VM) and unmapped after use. */
static void *scratch_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void scratch_free(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes ? bytes : 1);
}

static int status_errno(MergeStatus *st, const char *path)
{
    st->err = errno ? errno : EIO;
    st->path = path;
    return -1;
}

/* Opens a bucket file for reading; it must hold exactly `count` fingerprints. */
static int open_bucket_file(const char *path, int64_t count, MergeStatus *st)
{
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return status_errno(st, path);
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        status_errno(st, path);
        close(fd);
        return -1;
    }
    if ((int64_t)sb.st_size != count * 8) {
        st->corrupt = 1;
        st->path = path;
        st->have = (int64_t)sb.st_size;
        st->want = count * 8;
        close(fd);
        return -1;
    }
    return fd;
}

static int read_at(int fd, void *dst, size_t bytes, off_t offset, const char *path, MergeStatus *st)
{
    char *p = dst;
    while (bytes) {
        ssize_t r = pread(fd, p, bytes, offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {                         /* shrank since fstat: as corrupt as a short file */
            if (r == 0) {
                errno = EIO;
            }
            return status_errno(st, path);
        }
        p += r;
        bytes -= (size_t)r;
        offset += r;
    }
    return 0;
}

static int write_all(int fd, const void *src, size_t bytes, const char *path, MergeStatus *st)
{
    const char *p = src;
    while (bytes) {
        ssize_t w = write(fd, p, bytes);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return status_errno(st, path);
        }
        p += w;
        bytes -= (size_t)w;
    }
    return 0;
}

/* A whole delta file, in scratch memory (*out NULL for an empty one). */
static int read_delta(const char *path, int64_t count, uint64_t **out, MergeStatus *st)
{
    *out = NULL;
    if (path == NULL || count <= 0)
        return 0;
    int fd = open_bucket_file(path, count, st);
    if (fd < 0)
        return -1;
    uint64_t *d = scratch_alloc((size_t)count * 8);
    int rc = d == NULL ? (errno = ENOMEM, status_errno(st, path)) : read_at(fd, d, (size_t)count * 8, 0, path, st);
    close(fd);
    if (rc < 0) {
        scratch_free(d, (size_t)count * 8);
        return -1;
    }
    *out = d;
    return 0;
}

/* First index i in [lo, n) with a[i] >= x (n if none), galloping from lo. */
static inline size_t gallop(const uint64_t *a, size_t lo, size_t n, uint64_t x)
{
    size_t hi = lo, step = 1;
    while (hi < n && a[hi] < x) {
        lo = hi + 1;
        hi += step;
        step <<= 1;
    }
    if (hi > n)
        hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The same, for a key near lo (the next key of a dense batch): a few steps of
 * a cache line (8 fingerprints) each, a predictable loop, then a branchless
 * count inside the line; further away, gallop. */
static inline size_t seek(const uint64_t *a, size_t lo, size_t n, uint64_t x)
{
    for (int step = 0; step < SEEK_LINE_STEPS && lo + 8 <= n; step++) {
        if (a[lo + 7] >= x) {
            size_t below = 0;
            for (int i = 0; i < 8; i++)
                below += a[lo + i] < x;
            return lo + below;
        }
        lo += 8;
    }
    return gallop(a, lo, n, x);
}

/* mask[i] = 0 for the sorted keys found in the sorted array `set`. */
static void unmark_found(const uint64_t *keys, size_t nk, uint8_t *mask, const uint64_t *set, size_t ns)
{
    size_t j = 0;
    for (size_t i = 0; i < nk && j < ns; i++) {
        if (!mask[i])
            continue;
        j = seek(set, j, ns, keys[i]);
        if (j < ns && set[j] == keys[i])
            mask[i] = 0;
    }
}

/* The same against a base file, mapped `window` fingerprints at a time. */
static int unmark_found_in_base(const uint64_t *keys, size_t nk, uint8_t *mask, const char *path,
                                int64_t count, int64_t window, MergeStatus *st)
{
    int fd = open_bucket_file(path, count, st);
    if (fd < 0)
        return -1;
    const int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
    /* Many keys: every page will be read anyway, so map each window whole in
     * one call; few keys: let the few pages they touch fault in. */
    const int populate = (int64_t)nk * DENSE_FPS_PER_KEY >= count ? MAP_POPULATE : 0;
    size_t ki = 0;
    for (int64_t start = 0; start < count && ki < nk; start += window) {
        const int64_t w = count - start < window ? count - start : window;
        const int final = start + w >= count;
        const off_t offset = (off_t)(start * 8), aligned = offset - offset % page;
        const size_t len = (size_t)(offset - aligned) + (size_t)w * 8;
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED | populate, fd, aligned);
        if (m == MAP_FAILED) {
            status_errno(st, path);
            close(fd);
            return -1;
        }
        const uint64_t *win = (const uint64_t *)((const char *)m + (offset - aligned));
        const uint64_t last = win[w - 1];
        size_t j = 0, i = ki;
        for (; i < nk; i++) {
            if (!final && keys[i] > last)
                break;                        /* later windows hold only larger fingerprints */
            if (!mask[i])
                continue;
            j = seek(win, j, (size_t)w, keys[i]);
            if (j < (size_t)w && win[j] == keys[i])
                mask[i] = 0;
        }
        ki = i;
        munmap(m, len);
    }
    close(fd);
    return 0;
}


/* After a pass: None, the corrupt file's (path, size, expected), or OSError set. */
static PyObject *merge_result(const MergeStatus *st)
{
    if (st->corrupt)
        return Py_BuildValue("(yLL)", st->path, (long long)st->have, (long long)st->want);
    if (st->err) {
        errno = st->err;
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, st->path);
    }
    Py_RETURN_NONE;
}

/* --- due_sort_unique ------------------------------------------------------- */

typedef struct {
    uint64_t key;
    int64_t pos;
} KeyPos;

/* Stable sort of (key, position) pairs: one pass distributes them by the top
 * byte (MSD_BITS), then each of those runs (~n/256 pairs, in cache) is sorted
 * by an LSD radix sort of the remaining bytes.  Both steps are stable. */
static void radix_sort_pairs(const uint64_t *fps, size_t n, KeyPos *a, KeyPos *b)
{
    size_t start[MSD_SIZE + 1] = {0}, at[MSD_SIZE];
    for (size_t i = 0; i < n; i++)
        start[(fps[i] >> (64 - MSD_BITS)) + 1]++;
    for (size_t x = 0; x < MSD_SIZE; x++) {
        start[x + 1] += start[x];
        at[x] = start[x];
    }
    for (size_t i = 0; i < n; i++) {
        const uint64_t k = fps[i];
        KeyPos *dst = &a[at[k >> (64 - MSD_BITS)]++];
        dst->key = k;
        dst->pos = (int64_t)i;
    }
    size_t hist[LSD_PASSES][LSD_SIZE];
    for (size_t x = 0; x < MSD_SIZE; x++) {
        const size_t lo = start[x], m = start[x + 1] - lo;
        if (m < 2)
            continue;
        KeyPos *src = a + lo, *dst = b + lo;
        memset(hist, 0, sizeof(hist));
        for (size_t i = 0; i < m; i++) {
            const uint64_t k = src[i].key;
            for (int d = 0; d < LSD_PASSES; d++)
                hist[d][(k >> (d * LSD_BITS)) & (LSD_SIZE - 1)]++;
        }
        for (int d = 0; d < LSD_PASSES; d++) {
            size_t *h = hist[d];
            if (h[(src[0].key >> (d * LSD_BITS)) & (LSD_SIZE - 1)] == m)
                continue;                      /* one digit value: this pass keeps the order */
            size_t sum = 0;
            for (size_t v = 0; v < LSD_SIZE; v++) {
                const size_t c = h[v];
                h[v] = sum;
                sum += c;
            }
            for (size_t i = 0; i < m; i++) {
                const KeyPos kp = src[i];
                dst[h[(kp.key >> (d * LSD_BITS)) & (LSD_SIZE - 1)]++] = kp;
            }
            KeyPos *t = src;
            src = dst;
            dst = t;
        }
        if (src != a + lo)
            memcpy(a + lo, src, m * sizeof(KeyPos));
    }
}

static int radix_sort_unique(const uint64_t *fps, size_t n, uint64_t *keys, int64_t *first, size_t *unique)
{
    *unique = 0;
    if (n == 0)
        return 0;
    const size_t scratch_bytes = 2 * n * sizeof(KeyPos);
    KeyPos *a = scratch_alloc(scratch_bytes);
    if (a == NULL)
        return -1;
    radix_sort_pairs(fps, n, a, a + n);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || a[i].key != keys[u - 1]) {   /* the first of a run is the earliest (stable) */
            keys[u] = a[i].key;
            first[u] = a[i].pos;
            u++;
        }
    }
    scratch_free(a, scratch_bytes);
    *unique = u;
    return 0;
}

PyObject *due_sort_unique(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fps_obj, *keys_obj, *first_obj;
    if (!PyArg_ParseTuple(args, "OOO:due_sort_unique", &fps_obj, &keys_obj, &first_obj))
        return NULL;
    Py_buffer in, keys, first;
    PyObject *owner;
    if (get_u64_view(fps_obj, &in, &owner) < 0)
        return NULL;
    const Py_ssize_t n = in.len / 8;
    PyObject *result = NULL;
    if (get_array(keys_obj, &keys, 8, n, 1, "keys") < 0)
        goto release_in;
    if (get_array(first_obj, &first, 8, n, 1, "first") < 0)
        goto release_keys;
    size_t u;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = radix_sort_unique((const uint64_t *)in.buf, (size_t)n, (uint64_t *)keys.buf, (int64_t *)first.buf, &u);
    Py_END_ALLOW_THREADS
    result = rc < 0 ? PyErr_NoMemory() : PyLong_FromSize_t(u);
    PyBuffer_Release(&first);
release_keys:
    PyBuffer_Release(&keys);
release_in:
    PyBuffer_Release(&in);
    Py_XDECREF(owner);
    return result;
}

/* --- due_find_new ------------------------------------------------------------ */

typedef struct {
    const uint64_t *keys;
    const int64_t *bounds;
    Py_ssize_t buckets;
    const char **base_paths, **delta_paths;
    const int64_t *base_counts, *delta_counts;
    int64_t window;
    uint8_t *new_mask;
    int64_t *new_counts;
} FindJob;

static int find_new_pass(const FindJob *j, MergeStatus *st)
{
    for (Py_ssize_t b = 0; b < j->buckets; b++) {
        const int64_t lo = j->bounds[b], hi = j->bounds[b + 1];
        j->new_counts[b] = 0;
        if (hi <= lo)
            continue;
        const size_t nk = (size_t)(hi - lo);
        const uint64_t *kb = j->keys + lo;
        uint8_t *mask = j->new_mask + lo;
        memset(mask, 1, nk);
        uint64_t *delta;
        if (read_delta(j->delta_paths[b], j->delta_counts[b], &delta, st) < 0)
            return -1;
        if (delta != NULL) {
            unmark_found(kb, nk, mask, delta, (size_t)j->delta_counts[b]);
            scratch_free(delta, (size_t)j->delta_counts[b] * 8);
        }
        if (j->base_paths[b] != NULL && j->base_counts[b] > 0 &&
            unmark_found_in_base(kb, nk, mask, j->base_paths[b], j->base_counts[b], j->window, st) < 0)
            return -1;
        int64_t fresh = 0;
        for (size_t i = 0; i < nk; i++)
            fresh += mask[i];
        j->new_counts[b] = fresh;
    }
    return 0;
}

/* Checks bounds: buckets + 1 nondecreasing offsets from 0 to len(keys). */
static int check_bounds(const int64_t *bounds, Py_ssize_t buckets, Py_ssize_t nkeys)
{
    if (bounds[0] != 0 || bounds[buckets] != nkeys)
        goto bad;
    for (Py_ssize_t b = 0; b < buckets; b++)
        if (bounds[b + 1] < bounds[b])
            goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "bounds must rise from 0 to the number of keys");
    return -1;
}

PyObject *due_find_new(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *keys_o, *bounds_o, *bp_o, *bc_o, *dp_o, *dc_o, *mask_o, *nc_o;
    long long window;
    if (!PyArg_ParseTuple(args, "OOOOOOLOO:due_find_new", &keys_o, &bounds_o, &bp_o, &bc_o, &dp_o, &dc_o,
                          &window, &mask_o, &nc_o))
        return NULL;
    if (window < 1) {
        PyErr_SetString(PyExc_ValueError, "window_entries must be at least 1");
        return NULL;
    }
    Py_buffer keys, bounds, bc, dc, mask, nc;
    PyObject *result = NULL;
    const char **paths = NULL;
    if (get_array(keys_o, &keys, 8, 0, 0, "keys") < 0)
        return NULL;
    const Py_ssize_t nkeys = keys.len / 8;
    if (get_array(bounds_o, &bounds, 8, 2, 0, "bounds") < 0)
        goto r0;
    const Py_ssize_t buckets = bounds.len / 8 - 1;
    if (get_array(bc_o, &bc, 8, buckets, 0, "base_counts") < 0)
        goto r1;
    if (get_array(dc_o, &dc, 8, buckets, 0, "delta_counts") < 0)
        goto r2;
    if (get_array(mask_o, &mask, 1, nkeys, 1, "new_mask") < 0)
        goto r3;
    if (get_array(nc_o, &nc, 8, buckets, 1, "new_counts") < 0)
        goto r4;
    paths = PyMem_Malloc(sizeof(*paths) * 2 * (size_t)buckets);
    if (paths == NULL) {
        PyErr_NoMemory();
        goto r5;
    }
    if (check_bounds((const int64_t *)bounds.buf, buckets, nkeys) < 0 ||
        get_paths(bp_o, buckets, paths, "base_paths") < 0 ||
        get_paths(dp_o, buckets, paths + buckets, "delta_paths") < 0)
        goto r6;
    FindJob job = {(const uint64_t *)keys.buf, (const int64_t *)bounds.buf, buckets, paths, paths + buckets,
                   (const int64_t *)bc.buf, (const int64_t *)dc.buf, (int64_t)window, (uint8_t *)mask.buf,
                   (int64_t *)nc.buf};
    MergeStatus st = {0, 0, NULL, -1, -1};
    Py_BEGIN_ALLOW_THREADS
    find_new_pass(&job, &st);
    Py_END_ALLOW_THREADS
    result = merge_result(&st);
r6:
    PyMem_Free(paths);
r5:
    PyBuffer_Release(&nc);
r4:
    PyBuffer_Release(&mask);
r3:
    PyBuffer_Release(&dc);
r2:
    PyBuffer_Release(&bc);
r1:
    PyBuffer_Release(&bounds);
r0:
    PyBuffer_Release(&keys);
    return result;
}

/* --- due_write_buckets --------------------------------------------------------- */

typedef struct {
    int fd;
    uint64_t *buf;
    size_t n;
    const char *path;
} OutFile;

static inline int out_put(OutFile *o, uint64_t v, MergeStatus *st)
{
    o->buf[o->n++] = v;
    if (o->n < STREAM_ENTRIES)
        return 0;
    o->n = 0;
    return write_all(o->fd, o->buf, STREAM_ENTRIES * 8, o->path, st);
}

/* The new base: base (streamed in chunks) merged with the sorted `adds`. */
static int write_fold(OutFile *o, const char *base_path, int64_t base_count, const uint64_t *adds, size_t na,
                      uint64_t *chunk, size_t chunk_entries, MergeStatus *st)
{
    size_t ai = 0;
    if (base_path != NULL && base_count > 0) {
        int fd = open_bucket_file(base_path, base_count, st);
        if (fd < 0)
            return -1;
        for (int64_t start = 0; start < base_count; start += (int64_t)chunk_entries) {
            const size_t left = (size_t)(base_count - start);
            const size_t c = left < chunk_entries ? left : chunk_entries;
            if (read_at(fd, chunk, c * 8, (off_t)(start * 8), base_path, st) < 0) {
                close(fd);
                return -1;
            }
            for (size_t i = 0; i < c; i++) {
                const uint64_t v = chunk[i];
                while (ai < na && adds[ai] < v)
                    if (out_put(o, adds[ai++], st) < 0) {
                        close(fd);
                        return -1;
                    }
                if (out_put(o, v, st) < 0) {
                    close(fd);
                    return -1;
                }
            }
        }
        close(fd);
    }
    for (; ai < na; ai++)
        if (out_put(o, adds[ai], st) < 0)
            return -1;
    return write_all(o->fd, o->buf, o->n * 8, o->path, st);
}

typedef struct {
    const uint64_t *keys;
    const uint8_t *new_mask;
    const int64_t *bounds;
    const char **base_paths, **delta_paths;               /* per bucket of the set */
    const int64_t *base_counts, *delta_counts;
    const int64_t *buckets;                               /* the buckets to write */
    Py_ssize_t count;
    const char **out_paths;                               /* per bucket to write */
    const uint8_t *folds;
    int64_t window;
} WriteJob;

static int write_one(const WriteJob *j, Py_ssize_t i, uint64_t *out_buf, uint64_t *chunk, size_t chunk_entries,
                     MergeStatus *st)
{
    const int64_t b = j->buckets[i];
    const int64_t lo = j->bounds[b], hi = j->bounds[b + 1];
    size_t nn = 0;
    for (int64_t k = lo; k < hi; k++)
        nn += j->new_mask[k] != 0;
    uint64_t *delta;
    if (read_delta(j->delta_paths[b], j->delta_counts[b], &delta, st) < 0)
        return -1;
    const size_t nd = delta != NULL ? (size_t)j->delta_counts[b] : 0, na = nd + nn;
    uint64_t *adds = scratch_alloc(na * 8);
    if (adds == NULL) {
        scratch_free(delta, nd * 8);
        errno = ENOMEM;
        return status_errno(st, j->out_paths[i]);
    }
    size_t di = 0, n = 0;                         /* adds = delta merged with the new keys */
    for (int64_t k = lo; k < hi; k++) {
        if (!j->new_mask[k])
            continue;
        const uint64_t v = j->keys[k];
        while (di < nd && delta[di] < v)
            adds[n++] = delta[di++];
        adds[n++] = v;
    }
    while (di < nd)
        adds[n++] = delta[di++];
    scratch_free(delta, nd * 8);
    int fd;
    do
        fd = open(j->out_paths[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    int rc;
    if (fd < 0)
        rc = status_errno(st, j->out_paths[i]);
    else {
        if (j->folds[i]) {
            OutFile o = {fd, out_buf, 0, j->out_paths[i]};
            rc = write_fold(&o, j->base_paths[b], j->base_counts[b], adds, na, chunk, chunk_entries, st);
        } else
            rc = write_all(fd, adds, na * 8, j->out_paths[i], st);
        if (close(fd) < 0 && rc == 0)
            rc = status_errno(st, j->out_paths[i]);
    }
    scratch_free(adds, na * 8);
    return rc;
}

static int write_pass(const WriteJob *j, MergeStatus *st)
{
    const size_t chunk_entries = (size_t)j->window < STREAM_ENTRIES ? (size_t)j->window : STREAM_ENTRIES;
    const size_t bytes = (STREAM_ENTRIES + chunk_entries) * 8;
    uint64_t *out_buf = scratch_alloc(bytes);
    if (out_buf == NULL) {
        st->err = ENOMEM;
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; i < j->count && rc == 0; i++)
        rc = write_one(j, i, out_buf, out_buf + STREAM_ENTRIES, chunk_entries, st);
    scratch_free(out_buf, bytes);
    return rc;
}

PyObject *due_write_buckets(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *keys_o, *mask_o, *bounds_o, *bp_o, *bc_o, *dp_o, *dc_o, *buckets_o, *op_o, *folds_o;
    long long window;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOL:due_write_buckets", &keys_o, &mask_o, &bounds_o, &bp_o, &bc_o,
                          &dp_o, &dc_o, &buckets_o, &op_o, &folds_o, &window))
        return NULL;
    if (window < 1) {
        PyErr_SetString(PyExc_ValueError, "window_entries must be at least 1");
        return NULL;
    }
    Py_buffer keys, mask, bounds, bk, bc, dc, folds;
    PyObject *result = NULL;
    const char **paths = NULL;
    if (get_array(keys_o, &keys, 8, 0, 0, "keys") < 0)
        return NULL;
    const Py_ssize_t nkeys = keys.len / 8;
    if (get_array(mask_o, &mask, 1, nkeys, 0, "new_mask") < 0)
        goto r0;
    if (get_array(bounds_o, &bounds, 8, 2, 0, "bounds") < 0)
        goto r1;
    const Py_ssize_t nbuckets = bounds.len / 8 - 1;
    if (get_array(bc_o, &bc, 8, nbuckets, 0, "base_counts") < 0)
        goto r2;
    if (get_array(dc_o, &dc, 8, nbuckets, 0, "delta_counts") < 0)
        goto r3;
    if (get_array(buckets_o, &bk, 8, 0, 0, "buckets") < 0)
        goto r4;
    const Py_ssize_t count = bk.len / 8;
    if (get_array(folds_o, &folds, 1, count, 0, "folds") < 0)
        goto r5;
    paths = PyMem_Malloc(sizeof(*paths) * (size_t)(2 * nbuckets + count));
    if (paths == NULL) {
        PyErr_NoMemory();
        goto r6;
    }
    if (check_bounds((const int64_t *)bounds.buf, nbuckets, nkeys) < 0 ||
        get_paths(bp_o, nbuckets, paths, "base_paths") < 0 ||
        get_paths(dp_o, nbuckets, paths + nbuckets, "delta_paths") < 0 ||
        get_paths(op_o, count, paths + 2 * nbuckets, "out_paths") < 0)
        goto r7;
    for (Py_ssize_t i = 0; i < count; i++) {
        const int64_t b = ((const int64_t *)bk.buf)[i];
        if (b < 0 || b >= nbuckets || paths[2 * nbuckets + i] == NULL) {
            PyErr_SetString(PyExc_ValueError, "buckets must be bucket numbers, each with an out path");
            goto r7;
        }
    }
    WriteJob job = {(const uint64_t *)keys.buf, (const uint8_t *)mask.buf, (const int64_t *)bounds.buf,
                    paths, paths + nbuckets, (const int64_t *)bc.buf, (const int64_t *)dc.buf,
                    (const int64_t *)bk.buf, count, paths + 2 * nbuckets, (const uint8_t *)folds.buf,
                    (int64_t)window};
    MergeStatus st = {0, 0, NULL, -1, -1};
    Py_BEGIN_ALLOW_THREADS
    write_pass(&job, &st);
    Py_END_ALLOW_THREADS
    result = merge_result(&st);
r7:
    PyMem_Free(paths);
r6:
    PyBuffer_Release(&folds);
r5:
    PyBuffer_Release(&bk);
r4:
    PyBuffer_Release(&dc);
r3:
    PyBuffer_Release(&bc);
r2:
    PyBuffer_Release(&bounds);
r1:
    PyBuffer_Release(&mask);
r0:
    PyBuffer_Release(&keys);
    return result;
}

/* --- due_pick ------------------------------------------------------------------- */

PyObject *due_pick(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *urls, *pos_o;
    if (!PyArg_ParseTuple(args, "O!O:due_pick", &PyList_Type, &urls, &pos_o))
        return NULL;
    Py_buffer pos;
    if (get_array(pos_o, &pos, 8, 0, 0, "positions") < 0)
        return NULL;
    const Py_ssize_t m = pos.len / 8, n = PyList_GET_SIZE(urls);
    const int64_t *p = (const int64_t *)pos.buf;
    PyObject *out = PyList_New(m);
    for (Py_ssize_t i = 0; out != NULL && i < m; i++) {
        if (p[i] < 0 || p[i] >= n) {
            Py_CLEAR(out);
            PyErr_SetString(PyExc_IndexError, "due_pick: position out of range");
            break;
        }
        PyObject *u = PyList_GET_ITEM(urls, p[i]);
        Py_INCREF(u);
        PyList_SET_ITEM(out, i, u);
    }
    PyBuffer_Release(&pos);
    return out;
}
