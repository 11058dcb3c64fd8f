// libFuzzer target: params.json text -> FiaArgs attributes (io::parse_params, what `fia run`
// and io::load_case read a case's params.json with). Findings: a crash, a sanitizer report, or
// a rejection that names no key or says nothing.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fia/io/case_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fia::FiaArgs args;
  const fia::Status st = fia::io::parse_params(std::string(reinterpret_cast<const char*>(data), size), &args);
  if (!st.ok() && (st.parameter.empty() || st.message.empty())) {
    std::fprintf(stderr, "\nFINDING: a params.json rejection without key or message: '%s'\n", st.to_string().c_str());
    std::abort();
  }
  return 0;
}
