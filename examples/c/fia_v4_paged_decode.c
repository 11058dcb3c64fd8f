/* aclnnFusedInferAttentionScoreV4: one decode step of a GQA model over a paged KV cache.
 * Two sequences of 37 and 20 tokens, 4 query heads sharing 2 KV heads, head dim 64, fp16;
 * key/value caches (blockNum, blockSize, KV_N * D) in blocks of 16 tokens placed anywhere in the
 * pool (blockTable, int32 [B, maxBlocks], unused slots -1), layout BSH, with softmaxLse.
 * The result is checked against a float64 computation of the same attention. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "aclnnop/aclnn_fused_infer_attention_score_v4.h"
#include "sample_util.h"

enum { B = 2, QN = 4, KVN = 2, D = 64, BLOCK = 16, MAX_BLOCKS = 3, BLOCK_NUM = 8 };
static const int64_t kSeqLens[B] = {37, 20};
static const int32_t kBlockTable[B][MAX_BLOCKS] = {{5, 0, 6}, {3, 7, -1}};  /* pool block of each 16 tokens */

static aclFloat16 qHost[B * QN * D], kHost[BLOCK_NUM * BLOCK * KVN * D], vHost[BLOCK_NUM * BLOCK * KVN * D];
static aclFloat16 outHost[B * QN * D];
static float lseHost[B * QN];

static float Pseudo(unsigned *state) { /* a small LCG in [-1, 1) */
  *state = *state * 1664525u + 1013904223u;
  return (float)(*state >> 8) / 8388608.0f - 1.0f;
}

/* Where token t of batch b, KV head h starts in the cache. */
static int64_t CacheIndex(int b, int64_t t, int h) {
  return ((int64_t)kBlockTable[b][t / BLOCK] * BLOCK + t % BLOCK) * KVN * D + (int64_t)h * D;
}

/* Largest |difference| between fia's output (and LSE) and a float64 computation. */
static double MaxError(double scale) {
  double worst = 0.0;
  int b, n, d;
  int64_t t;
  for (b = 0; b < B; ++b)
    for (n = 0; n < QN; ++n) {
      const int h = n / (QN / KVN);
      double scores[MAX_BLOCKS * BLOCK], m = -INFINITY, sum = 0.0;
      for (t = 0; t < kSeqLens[b]; ++t) {
        double s = 0.0;
        for (d = 0; d < D; ++d)
          s += (double)aclFloat16ToFloat(qHost[(b * QN + n) * D + d]) * aclFloat16ToFloat(kHost[CacheIndex(b, t, h) + d]);
        scores[t] = s * scale;
        if (scores[t] > m) m = scores[t];
      }
      for (t = 0; t < kSeqLens[b]; ++t) sum += exp(scores[t] - m);
      for (d = 0; d < D; ++d) {
        double o = 0.0;
        for (t = 0; t < kSeqLens[b]; ++t) o += exp(scores[t] - m) / sum * aclFloat16ToFloat(vHost[CacheIndex(b, t, h) + d]);
        worst = fmax(worst, fabs(o - aclFloat16ToFloat(outHost[(b * QN + n) * D + d])));
      }
      worst = fmax(worst, fabs(m + log(sum) - lseHost[b * QN + n]));
    }
  return worst;
}

int main(void) {
  aclrtStream stream = NULL;
  const int64_t qShape[3] = {B, 1, QN * D}, cacheShape[3] = {BLOCK_NUM, BLOCK, KVN * D};
  const int64_t tableShape[2] = {B, MAX_BLOCKS}, lseShape[4] = {B, QN, 1, 1};
  void *qDev, *kDev, *vDev, *tableDev, *outDev, *lseDev, *workspace = NULL;
  aclTensor *query, *key, *value, *blockTable, *out, *lse;
  aclTensorList *keyList, *valueList;
  aclIntArray *seqLens;
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = NULL;
  char layout[] = "BSH";
  const double scale = 1.0 / sqrt((double)D);
  unsigned state = 1;
  size_t i;
  double error;

  CHECK_RET(Init(0, &stream) == 0, "Init");
  for (i = 0; i < sizeof qHost / sizeof qHost[0]; ++i) qHost[i] = aclFloatToFloat16(Pseudo(&state));
  for (i = 0; i < sizeof kHost / sizeof kHost[0]; ++i) kHost[i] = aclFloatToFloat16(Pseudo(&state));
  for (i = 0; i < sizeof vHost / sizeof vHost[0]; ++i) vHost[i] = aclFloatToFloat16(Pseudo(&state));
  CHECK_RET(CreateAclTensor(qHost, sizeof qHost, qShape, 3, ACL_FLOAT16, &qDev, &query) == 0, "query");
  CHECK_RET(CreateAclTensor(kHost, sizeof kHost, cacheShape, 3, ACL_FLOAT16, &kDev, &key) == 0, "key");
  CHECK_RET(CreateAclTensor(vHost, sizeof vHost, cacheShape, 3, ACL_FLOAT16, &vDev, &value) == 0, "value");
  CHECK_RET(CreateAclTensor(kBlockTable, sizeof kBlockTable, tableShape, 2, ACL_INT32, &tableDev, &blockTable) == 0,
            "blockTable");
  CHECK_RET(CreateAclTensor(NULL, sizeof outHost, qShape, 3, ACL_FLOAT16, &outDev, &out) == 0, "attentionOut");
  CHECK_RET(CreateAclTensor(NULL, sizeof lseHost, lseShape, 4, ACL_FLOAT, &lseDev, &lse) == 0, "softmaxLse");
  keyList = aclCreateTensorList((const aclTensor *const *)&key, 1);
  valueList = aclCreateTensorList((const aclTensor *const *)&value, 1);
  seqLens = aclCreateIntArray(kSeqLens, B);
  CHECK_RET(keyList != NULL && valueList != NULL && seqLens != NULL, "handles");

  CHECK_RET(aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
                query, keyList, valueList, NULL, NULL, NULL, seqLens, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                blockTable, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, QN,
                scale, 2147483647, 2147483647, layout, KVN, 0, 0, BLOCK, 0, true, 0, 0, 0, out, lse, &workspaceSize,
                &executor) == ACLNN_SUCCESS,
            "aclnnFusedInferAttentionScoreV4GetWorkspaceSize");
  if (workspaceSize > 0) {
    CHECK_RET(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc");
  }
  CHECK_RET(aclnnFusedInferAttentionScoreV4(workspace, workspaceSize, executor, stream) == ACLNN_SUCCESS,
            "aclnnFusedInferAttentionScoreV4");
  CHECK_RET(aclrtSynchronizeStream(stream) == ACL_SUCCESS, "aclrtSynchronizeStream");
  CHECK_RET(aclrtMemcpy(outHost, sizeof outHost, outDev, sizeof outHost, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS,
            "aclrtMemcpy");
  CHECK_RET(aclrtMemcpy(lseHost, sizeof lseHost, lseDev, sizeof lseHost, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS,
            "aclrtMemcpy");
  error = MaxError(scale);
  printf("paged decode: out[0][0][0..3] = %.4f %.4f %.4f %.4f, lse[0] = %.4f, max error %.2e\n",
         aclFloat16ToFloat(outHost[0]), aclFloat16ToFloat(outHost[1]), aclFloat16ToFloat(outHost[2]),
         aclFloat16ToFloat(outHost[3]), lseHost[0], error);

  aclDestroyTensorList(keyList);
  aclDestroyTensorList(valueList);
  aclDestroyIntArray(seqLens);
  aclDestroyTensor(query);
  aclDestroyTensor(key);
  aclDestroyTensor(value);
  aclDestroyTensor(blockTable);
  aclDestroyTensor(out);
  aclDestroyTensor(lse);
  aclrtFree(qDev);
  aclrtFree(kDev);
  aclrtFree(vDev);
  aclrtFree(tableDev);
  aclrtFree(outDev);
  aclrtFree(lseDev);
  if (workspace != NULL) aclrtFree(workspace);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return error < 2e-3 ? 0 : 1;
}
