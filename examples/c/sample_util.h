/* Helpers of the C examples, written as CANN's aclnn samples write them: initialise the runtime,
 * copy host data to "device" memory (aclrtMalloc + aclrtMemcpy) and describe it with
 * aclCreateTensor. With fia the device is the host, so the same program runs on any CPU. */
#ifndef FIA_EXAMPLES_C_SAMPLE_UTIL_H_
#define FIA_EXAMPLES_C_SAMPLE_UTIL_H_

#include <stdint.h>
#include <stdio.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"

#define CHECK_RET(cond, what)                                                     \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s failed: %s\n", what, aclGetRecentErrMsg());            \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

/** aclInit, aclrtSetDevice and aclrtCreateStream; 0 on success. */
static int Init(int32_t deviceId, aclrtStream *stream) {
  CHECK_RET(aclInit(NULL) == ACL_SUCCESS, "aclInit");
  CHECK_RET(aclrtSetDevice(deviceId) == ACL_SUCCESS, "aclrtSetDevice");
  CHECK_RET(aclrtCreateStream(stream) == ACL_SUCCESS, "aclrtCreateStream");
  return 0;
}

/** Copies `bytes` of host data to new device memory (*deviceAddr) and makes a contiguous ND
 *  tensor of `shape` (rank dims) over it; 0 on success. hostData may be NULL: zero-filled. */
static int CreateAclTensor(const void *hostData, size_t bytes, const int64_t *shape, uint64_t rank,
                           aclDataType dataType, void **deviceAddr, aclTensor **tensor) {
  int64_t strides[8];
  int64_t i;
  CHECK_RET(rank <= 8, "rank <= 8");
  CHECK_RET(aclrtMalloc(deviceAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
  if (hostData != NULL) {
    CHECK_RET(aclrtMemcpy(*deviceAddr, bytes, hostData, bytes, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS,
              "aclrtMemcpy");
  } else {
    CHECK_RET(aclrtMemset(*deviceAddr, bytes, 0, bytes) == ACL_SUCCESS, "aclrtMemset");
  }
  if (rank > 0) strides[rank - 1] = 1;
  for (i = (int64_t)rank - 2; i >= 0; --i) strides[i] = shape[i + 1] * strides[i + 1];
  *tensor = aclCreateTensor(shape, rank, dataType, strides, 0, ACL_FORMAT_ND, shape, rank, *deviceAddr);
  CHECK_RET(*tensor != NULL, "aclCreateTensor");
  return 0;
}

#endif /* FIA_EXAMPLES_C_SAMPLE_UTIL_H_ */
