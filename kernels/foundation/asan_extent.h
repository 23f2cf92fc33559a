// Code that AddressSanitizer cannot check access by access: vector loops
// whose accesses are asm operands (engine/core/params.c) or whose per-load
// checks cost more than the loop (kernels/dense_small.c). Such code checks,
// once per call, that the whole extent it reads or writes is addressable,
// and reads and writes nothing outside it: an operand too short, freed, or
// out of its allocation is then reported as ASan reports any bad access,
// from an instrumented read of its first bad byte, with the caller's stack.
// Without ASan these cost nothing.
#ifndef ASGD_KERNELS_FOUNDATION_ASAN_EXTENT_H
#define ASGD_KERNELS_FOUNDATION_ASAN_EXTENT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_EXTENT_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_EXTENT_CHECKED 1
#endif
#endif

#ifdef ASAN_EXTENT_CHECKED
#include <sanitizer/asan_interface.h>

// Code that checks its extents with asan_extent_check, not each access.
#define ASAN_EXTENT_UNCHECKED_BODY __attribute__((no_sanitize("address", "undefined")))

static inline void asan_extent_check(const void *p, size_t bytes) {
    if (bytes == 0) return;
    const volatile char *bad = __asan_region_is_poisoned((void *)(uintptr_t)p, bytes);
    if (bad) (void)*bad;
}
#else
#define ASAN_EXTENT_UNCHECKED_BODY
static inline void asan_extent_check(const void *p, size_t bytes) {
    (void)p;
    (void)bytes;
}
#endif

#endif
