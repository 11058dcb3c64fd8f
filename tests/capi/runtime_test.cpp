// The host-memory runtime of the C API: init, devices, streams, memory (with the bounds check of
// aclrtMemcpy/aclrtMemset on fia's blocks), fp16 conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"

namespace {

TEST(CApiRuntime, InitFinalizeDevicesStreams) {
  EXPECT_EQ(aclInit(nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(aclrtSetDevice(-1), ACL_ERROR_INVALID_DEVICE);
  aclrtStream stream = nullptr;
  EXPECT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  EXPECT_NE(stream, nullptr);
  EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
  EXPECT_EQ(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  EXPECT_EQ(aclnnInit(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclnnFinalize(), ACLNN_SUCCESS);
}

TEST(CApiRuntime, MemoryIsAlignedHostMemory) {
  void* p = nullptr;
  ASSERT_EQ(aclrtMalloc(&p, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  const char src[100] = "hello";
  EXPECT_EQ(aclrtMemcpy(p, 100, src, 100, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  char back[100] = {};
  EXPECT_EQ(aclrtMemcpy(back, 100, p, 100, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_STREQ(back, "hello");
  EXPECT_EQ(aclrtMemcpy(back, 50, p, 100, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("must be <= destMax"), std::string::npos);
  EXPECT_EQ(aclrtMemcpy(back, 100, nullptr, 10, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemset(p, 100, 7, 100), ACL_SUCCESS);
  EXPECT_EQ(static_cast<char*>(p)[99], 7);
  EXPECT_EQ(aclrtMemset(p, 10, 7, 100), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtFree(p), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMalloc(nullptr, 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtMallocHost(&p, 8), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreeHost(p), ACL_SUCCESS);
}

/// The message of the last failure contains `part`.
bool message_has(const std::string& part) { return std::string(aclGetRecentErrMsg()).find(part) != std::string::npos; }

TEST(CApiRuntime, CopiesPastTheEndOfABlockAreRefused) {
  void* dev = nullptr;
  void* host = nullptr;
  ASSERT_EQ(aclrtMalloc(&dev, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMallocHost(&host, 60), ACL_SUCCESS);
  std::vector<char> big(400, 1);
  char* d = static_cast<char*>(dev);
  // Inside the blocks: fine, also from an interior pointer up to the exact end.
  EXPECT_EQ(aclrtMemcpy(dev, 100, big.data(), 100, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemcpy(d + 40, 60, host, 60, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemset(d + 99, 1, 0, 1), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemset(host, 60, 5, 60), ACL_SUCCESS);
  // The CANN samples' read-back of twice the output: src runs past its block.
  EXPECT_EQ(aclrtMemcpy(big.data(), 400, dev, 200, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM);
  EXPECT_TRUE(message_has("aclrtMemcpy: src: 200 bytes from offset 0 run past the end of its 100-byte block"))
      << aclGetRecentErrMsg();
  EXPECT_EQ(aclrtMemcpy(big.data(), 400, d + 50, 51, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
  EXPECT_TRUE(message_has("src: 51 bytes from offset 50")) << aclGetRecentErrMsg();
  // dst runs past its block, with a destMax that lies about it.
  EXPECT_EQ(aclrtMemcpy(host, 400, big.data(), 61, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM);
  EXPECT_TRUE(message_has("aclrtMemcpy: dst: 61 bytes from offset 0 run past the end of its 60-byte block"))
      << aclGetRecentErrMsg();
  EXPECT_EQ(aclrtMemset(d + 10, 400, 0, 91), ACL_ERROR_INVALID_PARAM);
  EXPECT_TRUE(message_has("aclrtMemset: devPtr: 91 bytes from offset 10")) << aclGetRecentErrMsg();
  EXPECT_EQ(static_cast<char*>(host)[0], 5);  // nothing was written by the refused calls
  // count > destMax stays an error; pointers fia did not allocate are not checked.
  EXPECT_EQ(aclrtMemcpy(dev, 50, big.data(), 100, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
  EXPECT_TRUE(message_has("must be <= destMax")) << aclGetRecentErrMsg();
  EXPECT_EQ(aclrtMemcpy(big.data() + 200, 200, big.data(), 200, ACL_MEMCPY_HOST_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreeHost(host), ACL_SUCCESS);
}

TEST(CApiRuntime, BlockTrackingIsThreadSafe) {
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &failures] {
      char buffer[256] = {};
      for (int i = 0; i < 500; ++i) {
        void* p = nullptr;
        const size_t size = 16 + static_cast<size_t>((t * 31 + i) % 200);
        if (aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) ++failures[t];
        if (aclrtMemcpy(p, size, buffer, size, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS) ++failures[t];
        if (aclrtMemcpy(buffer, 256, p, size + 1, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_ERROR_INVALID_PARAM) ++failures[t];
        if (aclrtFree(p) != ACL_SUCCESS) ++failures[t];
      }
    });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST(CApiRuntime, Float16ConversionSaturatesAsCann) {
  EXPECT_EQ(aclFloatToFloat16(1.0f), 0x3C00);
  EXPECT_EQ(aclFloatToFloat16(-2.5f), 0xC100);
  EXPECT_EQ(aclFloatToFloat16(1e6f), 0x7BFF);
  EXPECT_EQ(aclFloatToFloat16(INFINITY), 0x7BFF);
  EXPECT_EQ(aclFloatToFloat16(-INFINITY), 0xFBFF);
  EXPECT_EQ(aclFloatToFloat16(NAN), 0x7BFF);
  EXPECT_EQ(aclFloat16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(aclFloat16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(aclFloat16ToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(aclFloat16ToFloat(0x7C00), 65536.0f);
  EXPECT_EQ(aclFloat16ToFloat(0xFC00), -65536.0f);
  EXPECT_EQ(aclFloat16ToFloat(0x7E00), 98304.0f);
}

}  // namespace
