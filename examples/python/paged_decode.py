"""Decode over a paged KV cache with GQA through fia's torch_npu-style API (docs/python.md).

Runs as a test (ctest: examples.python.paged_decode): it checks itself against
torch.nn.functional.scaled_dot_product_attention over the same keys gathered contiguously."""
import torch

import fia

torch.manual_seed(0)
batch, heads, kv_heads, dim, block_size = 2, 8, 2, 64, 128
lengths = [300, 70]                                   # tokens in each request's cache
blocks = torch.randperm(8, dtype=torch.int32)         # any block order
block_table = blocks.reshape(batch, 4)                # [B, max_blocks]
key_cache = torch.randn(8, block_size, kv_heads * dim, dtype=torch.float16)   # BSH cache
value_cache = torch.randn(8, block_size, kv_heads * dim, dtype=torch.float16)
query = torch.randn(batch, 1, heads * dim, dtype=torch.float16)               # BSH, one new token

out, lse = fia.npu_fused_infer_attention_score(
    query, key_cache, value_cache, num_heads=heads, num_key_value_heads=kv_heads,
    input_layout="BSH", scale=dim ** -0.5, block_table=block_table, block_size=block_size,
    actual_seq_lengths_kv=lengths, softmax_lse_flag=True)
print(out.shape, lse.shape)   # torch.Size([2, 1, 512]) torch.Size([2, 8, 1, 1])

# The same attention with torch: gather each request's blocks, then SDPA (GQA) in float32.
for b, n in enumerate(lengths):
    k = key_cache[block_table[b].long()].reshape(-1, kv_heads, dim)[:n].transpose(0, 1).float()
    v = value_cache[block_table[b].long()].reshape(-1, kv_heads, dim)[:n].transpose(0, 1).float()
    q = query[b].reshape(1, heads, dim).transpose(0, 1).float()
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    got = out[b].reshape(heads, 1, dim).float()
    assert torch.allclose(got, ref, atol=2e-3, rtol=5e-3), (got - ref).abs().max()
print("matches scaled_dot_product_attention")
