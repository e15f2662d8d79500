/*
 * File-system calls of the DUE with the GIL released: due_fsync_files
 * (fsync a merge's new bucket files from parallel threads), due_remove_files
 * (unlink the files a merge made obsolete) and due_populate_write (fault a
 * journal window's pages in writable before submit writes them).  The
 * pure-Python twins of the first two are in crawler/due/merge_pass.py;
 * without the third, crawler/due/journal.py lets the pages fault in as
 * they are written.
 */
#include "native.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define FSYNC_MAX_THREADS 64                 /* due_fsync_files runs at most this many at once */

/* --- due_fsync_files ------------------------------------------------------------ */

/* fsync a merge's new files from parallel threads, so the file system commits
 * them together (one journal commit instead of one each), with no Python
 * thread pool taking the GIL per file. */
#define FSYNC_STACK_BYTES ((size_t)1 << 16)

typedef struct {
    const char **paths;
    Py_ssize_t count;
    Py_ssize_t next;                 /* the next path to take (atomic) */
    pthread_mutex_t lock;
    int err;                         /* the first failure */
    Py_ssize_t failed;
} FsyncJob;

static void *fsync_worker(void *arg)
{
    FsyncJob *j = arg;
    for (;;) {
        const Py_ssize_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->count)
            return NULL;
        int fd, e = 0;
        do
            fd = open(j->paths[i], O_RDONLY | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0)
            e = errno;
        else {
            if (fsync(fd) < 0)
                e = errno;
            close(fd);
        }
        if (e) {
            pthread_mutex_lock(&j->lock);
            if (!j->err || i < j->failed) {
                j->err = e;
                j->failed = i;
            }
            pthread_mutex_unlock(&j->lock);
        }
    }
}

static void fsync_all(FsyncJob *j, Py_ssize_t threads)
{
    pthread_t tids[FSYNC_MAX_THREADS];
    Py_ssize_t started = 0;
    pthread_attr_t attr;
    const int have_attr = pthread_attr_init(&attr) == 0;
    if (have_attr)
        pthread_attr_setstacksize(&attr, FSYNC_STACK_BYTES);
    for (Py_ssize_t t = 1; t < threads; t++) {      /* the calling thread is the first worker */
        if (pthread_create(&tids[started], have_attr ? &attr : NULL, fsync_worker, j) != 0)
            break;                                   /* fewer threads: the others take more files */
        started++;
    }
    fsync_worker(j);
    for (Py_ssize_t t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    if (have_attr)
        pthread_attr_destroy(&attr);
}

PyObject *due_fsync_files(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *list;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "O!n:due_fsync_files", &PyList_Type, &list, &threads))
        return NULL;
    const Py_ssize_t count = PyList_GET_SIZE(list);
    if (count == 0)
        Py_RETURN_NONE;
    const char **paths = PyMem_Malloc(sizeof(*paths) * (size_t)count);
    if (paths == NULL)
        return PyErr_NoMemory();
    if (get_paths(list, count, paths, "paths") < 0) {
        PyMem_Free(paths);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (paths[i] == NULL) {
            PyMem_Free(paths);
            PyErr_SetString(PyExc_TypeError, "paths must be bytes");
            return NULL;
        }
    if (threads > count)
        threads = count;
    if (threads > FSYNC_MAX_THREADS)
        threads = FSYNC_MAX_THREADS;
    if (threads < 1)
        threads = 1;
    FsyncJob job = {paths, count, 0, PTHREAD_MUTEX_INITIALIZER, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    fsync_all(&job, threads);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (job.err) {
        errno = job.err;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, paths[job.failed]);
    } else
        result = Py_NewRef(Py_None);
    PyMem_Free(paths);
    return result;
}

/* --- due_remove_files ---------------------------------------------------------- */

/* Delete files (those already gone are skipped) in one call: a merge replaces
 * a few dozen bucket files, and an os.unlink each would take the GIL back
 * from the caller as many times. */
PyObject *due_remove_files(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O!:due_remove_files", &PyList_Type, &list))
        return NULL;
    const Py_ssize_t count = PyList_GET_SIZE(list);
    const char **paths = PyMem_Malloc(sizeof(*paths) * (size_t)(count ? count : 1));
    if (paths == NULL)
        return PyErr_NoMemory();
    if (get_paths(list, count, paths, "paths") < 0) {
        PyMem_Free(paths);
        return NULL;
    }
    int err = 0;
    Py_ssize_t failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count && !err; i++)
        if (paths[i] != NULL && unlink(paths[i]) < 0 && errno != ENOENT) {
            err = errno;
            failed = i;
        }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (err) {
        errno = err;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, paths[failed]);
    } else
        result = Py_NewRef(Py_None);
    PyMem_Free(paths);
    return result;
}

/* --- due_populate_write ---------------------------------------------------------- */
/* A journal window is a shared file mapping; its pages start write-protected
 * (the kernel tracks which are dirty), so the first write to each faults, on
 * submit's hot path.  MADV_POPULATE_WRITE (Linux 5.14) takes those faults now,
 * in the journal's mapper thread, with the GIL released (Python's own
 * mmap.madvise keeps it, and would stall submit for the ~2 ms it takes per
 * 4 MiB window).  No byte changes.  Returns False where the kernel or the file
 * system cannot (the pages then fault as they are written). */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
PyObject *due_populate_write(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)view.buf & ~(uintptr_t)(page - 1);
    size_t length = (size_t)((uintptr_t)view.buf + (uintptr_t)view.len - start);
    int rc = 0;
    if (view.len > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = madvise((void *)start, length, MADV_POPULATE_WRITE);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(rc == 0 && view.len > 0);
}
