// The AscendCL runtime subset on host memory: init, devices, streams (synchronous), memory,
// element sizes, fp16 conversion, and aclnnInit/aclnnFinalize.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "capi/errors.hpp"
#include "fia/half.hpp"

namespace {

using fia::capi::set_error;

std::atomic<bool> g_initialized{false};

/// The token aclrtCreateStream hands out: streams carry no state, every call is synchronous.
char g_stream_token;

aclError param_error(const char* function, const std::string& what) {
  set_error(std::string(function) + ": " + what);
  return ACL_ERROR_INVALID_PARAM;
}

/// The blocks aclrtMalloc / aclrtMallocHost handed out and not yet freed: start address -> the
/// size asked for, so that aclrtMemcpy / aclrtMemset can refuse a range that runs past a block's end.
class BlockRegistry {
 public:
  void add(const void* ptr, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_[reinterpret_cast<uintptr_t>(ptr)] = size;
  }

  void remove(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.erase(reinterpret_cast<uintptr_t>(ptr));
  }

  /// An empty string when [ptr, ptr + count) fits in the tracked block that holds ptr (or ptr is in
  /// none, when nothing is checked); otherwise why it does not.
  std::string overrun(const void* ptr, size_t count) const {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return {};
    --it;
    const size_t offset = p - it->first, size = it->second;
    if (offset >= size || count <= size - offset) return {};
    return std::to_string(count) + " bytes from offset " + std::to_string(offset) + " run past the end of its " +
           std::to_string(size) + "-byte block from aclrtMalloc/aclrtMallocHost";
  }

 private:
  mutable std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;
};

BlockRegistry& blocks() {
  static BlockRegistry registry;
  return registry;
}

/// ACL_ERROR_INVALID_PARAM naming `argument` when [ptr, ptr + count) overruns a tracked block.
aclError check_range(const char* function, const char* argument, const void* ptr, size_t count) {
  const std::string why = blocks().overrun(ptr, count);
  return why.empty() ? ACL_SUCCESS : param_error(function, std::string(argument) + ": " + why);
}

aclError host_alloc(const char* function, void** ptr, size_t size) {
  if (ptr == nullptr) return param_error(function, "the output pointer is null");
  if (size == 0) return param_error(function, "size must be > 0, got 0");
  const size_t rounded = (size + 63) / 64 * 64;
  if (rounded < size) return param_error(function, "size " + std::to_string(size) + " is too large");
  *ptr = std::aligned_alloc(64, rounded);
  if (*ptr == nullptr) {
    set_error(std::string(function) + ": cannot allocate " + std::to_string(size) + " bytes");
    return ACL_ERROR_BAD_ALLOC;
  }
  blocks().add(*ptr, size);
  return ACL_SUCCESS;
}

aclError check_device(const char* function, int32_t id) {
  if (id < 0) {
    set_error(std::string(function) + ": deviceId must be >= 0, got " + std::to_string(id));
    return ACL_ERROR_INVALID_DEVICE;
  }
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError aclInit(const char* configPath) {
  if (g_initialized.exchange(true)) {
    set_error("aclInit: already initialised");
    return ACL_ERROR_REPEAT_INITIALIZE;
  }
  return ACL_SUCCESS;
}

aclError aclFinalize(void) {
  if (!g_initialized.exchange(false)) {
    set_error("aclFinalize: not initialised");
    return ACL_ERROR_REPEAT_FINALIZE;
  }
  return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) { return check_device("aclrtSetDevice", deviceId); }

aclError aclrtResetDevice(int32_t deviceId) { return check_device("aclrtResetDevice", deviceId); }

aclError aclrtCreateStream(aclrtStream* stream) {
  if (stream == nullptr) return param_error("aclrtCreateStream", "stream is null");
  *stream = &g_stream_token;
  return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
  return stream == nullptr ? param_error("aclrtDestroyStream", "stream is null") : ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  return stream == nullptr ? param_error("aclrtSynchronizeStream", "stream is null") : ACL_SUCCESS;
}

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return host_alloc("aclrtMalloc", devPtr, size);
}

aclError aclrtFree(void* devPtr) {
  if (devPtr == nullptr) return param_error("aclrtFree", "devPtr is null");
  blocks().remove(devPtr);
  std::free(devPtr);
  return ACL_SUCCESS;
}

aclError aclrtMallocHost(void** hostPtr, size_t size) { return host_alloc("aclrtMallocHost", hostPtr, size); }

aclError aclrtFreeHost(void* hostPtr) {
  if (hostPtr == nullptr) return param_error("aclrtFreeHost", "hostPtr is null");
  blocks().remove(hostPtr);
  std::free(hostPtr);
  return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  if (static_cast<int>(kind) < ACL_MEMCPY_HOST_TO_HOST || static_cast<int>(kind) > ACL_MEMCPY_INTER_DEVICE_TO_DEVICE)
    return param_error("aclrtMemcpy", "unknown kind " + std::to_string(static_cast<int>(kind)));
  if (count > destMax)
    return param_error("aclrtMemcpy",
                       "count (" + std::to_string(count) + ") must be <= destMax (" + std::to_string(destMax) + ")");
  if (count == 0) return ACL_SUCCESS;
  if (dst == nullptr || src == nullptr)
    return param_error("aclrtMemcpy", dst == nullptr ? "dst is null" : "src is null");
  if (const aclError e = check_range("aclrtMemcpy", "dst", dst, count)) return e;
  if (const aclError e = check_range("aclrtMemcpy", "src", src, count)) return e;
  std::memcpy(dst, src, count);
  return ACL_SUCCESS;
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  if (count > maxCount)
    return param_error("aclrtMemset",
                       "count (" + std::to_string(count) + ") must be <= maxCount (" + std::to_string(maxCount) + ")");
  if (count == 0) return ACL_SUCCESS;
  if (devPtr == nullptr) return param_error("aclrtMemset", "devPtr is null");
  if (const aclError e = check_range("aclrtMemset", "devPtr", devPtr, count)) return e;
  std::memset(devPtr, value, count);
  return ACL_SUCCESS;
}

size_t aclDataTypeSize(aclDataType dataType) {
  switch (dataType) {
    case ACL_STRING:
    case ACL_DT_UNDEFINED:
      return 0;
    case ACL_INT4:
    case ACL_UINT1:
    case ACL_BOOL:
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_HIFLOAT8:
    case ACL_FLOAT8_E5M2:
    case ACL_FLOAT8_E4M3FN:
    case ACL_FLOAT8_E8M0:
      return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
      return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_COMPLEX32:
      return 4;
    case ACL_COMPLEX128:
      return 16;
    default:
      return 8;  // INT64, UINT64, DOUBLE, COMPLEX64; CANN gives 8 for every value it does not list
  }
}

float aclFloat16ToFloat(aclFloat16 value) {
  if ((value & 0x7C00u) != 0x7C00u) return fia::f16_to_f32(value);
  // Exponent 31 (Inf/NaN) read as a finite exponent, as CANN does: 2^16 * (1 + mantissa / 1024).
  const float magnitude = std::ldexp(1.0f + static_cast<float>(value & 0x3FFu) / 1024.0f, 16);
  return (value & 0x8000u) ? -magnitude : magnitude;
}

aclFloat16 aclFloatToFloat16(float value) {
  if (std::isnan(value)) return 0x7BFF;
  const aclFloat16 h = fia::f32_to_f16(value);
  if ((h & 0x7FFFu) == 0x7C00u) return (h & 0x8000u) ? 0xFBFF : 0x7BFF;  // saturate
  return h;
}

aclnnStatus aclnnInit(const char* configPath) { return ACLNN_SUCCESS; }

aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

}  // extern "C"
