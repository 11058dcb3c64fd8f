// FIA-SPEC 21.1 criterion A (src/check) under the test namespace.
#pragma once

#include "check/criterion.hpp"

namespace fia::test {
using check::criterion_a;
using check::lse_match;
using check::to_doubles;
using check::Verdict;
}  // namespace fia::test
