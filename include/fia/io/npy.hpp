// NumPy .npy reading (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
#pragma once

#include <string>
#include <vector>

#include "fia/status.hpp"
#include "fia/tensor.hpp"

namespace fia::io {

/// Parses a .npy image (format versions 1.0, 2.0 and 3.0), little-endian or byte-sized
/// C-order arrays of dtypes f2, f4, f8, i1, u1, b1, i4, i8, u8. Rejects truncated data, a
/// malformed header, Fortran order, big-endian and object arrays. Errors name `label`.
Status parse_npy(const std::vector<unsigned char>& image, const std::string& label, OwnedTensor* out);

/// Reads and parses a .npy file.
Status read_npy(const std::string& path, OwnedTensor* out);

/// Serialises a tensor as a version 1.0 .npy image (little-endian, C order). BF16 has no NumPy
/// dtype: it is rejected (kUnsupported), like other dtypes numpy lacks.
Status serialize_npy(const OwnedTensor& t, std::vector<unsigned char>* image);

/// Writes a .npy file.
Status write_npy(const std::string& path, const OwnedTensor& t);

}  // namespace fia::io
