/* ctest capi_securec (C99) and capi_securec_cpp (the same file as C++, securec_test.cpp): fia's
 * header-only securec.h. Every function's normal case and its error cases, with libboundscheck's
 * return codes and resets, and that no function writes past destMax (a guard byte after each
 * destination). Exits 0 when every check passes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "securec.h"

static int g_failed = 0;
static int g_passed = 0;

#define CHECK(cond)                                               \
  do {                                                            \
    if (cond) {                                                   \
      ++g_passed;                                                 \
    } else {                                                      \
      ++g_failed;                                                 \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
    }                                                             \
  } while (0)

/* A 8-byte destination followed by a guard byte that no call may change. */
typedef struct {
  char buf[8];
  char guard;
} Dest;

static void fill(Dest *d) {
  memset(d->buf, 'x', sizeof d->buf);
  d->guard = 'G';
}

static int all_bytes(const char *p, size_t n, char value) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (p[i] != value) return 0;
  return 1;
}

static void test_codes(void) {
  errno_t e = EOK;
  CHECK(e == 0);
  CHECK(EINVAL == 22 && ERANGE == 34);
  CHECK(EINVAL_AND_RESET == 150 && ERANGE_AND_RESET == 162 && EOVERLAP_AND_RESET == 182);
}

static void test_memory(void) {
  Dest d;
  char big[16] = "0123456789abcde";
  fill(&d);
  CHECK(memcpy_s(d.buf, 8, "abcd", 4) == EOK && memcmp(d.buf, "abcdxxxx", 8) == 0);
  CHECK(memcpy_s(d.buf, 8, "abcd", 0) == EOK && d.buf[0] == 'a');
  CHECK(memcpy_s(d.buf, 0, "abcd", 4) == ERANGE && d.buf[0] == 'a');
  CHECK(memcpy_s(d.buf, SECUREC_MEM_MAX_LEN + 1, "abcd", 4) == ERANGE);
  CHECK(memcpy_s(NULL, 8, "abcd", 4) == EINVAL);
  CHECK(memcpy_s(d.buf, 8, NULL, 4) == EINVAL_AND_RESET && all_bytes(d.buf, 8, 0));
  fill(&d);
  CHECK(memcpy_s(d.buf, 8, big, 16) == ERANGE_AND_RESET && all_bytes(d.buf, 8, 0) && d.guard == 'G');
  /* Overlapping on purpose: memcpy_s refuses before its memcpy, which gcc's -Wrestrict cannot see. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
  CHECK(memcpy_s(big + 2, 8, big, 4) == EOVERLAP_AND_RESET && all_bytes(big + 2, 8, 0));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  memcpy(big, "0123456789abcde", 16);
  CHECK(memmove_s(big + 2, 14, big, 4) == EOK && memcmp(big, "010123", 6) == 0);
  fill(&d);
  CHECK(memmove_s(d.buf, 0, big, 4) == ERANGE && d.buf[0] == 'x');
  CHECK(memmove_s(NULL, 8, big, 4) == EINVAL);
  CHECK(memmove_s(d.buf, 8, NULL, 4) == EINVAL_AND_RESET && all_bytes(d.buf, 8, 0));
  fill(&d);
  CHECK(memmove_s(d.buf, 8, big, 9) == ERANGE_AND_RESET && all_bytes(d.buf, 8, 0) && d.guard == 'G');

  fill(&d);
  CHECK(memset_s(d.buf, 8, 'z', 3) == EOK && memcmp(d.buf, "zzzxxxxx", 8) == 0);
  CHECK(memset_s(d.buf, 0, 'z', 3) == ERANGE);
  CHECK(memset_s(NULL, 8, 'z', 3) == EINVAL);
  CHECK(memset_s(d.buf, 8, 'q', 100) == ERANGE_AND_RESET && all_bytes(d.buf, 8, 'q') && d.guard == 'G');
}

static void test_strcpy(void) {
  Dest d;
  fill(&d);
  CHECK(strcpy_s(d.buf, 8, "1234567") == EOK && strcmp(d.buf, "1234567") == 0);
  CHECK(strcpy_s(d.buf, 8, "") == EOK && d.buf[0] == '\0');
  fill(&d);
  CHECK(strcpy_s(d.buf, 8, "12345678") == ERANGE_AND_RESET && d.buf[0] == '\0' && d.guard == 'G');
  fill(&d);
  CHECK(strcpy_s(d.buf, 0, "a") == ERANGE && d.buf[0] == 'x');
  CHECK(strcpy_s(NULL, 8, "a") == EINVAL);
  CHECK(strcpy_s(d.buf, 8, NULL) == EINVAL_AND_RESET && d.buf[0] == '\0');
  CHECK(strcpy_s(d.buf, 8, "abc") == EOK && strcpy_s(d.buf + 1, 7, d.buf) == EOVERLAP_AND_RESET && d.buf[1] == '\0');

  fill(&d);
  CHECK(strncpy_s(d.buf, 8, "abcdefghij", 3) == EOK && strcmp(d.buf, "abc") == 0);
  CHECK(strncpy_s(d.buf, 8, "ab", 5) == EOK && strcmp(d.buf, "ab") == 0);
  CHECK(strncpy_s(d.buf, 8, "abcdefghij", 0) == EOK && d.buf[0] == '\0');
  CHECK(strncpy_s(d.buf, 8, "abcdefghij", 7) == EOK && strcmp(d.buf, "abcdefg") == 0);
  fill(&d);
  CHECK(strncpy_s(d.buf, 8, "abcdefghij", 8) == ERANGE_AND_RESET && d.buf[0] == '\0' && d.guard == 'G');
  CHECK(strncpy_s(d.buf, 0, "a", 1) == ERANGE);
  CHECK(strncpy_s(NULL, 8, "a", 1) == EINVAL);
  CHECK(strncpy_s(d.buf, 8, NULL, 1) == EINVAL_AND_RESET && d.buf[0] == '\0');
  d.buf[0] = 'x';
  CHECK(strncpy_s(d.buf, 8, "a", SECUREC_STRING_MAX_LEN + 1) == ERANGE_AND_RESET && d.buf[0] == '\0');
}

static void test_strcat(void) {
  Dest d;
  fill(&d);
  strcpy(d.buf, "ab");
  CHECK(strcat_s(d.buf, 8, "cde") == EOK && strcmp(d.buf, "abcde") == 0);
  CHECK(strcat_s(d.buf, 8, "fg") == EOK && strcmp(d.buf, "abcdefg") == 0);
  CHECK(strcat_s(d.buf, 8, "h") == ERANGE_AND_RESET && d.buf[0] == '\0' && d.guard == 'G');
  CHECK(strcat_s(d.buf, 0, "h") == ERANGE);
  CHECK(strcat_s(NULL, 8, "h") == EINVAL);
  strcpy(d.buf, "ab");
  CHECK(strcat_s(d.buf, 8, NULL) == EINVAL_AND_RESET && d.buf[0] == '\0');
  fill(&d); /* not terminated within destMax */
  CHECK(strcat_s(d.buf, 8, "a") == EINVAL_AND_RESET && d.buf[0] == '\0' && d.guard == 'G');
  strcpy(d.buf, "abc");
  CHECK(strcat_s(d.buf, 8, d.buf + 1) == EOVERLAP_AND_RESET && d.buf[0] == '\0');

  strcpy(d.buf, "ab");
  CHECK(strncat_s(d.buf, 8, "cdefghij", 2) == EOK && strcmp(d.buf, "abcd") == 0);
  CHECK(strncat_s(d.buf, 8, "xy", 0) == EOK && strcmp(d.buf, "abcd") == 0);
  CHECK(strncat_s(d.buf, 8, "efg", 10) == EOK && strcmp(d.buf, "abcdefg") == 0);
  CHECK(strncat_s(d.buf, 8, "hij", 1) == ERANGE_AND_RESET && d.buf[0] == '\0' && d.guard == 'G');
  CHECK(strncat_s(d.buf, 0, "h", 1) == ERANGE);
  CHECK(strncat_s(NULL, 8, "h", 1) == EINVAL);
  strcpy(d.buf, "ab");
  CHECK(strncat_s(d.buf, 8, NULL, 1) == EINVAL_AND_RESET && d.buf[0] == '\0');
  strcpy(d.buf, "ab");
  CHECK(strncat_s(d.buf, 8, "c", SECUREC_STRING_MAX_LEN + 1) == ERANGE_AND_RESET && d.buf[0] == '\0');
}

static int call_vsnprintf_s(char *dest, size_t destMax, size_t count, const char *format, ...) {
  int n;
  va_list args;
  va_start(args, format);
  n = vsnprintf_s(dest, destMax, count, format, args);
  va_end(args);
  return n;
}

static void test_printf(void) {
  Dest d;
  const char *no_format = NULL;
  fill(&d);
  CHECK(sprintf_s(d.buf, 8, "%d-%s", 42, "ab") == 5 && strcmp(d.buf, "42-ab") == 0);
  CHECK(sprintf_s(d.buf, 8, "%s", "1234567") == 7 && strcmp(d.buf, "1234567") == 0);
  CHECK(sprintf_s(d.buf, 8, "%s", "12345678") == -1 && d.buf[0] == '\0' && d.guard == 'G');
  fill(&d);
  CHECK(sprintf_s(d.buf, 0, "%d", 1) == -1 && d.buf[0] == 'x');
  CHECK(sprintf_s(NULL, 8, "%d", 1) == -1);
  /* A null format on purpose (the error path): no -Wformat-security (clang) for it. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-security"
#endif
  CHECK(sprintf_s(d.buf, 8, no_format) == -1 && d.buf[0] == '\0');
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

  fill(&d);
  CHECK(snprintf_s(d.buf, 8, 7, "%d", 123) == 3 && strcmp(d.buf, "123") == 0);
  CHECK(snprintf_s(d.buf, 8, 3, "%s", "abcdef") == -1 && strcmp(d.buf, "abc") == 0);  /* cut at count */
  CHECK(snprintf_s(d.buf, 8, 20, "%s", "abcdefgh") == -1 && d.buf[0] == '\0' && d.guard == 'G');
  CHECK(snprintf_s(d.buf, 8, 20, "%s", "abcdefg") == 7 && strcmp(d.buf, "abcdefg") == 0);
  fill(&d);
  CHECK(snprintf_s(d.buf, 0, 1, "%d", 1) == -1 && d.buf[0] == 'x');
  CHECK(snprintf_s(NULL, 8, 1, "%d", 1) == -1);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-security"
#endif
  CHECK(snprintf_s(d.buf, 8, 1, no_format) == -1 && d.buf[0] == '\0');
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  d.buf[0] = 'x';
  CHECK(snprintf_s(d.buf, 8, SECUREC_STRING_MAX_LEN + 1, "%d", 1) == -1 && d.buf[0] == '\0');

  fill(&d);
  CHECK(call_vsnprintf_s(d.buf, 8, 7, "%c%c", 'o', 'k') == 2 && strcmp(d.buf, "ok") == 0);
  CHECK(call_vsnprintf_s(d.buf, 8, 2, "%s", "abc") == -1 && strcmp(d.buf, "ab") == 0);
  CHECK(call_vsnprintf_s(d.buf, 4, 10, "%s", "abcd") == -1 && d.buf[0] == '\0');
  CHECK(call_vsnprintf_s(NULL, 4, 1, "%s", "a") == -1);
}

/* The way CANN's samples use it: copy a layout string and a host buffer. */
static void test_sample_style(void) {
  char layout[5];
  float host[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  float copy[4];
  int ret = strcpy_s(layout, sizeof(layout), "BNSD");
  CHECK(ret == EOK && strcmp(layout, "BNSD") == 0);
  ret = memcpy_s(copy, sizeof(copy), host, sizeof(host));
  CHECK(ret == EOK && copy[3] == 4.0f);
}

int main(void) {
  test_codes();
  test_memory();
  test_strcpy();
  test_strcat();
  test_printf();
  test_sample_style();
  printf("securec: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
