/*
 * growable.h — the one grow-by-doubling step of the library's growable
 * arrays (a pointer, a count in use and a capacity). Header-only plain C
 * that C++ (the CUDA plugin) compiles too.
 *
 *   int32_t *v; size_t n, cap;
 *   if (!DI_GROW(v, n, cap, 1, 64)) return out_of_memory;
 *   v[n++] = id;
 */
#ifndef DI_GROWABLE_H
#define DI_GROWABLE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Makes room for `more` items after the n in use of the array whose pointer
 * is at *array_ptr (any T *, holding *cap items of item_size bytes): the
 * capacity starts at `first` and doubles until they fit. 1 on success; 0
 * when out of memory or when the size would overflow, the array then left as
 * it was (still to be freed by its owner).
 */
static inline int di_grow(void *array_ptr, size_t item_size, size_t n, size_t *cap, size_t more,
                          size_t first)
{
    if (more <= *cap - n)
        return 1;
    size_t c = *cap ? *cap : (first ? first : 1);
    while (c - n < more) {
        if (c > SIZE_MAX / 2)
            return 0;
        c *= 2;
    }
    if (c > SIZE_MAX / item_size)
        return 0;
    void *old, *p;
    memcpy(&old, array_ptr, sizeof old); /* the T * as a void *, without aliasing it */
    p = realloc(old, c * item_size);
    if (!p)
        return 0;
    memcpy(array_ptr, &p, sizeof p);
    *cap = c;
    return 1;
}

/* di_grow on an array `arr` (a T * lvalue) with counters n and cap (size_t). */
#define DI_GROW(arr, n, cap, more, first) di_grow(&(arr), sizeof *(arr), (n), &(cap), (more), (first))

#endif /* DI_GROWABLE_H */
