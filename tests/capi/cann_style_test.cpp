// ctest capi_cann_style: a C++ program written the way CANN's own aclnn samples are, built
// against fia's CANN headers only, must compile unchanged and compute the right answer. It uses
// the idioms those samples use that a C-only subset would miss:
//   * aclDataTypeSize(dataType) to size the device buffers (acl/acl_base.h);
//   * std::vector<op::fp16_t> host data filled with a double, read back with
//     static_cast<float> (aclnn/opdev/fp16_t.h);
//   * C++-qualified enumerators: aclDataType::ACL_FLOAT16, aclFormat::ACL_FORMAT_ND;
//   * a key/value list from a plain aclTensor* array, a char[] layout filled with strcpy_s from
//     securec.h (fia's header-only one), nullptr optionals.
// The call is the FIA V4 documentation sample (FIA-SPEC 22.16): every input an fp16 one, so the
// output is all ones. Also checks aclDataTypeSize's table and op::fp16_t's conversions.
// Exits 0 when every check passes.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/opdev/fp16_t.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v4.h"
#include "securec.h"

namespace {

int g_failed = 0;
int g_passed = 0;

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (cond) {                                                                \
      ++g_passed;                                                              \
    } else {                                                                   \
      ++g_failed;                                                              \
      std::printf("FAIL %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, aclGetRecentErrMsg()); \
    }                                                                          \
  } while (0)

int64_t GetShapeSize(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// The samples' helper: device buffer sized by aclDataTypeSize, contiguous strides back to front.
template <typename T>
int CreateAclTensor(const std::vector<T> &hostData, const std::vector<int64_t> &shape, void **deviceAddr,
                    aclDataType dataType, aclTensor **tensor) {
  auto size = GetShapeSize(shape) * aclDataTypeSize(dataType);
  auto ret = aclrtMalloc(deviceAddr, size, ACL_MEM_MALLOC_HUGE_FIRST);
  if (ret != ACL_SUCCESS) return ret;
  ret = aclrtMemcpy(*deviceAddr, size, hostData.data(), size, ACL_MEMCPY_HOST_TO_DEVICE);
  if (ret != ACL_SUCCESS) return ret;
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = shape.size() - 2; i >= 0; i--) strides[i] = shape[i + 1] * strides[i + 1];
  *tensor = aclCreateTensor(shape.data(), shape.size(), dataType, strides.data(), 0, aclFormat::ACL_FORMAT_ND,
                            shape.data(), shape.size(), *deviceAddr);
  return *tensor == nullptr ? 1 : 0;
}

void CheckDataTypeSizes() {
  EXPECT(aclDataTypeSize(ACL_FLOAT16) == 2 && aclDataTypeSize(ACL_BF16) == 2);
  EXPECT(aclDataTypeSize(ACL_FLOAT) == 4 && aclDataTypeSize(ACL_INT32) == 4);
  EXPECT(aclDataTypeSize(ACL_INT8) == 1 && aclDataTypeSize(ACL_BOOL) == 1 && aclDataTypeSize(ACL_UINT8) == 1);
  EXPECT(aclDataTypeSize(ACL_INT64) == 8 && aclDataTypeSize(ACL_DOUBLE) == 8);
  EXPECT(aclDataTypeSize(ACL_INT4) == 1);  // sub-byte types report 1, as CANN
  EXPECT(aclDataTypeSize(ACL_STRING) == 0 && aclDataTypeSize(ACL_DT_UNDEFINED) == 0);
  EXPECT(aclDataTypeSize(ACL_COMPLEX128) == 16);
}

void CheckFp16() {
  std::vector<op::fp16_t> ones(3, 1.0);
  EXPECT(ones[0].val == 0x3C00 && static_cast<float>(ones[2]) == 1.0f);
  EXPECT(op::fp16_t(uint16_t(0x3C00)).toFloat() == 1.0f);  // uint16_t is the raw bit pattern
  EXPECT(static_cast<float>(op::fp16_t(0.1f)) == aclFloat16ToFloat(aclFloatToFloat16(0.1f)));
  EXPECT(static_cast<int32_t>(op::fp16_t(-3)) == -3);
  op::fp16_t x = 1.5;
  x += op::fp16_t(0.25);
  EXPECT(static_cast<double>(x) == 1.75 && x > op::fp16_t(1) && !(x == op::fp16_t(2)));
  EXPECT(sizeof(op::fp16_t) == 2);
}

// FIA-SPEC 22.16: BNSD, B = 1, N = 2, KV_N = 1, S = 1, KV_S = 16, D = 128, ones in, ones out.
void CheckFiaV4Sample() {
  int32_t deviceId = 0;
  aclrtStream stream = nullptr;
  EXPECT(aclrtSetDevice(deviceId) == ACL_SUCCESS);
  EXPECT(aclrtCreateStream(&stream) == ACL_SUCCESS);
  std::vector<int64_t> queryShape = {1, 2, 1, 128}, keyShape = {1, 1, 16, 128}, outShape = {1, 2, 1, 128};
  std::vector<op::fp16_t> queryHost(GetShapeSize(queryShape), 1.0);
  std::vector<op::fp16_t> kvHost(GetShapeSize(keyShape), 1.0);
  std::vector<op::fp16_t> outHost(GetShapeSize(outShape), 0);
  void *queryDev = nullptr, *keyDev = nullptr, *valueDev = nullptr, *outDev = nullptr;
  aclTensor *query = nullptr, *key = nullptr, *value = nullptr, *out = nullptr;
  EXPECT(CreateAclTensor(queryHost, queryShape, &queryDev, aclDataType::ACL_FLOAT16, &query) == 0);
  EXPECT(CreateAclTensor(kvHost, keyShape, &keyDev, aclDataType::ACL_FLOAT16, &key) == 0);
  EXPECT(CreateAclTensor(kvHost, keyShape, &valueDev, aclDataType::ACL_FLOAT16, &value) == 0);
  EXPECT(CreateAclTensor(outHost, outShape, &outDev, aclDataType::ACL_FLOAT16, &out) == 0);
  aclTensor *keys[1] = {key};
  aclTensor *values[1] = {value};
  auto keyList = aclCreateTensorList(keys, 1);
  auto valueList = aclCreateTensorList(values, 1);
  std::string layoutString = "BNSD";
  char layout[8];
  EXPECT(strcpy_s(layout, sizeof(layout), layoutString.c_str()) == EOK);
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = nullptr;
  auto ret = aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
      query, keyList, valueList, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
      nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
      nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 2, 1.0 / std::sqrt(128.0), 2147483647,
      2147483647, layout, 1, 0, 0, 0, 0, false, 0, 0, 0, out, nullptr, &workspaceSize, &executor);
  EXPECT(ret == ACL_SUCCESS);
  void *workspace = nullptr;
  if (ret == ACL_SUCCESS && workspaceSize > 0)
    EXPECT(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
  if (ret == ACL_SUCCESS) EXPECT(aclnnFusedInferAttentionScoreV4(workspace, workspaceSize, executor, stream) == 0);
  EXPECT(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
  std::vector<op::fp16_t> result(GetShapeSize(outShape), 0);
  EXPECT(aclrtMemcpy(result.data(), result.size() * sizeof(result[0]), outDev, result.size() * sizeof(result[0]),
                     ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
  std::vector<op::fp16_t> resultCopy(result.size());
  EXPECT(memcpy_s(resultCopy.data(), resultCopy.size() * sizeof(resultCopy[0]), result.data(),
                  result.size() * sizeof(result[0])) == EOK);
  int wrong = 0;
  for (auto v : resultCopy) wrong += static_cast<float>(v) != 1.0f;
  EXPECT(wrong == 0);
  aclDestroyTensor(query);
  aclDestroyTensor(out);
  aclDestroyTensorList(keyList);  // as in CANN, a list owns its tensors: key and value go with it
  aclDestroyTensorList(valueList);
  for (void *p : {queryDev, keyDev, valueDev, outDev}) aclrtFree(p);
  if (workspace != nullptr) aclrtFree(workspace);
  aclrtDestroyStream(stream);
  aclrtResetDevice(deviceId);
}

}  // namespace

int main() {
  if (aclInit(nullptr) != ACL_SUCCESS) return 1;
  CheckDataTypeSizes();
  CheckFp16();
  CheckFiaV4Sample();
  aclFinalize();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
