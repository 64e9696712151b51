#include "tests/integration/control_plane/image_fixture.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

namespace guestflow::testing {
namespace {

namespace fs = std::filesystem;

std::string run_output(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    out.append(buf.data(), n);
  if (::pclose(p) != 0) throw std::runtime_error(cmd + " failed: " + out);
  return out;
}

void run(const std::string& cmd) {
  run_output(cmd + " 2>&1");
}

/// Where a host library goes in the image: /lib/x and /lib64/x below usr/ (the image's
/// lib and lib64 are symlinks into usr, as on a merged-/usr Debian).
fs::path image_path(const fs::path& host) {
  auto s = host.string();
  if (s.rfind("/lib/", 0) == 0 || s.rfind("/lib64/", 0) == 0) return "usr" + s;
  return host.relative_path();
}

void copy_followed(const fs::path& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing); // follows symlinks
  fs::permissions(to, fs::status(from).permissions());
}

} // namespace

void make_tiny_rootfs(const fs::path& dir, const std::string& marker) {
  fs::create_directories(dir / "usr/bin");
  fs::create_directories(dir / "usr/lib");
  fs::create_directories(dir / "usr/lib64");
  fs::create_symlink("usr/bin", dir / "bin");
  fs::create_symlink("usr/lib", dir / "lib");
  fs::create_symlink("usr/lib64", dir / "lib64");
  const std::vector<std::pair<std::string, std::string>> tools{
      {"/usr/bin/dash", "sh"},          {"/usr/bin/cat", "cat"},   {"/usr/bin/ls", "ls"},
      {"/usr/bin/touch", "touch"},      {"/usr/bin/stat", "stat"}, {"/usr/bin/id", "id"},
      {"/usr/bin/readlink", "readlink"}};
  for (const auto& [host, name] : tools) {
    copy_followed(host, dir / "usr/bin" / name);
    std::istringstream ldd{run_output("ldd " + host)};
    for (std::string word; ldd >> word;)
      if (!word.empty() && word[0] == '/' && fs::exists(word))
        copy_followed(word, dir / image_path(word));
  }
  std::ofstream{dir / "marker.txt"} << marker;
}

void tar_dir(const fs::path& dir, const fs::path& out, bool gzip) {
  run(std::string{"tar -C "} + dir.string() + (gzip ? " -czf " : " -cf ") + out.string() +
      " .");
}

std::vector<tar_entry> entries_of(const fs::path& dir) {
  std::vector<fs::path> paths;
  for (const auto& e : fs::recursive_directory_iterator{dir})
    paths.push_back(e.path());
  std::sort(paths.begin(), paths.end()); // parents before children
  std::vector<tar_entry> out;
  for (const auto& p : paths) {
    auto rel = p.lexically_relative(dir).string();
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) throw std::runtime_error("lstat " + p.string());
    if (S_ISLNK(st.st_mode)) {
      out.push_back(symlink_entry(rel, fs::read_symlink(p).string()));
    } else if (S_ISDIR(st.st_mode)) {
      out.push_back(dir_entry(rel + "/", st.st_mode & 07777));
    } else {
      std::ifstream in{p, std::ios::binary};
      std::string data{std::istreambuf_iterator<char>(in), {}};
      out.push_back(file_entry(rel, std::move(data), st.st_mode & 07777));
    }
  }
  return out;
}

void write_tar(const fs::path& out, const std::vector<tar_entry>& entries) {
  std::ofstream{out, std::ios::binary} << make_tar(entries);
}

void make_venv(const fs::path& dir, const fs::path& home_dir) {
  run("/usr/bin/python3 -m venv --without-pip " + dir.string());
  auto site = run_output("/usr/bin/python3 -c 'import sys; print(\"python%d.%d\" % "
                         "sys.version_info[:2])'");
  site.erase(site.find_last_not_of("\n") + 1);
  std::ofstream{dir / "lib" / site / "site-packages" / "marker.py"}
      << "print('marker imported')\n";
  if (home_dir.empty()) return;
  fs::create_directories(home_dir / "bin");
  fs::create_symlink("/usr/bin/python3", home_dir / "bin" / "python3");
  fs::remove(dir / "bin" / "python3");
  fs::create_symlink(home_dir / "bin" / "python3", dir / "bin" / "python3");
  std::ofstream{dir / "pyvenv.cfg"} << "home = " << (home_dir / "bin").string()
                                    << "\ninclude-system-site-packages = false\n";
}

http_reply image_test::add_image(const std::string& name, const std::string& field,
                                 const fs::path& path) {
  return call("POST", "/v1/images",
              "{\"name\":" + quote_json(name) + ",\"" + field +
                  "\":" + quote_json(path.string()) + "}");
}

image_added image_test::added(const std::string& name, const std::string& field,
                              const fs::path& path) {
  return data<image_added>(add_image(name, field, path));
}

std::vector<std::string> image_test::image_names() {
  std::vector<std::string> out;
  for (const auto& i : data<image_list>(call("GET", "/v1/images")).data)
    out.push_back(i.name);
  return out;
}

std::vector<std::string> image_test::image_dirs() const {
  std::vector<std::string> out;
  if (!fs::exists(state_dir_ / "images")) return out;
  for (const auto& e : fs::directory_iterator{state_dir_ / "images"})
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

sandbox_created image_test::create_on(const std::string& image) {
  return create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"rootfs":)" +
                quote_json(image) + "}");
}

void image_test::refuse_create(const std::string& body, unsigned status,
                               const std::string& needle) {
  auto r = call("POST", "/v1/sandboxes", body);
  if (r.status == 200)
    if (auto made = decode<sandbox_created>(envelope(r).data.text))
      created_.push_back(made->id);
  expect_refusal(r, status, needle);
}

exec_result image_test::sh(const std::string& id, const std::string& script) {
  return exec(id, "sh", {"-c", script});
}

} // namespace guestflow::testing
