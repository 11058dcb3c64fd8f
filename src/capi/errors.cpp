// aclGetRecentErrMsg, status mapping and parameter-name translation of the C API.
#include "capi/errors.hpp"

#include <cctype>
#include <cstring>

#include "acl/acl.h"

namespace fia::capi {
namespace {

thread_local std::string g_last_error;

/// A torch_npu name and its aclnn names: FIA V1 (V2+ add "Optional" when `optional`), IFA, PFA
/// (nullptr: the operator has no such argument).
struct NameRow {
  const char* torch;
  const char* fia;
  bool optional;
  const char* ifa;
  const char* pfa;
};

constexpr NameRow kNames[] = {
    {"query", "query", false, "query", "query"},
    {"key", "key", false, "key", "key"},
    {"value", "value", false, "value", "value"},
    {"pse_shift", "pseShift", true, "pseShift", "pseShift"},
    {"atten_mask", "attenMask", true, "attenMask", "attenMask"},
    {"actual_seq_lengths", "actualSeqLengths", true, nullptr, "actualSeqLengths"},
    {"actual_seq_lengths_kv", "actualSeqLengthsKv", true, "actualSeqLengths", "actualSeqLengthsKv"},
    {"dequant_scale1", "deqScale1", true, "dequantScale1", "deqScale1"},
    {"quant_scale1", "quantScale1", true, "quantScale1", "quantScale1"},
    {"dequant_scale2", "deqScale2", true, "dequantScale2", "deqScale2"},
    {"quant_scale2", "quantScale2", true, "quantScale2", "quantScale2"},
    {"quant_offset2", "quantOffset2", true, "quantOffset2", "quantOffset2"},
    {"antiquant_scale", "antiquantScale", true, "antiquantScale", nullptr},
    {"antiquant_offset", "antiquantOffset", true, "antiquantOffset", nullptr},
    {"block_table", "blockTable", true, "blocktable", nullptr},
    {"query_padding_size", "queryPaddingSize", true, nullptr, nullptr},
    {"kv_padding_size", "kvPaddingSize", true, "kvPaddingSize", nullptr},
    {"key_antiquant_scale", "keyAntiquantScale", true, nullptr, nullptr},
    {"key_antiquant_offset", "keyAntiquantOffset", true, nullptr, nullptr},
    {"value_antiquant_scale", "valueAntiquantScale", true, nullptr, nullptr},
    {"value_antiquant_offset", "valueAntiquantOffset", true, nullptr, nullptr},
    {"key_shared_prefix", "keySharedPrefix", true, nullptr, nullptr},
    {"value_shared_prefix", "valueSharedPrefix", true, nullptr, nullptr},
    {"actual_shared_prefix_len", "actualSharedPrefixLen", true, nullptr, nullptr},
    {"query_rope", "queryRope", true, nullptr, nullptr},
    {"key_rope", "keyRope", true, nullptr, nullptr},
    {"key_rope_antiquant_scale", "keyRopeAntiquantScale", true, nullptr, nullptr},
    {"dequant_scale_query", "dequantScaleQuery", true, nullptr, nullptr},
    {"learnable_sink", "learnableSink", true, nullptr, nullptr},
    {"num_heads", "numHeads", false, "numHeads", "numHeads"},
    {"scale", "scaleValue", false, "scaleValue", "scaleValue"},
    {"pre_tokens", "preTokens", false, nullptr, "preTokens"},
    {"next_tokens", "nextTokens", false, nullptr, "nextTokens"},
    {"input_layout", "inputLayout", false, "inputLayout", "inputLayout"},
    {"num_key_value_heads", "numKeyValueHeads", false, "numKeyValueHeads", "numKeyValueHeads"},
    {"sparse_mode", "sparseMode", false, nullptr, "sparseMode"},
    {"inner_precise", "innerPrecise", false, "innerPrecise", "innerPrecise"},
    {"block_size", "blockSize", false, "blockSize", nullptr},
    {"antiquant_mode", "antiquantMode", false, nullptr, nullptr},
    {"softmax_lse_flag", "softmaxLseFlag", false, nullptr, nullptr},
    {"key_antiquant_mode", "keyAntiquantMode", false, nullptr, nullptr},
    {"value_antiquant_mode", "valueAntiquantMode", false, nullptr, nullptr},
    {"query_quant_mode", "queryQuantMode", false, nullptr, nullptr},
    {"attention_out", "attentionOut", false, "attentionOut", "attentionOut"},
    {"softmax_lse", "softmaxLse", false, nullptr, nullptr},
    {"workspace", "workspace", false, "workspace", "workspace"},
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

void set_error(std::string message) { g_last_error = std::move(message); }

std::string aclnn_name(const EntryName& entry, const std::string& torch_name) {
  for (const NameRow& row : kNames) {
    if (torch_name != row.torch) continue;
    switch (entry.op) {
      case Op::kFia:
        return std::string(row.fia) + (row.optional && entry.version >= 2 ? "Optional" : "");
      case Op::kIfa:
        return row.ifa != nullptr ? row.ifa : torch_name;
      case Op::kPfa:
        return row.pfa != nullptr ? row.pfa : torch_name;
    }
  }
  return torch_name;
}

std::string translate_names(const EntryName& entry, const std::string& message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    if (!ident_char(message[i])) {
      out += message[i++];
      continue;
    }
    std::size_t j = i;
    while (j < message.size() && ident_char(message[j])) ++j;
    const std::string word = message.substr(i, j - i);
    out += word.find('_') != std::string::npos ? aclnn_name(entry, word) : word;
    i = j;
  }
  return out;
}

aclnnStatus report(const EntryName& entry, const Status& st, bool run_phase) {
  if (st.ok()) return ACLNN_SUCCESS;
  aclnnStatus code = ACLNN_ERR_PARAM_INVALID;
  if (st.code == StatusCode::kNullArgument) code = ACLNN_ERR_PARAM_NULLPTR;
  if (st.code == StatusCode::kInternal) code = ACLNN_ERR_RUNTIME_ERROR;
  std::string text = run_phase ? entry.run_function : entry.function;
  if (!st.parameter.empty()) {
    // "key[1]" keeps its index: translate the name before it.
    const std::size_t bracket = st.parameter.find('[');
    text += ": " + aclnn_name(entry, st.parameter.substr(0, bracket)) +
            (bracket == std::string::npos ? "" : st.parameter.substr(bracket));
  }
  text += ": " + translate_names(entry, st.message);
  if (st.code == StatusCode::kUnsupported) text += " (not supported by fia)";
  set_error(std::move(text));
  return code;
}

aclnnStatus fail(const char* function, aclnnStatus code, const std::string& message) {
  set_error(std::string(function) + ": " + message);
  return code;
}

}  // namespace fia::capi

extern "C" const char* aclGetRecentErrMsg(void) { return fia::capi::g_last_error.c_str(); }
