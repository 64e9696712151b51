#include "controlplane/local/guests/guest_mounts.hpp"

#include "common/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

constexpr const char* system_paths[] = {"/proc", "/dev", "/sys",   "/usr",      "/bin",
                                        "/sbin", "/lib", "/lib32", "/lib64",    "/libx32",
                                        "/etc",  "/tmp", "/run",   "/workspace"};

std::vector<std::string> parts_of(const std::string& p) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= p.size()) {
    auto j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    out.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

/// Every part non-empty, none `.` or `..`.
bool plain_parts(const std::vector<std::string>& parts) {
  return std::none_of(parts.begin(), parts.end(), [](const std::string& s) {
    return s.empty() || s == "." || s == ".." || s.size() > 255;
  });
}

/// `a` is `b` or below it (both plain absolute paths).
bool at_or_under(const std::string& a, const std::string& b) {
  if (b == "/") return true;
  return a == b ||
         (a.size() > b.size() && a.compare(0, b.size(), b) == 0 && a[b.size()] == '/');
}

std::string roots_text(const std::vector<fs::path>& roots) {
  if (roots.empty()) return "none are configured (GUESTFLOW_SESSION_MOUNT_ROOTS)";
  std::string out;
  for (auto& r : roots)
    out += (out.empty() ? "" : ", ") + r.string();
  return out;
}

} // namespace

std::vector<fs::path> mount_roots_from_env() {
  std::vector<fs::path> out;
  auto add = [&out](const std::string& p) {
    if (p.empty() || p[0] != '/') return;
    std::error_code ec;
    auto real = fs::canonical(p, ec);
    if (!ec) out.push_back(real);
  };
  if (const char* v = std::getenv("GUESTFLOW_SESSION_MOUNT_ROOTS")) {
    std::string s{v};
    size_t i = 0;
    while (i <= s.size()) {
      auto j = s.find(':', i);
      if (j == std::string::npos) j = s.size();
      add(s.substr(i, j - i));
      i = j + 1;
    }
  }
  if (const char* v = std::getenv("GUESTFLOW_SESSION_SKILLS_DIR")) add(v);
  return out;
}

result<std::vector<sandbox_mount>> resolve_mounts(const std::vector<sandbox_mount>& mounts,
                                                  const std::vector<fs::path>& roots) {
  std::vector<sandbox_mount> out;
  for (const auto& m : mounts) {
    auto x = m;
    const auto& g = x.guest_path;
    if (g.size() < 2 || g[0] != '/' || !plain_parts(parts_of(g.substr(1))))
      return fail(ec::bad_request, "mount guest_path \"" + g +
                                       "\" must be an absolute path without '.', '..', "
                                       "'//' or a trailing '/', and not '/'");
    for (const char* s : system_paths)
      if (at_or_under(g, s) || at_or_under(s, g))
        return fail(ec::bad_request, "mount guest_path \"" + g + "\" would cover the guest's " +
                                         s + "; choose another path (e.g. under /mnt)");
    if (!x.workspace_dir.empty()) {
      if (x.workspace_dir[0] == '/' || !plain_parts(parts_of(x.workspace_dir)))
        return fail(ec::bad_request, "mount workspace_dir \"" + x.workspace_dir +
                                         "\" must be a relative path without '.' or '..'");
    } else {
      std::error_code ec;
      auto real = fs::canonical(x.host_path, ec);
      if (ec || x.host_path[0] != '/')
        return fail(ec::bad_request, "mount host_path \"" + x.host_path +
                                         "\" is not an existing absolute path" +
                                         (ec ? ": " + ec.message() : std::string{}));
      auto allowed = std::any_of(roots.begin(), roots.end(), [&](const fs::path& r) {
        return at_or_under(real.string(), r.string());
      });
      if (!allowed)
        return fail(
            ec::bad_request,
            "mount host_path \"" + x.host_path + "\" (real path " + real.string() +
                ") is not under a mount root of this control plane: " + roots_text(roots));
      if (!fs::is_directory(real, ec))
        return fail(ec::bad_request,
                    "mount host_path \"" + x.host_path + "\" is not a directory");
      x.host_path = real.string();
    }
    out.push_back(std::move(x));
  }
  std::sort(out.begin(), out.end(), [](const sandbox_mount& a, const sandbox_mount& b) {
    return a.guest_path < b.guest_path;
  });
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < out.size(); ++j)
      if (i != j && at_or_under(out[j].guest_path, out[i].guest_path))
        return fail(ec::bad_request, "mount guest_path \"" + out[j].guest_path +
                                         "\" is at or under another mount's \"" +
                                         out[i].guest_path + "\"");
  return out;
}

result<bool> make_workspace_dirs(int root_fd, const std::vector<sandbox_mount>& mounts,
                                 uid_t uid, gid_t gid) {
  for (const auto& m : mounts) {
    if (m.workspace_dir.empty()) continue;
    unique_fd dir{::fcntl(root_fd, F_DUPFD_CLOEXEC, 0)};
    if (!dir) return fail(ec::unavailable, std::string{"dup: "} + std::strerror(errno));
    for (const auto& part : parts_of(m.workspace_dir)) {
      bool made = ::mkdirat(dir.get(), part.c_str(), 0755) == 0;
      if (!made && errno != EEXIST)
        return fail(ec::unavailable, "cannot create the workspace directory " +
                                         m.workspace_dir + ": " + std::strerror(errno));
      // O_NOFOLLOW with O_PATH opens a symlink itself, which O_DIRECTORY then refuses.
      unique_fd next{
          ::openat(dir.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
      if (!next)
        return fail(ec::bad_request, "the workspace's " + m.workspace_dir +
                                         " is not a directory (a file or symlink is there: " +
                                         std::strerror(errno) + ")");
      if (made && ::fchownat(dir.get(), part.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
        return fail(ec::unavailable, "cannot give the workspace directory " + m.workspace_dir +
                                         " to the guest: " + std::strerror(errno));
      dir = std::move(next);
    }
  }
  return true;
}

std::string mounts_to_text(const std::vector<sandbox_mount>& mounts) {
  std::string out;
  for (const auto& m : mounts) {
    out += m.workspace_dir.empty() ? 'h' : 'w';
    out += m.read_only ? 'r' : 'w';
    out += '\t';
    out += m.workspace_dir.empty() ? m.host_path : m.workspace_dir;
    out += '\t';
    out += m.guest_path;
    out += '\n';
  }
  return out;
}

result<std::vector<sandbox_mount>> mounts_from_text(const std::string& text) {
  std::vector<sandbox_mount> out;
  size_t i = 0;
  while (i < text.size()) {
    auto end = text.find('\n', i);
    if (end == std::string::npos) end = text.size();
    auto line = text.substr(i, end - i);
    i = end + 1;
    auto t1 = line.find('\t');
    auto t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
    if (t1 != 2 || t2 == std::string::npos || (line[0] != 'h' && line[0] != 'w') ||
        (line[1] != 'r' && line[1] != 'w'))
      return fail(ec::unavailable, "record store: unreadable mount \"" + line + "\"");
    sandbox_mount m;
    (line[0] == 'h' ? m.host_path : m.workspace_dir) = line.substr(3, t2 - 3);
    m.guest_path = line.substr(t2 + 1);
    m.read_only = line[1] == 'r';
    out.push_back(std::move(m));
  }
  return out;
}

} // namespace guestflow::local
