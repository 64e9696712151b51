#include "controlplane/local/guests/gvisor_checkpoint.hpp"

#include "controlplane/local/guests/host_command.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

constexpr const char* image_file = "checkpoint.img";

fs::path partial_of(const fs::path& dir) {
  auto p = dir;
  p += ".partial";
  return p;
}

/// The image's data and its directory entry on disk before the rename publishes it: a host
/// crash must not leave a checkpoint that looks complete and is not.
bool sync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

} // namespace

fs::path checkpoint_dir(const fs::path& guest_dir) {
  return guest_dir / "checkpoint";
}

bool has_checkpoint(const fs::path& dir) {
  struct stat st {};
  return ::stat((dir / image_file).c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

result<bool> write_checkpoint(const std::vector<std::string>& runsc_global,
                              const std::string& container, const fs::path& dir,
                              std::chrono::milliseconds timeout) {
  const auto partial = partial_of(dir);
  std::error_code ec_;
  fs::remove_all(partial, ec_);
  if (::mkdir(partial.c_str(), 0700) != 0)
    return fail(ec::unavailable,
                "cannot create " + partial.string() + ": " + std::strerror(errno));
  auto argv = runsc_global;
  argv.insert(argv.end(), {"checkpoint", "--image-path", partial.string(), container});
  auto out = run_command(argv, command_options{{}, -1, {}, timeout});
  auto failed = [&](const std::string& why) -> failure {
    fs::remove_all(partial, ec_);
    return fail(ec::unavailable, "checkpoint of " + container + " failed: " + why);
  };
  if (!out) return failed(out.error().message);
  if (out->exit_code != 0)
    return failed("runsc exit " + std::to_string(out->exit_code) + ": " + out->output);
  if (!has_checkpoint(partial)) return failed("runsc wrote no image");
  if (!sync_path(partial / image_file, false) || !sync_path(partial, true))
    return failed(std::string{"fsync: "} + std::strerror(errno));
  fs::remove_all(dir, ec_);
  if (::rename(partial.c_str(), dir.c_str()) != 0) return failed(std::strerror(errno));
  sync_path(dir.parent_path(), true);
  return true;
}

std::vector<std::string> restore_command(const fs::path& dir) {
  return {"restore", "--image-path", dir.string(), "--detach"};
}

void remove_checkpoint(const fs::path& dir) {
  std::error_code ec_;
  fs::remove_all(dir, ec_);
  fs::remove_all(partial_of(dir), ec_);
}

} // namespace guestflow::local
