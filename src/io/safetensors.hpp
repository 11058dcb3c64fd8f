// safetensors reading and writing (https://github.com/huggingface/safetensors, "Format").
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fia/status.hpp"
#include "fia/tensor.hpp"

namespace fia::io {

/// The contents of one .safetensors file.
struct TensorFile {
  std::map<std::string, OwnedTensor> tensors;
  std::map<std::string, std::string> metadata;  ///< the optional "__metadata__" object
};

/// Parses a safetensors image: 8-byte little-endian header length, JSON header, data. Rejects a
/// truncated file, a malformed or oversized header, unknown dtypes, negative or overflowing
/// shapes, offsets that do not match the shape or leave the data area, and overlapping tensors.
/// Errors name `label` (usually the file name) as the parameter.
Status parse_safetensors(const std::vector<unsigned char>& image, const std::string& label, TensorFile* out);

/// Reads and parses a file; a missing or unreadable file is an error naming `path`.
Status read_safetensors(const std::string& path, TensorFile* out);

/// Serialises tensors (in the given order) with optional metadata into a safetensors image.
std::vector<unsigned char> serialize_safetensors(const std::vector<std::pair<std::string, const OwnedTensor*>>& tensors,
                                                 const std::map<std::string, std::string>& metadata = {});

/// Writes a safetensors file atomically (a temporary file renamed into place).
Status write_safetensors(const std::string& path,
                         const std::vector<std::pair<std::string, const OwnedTensor*>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

/// Parses JSON text; `duplicate` receives the first key that appears twice in one object (empty
/// when none). The result is discarded (is_discarded()) when the text is not JSON.
nlohmann::json parse_json_object(const std::string& text, std::string* duplicate);

/// A JSON value for an error message: a scalar as written (cut after 60 characters), a list or an
/// object by its size only. (json::dump recurses once per nesting level: on a deeply nested
/// value it overflowed the stack, found by fuzzing.)
std::string json_excerpt(const nlohmann::json& value);

/// Reads a whole regular file into memory; false when it is not one or cannot be read.
bool read_file(const std::string& path, std::vector<unsigned char>* out);

}  // namespace fia::io
