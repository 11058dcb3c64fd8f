// Every C API operator version on small calls gives the C++ API's bits for the same inputs
// (FIA V1-V4, IFA V1-V4, PFA V1-V3), through GetWorkspaceSize + run.
#include <gtest/gtest.h>

#include <string>

#include "acl/acl.h"
#include "acl_handles.hpp"
#include "aclnnop/aclnn_fused_infer_attention_score.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v2.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v3.h"
#include "aclnnop/aclnn_fused_infer_attention_score_v4.h"
#include "aclnnop/aclnn_incre_flash_attention.h"
#include "aclnnop/aclnn_incre_flash_attention_v2.h"
#include "aclnnop/aclnn_incre_flash_attention_v3.h"
#include "aclnnop/aclnn_incre_flash_attention_v4.h"
#include "aclnnop/aclnn_prompt_flash_attention.h"
#include "aclnnop/aclnn_prompt_flash_attention_v2.h"
#include "aclnnop/aclnn_prompt_flash_attention_v3.h"
#include "support/call_builder.hpp"
#include "support/mla_full_quant_builder.hpp"

namespace fia::test {
namespace {

/// The handles of one call's inputs and outputs (null where the FiaArgs input is absent).
struct Handles {
  AclTensor query, pse, mask, block_table, q_padding, kv_padding, sink;
  AclTensor antiquant_scale, antiquant_offset, k_scale, k_offset, v_scale, v_offset, k_prefix, v_prefix;
  AclTensor query_rope, key_rope, dequant_scale_query;
  AclList key, value;
  AclTensor key1, value1;  // PFA: single tensors
  AclInts act_q, act_kv, prefix_len;
  AclTensor out, lse;
  std::string layout;

  Handles(const FiaArgs& a, Outputs& o)
      : query(acl_tensor(a.query)),
        pse(acl_tensor(a.pse_shift)),
        mask(acl_tensor(a.atten_mask)),
        block_table(acl_tensor(a.block_table)),
        q_padding(acl_tensor(a.query_padding_size)),
        kv_padding(acl_tensor(a.kv_padding_size)),
        sink(acl_tensor(a.learnable_sink)),
        antiquant_scale(acl_tensor(a.antiquant_scale)),
        antiquant_offset(acl_tensor(a.antiquant_offset)),
        k_scale(acl_tensor(a.key_antiquant_scale)),
        k_offset(acl_tensor(a.key_antiquant_offset)),
        v_scale(acl_tensor(a.value_antiquant_scale)),
        v_offset(acl_tensor(a.value_antiquant_offset)),
        k_prefix(acl_tensor(a.key_shared_prefix)),
        v_prefix(acl_tensor(a.value_shared_prefix)),
        query_rope(acl_tensor(a.query_rope)),
        key_rope(acl_tensor(a.key_rope)),
        dequant_scale_query(acl_tensor(a.dequant_scale_query)),
        key(acl_list(a.key)),
        value(acl_list(a.value)),
        key1(acl_tensor(a.key[0])),
        value1(acl_tensor(a.value[0])),
        act_q(acl_ints(a.actual_seq_lengths)),
        act_kv(acl_ints(a.actual_seq_lengths_kv)),
        prefix_len(acl_ints(a.actual_shared_prefix_len)),
        out(acl_tensor(o.attention_out.mutable_view())),
        lse(a.softmax_lse_flag ? acl_tensor(o.softmax_lse.mutable_view()) : nullptr),
        layout(a.input_layout) {}
  char* layout_c() { return layout.data(); }
};

/// Outputs shaped as the C++ API's, filled with a pattern so unwritten elements show.
Outputs blank_like(const Outputs& ref) {
  Outputs o;
  o.attention_out = OwnedTensor(ref.attention_out.dtype, ref.attention_out.shape);
  o.softmax_lse = OwnedTensor(DType::F32, ref.softmax_lse.shape);
  std::fill(o.attention_out.bytes.begin(), o.attention_out.bytes.end(), std::byte{0x5a});
  std::fill(o.softmax_lse.bytes.begin(), o.softmax_lse.bytes.end(), std::byte{0x5a});
  return o;
}

/// Runs phase 2 with a workspace of the size phase 1 asked for (`planned`: phase 1's status,
/// taken before ws_size and exec are read).
template <class Run>
void run_phase2(aclnnStatus planned, uint64_t ws_size, aclOpExecutor* exec, Run run) {
  ASSERT_EQ(planned, ACLNN_SUCCESS) << aclGetRecentErrMsg();
  void* ws = nullptr;
  if (ws_size > 0) {
    ASSERT_EQ(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  }
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  EXPECT_EQ(run(ws, ws_size, exec, stream), ACLNN_SUCCESS) << aclGetRecentErrMsg();
  EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  aclrtDestroyStream(stream);
  if (ws != nullptr) aclrtFree(ws);
}

void expect_same(const Outputs& got, const Outputs& want, bool lse, const std::string& what) {
  EXPECT_EQ(got.attention_out.bytes, want.attention_out.bytes) << what;
  if (lse) {
    EXPECT_EQ(got.softmax_lse.bytes, want.softmax_lse.bytes) << what;
  }
}

/// Calls FIA `version` with every argument of `a` (those the version lacks must be absent).
Outputs call_fia(int version, const FiaArgs& a, const Outputs& ref) {
  Outputs o = blank_like(ref);
  Handles h(a, o);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclTensor* n = nullptr;
  aclnnStatus st = ACLNN_ERR_RUNTIME_ERROR;
  if (version == 1) {
    st = aclnnFusedInferAttentionScoreGetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_q.get(), h.act_kv.get(), n, n, n, n,
        n, h.antiquant_scale.get(), h.antiquant_offset.get(), h.block_table.get(), h.q_padding.get(),
        h.kv_padding.get(), a.num_heads, a.scale, a.pre_tokens, a.next_tokens, h.layout_c(), a.num_key_value_heads,
        a.sparse_mode, a.inner_precise, a.block_size, a.antiquant_mode, a.softmax_lse_flag, h.out.get(), h.lse.get(),
        &ws, &ex);
    run_phase2(st, ws, ex, aclnnFusedInferAttentionScore);
  } else if (version == 2) {
    st = aclnnFusedInferAttentionScoreV2GetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_q.get(), h.act_kv.get(), n, n, n, n,
        n, h.antiquant_scale.get(), h.antiquant_offset.get(), h.block_table.get(), h.q_padding.get(),
        h.kv_padding.get(), h.k_scale.get(), h.k_offset.get(), h.v_scale.get(), h.v_offset.get(), h.k_prefix.get(),
        h.v_prefix.get(), h.prefix_len.get(), a.num_heads, a.scale, a.pre_tokens, a.next_tokens, h.layout_c(),
        a.num_key_value_heads, a.sparse_mode, a.inner_precise, a.block_size, a.antiquant_mode, a.softmax_lse_flag,
        a.key_antiquant_mode, a.value_antiquant_mode, h.out.get(), h.lse.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnFusedInferAttentionScoreV2);
  } else if (version == 3) {
    st = aclnnFusedInferAttentionScoreV3GetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_q.get(), h.act_kv.get(), n, n, n, n,
        n, h.antiquant_scale.get(), h.antiquant_offset.get(), h.block_table.get(), h.q_padding.get(),
        h.kv_padding.get(), h.k_scale.get(), h.k_offset.get(), h.v_scale.get(), h.v_offset.get(), h.k_prefix.get(),
        h.v_prefix.get(), h.prefix_len.get(), h.query_rope.get(), h.key_rope.get(), n, a.num_heads, a.scale,
        a.pre_tokens, a.next_tokens, h.layout_c(), a.num_key_value_heads, a.sparse_mode, a.inner_precise, a.block_size,
        a.antiquant_mode, a.softmax_lse_flag, a.key_antiquant_mode, a.value_antiquant_mode, h.out.get(), h.lse.get(),
        &ws, &ex);
    run_phase2(st, ws, ex, aclnnFusedInferAttentionScoreV3);
  } else {
    st = aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_q.get(), h.act_kv.get(), n, n, n, n,
        n, h.antiquant_scale.get(), h.antiquant_offset.get(), h.block_table.get(), h.q_padding.get(),
        h.kv_padding.get(), h.k_scale.get(), h.k_offset.get(), h.v_scale.get(), h.v_offset.get(), h.k_prefix.get(),
        h.v_prefix.get(), h.prefix_len.get(), h.query_rope.get(), h.key_rope.get(), n, h.dequant_scale_query.get(),
        h.sink.get(), a.num_heads,
        a.scale, a.pre_tokens, a.next_tokens, h.layout_c(), a.num_key_value_heads, a.sparse_mode, a.inner_precise,
        a.block_size, a.antiquant_mode, a.softmax_lse_flag, a.key_antiquant_mode, a.value_antiquant_mode,
        a.query_quant_mode, h.out.get(), h.lse.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnFusedInferAttentionScoreV4);
  }
  return o;
}

TEST(CApiOps, FusedInferAttentionScoreEveryVersionEqualsTheCppApi) {
  CallSpec spec;  // GQA decode with lengths, a mask and the LSE
  spec.layout = "BNSD";
  spec.batch = 2, spec.num_heads = 4, spec.num_kv_heads = 2, spec.q_seq = 1, spec.kv_seq = 40;
  spec.act_kv = std::vector<std::int64_t>{40, 17};
  spec.mask = MaskKind::kFull;
  spec.lse = true;
  for (int version = 1; version <= 4; ++version) {
    TestCall call = build_call(spec, 10 + version);
    const Outputs ref = cpp_outputs(call.args);
    expect_same(call_fia(version, call.args, ref), ref, true, "FIA V" + std::to_string(version));
  }
}

TEST(CApiOps, FusedInferAttentionScoreV4PagedPrefillWithSink) {
  CallSpec spec;
  spec.layout = "BSH";
  spec.dtype = DType::BF16;
  spec.batch = 2, spec.num_heads = 2, spec.q_seq = 3, spec.kv_seq = 37;
  spec.storage = KvStorage::kPaged;
  spec.block_size = 16;
  spec.act_kv = std::vector<std::int64_t>{37, 20};
  spec.sparse_mode = 3;
  spec.mask = MaskKind::kCompressed;
  spec.sink = true;
  spec.lse = true;
  for (int version : {1, 4}) {
    if (version == 1) spec.sink = false;  // V1 has no learnableSink
    TestCall call = build_call(spec, 7);
    const Outputs ref = cpp_outputs(call.args);
    expect_same(call_fia(version, call.args, ref), ref, true, "paged FIA V" + std::to_string(version));
  }
}

TEST(CApiOps, FusedInferAttentionScoreVersionFeatures) {
  {  // V1: packed int4 K/V (INT32, FIA-SPEC 2.3) with the combined antiquant scale/offset; query left padding
    CallSpec spec;
    spec.layout = "BSH";
    spec.batch = 2, spec.num_heads = 2, spec.q_seq = 4, spec.kv_seq = 24;
    spec.act_q = std::vector<std::int64_t>{2, 3};
    spec.act_kv = std::vector<std::int64_t>{20, 24};
    spec.query_padding = 1;
    set_antiquant(spec, KvQuant::kInt4, AntiquantKind::kChannel, 0);
    spec.quant.combined = true;
    spec.quant.channel_shape = "H";
    TestCall call = build_call(spec, 41);
    ASSERT_EQ(call.args.key[0].dtype, DType::I32);
    const Outputs ref = cpp_outputs(call.args);
    expect_same(call_fia(1, call.args, ref), ref, false, "FIA V1 int4 " + describe(spec));
  }
  for (int version : {2, 3, 4}) {  // split int8 antiquant with offsets, and a shared prefix
    CallSpec spec;
    spec.layout = "BNSD";
    spec.batch = 2, spec.num_heads = 4, spec.num_kv_heads = 2, spec.q_seq = 1, spec.kv_seq = 30;
    spec.prefix_seq = 7;
    spec.prefix_len = 5;
    spec.lse = true;
    set_antiquant(spec, KvQuant::kInt8, AntiquantKind::kChannel, 1);
    spec.quant.offsets = true;
    spec.quant.combined = false;
    TestCall call = build_call(spec, 50 + version);
    const Outputs ref = cpp_outputs(call.args);
    expect_same(call_fia(version, call.args, ref), ref, true, "FIA V" + std::to_string(version) + " " + describe(spec));
  }
  {  // V3/V4: MLA query_rope / key_rope (FIA-SPEC 15)
    CallSpec spec;
    spec.layout = "BSND";
    spec.batch = 1, spec.num_heads = 2, spec.q_seq = 2, spec.kv_seq = 9;
    spec.qk_dim = 32, spec.rope_dim = 16;
    for (int version : {3, 4}) {
      TestCall call = build_call(spec, 60 + version);
      const Outputs ref = cpp_outputs(call.args);
      expect_same(call_fia(version, call.args, ref), ref, false, "FIA V" + std::to_string(version) + " rope");
    }
  }
}

TEST(CApiOps, FusedInferAttentionScoreV4MlaFullQuant) {
  // FIA-SPEC 13.3 through V4: dequantScaleQuery, queryQuantMode 3, keyAntiquantScale and
  // valueAntiquantScale with an INT8 query and latent cache and BF16 rope; BF16 output.
  CallSpec spec;
  spec.layout = "BSND";
  spec.batch = 2, spec.num_heads = 4, spec.num_kv_heads = 1, spec.q_seq = 2, spec.kv_seq = 140;
  spec.act_kv = std::vector<std::int64_t>{140, 60};
  spec.qk_dim = 512, spec.rope_dim = 64;
  spec.storage = KvStorage::kPaged;
  spec.block_size = 128;
  spec.paged_bnbsd = true;
  spec.sparse_mode = 3;
  spec.mask = MaskKind::kCompressed;
  spec.lse = true;
  MlaFullQuantCall call = build_mla_full_quant_call(spec, 70);
  const Outputs ref = cpp_outputs(call.call.args);
  ASSERT_EQ(ref.attention_out.dtype, DType::BF16);
  expect_same(call_fia(4, call.call.args, ref), ref, true, "FIA V4 MLA full quant");
}

Outputs call_ifa(int version, FiaArgs a, const Outputs& ref) {
  Outputs o = blank_like(ref);
  Handles h(a, o);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclTensor* n = nullptr;
  if (version == 1) {
    const aclnnStatus st = aclnnIncreFlashAttentionGetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_kv.get(), a.num_heads, a.scale,
        h.layout_c(), a.num_key_value_heads, h.out.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnIncreFlashAttention);
  } else if (version == 2) {
    const aclnnStatus st = aclnnIncreFlashAttentionV2GetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_kv.get(), n, n, n, n, n,
        a.num_heads, a.scale, h.layout_c(), a.num_key_value_heads, h.out.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnIncreFlashAttentionV2);
  } else if (version == 3) {
    const aclnnStatus st = aclnnIncreFlashAttentionV3GetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_kv.get(), n, n, n, n, n, n, n,
        h.block_table.get(), a.num_heads, a.scale, h.layout_c(), a.num_key_value_heads, a.block_size, a.inner_precise,
        h.out.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnIncreFlashAttentionV3);
  } else {
    const aclnnStatus st = aclnnIncreFlashAttentionV4GetWorkspaceSize(
        h.query.get(), h.key.get(), h.value.get(), h.pse.get(), h.mask.get(), h.act_kv.get(), n, n, n, n, n, n, n,
        h.block_table.get(), h.kv_padding.get(), a.num_heads, a.scale, h.layout_c(), a.num_key_value_heads,
        a.block_size, a.inner_precise, h.out.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnIncreFlashAttentionV4);
  }
  return o;
}

TEST(CApiOps, IncreFlashAttentionEveryVersionEqualsTheCppApiOnTheIfaPath) {
  CallSpec spec;
  spec.layout = "BSH";
  spec.batch = 2, spec.num_heads = 4, spec.num_kv_heads = 1, spec.q_seq = 1, spec.kv_seq = 600;
  spec.act_kv = std::vector<std::int64_t>{600, 333};
  for (int version = 1; version <= 4; ++version) {
    spec.storage = version >= 3 ? KvStorage::kPaged : KvStorage::kContiguous;
    spec.block_size = 128;
    TestCall call = build_call(spec, 20 + version);
    call.args.entry_point = EntryPoint::kIncreFlashAttention;
    call.args.inner_precise = version >= 3 ? 0 : 1;  // V1/V2 have IFA's default 1
    const Outputs ref = cpp_outputs(call.args);
    expect_same(call_ifa(version, call.args, ref), ref, false, "IFA V" + std::to_string(version));
    call.args.entry_point = EntryPoint::kFusedInferAttentionScore;  // the data tells the paths apart
    EXPECT_NE(cpp_outputs(call.args).attention_out.bytes, ref.attention_out.bytes) << "IFA V" << version;
  }
}

Outputs call_pfa(int version, FiaArgs a, const Outputs& ref) {
  Outputs o = blank_like(ref);
  Handles h(a, o);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclTensor* n = nullptr;
  if (version == 1) {
    const aclnnStatus st = aclnnPromptFlashAttentionGetWorkspaceSize(
        h.query.get(), h.key1.get(), h.value1.get(), h.pse.get(), h.mask.get(), h.act_q.get(), a.num_heads, a.scale,
        a.pre_tokens, a.next_tokens, h.layout_c(), a.num_key_value_heads, h.out.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnPromptFlashAttention);
  } else if (version == 2) {
    const aclnnStatus st = aclnnPromptFlashAttentionV2GetWorkspaceSize(
        h.query.get(), h.key1.get(), h.value1.get(), h.pse.get(), h.mask.get(), h.act_q.get(), h.act_kv.get(), n, n, n,
        n, n, a.num_heads, a.scale, a.pre_tokens, a.next_tokens, h.layout_c(), a.num_key_value_heads, a.sparse_mode,
        h.out.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnPromptFlashAttentionV2);
  } else {
    const aclnnStatus st = aclnnPromptFlashAttentionV3GetWorkspaceSize(
        h.query.get(), h.key1.get(), h.value1.get(), h.pse.get(), h.mask.get(), h.act_q.get(), h.act_kv.get(), n, n, n,
        n, n, a.num_heads, a.scale, a.pre_tokens, a.next_tokens, h.layout_c(), a.num_key_value_heads, a.sparse_mode,
        a.inner_precise, h.out.get(), &ws, &ex);
    run_phase2(st, ws, ex, aclnnPromptFlashAttentionV3);
  }
  return o;
}

TEST(CApiOps, PromptFlashAttentionEveryVersionEqualsTheCppApiOnThePfaPath) {
  for (int version = 1; version <= 3; ++version) {
    CallSpec spec;
    spec.layout = "BNSD";
    spec.batch = 2, spec.num_heads = 2, spec.q_seq = 9, spec.kv_seq = 21;
    spec.act_q = std::vector<std::int64_t>{9, 5};
    if (version >= 2) {  // actualSeqLengthsKv and sparseMode 3 (causal) arrive in V2
      spec.act_kv = std::vector<std::int64_t>{21, 12};
      spec.sparse_mode = 3;
      spec.mask = MaskKind::kCompressed;
    } else {
      spec.pse = true;
    }
    TestCall call = build_call(spec, 30 + version);
    call.args.entry_point = EntryPoint::kPromptFlashAttention;
    call.args.inner_precise = version == 3 ? 0 : 1;
    const Outputs ref = cpp_outputs(call.args);
    expect_same(call_pfa(version, call.args, ref), ref, false, "PFA V" + std::to_string(version));
    call.args.entry_point = EntryPoint::kIncreFlashAttention;  // IFA rounds P otherwise, on this data
    EXPECT_NE(cpp_outputs(call.args).attention_out.bytes, ref.attention_out.bytes) << "PFA V" << version;
  }
}

}  // namespace
}  // namespace fia::test
