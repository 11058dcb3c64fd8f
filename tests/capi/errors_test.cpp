// C API errors: every status code, null handles, aclGetRecentErrMsg naming the aclnn argument
// of the operator called, the workspace/executor flow, FIA_ACLNN_STRICT, and empty tensors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "acl/acl.h"
#include "acl_handles.hpp"
#include "aclnnop/aclnn_fused_infer_attention_score.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v4.h"
#include "aclnnop/aclnn_incre_flash_attention_v4.h"
#include "aclnnop/aclnn_prompt_flash_attention_v3.h"
#include "support/call_builder.hpp"

namespace fia::test {
namespace {

std::string last_error() { return aclGetRecentErrMsg(); }

CallSpec small_decode() {
  CallSpec spec;
  spec.layout = "BNSD";
  spec.batch = 2, spec.num_heads = 2, spec.q_seq = 1, spec.kv_seq = 8;
  return spec;
}

/// A small BNSD decode call and its handles, for FIA V4.
struct V4Call {
  TestCall call;
  Outputs out;
  AclTensor query, mask, out_t, lse_t;
  AclList key, value;
  AclInts act_kv;
  std::string layout = "BNSD";
  bool lse_flag = false;
  int64_t num_heads = 2;

  explicit V4Call(const CallSpec& spec = small_decode()) : call(build_call(spec, 3)) {
    out = cpp_outputs(call.args);
    out.softmax_lse = OwnedTensor(DType::F32, {2, 2, 1, 1});
    query = acl_tensor(call.args.query);
    key = acl_list(call.args.key);
    value = acl_list(call.args.value);
    out_t = acl_tensor(out.attention_out.mutable_view());
    lse_t = acl_tensor(out.softmax_lse.mutable_view());
  }

  aclnnStatus plan(uint64_t* ws, aclOpExecutor** ex) {
    const aclTensor* n = nullptr;
    return aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
        query.get(), key.get(), value.get(), n, mask.get(), nullptr, act_kv.get(), n, n, n, n, n, n, n, n, n, n, n, n,
        n, n, n, n, nullptr, n, n, n, n, n, num_heads, 0.25, kIntMax, kIntMax, layout.data(), 0, 0, 0, 0, 0, lse_flag,
        0, 0, 0, out_t.get(), lse_t.get(), ws, ex);
  }
};

TEST(CApiErrors, NullRequiredInputsAre161001NamingTheArgument) {
  V4Call c;
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  c.query.reset();
  EXPECT_EQ(c.plan(&ws, &ex), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(last_error(), "aclnnFusedInferAttentionScoreV4GetWorkspaceSize: query: required, got null");
  EXPECT_EQ(ex, nullptr);
  V4Call d;
  d.out_t.reset();
  EXPECT_EQ(d.plan(&ws, &ex), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_NE(last_error().find("attentionOut"), std::string::npos) << last_error();
  V4Call e;
  e.key.reset();
  EXPECT_EQ(e.plan(&ws, &ex), ACLNN_ERR_PARAM_NULLPTR);
  V4Call f;
  f.lse_flag = true;
  f.lse_t.reset();
  EXPECT_EQ(f.plan(&ws, &ex), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_NE(last_error().find("softmaxLse: required when softmaxLseFlag is true"), std::string::npos) << last_error();
  V4Call g;
  EXPECT_EQ(g.plan(nullptr, &ex), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(g.plan(&ws, nullptr), ACLNN_ERR_PARAM_NULLPTR);
}

TEST(CApiErrors, InvalidCallsAre161002WithTheAclnnNames) {
  V4Call c;
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  c.act_kv = acl_ints(std::vector<std::int64_t>{8, 9});  // beyond KV_S = 8
  EXPECT_EQ(c.plan(&ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(last_error().rfind("aclnnFusedInferAttentionScoreV4GetWorkspaceSize: actualSeqLengthsKvOptional: ", 0), 0u)
      << last_error();
  EXPECT_EQ(last_error().find("actual_seq_lengths"), std::string::npos) << last_error();
  V4Call d;
  d.num_heads = 3;
  EXPECT_EQ(d.plan(&ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(last_error().find("numHeads"), std::string::npos) << last_error();
  V4Call e;
  e.layout = "XYZ";
  EXPECT_EQ(e.plan(&ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(last_error().find("inputLayout"), std::string::npos) << last_error();
  V4Call f;  // attentionOut of the wrong shape
  OwnedTensor small(DType::F16, {2, 2, 1, 8});
  f.out_t = acl_tensor(small.mutable_view());
  EXPECT_EQ(f.plan(&ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(last_error().find("attentionOut: shape must be [2, 2, 1, 16], got [2, 2, 1, 8]"), std::string::npos)
      << last_error();
}

TEST(CApiErrors, UnsupportedDtypesAndFormatsAre161002) {
  V4Call c;
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const std::int64_t dims[4] = {2, 2, 1, 16}, strides[4] = {32, 16, 16, 1};
  c.query.reset(
      aclCreateTensor(dims, 4, ACL_INT16, strides, 0, ACL_FORMAT_ND, dims, 4, c.call.storage.front().bytes.data()));
  EXPECT_EQ(c.plan(&ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(last_error().find("query: dtype ACL_INT16 is not supported"), std::string::npos) << last_error();
  V4Call d;
  d.query.reset(aclCreateTensor(dims, 4, ACL_FLOAT16, strides, 0, ACL_FORMAT_FRACTAL_NZ, dims, 4,
                                d.call.storage.front().bytes.data()));
  EXPECT_EQ(d.plan(&ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(last_error().find("format"), std::string::npos) << last_error();
}

TEST(CApiErrors, IfaAndPfaNameTheirOwnArguments) {
  CallSpec spec;
  spec.layout = "BNSD";
  spec.batch = 1, spec.num_heads = 2, spec.q_seq = 1, spec.kv_seq = 8;
  TestCall call = build_call(spec, 1);
  OwnedTensor out(DType::F16, {1, 2, 1, 16});
  AclTensor q = acl_tensor(call.args.query), o = acl_tensor(out.mutable_view());
  AclList k = acl_list(call.args.key), v = acl_list(call.args.value);
  AclInts bad = acl_ints(std::vector<std::int64_t>{9});
  char layout[] = "BNSD";
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclTensor* n = nullptr;
  EXPECT_EQ(aclnnIncreFlashAttentionV4GetWorkspaceSize(q.get(), k.get(), v.get(), n, n, bad.get(), n, n, n, n, n, n, n,
                                                       n, n, 2, 1.0, layout, 0, 0, 1, o.get(), &ws, &ex),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(last_error().rfind("aclnnIncreFlashAttentionV4GetWorkspaceSize: actualSeqLengths: ", 0), 0u)
      << last_error();
  AclTensor k1 = acl_tensor(call.args.key[0]), v1 = acl_tensor(call.args.value[0]);
  EXPECT_EQ(
      aclnnPromptFlashAttentionV3GetWorkspaceSize(q.get(), k1.get(), v1.get(), n, n, nullptr, bad.get(), n, n, n, n, n,
                                                  2, 1.0, kIntMax, kIntMax, layout, 0, 0, 1, o.get(), &ws, &ex),
      ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(last_error().rfind("aclnnPromptFlashAttentionV3GetWorkspaceSize: actualSeqLengthsKv: ", 0), 0u)
      << last_error();
  EXPECT_EQ(
      aclnnPromptFlashAttentionV3GetWorkspaceSize(q.get(), nullptr, v1.get(), n, n, nullptr, nullptr, n, n, n, n, n, 2,
                                                  1.0, kIntMax, kIntMax, layout, 0, 0, 1, o.get(), &ws, &ex),
      ACLNN_ERR_PARAM_NULLPTR);
}

TEST(CApiErrors, TheV1NamesHaveNoOptionalSuffix) {
  V4Call c;
  AclInts bad = acl_ints(std::vector<std::int64_t>{8, 9});
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclTensor* n = nullptr;
  EXPECT_EQ(aclnnFusedInferAttentionScoreGetWorkspaceSize(
                c.query.get(), c.key.get(), c.value.get(), n, n, nullptr, bad.get(), n, n, n, n, n, n, n, n, n, n, 2,
                0.25, kIntMax, kIntMax, c.layout.data(), 0, 0, 0, 0, 0, false, c.out_t.get(), nullptr, &ws, &ex),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(last_error().rfind("aclnnFusedInferAttentionScoreGetWorkspaceSize: actualSeqLengthsKv: ", 0), 0u)
      << last_error();
}

TEST(CApiErrors, WorkspaceAndExecutorFlow) {
  V4Call c;
  uint64_t ws = 12345;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS) << last_error();
  ASSERT_NE(ex, nullptr);
  std::vector<std::byte> work(ws + 1);
  if (ws > 0) {  // too small a workspace: refused, and the executor is freed
    EXPECT_EQ(aclnnFusedInferAttentionScoreV4(work.data(), ws - 1, ex, nullptr), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(last_error().find("workspaceSize must be at least"), std::string::npos) << last_error();
    ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS);
  }
  EXPECT_EQ(aclnnFusedInferAttentionScoreV4(work.data(), ws, ex, nullptr), ACLNN_SUCCESS) << last_error();
  EXPECT_EQ(c.out.attention_out.bytes, cpp_outputs(c.call.args).attention_out.bytes);
  EXPECT_EQ(aclnnFusedInferAttentionScoreV4(work.data(), ws, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(last_error(), "aclnnFusedInferAttentionScoreV4: executor is null");
  // An executor that will not run is freed with aclDestroyAclOpExecutor.
  ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyAclOpExecutor(ex), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyAclOpExecutor(nullptr), ACLNN_SUCCESS);
}

TEST(CApiErrors, HandlesCanBeDestroyedBetweenThePhases) {
  V4Call c;
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS) << last_error();
  c.query.reset(), c.key.reset(), c.value.reset(), c.out_t.reset();
  std::vector<std::byte> work(ws);
  EXPECT_EQ(aclnnFusedInferAttentionScoreV4(work.data(), ws, ex, nullptr), ACLNN_SUCCESS) << last_error();
  EXPECT_EQ(c.out.attention_out.bytes, cpp_outputs(c.call.args).attention_out.bytes);
}

TEST(CApiErrors, StrictModeFromTheEnvironment) {
  CallSpec spec = small_decode();
  spec.dtype = DType::F32;  // float32 attention: a fia extension, refused in strict mode
  V4Call c(spec);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(setenv("FIA_ACLNN_STRICT", "1", 1), 0);
  const aclnnStatus strict = c.plan(&ws, &ex);
  unsetenv("FIA_ACLNN_STRICT");
  EXPECT_EQ(strict, ACLNN_ERR_PARAM_INVALID) << "strict mode accepted a float32 query";
  ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS) << last_error();
  aclDestroyAclOpExecutor(ex);
}

TEST(CApiErrors, EmptyKeyAndValueGiveZerosAndInfiniteLse) {  // FIA-SPEC 19
  V4Call c;
  const std::int64_t dims[4] = {2, 2, 0, 16}, strides[4] = {0, 0, 16, 1}, storage[1] = {0};
  aclTensor* k = aclCreateTensor(dims, 4, ACL_FLOAT16, strides, 0, ACL_FORMAT_ND, storage, 1, nullptr);
  ASSERT_NE(k, nullptr) << last_error();
  const aclTensor* ks[1] = {k};
  c.key.reset(aclCreateTensorList(ks, 1));
  c.value.reset(aclCreateTensorList(ks, 1));
  aclDestroyTensor(k);
  c.lse_flag = true;
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS) << last_error();
  std::vector<std::byte> work(ws);
  ASSERT_EQ(aclnnFusedInferAttentionScoreV4(work.data(), ws, ex, nullptr), ACLNN_SUCCESS) << last_error();
  for (std::int64_t i = 0; i < c.out.attention_out.numel(); ++i)
    EXPECT_EQ(c.out.attention_out.as<std::uint16_t>()[i], 0);
  for (std::int64_t i = 0; i < c.out.softmax_lse.numel(); ++i)
    EXPECT_EQ(c.out.softmax_lse.as<float>()[i], std::numeric_limits<float>::infinity());
}

TEST(CApiErrors, AnEmptyQueryGivesAnEmptyOutput) {  // FIA-SPEC 19, as the C++ API: Q_S = 0
  V4Call c;
  const std::int64_t dims[4] = {2, 2, 0, 16}, strides[4] = {32, 16, 16, 1}, storage[1] = {0};
  c.query.reset(aclCreateTensor(dims, 4, ACL_FLOAT16, strides, 0, ACL_FORMAT_ND, storage, 1, nullptr));
  c.out_t.reset(aclCreateTensor(dims, 4, ACL_FLOAT16, strides, 0, ACL_FORMAT_ND, storage, 1, nullptr));
  ASSERT_NE(c.query, nullptr);
  uint64_t ws = 1;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS) << last_error();
  std::vector<std::byte> work(ws);
  EXPECT_EQ(aclnnFusedInferAttentionScoreV4(work.data(), ws, ex, nullptr), ACLNN_SUCCESS) << last_error();
}

TEST(CApiHandles, NullHandlesAndBadDescriptions) {
  EXPECT_EQ(aclDestroyTensor(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyTensorList(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyIntArray(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyBoolArray(nullptr), ACLNN_SUCCESS);
  const std::int64_t dims[2] = {2, 3}, strides[2] = {3, 1}, small[1] = {5};
  float data[6] = {};
  EXPECT_EQ(aclCreateTensor(nullptr, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 2, data), nullptr);
  EXPECT_NE(last_error().find("viewDims is null"), std::string::npos) << last_error();
  EXPECT_EQ(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, small, 1, data), nullptr);
  EXPECT_NE(last_error().find("inside the storage of 5 elements"), std::string::npos) << last_error();
  EXPECT_EQ(aclCreateTensor(dims, 2, ACL_FLOAT, strides, -1, ACL_FORMAT_ND, dims, 2, data), nullptr);
  EXPECT_EQ(aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 2, nullptr), nullptr);
  EXPECT_EQ(aclCreateTensorList(nullptr, 1), nullptr);
  const aclTensor* none[1] = {nullptr};
  EXPECT_EQ(aclCreateTensorList(none, 1), nullptr);
  EXPECT_NE(last_error().find("value[0] is null"), std::string::npos) << last_error();
  EXPECT_EQ(aclCreateIntArray(nullptr, 2), nullptr);
  EXPECT_EQ(aclCreateBoolArray(nullptr, 2), nullptr);
  aclIntArray* empty = aclCreateIntArray(nullptr, 0);
  EXPECT_NE(empty, nullptr);
  aclDestroyIntArray(empty);
  const bool flags[2] = {true, false};
  aclBoolArray* b = aclCreateBoolArray(flags, 2);
  EXPECT_NE(b, nullptr);
  aclDestroyBoolArray(b);
}

TEST(CApiHandles, OffsetIsCountedInElements) {
  // attentionOut placed 3 elements into a buffer: the result lands there.
  V4Call c;
  std::vector<std::uint16_t> buffer(3 + 64, 0xFFFF);
  const std::int64_t dims[4] = {2, 2, 1, 16}, strides[4] = {32, 16, 16, 1}, storage[1] = {67};
  c.out_t.reset(aclCreateTensor(dims, 4, ACL_FLOAT16, strides, 3, ACL_FORMAT_ND, storage, 1, buffer.data()));
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  ASSERT_EQ(c.plan(&ws, &ex), ACLNN_SUCCESS) << last_error();
  std::vector<std::byte> work(ws);
  ASSERT_EQ(aclnnFusedInferAttentionScoreV4(work.data(), ws, ex, nullptr), ACLNN_SUCCESS) << last_error();
  const Outputs ref = cpp_outputs(c.call.args);
  EXPECT_EQ(buffer[2], 0xFFFF);
  EXPECT_EQ(std::memcmp(buffer.data() + 3, ref.attention_out.bytes.data(), 128), 0);
}

}  // namespace
}  // namespace fia::test
