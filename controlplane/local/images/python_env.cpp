#include "controlplane/local/images/python_env.hpp"

#include "common/text.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sys/stat.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

bool is_within(const fs::path& p, const fs::path& dir) {
  auto rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

/// Why the guest cannot have `p` bound at its own path, or nullopt.
std::optional<std::string> reserved(const fs::path& p) {
  if (p == "/") return std::string{"is the root directory"};
  if (p == "/tmp") return std::string{"is /tmp itself (the guest's private /tmp)"};
  for (const char* r : {"/proc", "/dev", "/sys", "/etc", "/workspace", "/run/guestflow"})
    if (is_within(p, r))
      return "is inside " + std::string{r} +
             ", which the guest's sandbox "
             "provides itself";
  for (const char* r : {"/bin", "/lib", "/lib64", "/sbin"}) // symlinks into /usr in the guest
    if (is_within(p, r)) return "is inside " + std::string{r} + ", a symlink in the guest";
  return std::nullopt;
}

/// `home` of PREFIX/pyvenv.cfg, if there is one.
std::optional<std::string> venv_home(const fs::path& prefix) {
  std::ifstream in{prefix / "pyvenv.cfg"};
  if (!in) return std::nullopt;
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos && trim(line.substr(0, eq)) == "home")
      return std::string{trim(line.substr(eq + 1))};
  }
  return std::nullopt;
}

/// An interpreter's installation prefix from the directory its executable is in.
fs::path installation_of(const fs::path& bin_dir) {
  return bin_dir.filename() == "bin" ? bin_dir.parent_path() : bin_dir;
}

/// Other users (the guest's uid) may list and enter `dir`.
bool others_may_enter(const fs::path& dir) {
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 &&
         (st.st_mode & (S_IROTH | S_IXOTH)) == (S_IROTH | S_IXOTH);
}

uint64_t tree_size(const fs::path& root) {
  uint64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it{root, fs::directory_options::skip_permission_denied, ec};
  for (; !ec && it != fs::recursive_directory_iterator{}; it.increment(ec)) {
    std::error_code e;
    auto st = it->symlink_status(e);
    if (!e && fs::is_regular_file(st)) total += it->file_size(e);
  }
  return total;
}

failure refused(const fs::path& prefix, const std::string& why) {
  return fail(ec::bad_request, "python env " + prefix.string() + ": " + why);
}

} // namespace

result<python_env_layout> inspect_python_env(const fs::path& given) {
  if (!given.is_absolute()) return refused(given, "must be an absolute path");
  std::error_code ec;
  auto st = fs::status(given, ec);
  if (ec || !fs::exists(st)) return refused(given, "does not exist");
  if (!fs::is_directory(st))
    return refused(given, "is not a directory (give the environment's prefix, the "
                          "directory holding bin/python)");
  auto prefix = fs::canonical(given, ec);
  if (ec) return refused(given, "cannot be resolved: " + ec.message());
  if (auto why = reserved(prefix)) return refused(given, *why);

  const auto python = prefix / "bin" / "python";
  struct stat ps;
  if (::stat(python.c_str(), &ps) != 0 || !S_ISREG(ps.st_mode))
    return refused(given, "has no bin/python (is it a Python environment's prefix?)");
  if ((ps.st_mode & S_IXOTH) == 0)
    return refused(given, "bin/python is not executable by other users (the guest's uid)");
  struct stat p3;
  if (::stat((prefix / "bin" / "python3").c_str(), &p3) != 0 || !S_ISREG(p3.st_mode))
    return refused(given, "has bin/python but no bin/python3, which the guest runs");
  for (const auto& d : {prefix, prefix / "bin"})
    if (!others_may_enter(d))
      return refused(given, d.string() + " is not readable by other users (the guest's "
                                         "uid); make it (chmod o+rx) or use another env");

  python_env_layout out;
  out.prefix = prefix.string();
  out.path_prepend = (prefix / "bin").string();
  std::vector<fs::path> binds;
  if (!is_within(prefix, "/usr") && prefix != "/usr") binds.push_back(prefix);

  // The interpreter the environment runs: a venv's base installation (pyvenv.cfg `home`)
  // and wherever bin/python really is.
  std::vector<std::pair<fs::path, std::string>> bases;
  if (auto home = venv_home(prefix)) {
    fs::path h{*home};
    if (!h.is_absolute() || !fs::is_directory(h, ec))
      return refused(given, "pyvenv.cfg names home = " + *home +
                                ", which is not a directory; the environment's base "
                                "interpreter is gone");
    bases.emplace_back(installation_of(fs::canonical(h, ec)),
                       "its base installation (pyvenv.cfg home)");
  }
  auto real_python = fs::canonical(python, ec);
  if (!ec) bases.emplace_back(installation_of(real_python.parent_path()), "its interpreter");
  for (const auto& [base, what] : bases) {
    if (base == "/usr" || is_within(base, "/usr") || base == prefix || is_within(base, prefix))
      continue;
    if (auto why = reserved(base))
      return refused(given, what + " " + base.string() + " " + *why);
    if (!others_may_enter(base))
      return refused(given, what + " " + base.string() +
                                " is not readable by other users (the guest's uid)");
    binds.push_back(base);
  }
  // Only the outermost of nested directories is bound.
  std::sort(binds.begin(), binds.end());
  binds.erase(std::unique(binds.begin(), binds.end()), binds.end());
  for (const auto& b : binds) {
    bool nested = false;
    for (const auto& other : binds)
      nested = nested || (other != b && is_within(b, other));
    if (!nested) out.ro_binds.push_back(b.string());
  }
  out.size_bytes = tree_size(prefix);
  return out;
}

} // namespace guestflow::local
