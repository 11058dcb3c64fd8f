#include "support/cli_runner.hpp"

#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace fia::test {

namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

std::string temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const fs::path p = fs::temp_directory_path() /
                     ("fia-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

CliResult run_fia(const std::vector<std::string>& args) {
  const std::string dir = temp_dir("cli");
  std::ostringstream cmd;
  cmd << quote(FIA_BINARY);
  for (const auto& a : args) cmd << ' ' << quote(a);
  cmd << " >" << quote(dir + "/stdout") << " 2>" << quote(dir + "/stderr");
  const int status = std::system(cmd.str().c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir + "/stdout");
  r.err = slurp(dir + "/stderr");
  fs::remove_all(dir);
  return r;
}

}  // namespace fia::test
