/* fia's CANN-compatible C API: op::fp16_t, the host-side half-precision type that CANN's
 * samples use to fill and print FLOAT16 tensors (`std::vector<op::fp16_t> q(n, 1.0)`,
 * `static_cast<float>(out[i])`). C++ only, like CANN's aclnn/opdev/fp16_t.h; written for fia.
 *
 * The value is the IEEE fp16 bit pattern in `val` (sizeof(op::fp16_t) == 2, so a vector of them
 * can be copied to an ACL_FLOAT16 tensor). Conversions go through aclFloatToFloat16 and
 * aclFloat16ToFloat (round to nearest even; they saturate as CANN does, see acl/acl_base.h), so
 * a program using this type links libfia (or -lascendcl). As in CANN, constructing from a
 * uint16_t keeps it as the raw bit pattern (op::fp16_t(uint16_t(0x3C00)) is 1.0), while every
 * other arithmetic type is converted by value. Arithmetic and comparisons are done in float. */
#ifndef FIA_CANN_ACLNN_OPDEV_FP16_T_H_
#define FIA_CANN_ACLNN_OPDEV_FP16_T_H_

#ifndef __cplusplus
#error "aclnn/opdev/fp16_t.h is C++ only (as in CANN); in C use aclFloat16 with aclFloatToFloat16"
#endif

#include <cstdint>
#include <type_traits>

#include "acl/acl_base.h"

namespace op {

/** Half precision float: 1 sign bit, 5 exponent bits, 10 mantissa bits, in `val`. */
struct fp16_t {
  uint16_t val;

  /** Zero. */
  fp16_t() : val(0) {}
  /** The raw bit pattern `bits` (CANN's uint16_t constructor). */
  constexpr fp16_t(const uint16_t &bits) : val(bits) {}
  /** `value` converted to the nearest fp16 (any other arithmetic type: float, double, int, ...). */
  template <typename T, typename std::enable_if<std::is_arithmetic<T>::value &&
                                                    !std::is_same<T, uint16_t>::value,
                                                int>::type = 0>
  fp16_t(const T &value) : val(aclFloatToFloat16(static_cast<float>(value))) {}

  /** Assigns `value` converted by value (a uint16_t too, as CANN's operator=). */
  template <typename T, typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0>
  fp16_t &operator=(const T &value) {
    val = aclFloatToFloat16(static_cast<float>(value));
    return *this;
  }

  /** The value as float (exact). */
  float toFloat() const { return aclFloat16ToFloat(val); }
  /** The value as double (exact). */
  double toDouble() const { return static_cast<double>(toFloat()); }

  operator float() const { return toFloat(); }
  operator double() const { return toDouble(); }
  operator int8_t() const { return static_cast<int8_t>(toFloat()); }
  operator uint8_t() const { return static_cast<uint8_t>(toFloat()); }
  operator int16_t() const { return static_cast<int16_t>(toFloat()); }
  operator uint16_t() const { return static_cast<uint16_t>(toFloat()); }
  operator int32_t() const { return static_cast<int32_t>(toFloat()); }
  operator uint32_t() const { return static_cast<uint32_t>(toFloat()); }
  operator int64_t() const { return static_cast<int64_t>(toFloat()); }
  operator uint64_t() const { return static_cast<uint64_t>(toFloat()); }
  operator bool() const { return (val & 0x7FFFu) != 0; }

  fp16_t operator+(const fp16_t &o) const { return fp16_t(toFloat() + o.toFloat()); }
  fp16_t operator-(const fp16_t &o) const { return fp16_t(toFloat() - o.toFloat()); }
  fp16_t operator*(const fp16_t &o) const { return fp16_t(toFloat() * o.toFloat()); }
  fp16_t operator/(const fp16_t &o) const { return fp16_t(toFloat() / o.toFloat()); }
  fp16_t &operator+=(const fp16_t &o) { return *this = toFloat() + o.toFloat(); }
  fp16_t &operator-=(const fp16_t &o) { return *this = toFloat() - o.toFloat(); }
  fp16_t &operator*=(const fp16_t &o) { return *this = toFloat() * o.toFloat(); }
  fp16_t &operator/=(const fp16_t &o) { return *this = toFloat() / o.toFloat(); }

  bool operator==(const fp16_t &o) const { return toFloat() == o.toFloat(); }
  bool operator!=(const fp16_t &o) const { return toFloat() != o.toFloat(); }
  bool operator<(const fp16_t &o) const { return toFloat() < o.toFloat(); }
  bool operator<=(const fp16_t &o) const { return toFloat() <= o.toFloat(); }
  bool operator>(const fp16_t &o) const { return toFloat() > o.toFloat(); }
  bool operator>=(const fp16_t &o) const { return toFloat() >= o.toFloat(); }
};

static_assert(sizeof(fp16_t) == 2, "op::fp16_t must be two bytes, like an ACL_FLOAT16 element");

}  // namespace op

#endif /* FIA_CANN_ACLNN_OPDEV_FP16_T_H_ */
