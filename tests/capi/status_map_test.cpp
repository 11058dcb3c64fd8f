// The C API's mapping of fia's Status onto aclnn codes and messages (src/capi/errors.hpp): every
// code, the aclnn names of each operator and version, and an unsupported feature end to end.
#include <gtest/gtest.h>

#include <string>

#include "acl/acl.h"
#include "acl_handles.hpp"
#include "aclnnop/aclnn_fused_infer_attention_score_v2.h"
#include "capi/errors.hpp"
#include "support/call_builder.hpp"
#include "support/full_quant_builder.hpp"

namespace fia::test {
namespace {

using capi::EntryName;
using capi::Op;

constexpr EntryName kFiaV1{Op::kFia, 1, "aclnnFusedInferAttentionScoreGetWorkspaceSize",
                           "aclnnFusedInferAttentionScore"};
constexpr EntryName kFiaV4{Op::kFia, 4, "aclnnFusedInferAttentionScoreV4GetWorkspaceSize",
                           "aclnnFusedInferAttentionScoreV4"};
constexpr EntryName kIfaV3{Op::kIfa, 3, "aclnnIncreFlashAttentionV3GetWorkspaceSize", "aclnnIncreFlashAttentionV3"};
constexpr EntryName kPfaV2{Op::kPfa, 2, "aclnnPromptFlashAttentionV2GetWorkspaceSize", "aclnnPromptFlashAttentionV2"};

TEST(CApiStatus, EveryCodeMaps) {
  EXPECT_EQ(capi::report(kFiaV4, Status::Ok()), ACLNN_SUCCESS);
  EXPECT_EQ(capi::report(kFiaV4, {StatusCode::kNullArgument, "query", "required"}), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(capi::report(kFiaV4, {StatusCode::kInvalidArgument, "query", "bad"}), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(capi::report(kFiaV4, {StatusCode::kUnsupported, "query", "later"}), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()),
            "aclnnFusedInferAttentionScoreV4GetWorkspaceSize: query: later (not supported by fia)");
  EXPECT_EQ(capi::report(kFiaV4, {StatusCode::kInternal, "", "bug"}), ACLNN_ERR_RUNTIME_ERROR);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "aclnnFusedInferAttentionScoreV4GetWorkspaceSize: bug");
  capi::report(kFiaV4, {StatusCode::kInvalidArgument, "attention_out", "x"}, /*run_phase=*/true);
  EXPECT_EQ(std::string(aclGetRecentErrMsg()), "aclnnFusedInferAttentionScoreV4: attentionOut: x");
}

TEST(CApiStatus, NamesFollowTheOperatorAndVersion) {
  EXPECT_EQ(capi::aclnn_name(kFiaV1, "block_table"), "blockTable");
  EXPECT_EQ(capi::aclnn_name(kFiaV4, "block_table"), "blockTableOptional");
  EXPECT_EQ(capi::aclnn_name(kFiaV1, "dequant_scale1"), "deqScale1");
  EXPECT_EQ(capi::aclnn_name(kFiaV4, "num_heads"), "numHeads");
  EXPECT_EQ(capi::aclnn_name(kFiaV4, "scale"), "scaleValue");
  EXPECT_EQ(capi::aclnn_name(kIfaV3, "block_table"), "blocktable");
  EXPECT_EQ(capi::aclnn_name(kIfaV3, "actual_seq_lengths_kv"), "actualSeqLengths");
  EXPECT_EQ(capi::aclnn_name(kIfaV3, "dequant_scale1"), "dequantScale1");
  EXPECT_EQ(capi::aclnn_name(kPfaV2, "dequant_scale1"), "deqScale1");
  EXPECT_EQ(capi::aclnn_name(kPfaV2, "actual_seq_lengths_kv"), "actualSeqLengthsKv");
  EXPECT_EQ(capi::translate_names(kFiaV4, "actual_seq_lengths_kv[1] (9) must be <= 8 (key's S); see block_table"),
            "actualSeqLengthsKvOptional[1] (9) must be <= 8 (key's S); see blockTableOptional");
  EXPECT_EQ(capi::translate_names(kIfaV3, "actual_seq_lengths_kv and block_size"), "actualSeqLengths and blockSize");
  // Indexed parameters keep their index.
  capi::report(kFiaV4, {StatusCode::kInvalidArgument, "key_antiquant_scale[0]", "x"});
  EXPECT_EQ(std::string(aclGetRecentErrMsg()),
            "aclnnFusedInferAttentionScoreV4GetWorkspaceSize: keyAntiquantScaleOptional[0]: x");
}

TEST(CApiStatus, AnUnsupportedFeatureIs161002NamingItsArgument) {
  CallSpec spec;
  spec.layout = "BNSD";
  spec.num_heads = 2, spec.q_seq = 2, spec.kv_seq = 8;
  TestCall call = build_call(spec, 5);
  // A key whose innermost axis is strided: fia reads that axis with unit stride.
  OwnedTensor wide(DType::F16, {1, 2, 8, 32});
  TensorView strided = wide.view();
  strided.shape = {1, 2, 8, 16};
  strided.strides = {512, 256, 32, 2};
  OwnedTensor out(DType::F16, {1, 2, 2, 16});
  AclTensor q = acl_tensor(call.args.query), o = acl_tensor(out.mutable_view());
  AclList k = acl_list({strided}), v = acl_list({call.args.value[0]});
  char layout[] = "BNSD";
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclTensor* n = nullptr;
  const int64_t lengths[] = {8};
  aclIntArray* kv_lengths = aclCreateIntArray(lengths, 1);
  EXPECT_EQ(aclnnFusedInferAttentionScoreV2GetWorkspaceSize(
                q.get(), k.get(), v.get(), n, n, nullptr, kv_lengths, n, n, n, n, n, n, n, n, n, n, n, n,
                n, n, n, n, nullptr, 2, 1.0, kIntMax, kIntMax, layout, 0, 0, 0, 16, 0, false, 0, 0, o.get(), nullptr,
                &ws, &ex),
            ACLNN_ERR_PARAM_INVALID);
  aclDestroyIntArray(kv_lengths);
  const std::string msg = aclGetRecentErrMsg();
  EXPECT_EQ(msg.rfind("aclnnFusedInferAttentionScoreV2GetWorkspaceSize: key: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("(not supported by fia)"), std::string::npos) << msg;
  EXPECT_EQ(ex, nullptr);
}

/// Calls aclnnFusedInferAttentionScoreV2 (BNSD, 2 heads, no mask) on a call's query, key, value
/// and quantization scales into each of `outputs`: the first must succeed with the C++ API's
/// bytes, the others must be rejected naming attentionOut (a dtype 13.2 does not allow).
void expect_v2_output_dtypes(const FiaArgs& a, const std::vector<OwnedTensor*>& outputs) {
  Outputs want;
  ASSERT_TRUE(fia::fused_infer_attention_score(a, Options{}, &want).ok());
  ASSERT_EQ(want.attention_out.dtype, outputs[0]->dtype);
  AclTensor q = acl_tensor(a.query), d1 = acl_tensor(a.dequant_scale1), q1 = acl_tensor(a.quant_scale1),
            d2 = acl_tensor(a.dequant_scale2), s2 = acl_tensor(a.quant_scale2);
  AclList k = acl_list(a.key), v = acl_list(a.value);
  char layout[] = "BNSD";
  const aclTensor* n = nullptr;
  for (OwnedTensor* out : outputs) {
    AclTensor o = acl_tensor(out->mutable_view());
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    const aclnnStatus st = aclnnFusedInferAttentionScoreV2GetWorkspaceSize(
        q.get(), k.get(), v.get(), n, n, nullptr, nullptr, d1.get(), q1.get(), d2.get(), s2.get(), n, n, n, n, n, n,
        n, n, n, n, n, n, nullptr, 2, a.scale, kIntMax, kIntMax, layout, 0, 0, 0, 0, 0, false, 0, 0, o.get(), nullptr,
        &ws, &ex);
    if (out != outputs[0]) {
      EXPECT_EQ(st, ACLNN_ERR_PARAM_INVALID);
      EXPECT_NE(std::string(aclGetRecentErrMsg()).find("attentionOut"), std::string::npos) << aclGetRecentErrMsg();
      continue;
    }
    ASSERT_EQ(st, ACLNN_SUCCESS) << aclGetRecentErrMsg();
    std::vector<std::byte> workspace(ws);
    ASSERT_EQ(aclnnFusedInferAttentionScoreV2(ws ? workspace.data() : nullptr, ws, ex, nullptr), ACLNN_SUCCESS);
    EXPECT_EQ(out->bytes, want.attention_out.bytes);
  }
}

TEST(CApiStatus, PostQuantWritesAnInt8OutputAndRejectsAFloatOne) {
  // quantScale2 (FIA-SPEC 14): attentionOut must be INT8; the values are the C++ API's.
  CallSpec spec;
  spec.layout = "BNSD";
  spec.num_heads = 2, spec.q_seq = 3, spec.kv_seq = 8;
  TestCall call = build_call(spec, 6);
  call.args.scale = 0.25;
  OwnedTensor scale2(DType::F32, {1});
  scale2.as<float>()[0] = 60.0f;
  call.args.quant_scale2 = call.keep(std::move(scale2));
  OwnedTensor out8(DType::I8, {1, 2, 3, 16}), out16(DType::F16, {1, 2, 3, 16});
  expect_v2_output_dtypes(call.args, {&out8, &out16});
}

TEST(CApiStatus, FullQuantWritesAnFp16OutputAndRejectsABf16One) {
  // INT8 query/key/value with deqScale1 (UINT64), quantScale1, deqScale2 (FIA-SPEC 13.1-13.2):
  // attentionOut FP16, the C++ API's values bit for bit; BF16 output is not an allowed pair.
  FullQuantSpec fs;
  fs.spec.layout = "BNSD";
  fs.spec.num_heads = 2, fs.spec.q_seq = 3, fs.spec.kv_seq = 40, fs.spec.qk_dim = 32;
  FullQuantCall fq = build_full_quant_call(fs, 7);
  ASSERT_EQ(fq.call.args.dequant_scale1.dtype, DType::U64);
  OwnedTensor out16(DType::F16, {1, 2, 3, 32}), out_bf16(DType::BF16, {1, 2, 3, 32});
  expect_v2_output_dtypes(fq.call.args, {&out16, &out_bf16});
}

}  // namespace
}  // namespace fia::test
