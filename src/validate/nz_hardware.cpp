// FIA-SPEC 3.2, 9.2, 12.4, 15.4: where an Atlas A2/A3 NPU reads an NZ paged cache (blockNum,
// KV_N, D/D0, blockSize, D0). Enforced only in strict mode (25.2): the default mode reads an NZ
// cache wherever it reads a paged cache.
#include <string>

#include "validate/antiquant_layout.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

std::string dname(DType t) { return std::string(dtype_name(t)); }

/// 12.4 "KV-NZ GQA antiquant": the per-channel scale shape each layout takes.
const char* channel_form(const std::string& layout) {
  if (layout == "BSH") return "(H)";
  if (layout == "BNSD") return "(N, 1, D)";
  return "(N, D)";
}

/// 12.4: the KV-NZ GQA antiquant path (BF16 query, INT8 NZ cache, split parameters).
Status nz_antiquant(const Ctx& c) {
  const FiaArgs& a = c.a;
  const Ctx::Antiquant& q = c.aq;
  if (c.dtype != DType::BF16)
    return invalid("query", cat("INT8 key/value in an NZ cache needs a BFLOAT16 query, got ", dname(c.dtype)));
  if (c.q_seq > 16) return invalid("query", cat("INT8 key/value in an NZ cache needs Q_S <= 16, got ", c.q_seq));
  if (c.qk_dim != 128 || c.v_dim != 128)
    return invalid("key", cat("INT8 key/value in an NZ cache needs head dim 128, got ", c.qk_dim, " and ", c.v_dim));
  if (a.block_size != 128 && a.block_size != 512)
    return invalid("block_size", cat("INT8 key/value in an NZ cache needs block_size 128 or 512, got ", a.block_size));
  if (a.inner_precise != 1)
    return invalid("inner_precise", cat("INT8 key/value in an NZ cache needs inner_precise 1, got ", a.inner_precise));
  if (c.rope) return invalid("query_rope", "INT8 key/value in an NZ cache does not combine with rope, got query_rope");
  const std::string& layout = c.layout.name;
  if (layout != "BSH" && layout != "BSND" && layout != "BNSD" && layout != "TND")
    return invalid("input_layout", cat("INT8 key/value in an NZ cache needs layout BSH, BSND, BNSD or TND, got ", layout));
  if (!q.split)
    return invalid("antiquant_scale", "INT8 key/value in an NZ cache needs split parameters (key_antiquant_scale, "
                                      "value_antiquant_scale), got antiquant_scale");
  for (int s = 0; s < 2; ++s) {
    if (q.offset[s] != nullptr)
      return invalid(q.offset_name[s], cat("INT8 key/value in an NZ cache takes no offsets, got ", q.offset_name[s]));
    const std::int64_t mode = q.mode[s];
    if (mode > 1 || (mode == 1 && layout == "TND"))
      return invalid(q.mode_name[s], cat("INT8 key/value in an NZ cache needs ", q.mode_name[s],
                                         layout == "TND" ? " 0 (per-channel) with layout TND" : " 0 or 1", ", got ", mode));
    ScaleLayout l;
    scale_layout(*q.scale[s], false, s, mode, scale_sizes(c, s), &l);
    const std::string want = mode == 0 ? channel_form(layout) : "(B, S')";
    if (l.form != want || (mode == 1 && q.scale[s]->dtype != DType::F32))
      return invalid(q.scale_name[s], cat("INT8 key/value in an NZ cache with layout ", layout, " needs ",
                                          mode == 0 ? "a per-channel scale of shape " : "a FLOAT32 per-token scale of shape ",
                                          want, ", got ", dname(q.scale[s]->dtype), " ", shape_str(q.scale[s]->shape)));
  }
  if (c.q_seq == 1 && (a.sparse_mode != 0 || c.has_mask))
    return invalid(c.has_mask ? "atten_mask" : "sparse_mode",
                   cat("INT8 key/value in an NZ cache with Q_S = 1 needs sparse_mode 0 without atten_mask, got sparse_mode ",
                       a.sparse_mode, c.has_mask ? " with atten_mask" : ""));
  if (c.q_seq > 1 && a.sparse_mode != 3 && a.sparse_mode != 9)
    return invalid("sparse_mode", cat("INT8 key/value in an NZ cache with Q_S > 1 needs sparse_mode 3 or 9, got ",
                                      a.sparse_mode));
  return Status::Ok();
}

}  // namespace

/// FIA-SPEC 9.2, 12.4, 15.4 / 25.2: the NZ cache exists on the NPU for decode MLA (block_size
/// 128) and for KV-NZ GQA antiquant; MLA full quant (INT8 query) has its own rules (13.3).
Status check_nz_hardware(const Ctx& c) {
  if (!c.strict || c.storage != Storage::kPaged || c.cache != CacheLayout::kNz || c.dtype == DType::I8)
    return Status::Ok();
  if (c.antiquant()) return nz_antiquant(c);
  if (!c.decode_mla)
    return invalid("key", cat("an NZ cache of ", dname(c.kv_dtype), " needs decode MLA (query_rope with head dim 512), ",
                              "got head dim ", c.qk_dim, c.rope ? " with rope" : " without rope"));
  if (c.a.block_size != 128)
    return invalid("block_size", cat("decode MLA with an NZ cache needs block_size 128, got ", c.a.block_size));
  return Status::Ok();
}

}  // namespace fia::detail
