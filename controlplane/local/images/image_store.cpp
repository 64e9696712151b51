#include "controlplane/local/images/image_store.hpp"

#include "common/unique_fd.hpp"
#include "controlplane/local/images/image_import.hpp"
#include "controlplane/local/images/python_env.hpp"
#include "controlplane/local/service/clock.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

constexpr const char* manifest_file = "image.json";
constexpr const char* rootfs_dir = "rootfs";
constexpr const char* staging_prefix = ".staging-";
constexpr const char* trash_prefix = ".trash-";
constexpr uintmax_t max_manifest_bytes = 1 << 20;

std::string random_suffix() {
  auto id = new_guest_id(); // "sb-" + 16 hex digits from getrandom(2)
  return id.substr(id.find('-') + 1);
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

result<bool> write_manifest(const fs::path& file, const image_manifest& m) {
  auto text = encode(m);
  unique_fd fd{::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (!fd)
    return fail(ec::unavailable, "cannot write " + file.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return fail(ec::unavailable,
                  "cannot write " + file.string() + ": " + std::strerror(errno));
    done += size_t(n);
  }
  if (::fsync(fd.get()) != 0)
    return fail(ec::unavailable, "cannot write " + file.string() + ": " + std::strerror(errno));
  return true;
}

result<image_manifest> read_manifest(const fs::path& file) {
  std::error_code ec_;
  auto size = fs::file_size(file, ec_);
  if (ec_) return fail(ec::unavailable, "cannot read " + file.string() + ": " + ec_.message());
  if (size > max_manifest_bytes) return fail(ec::unavailable, file.string() + " is too large");
  std::ifstream in{file, std::ios::binary};
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return fail(ec::unavailable, "cannot read " + file.string());
  auto m = decode<image_manifest>(text.str());
  if (!m) return fail(ec::unavailable, file.string() + ": " + m.error().message);
  return m;
}

/// The error of an image operation that refers to what the store holds.
std::string image_names(const std::map<std::string, image_manifest>& images) {
  std::string out{builtin_image};
  for (const auto& [name, m] : images)
    out += ", " + name;
  return out;
}

void remove_tree(const fs::path& p) {
  std::error_code ignored;
  fs::remove_all(p, ignored);
}

} // namespace

std::vector<std::string> image_store::builtin_preload_from_env() {
  std::vector<std::string> out;
  const char* v = std::getenv("GUESTFLOW_PRELOAD");
  std::stringstream in{v ? v : ""};
  for (std::string item; std::getline(in, item, ',');) {
    auto b = item.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    out.push_back(item.substr(b, item.find_last_not_of(" \t") + 1 - b));
  }
  return out;
}

result<std::unique_ptr<image_store>>
image_store::open(const fs::path& state_dir, std::vector<std::string>& problems,
                  const std::vector<std::string>& builtin_preload) {
  auto dir = state_dir / "images";
  std::error_code ec_;
  fs::create_directories(dir, ec_);
  if (ec_) return fail(ec::unavailable, "cannot create " + dir.string() + ": " + ec_.message());
  ::chmod(dir.c_str(), 0700);
  std::unique_ptr<image_store> store{new image_store(dir)};
  std::vector<std::string> preload;
  for (const auto& m : builtin_preload) {
    if (auto problem = preload_problem(m); !problem.empty())
      problems.push_back("GUESTFLOW_PRELOAD: ignoring an entry: " + problem);
    else
      preload.push_back(m);
  }
  if (auto canonical = canonical_preload(std::move(preload)))
    store->builtin_preload_ = std::move(*canonical);
  else
    problems.push_back("GUESTFLOW_PRELOAD: ignored: " + canonical.error().message);
  for (fs::directory_iterator it{dir, ec_}, end; !ec_ && it != end; it.increment(ec_)) {
    auto name = it->path().filename().string();
    if (starts_with(name, staging_prefix) || starts_with(name, trash_prefix)) {
      remove_tree(it->path()); // an import or removal a crash interrupted
      continue;
    }
    if (!valid_image_name(name) || name == builtin_image || !it->is_directory()) {
      problems.push_back("images: ignoring " + it->path().string() + " (not an image)");
      continue;
    }
    auto m = read_manifest(it->path() / manifest_file);
    if (!m) {
      problems.push_back("images: ignoring " + name + ": " + m.error().message);
      continue;
    }
    if (m->info.name != name ||
        (m->info.kind == image_kind_rootfs &&
         (m->root_dir != rootfs_dir || !fs::is_directory(it->path() / m->root_dir)))) {
      problems.push_back("images: ignoring " + name + ": its record does not match its files");
      continue;
    }
    store->images_.emplace(name, std::move(*m));
  }
  if (ec_) return fail(ec::unavailable, "cannot list " + dir.string() + ": " + ec_.message());
  return store;
}

image_list image_store::list() const {
  image_list out;
  image_info builtin;
  builtin.name = std::string{builtin_image};
  builtin.kind = std::string{image_kind_builtin};
  builtin.source = "the host's /usr";
  builtin.preload = builtin_preload_;
  out.data.push_back(std::move(builtin));
  std::lock_guard<std::mutex> lock{mu_};
  for (const auto& [name, m] : images_) {
    out.data.push_back(m.info);
    out.data.back().snapshot =
        ::access((snapshot_dir(name) / "checkpoint.img").c_str(), F_OK) == 0;
  }
  out.total = out.data.size();
  return out;
}

std::vector<std::string> image_store::names() const {
  std::vector<std::string> out{std::string{builtin_image}};
  std::lock_guard<std::mutex> lock{mu_};
  for (const auto& [name, m] : images_)
    out.push_back(name);
  return out;
}

result<resolved_image> image_store::resolve(const std::optional<std::string>& rootfs) const {
  resolved_image out;
  out.name = rootfs.value_or(std::string{builtin_image});
  if (out.name == builtin_image) {
    out.preload = builtin_preload_;
    return out;
  }
  std::lock_guard<std::mutex> lock{mu_};
  auto i = images_.find(out.name);
  if (i == images_.end())
    return fail(ec::bad_request, "rootfs: unknown image '" + out.name +
                                     "'; this control plane has " + image_names(images_) +
                                     " (add one with `guestflow image add`)");
  const auto& m = i->second;
  image_layout layout;
  if (m.info.kind == image_kind_rootfs) layout.root = dir_ / out.name / m.root_dir;
  layout.ro_binds = m.ro_binds;
  out.layout = std::move(layout);
  out.path_prepend = m.path_prepend;
  out.preload = m.info.preload;
  return out;
}

result<image_added> image_store::add(const image_add_request& req) {
  if (auto problem = image_name_problem(req.name); !problem.empty())
    return fail(ec::bad_request, problem);
  if (req.name == builtin_image)
    return fail(ec::bad_request, "image name '" + req.name +
                                     "' is the built-in image (the host's /usr); choose "
                                     "another name");
  if (bool(req.rootfs) == bool(req.python_env))
    return fail(ec::bad_request, "give exactly one of rootfs and python_env");
  auto preload = canonical_preload(req.preload);
  if (!preload) return preload.error();
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (images_.count(req.name) || importing_.count(req.name))
      return fail(ec::bad_request, "image name '" + req.name +
                                       "' is taken; remove it first (`guestflow image rm " +
                                       req.name + "`) or choose another name");
    importing_.insert(req.name);
  }
  struct release {
    image_store* s;
    std::string name;
    ~release() {
      std::lock_guard<std::mutex> lock{s->mu_};
      s->importing_.erase(name);
    }
  } releasing{this, req.name};

  const auto staging = dir_ / (staging_prefix + random_suffix());
  if (::mkdir(staging.c_str(), 0700) != 0)
    return fail(ec::unavailable,
                "cannot create " + staging.string() + ": " + std::strerror(errno));
  image_added out;
  auto m = build(req, *preload, staging, out);
  if (!m) {
    remove_tree(staging);
    return m.error();
  }
  const auto final_dir = dir_ / req.name;
  std::lock_guard<std::mutex> lock{mu_};
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) !=
      0) {
    int err = errno;
    remove_tree(staging);
    if (err == EEXIST)
      return fail(ec::bad_request, "image name '" + req.name +
                                       "' is taken: " + final_dir.string() +
                                       " exists (an unreadable image? remove that directory)");
    return fail(ec::unavailable,
                "cannot move the image into place: " + std::string{std::strerror(err)});
  }
  images_.emplace(req.name, *m);
  out.image = m->info;
  return out;
}

result<image_manifest> image_store::build(const image_add_request& req,
                                          std::vector<std::string> preload,
                                          const fs::path& staging, image_added& out) {
  image_manifest m;
  m.info.name = req.name;
  m.info.preload = std::move(preload);
  if (req.rootfs) {
    const auto root = staging / rootfs_dir;
    if (::mkdir(root.c_str(), 0755) != 0)
      return fail(ec::unavailable,
                  "cannot create " + root.string() + ": " + std::strerror(errno));
    auto report = import_rootfs(*req.rootfs, root);
    if (!report) return report.error();
    m.info.kind = std::string{image_kind_rootfs};
    m.info.source = *req.rootfs;
    m.info.size_bytes = report->size_bytes;
    m.root_dir = rootfs_dir;
    out.dropped = std::move(report->dropped);
    out.dropped_total = report->dropped_total;
  } else {
    auto env = inspect_python_env(*req.python_env);
    if (!env) return env.error();
    m.info.kind = std::string{image_kind_python_env};
    m.info.source = *req.python_env;
    m.info.size_bytes = env->size_bytes;
    m.ro_binds = std::move(env->ro_binds);
    m.path_prepend = std::move(env->path_prepend);
  }
  m.info.created_at = now_rfc3339();
  if (auto ok = write_manifest(staging / manifest_file, m); !ok) return ok.error();
  return m;
}

result<fs::path> image_store::detach(const std::string& name) {
  if (name == builtin_image)
    return fail(ec::bad_request, "image '" + name +
                                     "' is built in (the host's /usr) and "
                                     "cannot be removed");
  std::lock_guard<std::mutex> lock{mu_};
  if (!images_.count(name))
    return fail(ec::not_found,
                "no image '" + name + "'; this control plane has " + image_names(images_));
  auto trash = dir_ / (trash_prefix + random_suffix());
  if (::rename((dir_ / name).c_str(), trash.c_str()) != 0)
    return fail(ec::unavailable,
                "cannot remove image '" + name + "': " + std::string{std::strerror(errno)});
  images_.erase(name);
  return trash;
}

void image_store::purge(const fs::path& detached) {
  remove_tree(detached);
}

} // namespace guestflow::local
