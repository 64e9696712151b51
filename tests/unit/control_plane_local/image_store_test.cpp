// The image store (controlplane/local/images/image_store.hpp): records that survive a reopen,
// names, refusals that leave nothing behind, python environments, and the image codecs.
#include "controlplane/local/http/routes.hpp"
#include "controlplane/local/images/image_store.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/control_plane_local/tar_writer.hpp"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

class image_store_test : public ::testing::Test {
protected:
  void SetUp() override {
    state = s.path() / "state";
    rootfs = s.path() / "tree";
    fs::create_directories(rootfs / "usr/bin");
    std::ofstream{rootfs / "marker"} << "image";
    reopen();
  }

  void reopen() {
    store.reset();
    problems.clear();
    auto st = image_store::open(state, problems);
    ASSERT_TRUE(st) << st.error().message;
    store = std::move(*st);
  }

  /// Names of everything under state/images (leftovers included).
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator{state / "images"})
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  image_add_request rootfs_request(std::string name, fs::path from) {
    image_add_request r;
    r.name = std::move(name);
    r.rootfs = from.string();
    return r;
  }

  test_support::temp_dir s{"guestflow-images"};
  fs::path state, rootfs;
  std::vector<std::string> problems;
  std::unique_ptr<image_store> store;
};

TEST_F(image_store_test, an_added_image_is_listed_resolved_and_survives_a_reopen) {
  EXPECT_EQ(store->names(), std::vector<std::string>{"debian:12"});
  auto added = store->add(rootfs_request("tiny:1", rootfs));
  ASSERT_TRUE(added) << added.error().message;
  EXPECT_EQ(added->image.kind, "rootfs");
  EXPECT_EQ(added->image.source, rootfs.string());
  EXPECT_EQ(added->image.size_bytes, 5u);
  EXPECT_FALSE(added->image.created_at.empty());

  reopen();
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(store->names(), (std::vector<std::string>{"debian:12", "tiny:1"}));
  auto list = store->list();
  ASSERT_EQ(list.total, 2u);
  EXPECT_EQ(list.data[0].kind, "builtin");
  EXPECT_EQ(list.data[1], added->image);
  auto r = store->resolve(std::string{"tiny:1"});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->layout);
  EXPECT_EQ(r->layout->root, state / "images" / "tiny:1" / "rootfs");
  EXPECT_TRUE(fs::is_regular_file(r->layout->root / "marker"));
  auto builtin = store->resolve(std::nullopt);
  ASSERT_TRUE(builtin);
  EXPECT_EQ(builtin->name, "debian:12");
  EXPECT_FALSE(builtin->layout);

  auto detached = store->detach("tiny:1");
  ASSERT_TRUE(detached) << detached.error().message;
  EXPECT_FALSE(store->resolve(std::string{"tiny:1"}));
  store->purge(*detached);
  EXPECT_TRUE(entries().empty());
  reopen();
  EXPECT_EQ(store->names(), std::vector<std::string>{"debian:12"});
}

TEST_F(image_store_test, unknown_images_are_refused_naming_the_ones_that_exist) {
  ASSERT_TRUE(store->add(rootfs_request("tiny", rootfs)));
  auto r = store->resolve(std::string{"ubuntu:24.04"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::bad_request);
  EXPECT_NE(r.error().message.find("debian:12, tiny"), std::string::npos) << r.error().message;
  auto d = store->detach("nope");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ec::not_found);
  d = store->detach("debian:12");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ec::bad_request);
}

TEST_F(image_store_test, bad_taken_and_builtin_names_are_refused) {
  ASSERT_TRUE(store->add(rootfs_request("tiny", rootfs)));
  for (const auto& name : std::vector<std::string>{"", "Upper", "-dash", ".dot", "a/b", "a b",
                                                   std::string(65, 'a'), "debian:12", "tiny"}) {
    auto r = store->add(rootfs_request(name, rootfs));
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().code, ec::bad_request) << name;
  }
  EXPECT_EQ(entries(), std::vector<std::string>{"tiny"});
}

TEST_F(image_store_test, a_refused_import_leaves_nothing_behind) {
  auto hostile = s.path() / "hostile.tar";
  std::ofstream{hostile, std::ios::binary}
      << testing::make_tar({testing::file_entry("a/big", std::string(100000, 'x')),
                            testing::file_entry("../../escape", "x")});
  auto r = store->add(rootfs_request("hostile", hostile));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::bad_request);
  EXPECT_NE(r.error().message.find("../../escape"), std::string::npos) << r.error().message;
  EXPECT_TRUE(entries().empty()) << "a staging directory was left behind";
  EXPECT_EQ(store->names(), std::vector<std::string>{"debian:12"});
  // The name is free again.
  EXPECT_TRUE(store->add(rootfs_request("hostile", rootfs)));
}

TEST_F(image_store_test, leftovers_of_a_crash_are_removed_at_open) {
  fs::create_directories(state / "images" / ".staging-0123" / "rootfs" / "usr");
  fs::create_directories(state / "images" / ".trash-4567" / "rootfs");
  fs::create_directories(state / "images" / "norecord");
  reopen();
  EXPECT_EQ(entries(), std::vector<std::string>{"norecord"});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("norecord"), std::string::npos);
  EXPECT_EQ(store->names(), std::vector<std::string>{"debian:12"});
  auto r = store->add(rootfs_request("norecord", rootfs));
  ASSERT_FALSE(r) << "an unreadable image's directory is never replaced";
  EXPECT_EQ(r.error().code, ec::bad_request);
}

class python_env_test : public image_store_test {
protected:
  fs::path venv() {
    auto dir = s.path() / "venv";
    auto cmd = "/usr/bin/python3 -m venv --without-pip " + dir.string();
    if (std::system(cmd.c_str()) != 0) return {};
    return dir;
  }
  image_add_request env_request(std::string name, fs::path prefix) {
    image_add_request r;
    r.name = std::move(name);
    r.python_env = prefix.string();
    return r;
  }
  void expect_refused(const fs::path& prefix, const std::string& needle) {
    auto r = store->add(env_request("bad", prefix));
    ASSERT_FALSE(r) << prefix;
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
    EXPECT_TRUE(entries().empty());
  }
};

TEST_F(python_env_test, a_venv_is_bound_at_its_path_with_its_bin_first) {
  auto prefix = venv();
  ASSERT_FALSE(prefix.empty()) << "/usr/bin/python3 -m venv failed";
  auto added = store->add(env_request("py", prefix));
  ASSERT_TRUE(added) << added.error().message;
  EXPECT_EQ(added->image.kind, "python-env");
  EXPECT_GT(added->image.size_bytes, 0u);
  auto r = store->resolve(std::string{"py"});
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->layout);
  EXPECT_TRUE(r->layout->root.empty()) << "the host's /usr layout";
  auto canonical = fs::canonical(prefix).string();
  EXPECT_EQ(r->layout->ro_binds, std::vector<std::string>{canonical})
      << "a venv of /usr/bin/python3 needs nothing but itself";
  EXPECT_EQ(r->path_prepend, canonical + "/bin");
  reopen();
  ASSERT_TRUE(store->resolve(std::string{"py"}));
}

TEST_F(python_env_test, a_venv_of_an_interpreter_outside_usr_binds_that_installation) {
  // A base installation of our own: bin/python3 → the host's interpreter.
  auto base = s.path() / "base";
  fs::create_directories(base / "bin");
  fs::create_symlink("/usr/bin/python3", base / "bin" / "python3");
  auto prefix = s.path() / "venv2";
  fs::create_directories(prefix / "bin");
  fs::create_symlink(base / "bin" / "python3", prefix / "bin" / "python3");
  fs::create_symlink("python3", prefix / "bin" / "python");
  std::ofstream{prefix / "pyvenv.cfg"} << "home = " << (base / "bin").string()
                                       << "\ninclude-system-site-packages = false\n";
  auto added = store->add(env_request("py2", prefix));
  ASSERT_TRUE(added) << added.error().message;
  auto r = store->resolve(std::string{"py2"});
  ASSERT_TRUE(r && r->layout);
  EXPECT_EQ(r->layout->ro_binds, (std::vector<std::string>{fs::canonical(base).string(),
                                                           fs::canonical(prefix).string()}));
}

TEST_F(python_env_test, bad_prefixes_are_refused) {
  expect_refused(s.path() / "missing", "does not exist");
  std::ofstream{s.path() / "file"} << "x";
  expect_refused(s.path() / "file", "not a directory");
  fs::create_directories(s.path() / "empty");
  expect_refused(s.path() / "empty", "bin/python");
  fs::create_directories(s.path() / "noexec/bin");
  std::ofstream{s.path() / "noexec/bin/python"} << "x";
  ::chmod((s.path() / "noexec/bin/python").c_str(), 0644);
  expect_refused(s.path() / "noexec", "not executable");
  expect_refused("/", "root");
  fs::create_directories(s.path() / "gone/bin");
  fs::create_symlink("/usr/bin/python3", s.path() / "gone/bin/python");
  fs::create_symlink("/usr/bin/python3", s.path() / "gone/bin/python3");
  std::ofstream{s.path() / "gone/pyvenv.cfg"} << "home = /nonexistent/bin\n";
  expect_refused(s.path() / "gone", "home");
}

TEST_F(image_store_test, a_preload_is_stored_canonical_and_resolved_with_the_image) {
  auto req = rootfs_request("pd", rootfs);
  req.preload = {"numpy", "pandas", "guestflow:runner", "numpy", "xml.etree.ElementTree"};
  auto added = store->add(req);
  ASSERT_TRUE(added) << added.error().message;
  const std::vector<std::string> canonical{"guestflow:runner", "numpy", "pandas",
                                           "xml.etree.ElementTree"};
  EXPECT_EQ(added->image.preload, canonical);
  reopen();
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(store->list().data[1].preload, canonical);
  auto r = store->resolve(std::string{"pd"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->preload, canonical);
  auto none = store->add(rootfs_request("plain", rootfs));
  ASSERT_TRUE(none);
  EXPECT_TRUE(store->resolve(std::string{"plain"})->preload.empty());
}

TEST_F(image_store_test, a_bad_preload_module_is_refused_and_leaves_nothing) {
  for (std::vector<std::string> bad : {std::vector<std::string>{"pandas", "os; import x"},
                                       {"-m"},
                                       {"a..b"},
                                       {"1abc"},
                                       {"pandas."},
                                       {""},
                                       {"über"},
                                       {std::string(201, 'a')},
                                       std::vector<std::string>(65, "x")}) {
    auto req = rootfs_request("bad", rootfs);
    req.preload = bad;
    auto r = store->add(req);
    ASSERT_FALSE(r) << bad.front();
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find("preload"), std::string::npos) << r.error().message;
    EXPECT_TRUE(entries().empty()) << r.error().message;
  }
  auto wire = decode<image_add_request>(R"({"name":"x","rootfs":"/a","preload":["a b"]})");
  ASSERT_FALSE(wire);
  EXPECT_EQ(wire.error().code, ec::bad_request);
  EXPECT_NE(wire.error().message.find("not a Python module name"), std::string::npos)
      << wire.error().message;
}

TEST_F(image_store_test, the_builtin_image_takes_the_host_wide_preload) {
  store.reset();
  auto st = image_store::open(state, problems, {"sympy", " bad name", "pandas", "sympy"});
  ASSERT_TRUE(st);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("GUESTFLOW_PRELOAD"), std::string::npos) << problems[0];
  const std::vector<std::string> want{"pandas", "sympy"};
  EXPECT_EQ((*st)->resolve(std::nullopt)->preload, want);
  EXPECT_EQ((*st)->list().data[0].preload, want);
  ::setenv("GUESTFLOW_PRELOAD", " pandas , numpy,, ", 1);
  EXPECT_EQ(image_store::builtin_preload_from_env(),
            (std::vector<std::string>{"pandas", "numpy"}));
  ::unsetenv("GUESTFLOW_PRELOAD");
  EXPECT_TRUE(image_store::builtin_preload_from_env().empty());
}

TEST(image_codecs, add_requests_take_one_absolute_source_and_a_valid_name) {
  auto ok = decode<image_add_request>(R"({"name":"py:3.11","python_env":"/opt/venv"})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->python_env, std::optional<std::string>{"/opt/venv"});
  EXPECT_EQ(decode<image_add_request>(encode(*ok)).value(), *ok);
  auto pre = decode<image_add_request>(
      R"({"name":"p","python_env":"/opt/venv","preload":["sympy","pandas"]})");
  ASSERT_TRUE(pre) << pre.error().message;
  EXPECT_EQ(pre->preload, (std::vector<std::string>{"pandas", "sympy"}));
  EXPECT_EQ(decode<image_add_request>(encode(*pre)).value(), *pre);
  for (auto bad : {R"({"name":"x"})", R"({"name":"x","rootfs":"/a","python_env":"/b"})",
                   R"({"name":"x","rootfs":"relative.tar"})", R"({"name":"X","rootfs":"/a"})",
                   R"({"rootfs":"/a"})", R"({"name":"x","rootfs":""})"}) {
    auto r = decode<image_add_request>(bad);
    EXPECT_FALSE(r) << bad;
  }
}

TEST(image_codecs, lists_added_and_manifests_round_trip) {
  image_list l;
  l.data.push_back({"debian:12", "builtin", "the host's /usr", 0, ""});
  l.data.push_back({"tiny", "rootfs", "/x.tar", 42, "2026-12-01T00:00:00.000Z"});
  l.total = 2;
  EXPECT_EQ(decode<image_list>(encode(l)).value(), l);
  image_added a{l.data[1], {"dev/null (device node)"}, 7};
  EXPECT_EQ(decode<image_added>(encode(a)).value(), a);
  image_manifest m;
  m.info = {"py", "python-env", "/v", 1, "2026-12-01T00:00:00.000Z"};
  m.ro_binds = {"/opt/py", "/v"};
  m.path_prepend = "/v/bin";
  EXPECT_EQ(decode<image_manifest>(encode(m)).value(), m);
  m.info.preload = {"guestflow:runner", "pandas"};
  auto with_preload = decode<image_manifest>(encode(m));
  ASSERT_TRUE(with_preload) << with_preload.error().message << encode(m);
  EXPECT_EQ(*with_preload, m);
  l.data[1].preload = {"numpy"};
  auto listed = decode<image_list>(encode(l));
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(*listed, l);
  m.info.kind = "docker";
  EXPECT_FALSE(decode<image_manifest>(encode(m)));
  capabilities c;
  c.images = {"debian:12", "tiny"};
  EXPECT_EQ(decode<capabilities>(encode(c)).value().images, c.images);
}

TEST(image_routes, images_have_their_endpoints) {
  EXPECT_EQ(match_route("GET", "/v1/images").ep, endpoint::list_images);
  EXPECT_EQ(match_route("POST", "/v1/images").ep, endpoint::add_image);
  auto r = match_route("DELETE", "/v1/images/py:3.11");
  ASSERT_EQ(r.kind, route::outcome::found);
  EXPECT_EQ(r.ep, endpoint::delete_image);
  EXPECT_EQ(r.id, "py:3.11");
  EXPECT_EQ(match_route("PUT", "/v1/images").kind, route::outcome::method_not_allowed);
}

} // namespace
} // namespace guestflow::local
