// The plain tar reader of returned files: crafted archives (built byte by byte here), a
// real GNU tar archive when the host has tar, and garbage.

#include "actors/artifact_archive.hpp"
#include "tar_builder.hpp"
#include "tests/support/slurp.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::test;

namespace {

returned_files ok(const std::string& archive) {
  auto r = artifacts::unpack(archive);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : returned_files{};
}

const returned_file* find(const returned_files& f, const std::string& path) {
  for (auto& x : f.files)
    if (x.path == path) return &x;
  return nullptr;
}

std::string bytes_of(size_t n, unsigned seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return out;
}

using test_support::slurp;

} // namespace

TEST(archive, regular_files_come_back_byte_exact) {
  auto a = tar_entry({"./", '5'}) + tar_entry({"./a.txt", '0', "hello\n"}) +
           tar_entry({"./dir/", '5'}) + tar_entry({"./dir/b.bin", '0', bytes_of(1500, 7)}) +
           tar_entry({"./empty", '0', ""}) + end_of_archive();
  auto f = ok(a);
  ASSERT_EQ(f.files.size(), 3u);
  EXPECT_EQ(f.files[0], (returned_file{"a.txt", 6, "hello\n"}));
  EXPECT_EQ(f.files[1].path, "dir/b.bin");
  EXPECT_EQ(f.files[1].bytes, bytes_of(1500, 7));
  EXPECT_EQ(f.files[1].size, 1500u);
  EXPECT_EQ(f.files[2], (returned_file{"empty", 0, ""}));
  EXPECT_TRUE(f.dropped.empty());
  EXPECT_FALSE(f.error);
}

TEST(archive, names_keep_spaces_newlines_and_utf8) {
  // In the ustar name field itself and through pax `path` records.
  auto a = tar_entry({"trailing ", '0', "1"}) + tar_entry({" leading", '0', "2"}) +
           tar_entry({"new\nline", '0', "3"}) +
           pax_entry({{"path", "p\xc3\xa4x/\xe2\x9c\x93 tick\n"}}) +
           tar_entry({"ignored", '0', "4"}) + tar_entry({"tab\there\r", '0', "5"}) +
           end_of_archive();
  auto f = ok(a);
  ASSERT_EQ(f.files.size(), 5u);
  EXPECT_EQ(f.files[0].path, "trailing ");
  EXPECT_EQ(f.files[1].path, " leading");
  EXPECT_EQ(f.files[2].path, "new\nline");
  EXPECT_EQ(f.files[3].path, "p\xc3\xa4x/\xe2\x9c\x93 tick\n");
  EXPECT_EQ(f.files[3].bytes, "4");
  EXPECT_EQ(f.files[4].path, "tab\there\r");
}

TEST(archive, long_names_via_pax_prefix_and_gnu) {
  std::string deep;
  for (int i = 0; i < 30; ++i)
    deep += "segment" + std::to_string(i) + "/";
  deep += "file with a long name.txt";
  ASSERT_GT(deep.size(), 255u);
  tar_member ustar_split{"name-part.txt", '0', "u"};
  ustar_split.prefix = "prefix/part";
  tar_member gnu_long{"././@LongLink", 'L', "gnu/" + std::string(150, 'g') + ".txt"};
  gnu_long.gnu_magic = true;
  tar_member gnu_file{"truncated", '0', "g"};
  gnu_file.gnu_magic = true;
  gnu_file.prefix = "not-a-prefix-in-gnu-format";
  auto a = pax_entry({{"path", deep}, {"mtime", "1700000000.5"}, {"atime", "1"}}) +
           tar_entry({"short", '0', "p"}) + tar_entry(ustar_split) + tar_entry(gnu_long) +
           tar_entry(gnu_file) + end_of_archive();
  auto f = ok(a);
  ASSERT_EQ(f.files.size(), 3u);
  EXPECT_EQ(f.files[0].path, deep);
  EXPECT_EQ(f.files[1].path, "prefix/part/name-part.txt");
  EXPECT_EQ(f.files[2].path, "gnu/" + std::string(150, 'g') + ".txt");
}

TEST(archive, escaping_members_links_and_devices_are_dropped_and_reported) {
  auto a = tar_entry({"../../etc/x", '0', "evil"}) + tar_entry({"/etc/passwd", '0', "evil"}) +
           tar_entry({"./a/../../b", '0', "evil"}) + tar_entry({"a/..b", '0', "fine"}) +
           tar_entry({"link", '2', "", "/etc/shadow"}) + tar_entry({"hard", '1', "", "a/..b"}) +
           tar_entry({"fifo", '6'}) + tar_entry({"tty", '3'}) + tar_entry({"disk", '4'}) +
           pax_entry({{"path", "../pax-escape"}}) + tar_entry({"x", '0', "evil"}) +
           tar_entry({"weird", 'Z', "data"}) + end_of_archive();
  auto f = ok(a);
  ASSERT_EQ(f.files.size(), 1u);
  EXPECT_EQ(f.files[0].path, "a/..b");
  ASSERT_EQ(f.dropped.size(), 10u);
  EXPECT_EQ(f.dropped[0].path, "../../etc/x");
  EXPECT_NE(f.dropped[0].reason.find("escapes"), std::string::npos);
  EXPECT_EQ(f.dropped[1].path, "/etc/passwd");
  EXPECT_NE(f.dropped[1].reason.find("absolute"), std::string::npos);
  EXPECT_EQ(f.dropped[2].path, "./a/../../b");
  EXPECT_EQ(f.dropped[3], (dropped_member{"link", "symbolic link"}));
  EXPECT_EQ(f.dropped[4], (dropped_member{"hard", "hard link"}));
  EXPECT_EQ(f.dropped[5], (dropped_member{"fifo", "fifo"}));
  EXPECT_EQ(f.dropped[6], (dropped_member{"tty", "character device"}));
  EXPECT_EQ(f.dropped[7], (dropped_member{"disk", "block device"}));
  EXPECT_EQ(f.dropped[8].path, "../pax-escape");
  EXPECT_EQ(f.dropped[9].path, "weird");
  EXPECT_NE(f.dropped[9].reason.find("unsupported"), std::string::npos);
}

TEST(archive, a_later_member_replaces_an_earlier_one_and_pax_size_wins) {
  tar_member big{"big", '0', std::string(700, 'b')};
  big.size_field = octal(0, 12); // the header says 0; the pax record says 700
  auto a = tar_entry({"same", '0', "old"}) + tar_entry({"same", '0', "new"}) +
           pax_entry({{"size", "700"}}) + tar_entry(big) + end_of_archive();
  auto f = ok(a);
  ASSERT_EQ(f.files.size(), 2u);
  EXPECT_EQ(f.files[0].bytes, "new");
  EXPECT_EQ(f.files[1].bytes, std::string(700, 'b'));
}

TEST(archive, truncation_is_an_error) {
  auto whole = tar_entry({"a", '0', std::string(1000, 'a')}) + end_of_archive();
  ASSERT_TRUE(artifacts::unpack(whole));
  for (size_t cut : {size_t{0} + 100, size_t{512}, size_t{700}, size_t{1024}, size_t{1536}}) {
    auto r = artifacts::unpack(std::string_view{whole}.substr(0, cut));
    ASSERT_FALSE(r) << cut;
    EXPECT_EQ(r.error().code, ec::guest_failed);
    EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(artifacts::unpack(""));
}

TEST(archive, garbage_numeric_fields_and_checksums_are_errors) {
  tar_member m{"a", '0', "x"};
  m.size_field = "12x";
  auto r = artifacts::unpack(tar_entry(m) + end_of_archive());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("size"), std::string::npos) << r.error().message;
  m.size_field = "           ";
  EXPECT_FALSE(artifacts::unpack(tar_entry(m) + end_of_archive()));
  m.size_field = std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 12);
  EXPECT_FALSE(artifacts::unpack(tar_entry(m) + end_of_archive()));
  auto bad_sum = tar_entry({"a", '0', "x"}) + end_of_archive();
  bad_sum[0] = 'b';
  r = artifacts::unpack(bad_sum);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("checksum"), std::string::npos);
  // A member claiming far more data than there is.
  tar_member huge{"h", '0', "x"};
  huge.size_field = octal(uint64_t{1} << 40, 12);
  EXPECT_FALSE(artifacts::unpack(tar_entry(huge) + end_of_archive()));
  // Base-256 sizes are read (GNU tar uses them past 8 GiB).
  tar_member b256{"b", '0', "xyz"};
  b256.size_field = std::string("\x80\0\0\0\0\0\0\0\0\0\0\x03", 12);
  auto f = artifacts::unpack(tar_entry(b256) + end_of_archive());
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->files.at(0).bytes, "xyz");
}

TEST(archive, malformed_pax_records_are_errors) {
  auto member = tar_entry({"a", '0', "x"}) + end_of_archive();
  for (std::string data :
       {std::string("99 path=a\n"), std::string("5 pa\n"), std::string("x path=a\n"),
        std::string("10 path=a "), std::string("10 =nokey\n")}) {
    tar_member pax{"pax", 'x', data};
    auto r = artifacts::unpack(tar_entry(pax) + member);
    EXPECT_FALSE(r) << data;
  }
  // An extended header with nothing after it.
  EXPECT_FALSE(artifacts::unpack(pax_entry({{"path", "a"}}) + end_of_archive()));
}

TEST(archive, random_bytes_and_mutations_never_crash) {
  std::mt19937_64 rng{12345};
  for (int i = 0; i < 3000; ++i) {
    std::string junk(rng() % 4096, '\0');
    for (auto& c : junk)
      c = static_cast<char>(rng());
    (void)artifacts::unpack(junk);
  }
  auto valid = pax_entry({{"path", "p\n x"}, {"size", "600"}}) +
               tar_entry({"f", '0', std::string(600, 'q')}) +
               tar_entry({"L", 'L', "longname"}) + tar_entry({"g", '0', "gg"}) +
               pax_entry({{"comment", "hi"}}, 'g') + tar_entry({"l", '2', "", "t"}) +
               end_of_archive();
  ASSERT_TRUE(artifacts::unpack(valid));
  size_t accepted = 0;      // decoded: the mutation left a readable archive
  size_t past_checksum = 0; // refused by a decoder after the header checksum held
  for (int i = 0; i < 20000; ++i) {
    auto m = valid;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 8); k < n; ++k)
      m[rng() % m.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) m.resize(rng() % m.size());
    auto r = artifacts::unpack(m);
    if (r) {
      ++accepted;
      for (auto& f : r->files)
        EXPECT_EQ(f.size, f.bytes.size());
    } else if (r.error().message.find("checksum") == std::string::npos) {
      ++past_checksum;
    }
  }
  // The guard: mutations must keep reaching the decoders behind the checksum (sizes, pax
  // records, long names, the end marker) and, often enough, decode; a corpus whose
  // mutations all died at the first header's checksum would test nothing else.
  EXPECT_GT(accepted, 1000u) << "mutations no longer produce archives that decode";
  EXPECT_GT(past_checksum, 1000u) << "mutations no longer reach past the header checksum";
}

TEST(archive, reads_what_gnu_tar_writes) {
  if (::access("/usr/bin/tar", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/tar on this host";
  test_support::temp_dir d{"gf-archive-test"};
  auto src = d.path() / "artifacts";
  std::filesystem::create_directories(src / "n\xc3\xa9sted" / "deeper");
  std::map<std::string, std::string> want{
      {"plain.txt", "plain\n"},
      {"with space ", bytes_of(3000, 1)},
      {"new\nline.bin", bytes_of(10, 2)},
      {"n\xc3\xa9sted/deeper/" + std::string(180, 'z') + ".dat", bytes_of(70000, 3)},
  };
  for (auto& [path, bytes] : want)
    std::ofstream{src / path, std::ios::binary} << bytes;
  std::filesystem::create_symlink("/etc/passwd", src / "link");
  auto archive = d.path() / "out.tar";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/usr/bin/tar", "tar", "-C", src.c_str(), "-cf", archive.c_str(), "--format=pax",
            ".", nullptr);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto f = ok(slurp(archive));
  ASSERT_EQ(f.files.size(), want.size());
  for (auto& [path, bytes] : want) {
    auto* got = find(f, path);
    ASSERT_NE(got, nullptr) << path;
    EXPECT_EQ(got->bytes, bytes) << path;
  }
  ASSERT_EQ(f.dropped.size(), 1u);
  EXPECT_EQ(f.dropped[0], (dropped_member{"./link", "symbolic link"}));
}

TEST(write_under, writes_nested_files_and_never_leaves_the_directory) {
  test_support::temp_dir d{"gf-archive-test"};
  auto out = (d.path() / "out" / "deeper").string();
  std::vector<returned_file> files{
      {"a.txt", 1, "a"}, {"sub dir/new\nline ", 3, "xyz"}, {"u\xcc\x88/f", 0, ""}};
  auto n = artifacts::write_under(out, files);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(slurp(d.path() / "out/deeper/a.txt"), "a");
  EXPECT_EQ(slurp(d.path() / "out/deeper/sub dir/new\nline "), "xyz");
  EXPECT_TRUE(std::filesystem::exists(d.path() / "out/deeper/u\xcc\x88/f"));

  for (auto bad : {"../escape", "/abs", "a/../../x", ""}) {
    auto r = artifacts::write_under(out, {{bad, 1, "!"}});
    EXPECT_FALSE(r) << bad;
  }
  EXPECT_FALSE(std::filesystem::exists(d.path() / "out/escape"));
  // A symbolic link planted inside the directory does not redirect a write.
  std::filesystem::create_directories(d.path() / "outside");
  std::filesystem::create_directory_symlink(d.path() / "outside", d.path() / "out/deeper/link");
  auto r = artifacts::write_under(out, {{"link/x", 1, "!"}});
  ASSERT_FALSE(r);
  EXPECT_FALSE(std::filesystem::exists(d.path() / "outside/x"));
  std::filesystem::create_symlink(d.path() / "outside/target", d.path() / "out/deeper/leaf");
  EXPECT_FALSE(artifacts::write_under(out, {{"leaf", 1, "!"}}));
  EXPECT_FALSE(std::filesystem::exists(d.path() / "outside/target"));
}
