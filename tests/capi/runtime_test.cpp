// The host-memory runtime of the C API: init, devices, streams, memory, fp16 conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

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
