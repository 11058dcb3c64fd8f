/*
 * securec.h: fia's header-only stand-in for Huawei's bounds-checked C functions (libboundscheck,
 * shipped with the CANN toolkit), so that CANN's sample programs, which include "securec.h",
 * compile unchanged against fia's headers. fia's own implementation; C99 and C++.
 *
 * Return codes follow libboundscheck: EOK (0) on success; ERANGE / EINVAL when the destination
 * itself is unusable (destMax 0 or above SECUREC_MEM_MAX_LEN / SECUREC_STRING_MAX_LEN, a NULL
 * destination), nothing written; the *_AND_RESET codes when the destination was usable and has been
 * reset (a string destination gets an empty string, a memory destination is zero-filled over
 * destMax bytes; memset_s fills destMax bytes with the value). No function writes past destMax.
 * The printf-style functions return the characters written, or -1 on any error.
 *
 * The include guard is libboundscheck's own, so whichever securec.h comes first wins and the
 * other is skipped (no duplicate definitions when a program also sees the real one).
 */
#ifndef SECUREC_H_5D13A042_DC3F_4ED9_A8D1_882811274C27
#define SECUREC_H_5D13A042_DC3F_4ED9_A8D1_882811274C27

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifndef SECUREC_DEFINED_ERRNO_TYPE
#define SECUREC_DEFINED_ERRNO_TYPE
#ifndef errno_t
typedef int errno_t;
#endif
#endif

#ifndef EOK
#define EOK 0 /* success */
#endif
#ifndef EINVAL
#define EINVAL 22 /* a bad argument; the destination was not touched */
#endif
#ifndef EINVAL_AND_RESET
#define EINVAL_AND_RESET 150 /* a bad source; the destination was reset */
#endif
#ifndef ERANGE
#define ERANGE 34 /* destMax is 0 or too large; the destination was not touched */
#endif
#ifndef ERANGE_AND_RESET
#define ERANGE_AND_RESET 162 /* the destination is too small; it was reset */
#endif
#ifndef EOVERLAP_AND_RESET
#define EOVERLAP_AND_RESET 182 /* source and destination overlap; the destination was reset */
#endif

/* The largest destMax accepted for memory and for strings (libboundscheck's defaults). */
#ifndef SECUREC_MEM_MAX_LEN
#define SECUREC_MEM_MAX_LEN ((size_t)0x7fffffffUL)
#endif
#ifndef SECUREC_STRING_MAX_LEN
#define SECUREC_STRING_MAX_LEN ((size_t)0x7fffffffUL)
#endif

#if defined(__GNUC__) || defined(__clang__)
#define FIA_SECUREC_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define FIA_SECUREC_UNUSED __attribute__((unused))
#else
#define FIA_SECUREC_PRINTF(fmt, args)
#define FIA_SECUREC_UNUSED
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Whether [a, a + na) and [b, b + nb) share a byte. */
static inline FIA_SECUREC_UNUSED int fia_securec_overlap(const void *a, size_t na, const void *b, size_t nb) {
  const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
  return (pa < pb) ? (pb - pa < na) : (pa - pb < nb);
}

/* The length of s, looking at most at max bytes (max when no terminator is among them). */
static inline FIA_SECUREC_UNUSED size_t fia_securec_strnlen(const char *s, size_t max) {
  size_t n = 0;
  while (n < max && s[n] != '\0') ++n;
  return n;
}

/* Copies count bytes of src to dest (destMax bytes long). Errors: ERANGE (destMax 0 or too large),
 * EINVAL (dest NULL); with dest zeroed over destMax: EINVAL_AND_RESET (src NULL), ERANGE_AND_RESET
 * (count > destMax), EOVERLAP_AND_RESET (the ranges overlap). count 0 copies nothing. */
static inline FIA_SECUREC_UNUSED errno_t memcpy_s(void *dest, size_t destMax, const void *src, size_t count) {
  if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) return ERANGE;
  if (dest == NULL) return EINVAL;
  if (src == NULL) {
    memset(dest, 0, destMax);
    return EINVAL_AND_RESET;
  }
  if (count > destMax) {
    memset(dest, 0, destMax);
    return ERANGE_AND_RESET;
  }
  if (dest == src || count == 0) return EOK;
  if (fia_securec_overlap(dest, count, src, count)) {
    memset(dest, 0, destMax);
    return EOVERLAP_AND_RESET;
  }
  memcpy(dest, src, count);
  return EOK;
}

/* memcpy_s for ranges that may overlap (no EOVERLAP_AND_RESET); the other errors as memcpy_s. */
static inline FIA_SECUREC_UNUSED errno_t memmove_s(void *dest, size_t destMax, const void *src, size_t count) {
  if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) return ERANGE;
  if (dest == NULL) return EINVAL;
  if (src == NULL) {
    memset(dest, 0, destMax);
    return EINVAL_AND_RESET;
  }
  if (count > destMax) {
    memset(dest, 0, destMax);
    return ERANGE_AND_RESET;
  }
  if (count != 0 && dest != src) memmove(dest, src, count);
  return EOK;
}

/* Sets count bytes of dest to (unsigned char)c. Errors: ERANGE (destMax 0 or too large), EINVAL
 * (dest NULL), ERANGE_AND_RESET (count > destMax: the destMax bytes are set, no more). */
static inline FIA_SECUREC_UNUSED errno_t memset_s(void *dest, size_t destMax, int c, size_t count) {
  if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) return ERANGE;
  if (dest == NULL) return EINVAL;
  if (count > destMax) {
    memset(dest, c, destMax);
    return ERANGE_AND_RESET;
  }
  memset(dest, c, count);
  return EOK;
}

/* Copies the first n characters of src and a terminator to dest (n + 1 <= destMax checked by the
 * callers), or resets dest to "" with EOVERLAP_AND_RESET when the two overlap. */
static inline FIA_SECUREC_UNUSED errno_t fia_securec_copy(char *dest, size_t destMax, const char *src, size_t n) {
  if (fia_securec_overlap(dest, n + 1, src, n + 1)) {
    dest[0] = '\0';
    (void)destMax;
    return EOVERLAP_AND_RESET;
  }
  memcpy(dest, src, n);
  dest[n] = '\0';
  return EOK;
}

/* Copies the string src, terminator included, to dest. Errors: ERANGE (destMax 0 or too large),
 * EINVAL (dest NULL); with dest set to "": EINVAL_AND_RESET (src NULL), ERANGE_AND_RESET (src does
 * not fit, terminator included), EOVERLAP_AND_RESET. */
static inline FIA_SECUREC_UNUSED errno_t strcpy_s(char *strDest, size_t destMax, const char *strSrc) {
  size_t n;
  if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return ERANGE;
  if (strDest == NULL) return EINVAL;
  if (strSrc == NULL) {
    strDest[0] = '\0';
    return EINVAL_AND_RESET;
  }
  if (strDest == strSrc) return EOK;
  n = fia_securec_strnlen(strSrc, destMax);
  if (n == destMax) {
    strDest[0] = '\0';
    return ERANGE_AND_RESET;
  }
  return fia_securec_copy(strDest, destMax, strSrc, n);
}

/* Copies at most count characters of src, then a terminator, to dest. Errors as strcpy_s, plus
 * ERANGE_AND_RESET for count above SECUREC_STRING_MAX_LEN. count 0 gives "". */
static inline FIA_SECUREC_UNUSED errno_t strncpy_s(char *strDest, size_t destMax, const char *strSrc, size_t count) {
  size_t n;
  if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return ERANGE;
  if (strDest == NULL) return EINVAL;
  if (strSrc == NULL) {
    strDest[0] = '\0';
    return EINVAL_AND_RESET;
  }
  if (count > SECUREC_STRING_MAX_LEN) {
    strDest[0] = '\0';
    return ERANGE_AND_RESET;
  }
  n = fia_securec_strnlen(strSrc, count < destMax ? count : destMax);
  if (n == destMax) {
    strDest[0] = '\0';
    return ERANGE_AND_RESET;
  }
  if (strDest == strSrc) {
    strDest[n] = '\0';
    return EOK;
  }
  return fia_securec_copy(strDest, destMax, strSrc, n);
}

/* Appends at most count characters of src (all of it for strcat_s) and a terminator to the string
 * in dest. Errors: ERANGE, EINVAL as strcpy_s; with dest set to "": EINVAL_AND_RESET (src NULL, or
 * dest not terminated within destMax), ERANGE_AND_RESET (the result does not fit, or count above
 * SECUREC_STRING_MAX_LEN), EOVERLAP_AND_RESET. */
static inline FIA_SECUREC_UNUSED errno_t strncat_s(char *strDest, size_t destMax, const char *strSrc, size_t count) {
  size_t used, n;
  if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return ERANGE;
  if (strDest == NULL) return EINVAL;
  if (strSrc == NULL) {
    strDest[0] = '\0';
    return EINVAL_AND_RESET;
  }
  if (count > SECUREC_STRING_MAX_LEN) {
    strDest[0] = '\0';
    return ERANGE_AND_RESET;
  }
  used = fia_securec_strnlen(strDest, destMax);
  if (used == destMax) {
    strDest[0] = '\0';
    return EINVAL_AND_RESET;
  }
  n = fia_securec_strnlen(strSrc, count < destMax - used ? count : destMax - used);
  if (n == destMax - used) {
    strDest[0] = '\0';
    return ERANGE_AND_RESET;
  }
  if (fia_securec_overlap(strDest, used + n + 1, strSrc, n + 1)) {
    strDest[0] = '\0';
    return EOVERLAP_AND_RESET;
  }
  return fia_securec_copy(strDest + used, destMax - used, strSrc, n);
}

/* strncat_s with no count limit. */
static inline FIA_SECUREC_UNUSED errno_t strcat_s(char *strDest, size_t destMax, const char *strSrc) {
  return strncat_s(strDest, destMax, strSrc, SECUREC_STRING_MAX_LEN);
}

/* Formats at most count characters into dest (destMax bytes, terminator included). Returns the
 * characters written, or -1: on bad arguments (dest NULL, destMax 0 or too large, format NULL,
 * count too large; dest set to "" where it is usable); when the text does not fit in destMax
 * (dest set to ""); when it is cut at count < destMax characters (dest keeps the cut text, as in
 * libboundscheck). */
static inline FIA_SECUREC_UNUSED int vsnprintf_s(char *strDest, size_t destMax, size_t count, const char *format,
                                                 va_list argList) {
  int n;
  size_t limit;
  if (strDest == NULL || destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return -1;
  if (format == NULL || count > SECUREC_STRING_MAX_LEN) {
    strDest[0] = '\0';
    return -1;
  }
  limit = count < destMax ? count + 1 : destMax; /* bytes vsnprintf may write */
  n = vsnprintf(strDest, limit, format, argList);
  if (n < 0) {
    strDest[0] = '\0';
    return -1;
  }
  if ((size_t)n >= limit) {
    if (limit == destMax) strDest[0] = '\0'; /* did not fit at all: reset */
    return -1;                                /* cut at count: keep the cut text */
  }
  return n;
}

/* vsnprintf_s with the variadic arguments. */
static inline FIA_SECUREC_UNUSED FIA_SECUREC_PRINTF(4, 5) int snprintf_s(char *strDest, size_t destMax, size_t count,
                                                                       const char *format, ...) {
  int n;
  va_list args;
  va_start(args, format);
  n = vsnprintf_s(strDest, destMax, count, format, args);
  va_end(args);
  return n;
}

/* vsnprintf_s with no count: the whole text must fit in destMax, or dest is "" and -1 returned. */
static inline FIA_SECUREC_UNUSED int vsprintf_s(char *strDest, size_t destMax, const char *format, va_list argList) {
  return vsnprintf_s(strDest, destMax, destMax, format, argList);
}

/* vsprintf_s with the variadic arguments. */
static inline FIA_SECUREC_UNUSED FIA_SECUREC_PRINTF(3, 4) int sprintf_s(char *strDest, size_t destMax,
                                                                      const char *format, ...) {
  int n;
  va_list args;
  va_start(args, format);
  n = vsnprintf_s(strDest, destMax, destMax, format, args);
  va_end(args);
  return n;
}

#ifdef __cplusplus
}
#endif

#endif /* SECUREC_H_5D13A042_DC3F_4ED9_A8D1_882811274C27 */
