/*
 * Table memory of the cache kernels: zeroed arrays from Python's raw
 * allocator, and large ones (the CLOCK keys) mapped on huge pages and
 * counted by tracemalloc.
 */
#include "native.h"

#include <sys/mman.h>

/* A large, randomly probed table (the CLOCK keys): its huge-page-aligned part
 * on 2 MiB pages where the kernel offers them (transparent huge pages, also in
 * "madvise" mode), so a probe costs no TLB miss.  A 2 MiB table on 4 KiB
 * pages needs 512 TLB entries, and the DUE's other traffic (URL strings,
 * journal) evicts them: huge pages made the DUE's checks 9-18% faster
 * (docs/due.md).  Zeroed; free with free_table(p, bytes). */
#define HUGE_PAGE ((size_t)2 << 20)
#define SMALL_PAGE ((size_t)4096)
#define TABLE_TRACE_DOMAIN 0x43524157u   /* tracemalloc domain of the mapped tables */

static size_t table_span(size_t bytes)
{
    return (bytes + SMALL_PAGE - 1) & ~(SMALL_PAGE - 1);
}

/* Bytes a table of `bytes` really holds (mapped ones are whole small pages). */
size_t table_bytes(size_t bytes)
{
    return bytes < HUGE_PAGE ? bytes : table_span(bytes);
}

void *alloc_table(size_t bytes)
{
    if (bytes < HUGE_PAGE) {
        void *small = PyMem_RawCalloc(bytes ? bytes : 1, 1);
        if (small == NULL)
            PyErr_NoMemory();
        return small;
    }
    size_t span = table_span(bytes), reserve = span + HUGE_PAGE;
    char *raw = mmap(NULL, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        PyErr_NoMemory();
        return NULL;
    }
    /* Keep the huge-page-aligned `span` bytes of the reservation; unmap both ends. */
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + reserve > p + span)
        munmap(p + span, (size_t)(raw + reserve - (p + span)));
#ifdef MADV_HUGEPAGE
    madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);   /* advice: ignored where unsupported */
#endif
    PyTraceMalloc_Track(TABLE_TRACE_DOMAIN, (uintptr_t)p, span);   /* so tracemalloc counts it */
    return p;
}

void free_table(void *p, size_t bytes)
{
    if (p == NULL)
        return;
    if (bytes < HUGE_PAGE) {
        PyMem_RawFree(p);
    } else {
        PyTraceMalloc_Untrack(TABLE_TRACE_DOMAIN, (uintptr_t)p);
        munmap(p, table_span(bytes));
    }
}

void *alloc_zeroed(size_t count, size_t size)
{
    void *p = PyMem_RawCalloc(count ? count : 1, size);
    if (p == NULL)
        PyErr_NoMemory();
    return p;
}
