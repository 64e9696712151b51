// exec_pump: a command whose output the pump cannot read (the control plane is out of file
// descriptors) is an error, never a clean exit with its output silently lost.
#include "controlplane/local/http/exec_pump.hpp"
#include "tests/support/fds_exhausted.hpp"

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <optional>
#include <unistd.h>
#include <vector>

namespace guestflow::local {
namespace {

using test_support::fds_exhausted;

/// A command that already printed `text` on stdout (a pipe, closed for writing) and exited 0.
class printed_command final : public running_exec {
public:
  printed_command(const std::string& text, std::atomic<int>* kills, bool hands_over = false)
      : kills_(kills)
      , hands_over_(hands_over) {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    EXPECT_EQ(::write(p[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(p[1]);
    out_.reset(p[0]);
  }
  int stdout_fd() const override { return out_.get(); }
  int stderr_fd() const override { return -1; }
  int exit_fd() const override { return -1; }
  unique_fd take_stdout() override { return hands_over_ ? std::move(out_) : unique_fd{}; }
  void kill() override { ++*kills_; }
  exec_outcome finish() override {
    out_.reset();
    return {};
  }

private:
  unique_fd out_;
  std::atomic<int>* kills_;
  bool hands_over_;
};

struct pump_run {
  boost::asio::io_context io;
  boost::asio::thread_pool workers{1};
  std::atomic<int> kills{0};
  std::optional<exec_result> result;

  std::shared_ptr<exec_pump> make(const std::string& printed, bool hands_over = false) {
    return std::make_shared<exec_pump>(
        io.get_executor(), workers,
        std::make_unique<printed_command>(printed, &kills, hands_over), exec_limits{},
        std::chrono::steady_clock::now(), exec_pump::emit_fn{},
        [this](exec_result r) { result = std::move(r); });
  }

  /// Runs the I/O loop until the pump reported (the worker reaps on its own thread).
  void wait() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (!result && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_for(std::chrono::milliseconds{50});
    }
  }
};

TEST(ExecPump, BufferedOutputIsRead) {
  pump_run r;
  r.make("hello\n")->start();
  r.wait();
  ASSERT_TRUE(r.result);
  EXPECT_EQ(r.result->stdout_text, "hello\n");
  EXPECT_EQ(r.result->exit_code, 0);
  EXPECT_FALSE(r.result->error);
  EXPECT_EQ(r.kills, 0);
}

TEST(ExecPump, OutOfDescriptorsIsAnErrorNotALostOutput) {
  pump_run r;
  auto pump = r.make("{\"t\":\"done\"}\n"); // its pipe made before the descriptors run out
  {
    fds_exhausted full;
    pump->start();
  }
  r.wait();
  ASSERT_TRUE(r.result);
  ASSERT_TRUE(r.result->error) << "a clean exit with no output: the frames were lost";
  EXPECT_NE(r.result->error->find("out of file descriptors"), std::string::npos)
      << *r.result->error;
  EXPECT_NE(r.result->error->find("stdout"), std::string::npos) << *r.result->error;
  EXPECT_EQ(r.kills, 1); // the command is not left running unread
}

TEST(ExecPump, HandedOverStdoutNeedsNoSpareDescriptor) {
  pump_run r;
  auto pump = r.make("{\"t\":\"done\"}\n", true); // as the simulated domain's canned output
  {
    fds_exhausted full;
    pump->start();
    r.wait();
  }
  ASSERT_TRUE(r.result);
  EXPECT_FALSE(r.result->error) << *r.result->error;
  EXPECT_EQ(r.result->stdout_text, "{\"t\":\"done\"}\n");
  EXPECT_EQ(r.kills, 0);
}

TEST(ExecPump, OpenSaysWhyBeforeAnythingIsPromised) {
  pump_run r;
  std::shared_ptr<exec_pump> pump = r.make("x\n");
  std::optional<std::string> why;
  {
    fds_exhausted full;
    why = pump->open();
  }
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("Too many open files"), std::string::npos) << *why;
  pump->abandon(); // what the HTTP session does: kill and reap, no result
  r.workers.join();
  EXPECT_EQ(r.kills, 1);
  EXPECT_FALSE(r.result);
  // Once descriptors are free again, a new pump reads normally.
  pump_run again;
  again.make("y\n")->start();
  again.wait();
  ASSERT_TRUE(again.result);
  EXPECT_EQ(again.result->stdout_text, "y\n");
}

} // namespace
} // namespace guestflow::local
