// tests/support: the temporary directory and the deadline poll every test binary shares.

#include "tests/support/eventually.hpp"
#include "tests/support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>

using namespace guestflow::test_support;
using namespace std::chrono_literals;

TEST(support, temp_dir_is_fresh_private_and_removed_with_its_contents) {
  std::filesystem::path kept;
  {
    temp_dir a{"gf-support"}, b{"gf-support"};
    EXPECT_NE(a.path(), b.path());
    EXPECT_EQ(a.path().parent_path(), "/tmp");
    EXPECT_EQ(a.path().filename().string().rfind("gf-support.", 0), 0u) << a.path();
    ASSERT_TRUE(std::filesystem::is_directory(a.path()));
    EXPECT_TRUE(std::filesystem::is_empty(a.path()));
    struct stat st {};
    ASSERT_EQ(::stat(a.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::filesystem::create_directories(a.path() / "x" / "y");
    std::ofstream{a.path() / "x" / "y" / "f"} << "data";
    kept = a.path();
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(support, temp_dir_says_why_it_cannot_be_made) {
  try {
    temp_dir bad{"no/such/parent"};
    FAIL() << "made " << bad.path();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string{e.what()}.find("No such file or directory"), std::string::npos)
        << e.what();
  }
}

TEST(support, eventually_waits_for_a_condition_and_gives_up_at_the_deadline) {
  int polls = 0;
  EXPECT_TRUE(eventually([&] { return ++polls == 3; }, 10s, 1ms));
  EXPECT_EQ(polls, 3);
  auto start = std::chrono::steady_clock::now();
  polls = 0;
  EXPECT_FALSE(eventually([&] { return ++polls < 0; }, 50ms, 5ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  EXPECT_GE(polls, 2);
}

TEST(support, eventually_counts_a_condition_true_at_the_deadline) {
  int polls = 0;
  // False on every poll inside the deadline, true on the last look.
  auto end = std::chrono::steady_clock::now() + 30ms;
  EXPECT_TRUE(eventually(
      [&] {
        ++polls;
        return std::chrono::steady_clock::now() >= end;
      },
      30ms, 5ms));
}
