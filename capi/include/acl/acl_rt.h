/* fia's CANN-compatible C API: the AscendCL runtime subset, on host memory.
 * "Device" memory is host memory, streams are synchronous. See docs/c-api.md. C99 and C++. */
#ifndef FIA_CANN_ACL_ACL_RT_H_
#define FIA_CANN_ACL_ACL_RT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST,
  ACL_MEMCPY_HOST_TO_DEVICE,
  ACL_MEMCPY_DEVICE_TO_HOST,
  ACL_MEMCPY_DEVICE_TO_DEVICE,
  ACL_MEMCPY_DEFAULT,
  ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
  ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
  ACL_MEMCPY_INTER_DEVICE_TO_DEVICE
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST,
  ACL_MEM_MALLOC_HUGE_ONLY,
  ACL_MEM_MALLOC_NORMAL_ONLY,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
  ACL_MEM_MALLOC_HUGE1G_ONLY,
  ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
  ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
  ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
  ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000
} aclrtMemMallocPolicy;

/** Initialises the runtime. configPath may be NULL (it is not read). Returns ACL_SUCCESS, or
 *  ACL_ERROR_REPEAT_INITIALIZE when already initialised (as CANN). */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);

/** Ends the runtime. ACL_ERROR_REPEAT_FINALIZE when not initialised. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

/** The message of the last failure of an acl* / aclnn* call on this thread ("" when none).
 *  Valid until the next failing call on the thread. */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

/** Selects a device. fia has one "device", the host: any deviceId >= 0 is accepted;
 *  negative ids give ACL_ERROR_INVALID_DEVICE. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);

/** Releases a device (nothing to release on the host). Same errors as aclrtSetDevice. */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);

/** Creates a stream: a non-null token; work on it runs synchronously in the calling thread.
 *  ACL_ERROR_INVALID_PARAM for a null stream pointer. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);

/** Destroys a stream made by aclrtCreateStream. ACL_ERROR_INVALID_PARAM for NULL. */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);

/** Waits for a stream: every call already finished, so it returns ACL_SUCCESS at once.
 *  ACL_ERROR_INVALID_PARAM for NULL. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);

/** Allocates `size` bytes of host memory aligned to 64 bytes (the policy is ignored).
 *  Errors: ACL_ERROR_INVALID_PARAM (null devPtr, size 0), ACL_ERROR_BAD_ALLOC. */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);

/** Frees memory from aclrtMalloc. ACL_ERROR_INVALID_PARAM for NULL. */
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);

/** Allocates `size` bytes of (64-byte aligned) host memory. Errors as aclrtMalloc. */
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size);

/** Frees memory from aclrtMallocHost. ACL_ERROR_INVALID_PARAM for NULL. */
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);

/** Copies `count` bytes (every kind is a host memcpy; regions must not overlap).
 *  Errors: ACL_ERROR_INVALID_PARAM for null pointers (count > 0), count > destMax, an
 *  unknown kind, or a dst or src range that starts inside a block from aclrtMalloc /
 *  aclrtMallocHost and runs past its end (the message names the argument; memory fia did not
 *  allocate is not checked). Nothing is copied on an error. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                         aclrtMemcpyKind kind);

/** Sets `count` bytes to (unsigned char)value. Errors: ACL_ERROR_INVALID_PARAM for a null
 *  pointer (count > 0), count > maxCount, or a range that runs past the end of the
 *  aclrtMalloc / aclrtMallocHost block devPtr points into. */
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* FIA_CANN_ACL_ACL_RT_H_ */
