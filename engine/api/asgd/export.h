#ifndef ASGD_EXPORT_H
#define ASGD_EXPORT_H
// ASGD_API marks what libasgd.so exports. The library is compiled with
// hidden visibility (CMakeLists.txt), so a function without it stays inside:
// the shared library's boundary is exactly the functions declared with
// ASGD_API in <asgd/...>. The static library, which the asgd program, the
// tests and the benches link, holds everything.
#if defined(__GNUC__) || defined(__clang__)
#define ASGD_API __attribute__((visibility("default")))
#else
#define ASGD_API
#endif

#endif
