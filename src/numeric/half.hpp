// The fp16/bf16 conversions of the public API, under the names the library uses inside.
#pragma once

#include "fia/half.hpp"

namespace fia::detail {

using fia::bf16_to_f32;
using fia::f16_to_f32;
using fia::f32_to_bf16;
using fia::f32_to_f16;
using fia::f64_to_bf16;
using fia::f64_to_f16;
using fia::round_to_bf16;
using fia::round_to_f16;

}  // namespace fia::detail
