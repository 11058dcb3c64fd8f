// FIA_API: marks the public C++ API as exported from libfia.so (the library is built with
// -fvisibility=hidden, so everything not marked stays internal).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FIA_API __attribute__((visibility("default")))
#else
#define FIA_API
#endif
