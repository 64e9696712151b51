// Guest images on the real control plane with real guests: a rootfs (directory, tar, gzip
// tar) is the guest's read-only /, hostile archives are sanitised or refused as documented
// (controlplane/local/images/image_import.hpp), a Python environment's python3 is the guest's,
// and images are listed, refused while in use, and kept across restarts.
#include "tests/integration/control_plane/image_fixture.hpp"

#include <fstream>

namespace guestflow::testing {
namespace {

namespace fs = std::filesystem;

bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

TEST_F(image_test, a_directory_rootfs_is_the_guests_read_only_root) {
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "from the image");
  auto a = added("tiny", "rootfs", tree);
  EXPECT_EQ(a.image.kind, "rootfs");
  EXPECT_GT(a.image.size_bytes, 100000u);
  auto g = create_on("tiny");
  EXPECT_EQ(g.rootfs, "tiny");

  auto r = exec(g.id, "cat", {"/marker.txt"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "from the image");
  // The image's own tree, not the host's /usr: no python3, no coreutils beyond ours.
  r = sh(g.id, "ls /usr/bin; test -e /usr/bin/python3 && echo HOST_USR; id -u");
  EXPECT_EQ(r.stdout_text, "cat\nid\nls\nreadlink\nsh\nstat\ntouch\n60000\n") << r.stderr_text;
  // Read-only everywhere but /workspace and the private /tmp.
  r = sh(g.id, "touch /x || echo root-ro; touch /usr/bin/x || echo usr-ro; "
               "touch /marker.txt || echo marker-ro; touch /etc/passwd || echo etc-ro; "
               "touch /workspace/w && echo ws-rw; touch /tmp/t && echo tmp-rw");
  EXPECT_EQ(r.stdout_text, "root-ro\nusr-ro\nmarker-ro\netc-ro\nws-rw\ntmp-rw\n")
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("Read-only file system"), std::string::npos) << r.stderr_text;
  // The files API sees the same root.
  EXPECT_EQ(get_file(g.id, "/marker.txt").body, "from the image");
  expect_refusal(put_file(g.id, "/usr/bin/evil", "x"), 400, "read-only");
  EXPECT_EQ(put_file(g.id, "/workspace/in.txt", "ok").status, 200u);
  EXPECT_EQ(exec(g.id, "cat", {"/workspace/in.txt"}).stdout_text, "ok");
  EXPECT_FALSE(fs::exists(state_dir_ / "images" / "tiny" / "rootfs" / "x"));
}

TEST_F(image_test, plain_and_gzip_tars_become_images) {
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "tarred");
  tar_dir(tree, dir_.path() / "tiny.tar", false);
  tar_dir(tree, dir_.path() / "tiny.tar.gz", true);
  added("plain", "rootfs", dir_.path() / "tiny.tar");
  added("gz", "rootfs", dir_.path() / "tiny.tar.gz");
  for (const auto* image : {"plain", "gz"}) {
    auto g = create_on(image);
    auto r = sh(g.id, "cat /marker.txt; readlink /bin");
    EXPECT_EQ(r.exit_code, 0) << image << ": " << r.stderr_text;
    EXPECT_EQ(r.stdout_text, "tarredusr/bin\n") << image;
  }
}

TEST_F(image_test, hostile_members_are_sanitised_or_dropped_and_the_guest_stays_inside) {
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "m");
  auto host_secret = dir_.path() / "host-secret";
  std::ofstream{host_secret} << "HOST SECRET";
  auto entries = entries_of(tree);
  entries.push_back(file_entry("/abs-marker", "absolute, inside")); // sanitised
  entries.push_back({"dev/evil", '4', {}, {}, 0666});               // dropped
  entries.push_back({"fifo", '6', {}, {}, 0644});                   // dropped
  entries.push_back(file_entry("usr/bin/suid", "x", 04755));        // setuid stripped
  entries.push_back(file_entry("root-only", "readable", 0600));     // made readable
  entries.push_back(hardlink_entry("usr/bin/cat2", "usr/bin/cat")); // kept
  // Symlinks that would leave the root on the host stay inside it in the guest.
  entries.push_back(symlink_entry("escape-abs", host_secret.string()));
  entries.push_back(symlink_entry("escape-rel", "../../../../../../.." + host_secret.string()));
  write_tar(dir_.path() / "hostile.tar", entries);

  auto a = added("hostile", "rootfs", dir_.path() / "hostile.tar");
  EXPECT_EQ(a.dropped_total, 2u);
  EXPECT_TRUE(contains(a.dropped, "dev/evil (device node)"));
  EXPECT_TRUE(contains(a.dropped, "fifo (FIFO)"));
  auto g = create_on("hostile");
  auto r = sh(g.id, "cat /abs-marker; echo; stat -c %a /usr/bin/suid; cat /root-only; echo; "
                    "cat2 /marker.txt; echo; test -e /fifo || echo no-fifo");
  EXPECT_EQ(r.stdout_text, "absolute, inside\n755\nreadable\nm\nno-fifo\n") << r.stderr_text;
  r = sh(g.id, "cat /escape-abs; cat /escape-rel; readlink /escape-abs");
  EXPECT_EQ(r.stdout_text.find("HOST SECRET"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text, host_secret.string() + "\n") << "kept verbatim, resolved inside";
  EXPECT_NE(r.stderr_text.find("No such file"), std::string::npos) << r.stderr_text;
  // Nothing was created on the host by the absolute member.
  EXPECT_FALSE(fs::exists("/abs-marker"));
}

TEST_F(image_test, refused_archives_leave_nothing_behind) {
  auto outside = dir_.path() / "outside";
  fs::create_directories(outside);
  struct refusal {
    std::string name;
    std::vector<tar_entry> entries;
    std::string needle;
  };
  std::vector<refusal> cases{
      {"dotdot", {file_entry("ok", "1"), file_entry("a/../../escape", "x")}, ".."},
      {"through-link",
       {symlink_entry("lnk", outside.string()), file_entry("lnk/pwned", "x")},
       "symlink"},
      {"host-hardlink", {hardlink_entry("shadow", "/etc/shadow")}, "hard link"},
      {"sparse", {{"holes", 'S', {}, {}, 0644}}, "sparse"},
  };
  for (const auto& c : cases) {
    auto file = dir_.path() / (c.name + ".tar");
    write_tar(file, c.entries);
    expect_refusal(add_image(c.name, "rootfs", file), 400, c.needle);
    EXPECT_FALSE(contains(image_names(), c.name)) << c.name;
  }
  EXPECT_FALSE(fs::exists(dir_.path() / "escape"));
  EXPECT_FALSE(fs::exists(outside / "pwned"));
  EXPECT_TRUE(image_dirs().empty()) << "a half-imported image was left in the state dir";
  // Not an archive, not there, or a directory holding the state dir.
  std::ofstream{dir_.path() / "junk.tar"} << std::string(4096, 'j');
  expect_refusal(add_image("junk", "rootfs", dir_.path() / "junk.tar"), 400, "tar");
  expect_refusal(add_image("gone", "rootfs", dir_.path() / "gone.tar"), 400, "does not exist");
  expect_refusal(add_image("self", "rootfs", dir_.path()), 400, "state dir");
  EXPECT_TRUE(image_dirs().empty());
}

TEST_F(image_test, names_are_checked_and_taken_names_and_debian_12_refused) {
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "n");
  added("tiny", "rootfs", tree);
  expect_refusal(add_image("tiny", "rootfs", tree), 400, "taken");
  expect_refusal(add_image("debian:12", "rootfs", tree), 400, "built-in");
  expect_refusal(add_image("Bad/Name", "rootfs", tree), 400, "[a-z0-9]");
  expect_refusal(call("POST", "/v1/images", R"({"name":"x","rootfs":"rel/path"})"), 400,
                 "absolute");
  expect_refusal(call("POST", "/v1/images", R"({"name":"x"})"), 400, "exactly one");
  EXPECT_EQ(image_names(), (std::vector<std::string>{"debian:12", "tiny"}));
}

TEST_F(image_test, a_python_env_is_the_guests_python3) {
  auto venv = dir_.path() / "venv";
  make_venv(venv);
  auto a = added("py", "python_env", venv);
  EXPECT_EQ(a.image.kind, "python-env");
  auto g = create_on("py");
  auto r = exec(g.id, "timeout",
                {"--kill-after=5", "20", "python3", "-c",
                 "import marker; import sys; print(sys.prefix)"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "marker imported\n" + fs::canonical(venv).string() + "\n");
  // The host's /usr is still there; the environment is read-only.
  r = sh(g.id, "command -v python3; test -x /usr/bin/python3 && echo host-usr; touch " +
                   venv.string() + "/x || echo venv-ro");
  EXPECT_EQ(r.stdout_text, fs::canonical(venv).string() + "/bin/python3\nhost-usr\nvenv-ro\n")
      << r.stderr_text;
  EXPECT_FALSE(fs::exists(venv / "x"));
  // An explicit PATH from the caller wins.
  auto plain = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"rootfs":"py",)"
                      R"("envs":{"PATH":"/usr/bin:/bin"}})");
  EXPECT_EQ(sh(plain.id, "command -v python3").stdout_text, "/usr/bin/python3\n");
}

TEST_F(image_test, a_venv_whose_interpreter_lives_outside_usr_gets_it_bound_too) {
  auto venv = dir_.path() / "venv";
  auto base = dir_.path() / "base";
  make_venv(venv, base);
  added("pyhome", "python_env", venv);
  auto g = create_on("pyhome");
  auto r = exec(g.id, "python3", {"-c", "import marker, sys; print(sys.executable)"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text,
            "marker imported\n" + fs::canonical(venv).string() + "/bin/python3\n");
  // bin/python3 → base/bin/python3 → /usr/bin/python3 resolves only with base bound.
  r = sh(g.id, "readlink " + (base / "bin" / "python3").string());
  EXPECT_EQ(r.stdout_text, "/usr/bin/python3\n") << r.stderr_text;
}

TEST_F(image_test, a_python_env_swapped_for_a_symlink_later_is_not_followed) {
  auto venv = dir_.path() / "venv";
  make_venv(venv);
  added("py", "python_env", venv);
  // Someone who can write the venv's parent replaces it with a link to another directory.
  auto elsewhere = dir_.path() / "elsewhere";
  fs::create_directories(elsewhere / "bin");
  fs::rename(venv, dir_.path() / "venv.real");
  fs::create_directory_symlink(elsewhere, venv);
  refuse_create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"rootfs":"py"})", 503,
                "symlink");
  EXPECT_EQ(workspace_count(), 0u) << "the refused guest left its workspace";
  // Put back, it works again.
  fs::remove(venv);
  fs::rename(dir_.path() / "venv.real", venv);
  auto g = create_on("py");
  EXPECT_EQ(exec(g.id, "python3", {"-c", "import marker"}).stdout_text, "marker imported\n");
}

TEST_F(image_test, bad_python_envs_are_refused) {
  expect_refusal(add_image("p1", "python_env", dir_.path() / "missing"), 400, "does not exist");
  std::ofstream{dir_.path() / "file"} << "x";
  expect_refusal(add_image("p2", "python_env", dir_.path() / "file"), 400, "not a directory");
  fs::create_directories(dir_.path() / "nopython/bin");
  expect_refusal(add_image("p3", "python_env", dir_.path() / "nopython"), 400, "bin/python");
  EXPECT_EQ(image_names(), std::vector<std::string>{"debian:12"});
  EXPECT_TRUE(image_dirs().empty());
}

TEST_F(image_test, an_unknown_image_is_refused_naming_those_that_exist) {
  auto venv = dir_.path() / "venv";
  make_venv(venv);
  added("py", "python_env", venv);
  refuse_create(R"({"shape":"s-1vcpu-256mb","rootfs":"ubuntu:24.04"})", 400,
                "unknown image 'ubuntu:24.04'; this control plane has debian:12, py");
  EXPECT_EQ(sandbox_total(), 0u);
}

TEST_F(image_test, capabilities_list_the_images) {
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  EXPECT_EQ(caps.images, std::vector<std::string>{"debian:12"});
  auto venv = dir_.path() / "venv";
  make_venv(venv);
  added("py", "python_env", venv);
  caps = data<capabilities>(call("GET", "/v1/capabilities"));
  EXPECT_EQ(caps.images, (std::vector<std::string>{"debian:12", "py"}));
  EXPECT_EQ(caps.isolation, "namespaces") << "the other fields are unchanged";
}

TEST_F(image_test, rm_is_refused_while_a_guest_uses_the_image_and_allowed_after) {
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "in use");
  added("tiny", "rootfs", tree);
  auto g = create_on("tiny");
  auto r = call("DELETE", "/v1/images/tiny");
  expect_refusal(r, 409, "image in use");
  expect_refusal(r, 409, g.id);
  EXPECT_EQ(sh(g.id, "cat /marker.txt").stdout_text, "in use");
  // Paused is still in use.
  ASSERT_EQ(data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/pause")).status,
            sandbox_status::paused);
  expect_refusal(call("DELETE", "/v1/images/tiny"), 409, g.id);
  ASSERT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
  EXPECT_EQ(data<image_removed>(call("DELETE", "/v1/images/tiny")).name, "tiny");
  EXPECT_TRUE(image_dirs().empty());
  EXPECT_EQ(image_names(), std::vector<std::string>{"debian:12"});
  expect_refusal(call("DELETE", "/v1/images/tiny"), 404, "no image");
  expect_refusal(call("DELETE", "/v1/images/debian:12"), 400, "built in");
  refuse_create(R"({"shape":"s-1vcpu-256mb","rootfs":"tiny"})", 400, "unknown image");
}

TEST_F(image_test, images_and_their_guests_survive_a_restart) {
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "kept");
  auto venv = dir_.path() / "venv";
  make_venv(venv);
  added("tiny", "rootfs", tree);
  added("py", "python_env", venv);
  auto on_py = create_on("py");
  EXPECT_EQ(stop(), 0);
  start();
  EXPECT_EQ(image_names(), (std::vector<std::string>{"debian:12", "py", "tiny"}));
  // The adopted guest still gets the environment's bin first on its PATH.
  EXPECT_EQ(sh(on_py.id, "command -v python3").stdout_text,
            fs::canonical(venv).string() + "/bin/python3\n");
  auto g = create_on("tiny");
  EXPECT_EQ(exec(g.id, "cat", {"/marker.txt"}).stdout_text, "kept");
  expect_refusal(call("DELETE", "/v1/images/py"), 409, on_py.id);
}

} // namespace
} // namespace guestflow::testing
