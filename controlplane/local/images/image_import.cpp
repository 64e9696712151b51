#include "controlplane/local/images/image_import.hpp"

#include "common/unique_fd.hpp"
#include "controlplane/local/images/archive_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

constexpr size_t max_dropped_named = 20;
constexpr size_t copy_chunk = 64 * 1024;

failure refused(const std::string& member, const std::string& why) {
  return fail(ec::bad_request, "rootfs member \"" + member + "\": " + why);
}

failure io_failure(const std::string& what, int err) {
  if (err == ENOSPC || err == EDQUOT)
    return fail(ec::unavailable,
                what + ": the state dir's file system is full (" + std::strerror(err) + ")");
  if (err == ENAMETOOLONG) return fail(ec::bad_request, what + ": name too long");
  return fail(ec::unavailable, what + ": " + std::strerror(err));
}

/// A member path as the components it lands at inside the image (see the policy in the
/// header): leading '/', "." and empty components dropped, ".." refused.
result<std::vector<std::string>> components(const std::string& name,
                                            const std::string& member) {
  if (name.size() >= PATH_MAX) return refused(member.substr(0, 200) + "…", "path too long");
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= name.size()) {
    auto slash = name.find('/', at);
    if (slash == std::string::npos) slash = name.size();
    auto part = name.substr(at, slash - at);
    at = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..")
      return refused(member, "a \"..\" component could leave the image's root; refused");
    if (part.size() > NAME_MAX) return refused(member, "a path component is too long");
    out.push_back(std::move(part));
  }
  return out;
}

std::string joined(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i)
    out += (i ? "/" : "") + parts[i];
  return out;
}

uint32_t normal_mode(bool dir, uint32_t mode) {
  if (dir) return 0755;
  return (mode & 0111) != 0 ? 0755 : 0644;
}

result<bool> write_all(int fd, const char* data, size_t n, const std::string& member) {
  while (n > 0) {
    auto w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_failure("writing \"" + member + "\"", errno);
    data += w;
    n -= size_t(w);
  }
  return true;
}

/// Applies the policy to members and writes them below the image's root; never follows a
/// symlink (every component is checked with fstatat and opened with O_NOFOLLOW).
class tree_writer {
public:
  explicit tree_writer(unique_fd root)
      : root_(std::move(root))
      , buf_(copy_chunk) {}

  import_report report;

  using chunk_reader = std::function<result<size_t>(char*, size_t)>;

  result<bool> directory(const std::string& member) {
    auto parts = components(member, member);
    if (!parts) return parts.error();
    if (parts->empty()) return true; // the root itself: its mode is the image's (0755)
    auto parent = parent_of(*parts, member, true);
    if (!parent) return parent.error();
    const auto& leaf = parts->back();
    struct stat st;
    if (::fstatat(parent->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISDIR(st.st_mode)) return true;
      if (::unlinkat(parent->get(), leaf.c_str(), 0) != 0)
        return io_failure("replacing \"" + member + "\"", errno);
    } else if (errno != ENOENT) {
      return io_failure("reading \"" + member + "\"", errno);
    }
    if (::mkdirat(parent->get(), leaf.c_str(), 0755) != 0 ||
        ::fchmodat(parent->get(), leaf.c_str(), 0755, 0) != 0)
      return io_failure("creating \"" + member + "\"", errno);
    return true;
  }

  result<bool> file(const std::string& member, uint32_t mode, const chunk_reader& read) {
    auto parts = components(member, member);
    if (!parts) return parts.error();
    if (parts->empty()) return refused(member, "a file cannot be the image's root");
    auto parent = parent_of(*parts, member, true);
    if (!parent) return parent.error();
    const auto& leaf = parts->back();
    if (auto ok = clear_leaf(parent->get(), leaf, member); !ok) return ok;
    unique_fd out{::openat(parent->get(), leaf.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
    if (!out) return io_failure("creating \"" + member + "\"", errno);
    for (;;) {
      auto n = read(buf_.data(), buf_.size());
      if (!n) return n.error();
      if (*n == 0) break;
      if (auto ok = write_all(out.get(), buf_.data(), *n, member); !ok) return ok;
      report.size_bytes += *n;
    }
    if (::fchmod(out.get(), normal_mode(false, mode)) != 0)
      return io_failure("setting the mode of \"" + member + "\"", errno);
    return true;
  }

  result<bool> symlink(const std::string& member, const std::string& target) {
    if (target.empty()) return refused(member, "a symlink with an empty target");
    if (target.size() >= PATH_MAX) return refused(member, "symlink target too long");
    auto parts = components(member, member);
    if (!parts) return parts.error();
    if (parts->empty()) return refused(member, "a symlink cannot be the image's root");
    auto parent = parent_of(*parts, member, true);
    if (!parent) return parent.error();
    const auto& leaf = parts->back();
    if (auto ok = clear_leaf(parent->get(), leaf, member); !ok) return ok;
    if (::symlinkat(target.c_str(), parent->get(), leaf.c_str()) != 0)
      return io_failure("creating the symlink \"" + member + "\"", errno);
    return true;
  }

  result<bool> hardlink(const std::string& member, const std::string& target) {
    auto to = components(target, member);
    if (!to) return to.error();
    auto not_a_file = [&] {
      return refused(member, "a hard link to \"" + target +
                                 "\", which is not an earlier regular file of the image; "
                                 "refused");
    };
    if (to->empty()) return not_a_file();
    bool missing = false;
    auto tparent = parent_of(*to, member, false, &missing);
    if (!tparent) return missing ? not_a_file() : tparent.error();
    struct stat st;
    if (::fstatat(tparent->get(), to->back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      return not_a_file();
    auto parts = components(member, member);
    if (!parts) return parts.error();
    if (parts->empty()) return refused(member, "a hard link cannot be the image's root");
    if (*parts == *to) return true; // a link to itself: already there
    auto parent = parent_of(*parts, member, true);
    if (!parent) return parent.error();
    const auto& leaf = parts->back();
    if (auto ok = clear_leaf(parent->get(), leaf, member); !ok) return ok;
    if (::linkat(tparent->get(), to->back().c_str(), parent->get(), leaf.c_str(), 0) != 0)
      return io_failure("creating the hard link \"" + member + "\"", errno);
    return true;
  }

  void drop(const std::string& member, const char* why) {
    ++report.dropped_total;
    if (report.dropped.size() < max_dropped_named)
      report.dropped.push_back(member + " (" + why + ")");
  }

  /// Makes the sandbox's mountpoints real directories and files (see the header).
  result<bool> finish() {
    for (const auto& d : image_mount_dirs()) {
      struct stat st;
      if (::fstatat(root_.get(), d.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode)) {
          if (::fchmodat(root_.get(), d.c_str(), 0755, 0) != 0)
            return io_failure("setting the mode of /" + d, errno);
          continue;
        }
        if (::unlinkat(root_.get(), d.c_str(), 0) != 0)
          return io_failure("replacing /" + d + " with a directory", errno);
      }
      if (::mkdirat(root_.get(), d.c_str(), 0755) != 0 ||
          ::fchmodat(root_.get(), d.c_str(), 0755, 0) != 0)
        return io_failure("creating /" + d, errno);
    }
    for (const auto& f : image_mount_files()) {
      auto parts = components(f, f);
      auto parent = parent_of(*parts, f, true);
      if (!parent) return parent.error();
      const auto& leaf = parts->back();
      struct stat st;
      if (::fstatat(parent->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISREG(st.st_mode)) continue;
        if (S_ISDIR(st.st_mode))
          return refused(f, "is a directory; the guest's sandbox needs a file there");
        if (::unlinkat(parent->get(), leaf.c_str(), 0) != 0)
          return io_failure("replacing /" + f + " with a file", errno);
      }
      unique_fd fd{::openat(parent->get(), leaf.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)};
      if (!fd || ::fchmod(fd.get(), 0644) != 0) return io_failure("creating /" + f, errno);
    }
    if (::fchmod(root_.get(), 0755) != 0) return io_failure("setting the root's mode", errno);
    return true;
  }

private:
  /// The directory `parts` (all but the last) names, opened O_PATH; missing directories
  /// are created when `create`. A symlink or non-directory on the way is refused.
  result<unique_fd> parent_of(const std::vector<std::string>& parts, const std::string& member,
                              bool create, bool* missing = nullptr) {
    unique_fd cur{::fcntl(root_.get(), F_DUPFD_CLOEXEC, 0)};
    if (!cur) return io_failure("opening the image root", errno);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto& comp = parts[i];
      struct stat st;
      if (::fstatat(cur.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT)
          return io_failure("reading \"" + joined(parts, i + 1) + "\"", errno);
        if (!create) {
          if (missing) *missing = true;
          return refused(member, "\"" + joined(parts, i + 1) + "\" does not exist");
        }
        if (::mkdirat(cur.get(), comp.c_str(), 0755) != 0 ||
            ::fchmodat(cur.get(), comp.c_str(), 0755, 0) != 0)
          return io_failure("creating \"" + joined(parts, i + 1) + "\"", errno);
      } else if (S_ISLNK(st.st_mode)) {
        return refused(member, "its path goes through the symlink \"" + joined(parts, i + 1) +
                                   "\"; nothing is written through a symlink, refused");
      } else if (!S_ISDIR(st.st_mode)) {
        return refused(member, "\"" + joined(parts, i + 1) + "\" is not a directory");
      }
      unique_fd next{
          ::openat(cur.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
      if (!next) return io_failure("opening \"" + joined(parts, i + 1) + "\"", errno);
      cur = std::move(next);
    }
    return cur;
  }

  /// Removes a non-directory at `leaf` (a later member replaces an earlier one, as tar
  /// does); a directory there is refused.
  result<bool> clear_leaf(int dir, const std::string& leaf, const std::string& member) {
    struct stat st;
    if (::fstatat(dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return true;
      return io_failure("reading \"" + member + "\"", errno);
    }
    if (S_ISDIR(st.st_mode))
      return refused(member, "would replace a directory of the same name; refused");
    if (::unlinkat(dir, leaf.c_str(), 0) != 0)
      return io_failure("replacing \"" + member + "\"", errno);
    return true;
  }

  unique_fd root_;
  std::vector<char> buf_;
};

// -- sources ------------------------------------------------------------------------------

class fd_source final : public byte_source {
public:
  explicit fd_source(int fd)
      : fd_(fd) {}
  result<size_t> read(char* buf, size_t n) override {
    for (;;) {
      auto r = ::read(fd_, buf, n);
      if (r >= 0) return size_t(r);
      if (errno != EINTR) return io_failure("reading the rootfs", errno);
    }
  }

private:
  int fd_;
};

result<bool> import_tar(byte_source& in, tree_writer& w) {
  archive_reader tar{in};
  for (;;) {
    auto next = tar.next();
    if (!next) return next.error();
    if (!*next) return true;
    const auto& m = **next;
    result<bool> ok{true};
    switch (m.type) {
    case tar_member::kind::file:
      ok =
          w.file(m.name, m.mode, [&tar](char* buf, size_t n) { return tar.read_data(buf, n); });
      break;
    case tar_member::kind::directory:
      ok = w.directory(m.name);
      break;
    case tar_member::kind::symlink:
      ok = w.symlink(m.name, m.link);
      break;
    case tar_member::kind::hardlink:
      ok = w.hardlink(m.name, m.link);
      break;
    case tar_member::kind::char_dev:
    case tar_member::kind::block_dev:
      w.drop(m.name, "device node");
      break;
    case tar_member::kind::fifo:
      w.drop(m.name, "FIFO");
      break;
    }
    if (!ok) return ok;
  }
}

/// Copies a directory tree: one file system, symlinks as symlinks, hard links kept.
class dir_walker {
public:
  dir_walker(tree_writer& w, dev_t dev)
      : w_(w)
      , dev_(dev) {}

  result<bool> walk(int dirfd, const std::string& rel) {
    unique_fd dup{::fcntl(dirfd, F_DUPFD_CLOEXEC, 0)};
    if (!dup) return io_failure("reading the rootfs directory", errno);
    DIR* d = ::fdopendir(dup.get());
    if (d == nullptr) return io_failure("reading the rootfs directory /" + rel, errno);
    dup.release();
    std::vector<std::string> names;
    errno = 0;
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    int err = errno;
    ::closedir(d);
    if (err != 0) return io_failure("reading the rootfs directory /" + rel, err);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      auto member = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return io_failure("reading /" + member, errno);
      if (S_ISDIR(st.st_mode)) {
        if (st.st_dev != dev_) {
          w_.drop(member + "/", "another file system mounted in the directory");
          continue;
        }
        if (auto ok = w_.directory(member); !ok) return ok;
        unique_fd sub{
            ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
        if (!sub) return io_failure("opening /" + member, errno);
        if (auto ok = walk(sub.get(), member); !ok) return ok;
      } else if (S_ISREG(st.st_mode)) {
        auto key = std::make_pair(st.st_dev, st.st_ino);
        if (st.st_nlink > 1)
          if (auto seen = links_.find(key); seen != links_.end()) {
            if (auto ok = w_.hardlink(member, seen->second); !ok) return ok;
            continue;
          }
        unique_fd in{::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
        if (!in) return io_failure("opening /" + member, errno);
        fd_source src{in.get()};
        auto ok = w_.file(member, st.st_mode & 07777,
                          [&src](char* buf, size_t n) { return src.read(buf, n); });
        if (!ok) return ok;
        if (st.st_nlink > 1) links_.emplace(key, member);
      } else if (S_ISLNK(st.st_mode)) {
        std::string target(PATH_MAX, '\0');
        auto n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
        if (n < 0) return io_failure("reading the symlink /" + member, errno);
        target.resize(size_t(n));
        if (auto ok = w_.symlink(member, target); !ok) return ok;
      } else {
        w_.drop(member, S_ISFIFO(st.st_mode)   ? "FIFO"
                        : S_ISSOCK(st.st_mode) ? "socket"
                                               : "device node");
      }
    }
    return true;
  }

private:
  tree_writer& w_;
  dev_t dev_;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;
};

} // namespace

const std::vector<std::string>& image_mount_dirs() {
  static const std::vector<std::string> dirs{"proc", "dev", "tmp", "workspace", "etc"};
  return dirs;
}

const std::vector<std::string>& image_mount_files() {
  static const std::vector<std::string> files{"etc/passwd", "etc/group", "etc/hosts",
                                              "etc/resolv.conf"};
  return files;
}

result<import_report> import_rootfs(const fs::path& source, const fs::path& dest) {
  const auto shown = source.string();
  unique_fd in{::open(source.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!in) {
    int err = errno;
    if (err == ENOENT) return fail(ec::bad_request, "rootfs " + shown + " does not exist");
    return fail(ec::bad_request, "rootfs " + shown + " cannot be read: " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(in.get(), &st) != 0) return io_failure("reading " + shown, errno);
  unique_fd root{::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (!root) return io_failure("opening " + dest.string(), errno);
  tree_writer w{std::move(root)};

  if (S_ISDIR(st.st_mode)) {
    // A directory that holds the state dir would be copied into itself.
    std::error_code e1, e2;
    auto src = fs::canonical(source, e1), dst = fs::canonical(dest, e2);
    if (!e1 && !e2) {
      auto rel = dst.lexically_relative(src);
      if (!rel.empty() && *rel.begin() != "..")
        return fail(ec::bad_request, "rootfs " + shown +
                                         " contains the control plane's state dir; give the "
                                         "directory of the image's tree itself");
    }
    dir_walker walker{w, st.st_dev};
    if (auto ok = walker.walk(in.get(), ""); !ok) return ok.error();
  } else if (S_ISREG(st.st_mode)) {
    fd_source src{in.get()};
    if (auto ok = import_tar(src, w); !ok)
      return fail(ok.error().code, shown + ": " + ok.error().message);
  } else {
    return fail(ec::bad_request,
                "rootfs " + shown + " is neither a tar archive nor a directory");
  }
  if (auto ok = w.finish(); !ok) return ok.error();
  return w.report;
}

} // namespace guestflow::local
