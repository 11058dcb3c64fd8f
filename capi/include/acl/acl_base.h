/* fia's CANN-compatible C API: AscendCL base types, status codes and element types.
 * Same names, values and ABI as CANN's acl/acl_base.h; written for fia (host memory only).
 * C99 and C++. See docs/c-api.md. */
#ifndef FIA_CANN_ACL_ACL_BASE_H_
#define FIA_CANN_ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtContext;
typedef int aclError;
typedef uint16_t aclFloat16;

static const int ACL_ERROR_NONE = 0;
static const int ACL_SUCCESS = 0;
static const int ACL_ERROR_INVALID_PARAM = 100000;
static const int ACL_ERROR_UNINITIALIZE = 100001;
static const int ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const int ACL_ERROR_REPEAT_FINALIZE = 100037;
static const int ACL_ERROR_BAD_ALLOC = 200000;
static const int ACL_ERROR_API_NOT_SUPPORT = 200001;
static const int ACL_ERROR_INVALID_DEVICE = 200002;
static const int ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005;
static const int ACL_ERROR_FEATURE_UNSUPPORTED = 200006;
static const int ACL_ERROR_STORAGE_OVER_LIMIT = 300000;
static const int ACL_ERROR_INTERNAL_ERROR = 500000;
static const int ACL_ERROR_FAILURE = 500001;

/* Element types (CANN's numbering). */
typedef enum {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_UINT16 = 7,
  ACL_UINT32 = 8,
  ACL_INT64 = 9,
  ACL_UINT64 = 10,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_STRING = 13,
  ACL_COMPLEX64 = 16,
  ACL_COMPLEX128 = 17,
  ACL_BF16 = 27,
  ACL_INT4 = 29,
  ACL_UINT1 = 30,
  ACL_COMPLEX32 = 33,
  ACL_HIFLOAT8 = 34,
  ACL_FLOAT8_E5M2 = 35,
  ACL_FLOAT8_E4M3FN = 36,
  ACL_FLOAT8_E8M0 = 37,
  ACL_FLOAT6_E3M2 = 38,
  ACL_FLOAT6_E2M3 = 39,
  ACL_FLOAT4_E2M1 = 40,
  ACL_FLOAT4_E1M2 = 41
} aclDataType;

/* Storage formats (CANN's numbering); fia computes ACL_FORMAT_ND (and the 4-D names of it). */
typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NC1HWC0 = 3,
  ACL_FORMAT_FRACTAL_Z = 4,
  ACL_FORMAT_NC1HWC0_C04 = 12,
  ACL_FORMAT_HWCN = 16,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_FRACTAL_NZ = 29,
  ACL_FORMAT_NCDHW = 30,
  ACL_FORMAT_NDC1HWC0 = 32,
  ACL_FRACTAL_Z_3D = 33,
  ACL_FORMAT_NC = 35,
  ACL_FORMAT_NCL = 47,
  ACL_FORMAT_FRACTAL_NZ_C0_16 = 50,
  ACL_FORMAT_FRACTAL_NZ_C0_32 = 51,
  ACL_FORMAT_FRACTAL_NZ_C0_2 = 52,
  ACL_FORMAT_FRACTAL_NZ_C0_4 = 53,
  ACL_FORMAT_FRACTAL_NZ_C0_8 = 54
} aclFormat;

/** The size of one element of `dataType` in bytes, as CANN's runtime reports it: 0 for
 *  ACL_STRING and ACL_DT_UNDEFINED; 1 for the sub-byte ACL_INT4 and ACL_UINT1 and for the
 *  one-byte types (BOOL, INT8, UINT8, HIFLOAT8, FLOAT8_*); 2 for FLOAT16, BF16, INT16, UINT16;
 *  4 for FLOAT, INT32, UINT32, COMPLEX32; 16 for COMPLEX128; 8 for every other value
 *  (INT64, UINT64, DOUBLE, COMPLEX64, and, as in CANN, FLOAT6_* / FLOAT4_* and unknown values). */
ACL_FUNC_VISIBILITY size_t aclDataTypeSize(aclDataType dataType);

/** Converts an fp16 bit pattern to float. As CANN: +Inf gives 65536, -Inf -65536, NaN 98304
 *  (the exponent-31 patterns read as if they were finite); every finite value is exact. */
ACL_FUNC_VISIBILITY float aclFloat16ToFloat(aclFloat16 value);

/** Converts a float to fp16 (round to nearest even). As CANN it saturates: values beyond the
 *  fp16 range, +Inf and NaN give 65504 (0x7BFF), -Inf and large negatives -65504 (0xFBFF). */
ACL_FUNC_VISIBILITY aclFloat16 aclFloatToFloat16(float value);

#ifdef __cplusplus
}
#endif

#endif /* FIA_CANN_ACL_ACL_BASE_H_ */
