// Reads choices from the front of a fuzz input, one or more bytes each. Past the end every
// choice reads as 0, so the empty input is the simplest call and a short seed can be written by
// hand: byte k is the k-th choice of the decoder (fuzz/call_decoder.cpp lists them in order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace fia::fuzz {

class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  /// The next byte (0 past the end).
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  /// A value in [0, n) from one byte (n <= 256).
  std::int64_t below(std::int64_t n) { return n <= 1 ? 0 : byte() % n; }
  /// A value in [lo, hi] from one byte (hi - lo < 256).
  std::int64_t range(std::int64_t lo, std::int64_t hi) { return lo + below(hi - lo + 1); }
  /// True for an odd byte.
  bool flag() { return byte() & 1; }
  /// One of `options`, chosen by one byte.
  template <class T>
  T pick(std::initializer_list<T> options) {
    return *(options.begin() + below(static_cast<std::int64_t>(options.size())));
  }
  /// Eight bytes, little-endian.
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{byte()} << (8 * i);
    return v;
  }
  /// True when every byte has been read.
  bool done() const { return pos_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace fia::fuzz
