#include "controlplane/local/http/exec_pump.hpp"

#include "controlplane/local/guests/sandbox_launch.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <unistd.h>

namespace guestflow::local {

namespace net = boost::asio;
using error_code = boost::system::error_code;

namespace {

/// The pump owns duplicates, so that running_exec::finish() may close the originals.
int dup_fd(int fd) {
  return fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
}

/// The domain reports a command the guest's memory cgroup OOM-killed during the exec
/// (its oom_kill counter moved, read before and after: control_plane's guest_command) as
/// an error starting with these words, and nothing else does.
bool oom_killed(const exec_outcome& o) {
  return o.error && o.error->rfind("out of memory", 0) == 0;
}

/// The domain reports a command whose workspace lost writes the kernel had taken (the host's
/// file system full under a sparse image: control_plane's guest_command, after syncfs) as an
/// error starting with these words.
bool lost_writes(const exec_outcome& o) {
  return o.error && o.error->rfind("workspace_io_error", 0) == 0;
}

/// When the process behind pidfd `fd` started, on the steady clock: the kernel's record of
/// its fork (/proc/<pid>/stat, clock ticks after boot, rounded down), not when this pump was
/// made once the spawn returned, which is after the program already runs (a 2 s program read
/// 1,987 ms). nullopt when `fd` is no pidfd (a fault's timer, a simulated exec). The pidfd
/// keeps the unreaped process's pid from being reused.
std::optional<std::chrono::steady_clock::time_point> process_started(int fd) {
  std::ifstream info{"/proc/self/fdinfo/" + std::to_string(fd)};
  std::string line;
  pid_t pid = 0;
  while (std::getline(info, line))
    if (line.rfind("Pid:", 0) == 0) pid = pid_t(std::atol(line.c_str() + 4));
  if (pid <= 0) return std::nullopt;
  auto st = read_process_stat(pid);
  timespec boot{};
  const auto now = std::chrono::steady_clock::now();
  const long tick = ::sysconf(_SC_CLK_TCK);
  if (!st || tick <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return std::nullopt;
  const auto boot_now =
      std::chrono::seconds{boot.tv_sec} + std::chrono::nanoseconds{boot.tv_nsec};
  const auto started = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>{double(st->start_time) / double(tick)});
  if (started > boot_now) return std::nullopt;
  return now -
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(boot_now - started);
}

/// The exit code answered for such a command, whatever it returned (sysexits' EX_IOERR):
/// a caller reading only the exit code must not read a success.
constexpr int32_t lost_writes_exit = 74;

} // namespace

std::optional<failure> exec_failure(const exec_result& r) {
  if (r.error && r.error->rfind("workspace_io_error", 0) == 0)
    return fail(ec::guest_failed, *r.error);
  return std::nullopt;
}

std::string stream_line(exec_stream_line::kind kind, std::string text, int32_t code,
                        std::optional<uint64_t> exec_ms) {
  exec_stream_line l;
  l.type = kind;
  l.text = std::move(text);
  l.exit_code = code;
  l.exec_ms = exec_ms;
  return encode(l);
}

exec_pump::exec_pump(net::any_io_executor io, net::thread_pool& workers,
                     std::unique_ptr<running_exec> run, exec_limits limits,
                     std::chrono::steady_clock::time_point started, emit_fn emit, done_fn done)
    : io_(io)
    , worker_(net::make_strand(workers.get_executor()))
    , run_(std::move(run))
    , limits_(limits)
    , started_(started)
    , emit_(std::move(emit))
    , done_(std::move(done))
    , out_(io)
    , err_(io)
    , exit_(io)
    , grace_(io) {
  out_.cap = limits_.max_stdout_bytes;
  err_.cap = limits_.max_stderr_bytes;
  err_.is_stderr = true;
}

std::optional<std::string> exec_pump::open() {
  if (opened_) return open_error_;
  opened_ = true;
  auto fail_with = [this](const char* what) {
    open_error_ = std::string{"cannot read the command's "} + what + ": " +
                  std::strerror(errno) + " (the control plane is out of file descriptors)";
    error_code ignored;
    for (auto* c : {&out_, &err_}) {
      c->sd.close(ignored);
      c->open = false;
    }
    return open_error_;
  };
  if (auto taken = run_->take_stdout()) { // handed over: no duplicate needed
    out_.sd.assign(taken.release());
    out_.open = true;
  }
  for (auto* c : {&out_, &err_}) {
    if (c->open) continue;
    int orig = c->is_stderr ? run_->stderr_fd() : run_->stdout_fd();
    if (orig < 0) continue; // no such pipe: counts as closed
    int fd = dup_fd(orig);
    if (fd < 0) return fail_with(c->is_stderr ? "stderr" : "stdout");
    c->sd.assign(fd);
    c->open = true;
  }
  if (int orig = run_->exit_fd(); orig >= 0) {
    int xfd = dup_fd(orig);
    if (xfd < 0) return fail_with("exit");
    exit_.assign(xfd);
    if (!run_->measures_run())
      if (auto t = process_started(xfd); t && *t < spawned_) spawned_ = *t;
  }
  return std::nullopt;
}

void exec_pump::abandon() {
  killed_ = true;
  net::post(worker_, [self = shared_from_this()] {
    self->run_->kill();
    self->run_->finish();
  });
}

void exec_pump::start() {
  if (open()) { // nothing to read from: kill the command, reap it, say why in the result
    killed_ = true;
    exited_ = true;
    net::post(worker_, [self = shared_from_this()] { self->run_->kill(); });
    return maybe_finish();
  }
  for (auto* c : {&out_, &err_})
    if (c->open) read(*c);
  if (!exit_.is_open()) {
    exited_ = true; // cannot watch: rely on the pipes' EOF, finish() waits for the exit
  } else {
    exit_.async_wait(net::posix::stream_descriptor::wait_read,
                     [self = shared_from_this()](error_code) { self->on_exit(); });
  }
  maybe_finish();
}

void exec_pump::read(channel& c) {
  c.sd.async_read_some(net::buffer(c.buf),
                       [self = shared_from_this(), &c](error_code ec, size_t n) {
                         if (ec) {
                           self->deliver(c, {}, true);
                           return;
                         }
                         self->deliver(c, std::string_view{c.buf.data(), n}, false);
                       });
}

void exec_pump::deliver(channel& c, std::string_view bytes, bool eof) {
  std::string text;
  std::vector<std::string> lines;
  bool was_truncated = c.truncated;
  if (!c.truncated) {
    auto room = c.cap - std::min(c.cap, c.total);
    text = c.utf8.feed(bytes.substr(0, std::min<uint64_t>(room, bytes.size())));
    if (bytes.size() > room) {
      c.truncated = true;
      text += c.utf8.flush(); // a cut sequence becomes U+FFFD
    } else if (eof) {
      text += c.utf8.flush();
    }
  }
  c.total += bytes.size();
  auto kind =
      c.is_stderr ? exec_stream_line::kind::stderr_chunk : exec_stream_line::kind::stdout_chunk;
  bool newly_truncated = c.truncated && !was_truncated;
  if (emit_) {
    if (!text.empty()) lines.push_back(stream_line(kind, std::move(text)));
    if (newly_truncated)
      lines.push_back(stream_line(exec_stream_line::kind::error,
                                  std::string{c.is_stderr ? "stderr" : "stdout"} +
                                      " truncated at " + std::to_string(c.cap) + " bytes"));
  } else {
    c.kept += text;
  }
  if (eof) {
    c.open = false;
    error_code ignored;
    c.sd.close(ignored);
    emit_lines(std::move(lines), [self = shared_from_this()] { self->maybe_finish(); });
    return;
  }
  emit_lines(std::move(lines), [self = shared_from_this(), &c] { self->read(c); });
}

void exec_pump::emit_lines(std::vector<std::string> lines, std::function<void()> then) {
  if (lines.empty()) {
    then();
    return;
  }
  auto first = std::move(lines.front());
  lines.erase(lines.begin());
  emit_(std::move(first), [self = shared_from_this(), lines = std::move(lines),
                           then = std::move(then)]() mutable {
    self->emit_lines(std::move(lines), std::move(then));
  });
}

void exec_pump::on_exit() {
  exited_ = true;
  exited_at_ = std::chrono::steady_clock::now();
  if (out_.open || err_.open) {
    // A grandchild may hold the pipes open: stop waiting for EOF after the grace period.
    grace_.expires_after(limits_.exit_grace);
    grace_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec) return;
      error_code ignored;
      for (auto* c : {&self->out_, &self->err_})
        if (c->open) c->sd.cancel(ignored); // the pending read completes and closes the channel
    });
  }
  maybe_finish();
}

void exec_pump::maybe_finish() {
  if (finishing_ || !exited_ || out_.open || err_.open) return;
  finishing_ = true;
  grace_.cancel();
  error_code ignored;
  exit_.close(ignored);
  net::post(worker_, [self = shared_from_this()] {
    auto outcome = self->run_->finish();
    net::post(self->io_, [self, outcome = std::move(outcome)] {
      exec_result r;
      r.exit_code = lost_writes(outcome) ? lost_writes_exit : outcome.exit_code;
      r.oom_killed = oom_killed(outcome);
      r.truncated.stdout_cut = self->out_.truncated;
      r.truncated.stderr_cut = self->err_.truncated;
      // The command's exit watcher's figure when it has one: this pump sees the exit only
      // when the server runs, and a stalled server would add the stall.
      const auto ended = self->exited_at_.value_or(std::chrono::steady_clock::now());
      r.exec_ms = outcome.ran_ms.value_or(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(ended - self->spawned_)
              .count()));
      std::string error;
      auto add = [&error](const std::string& e) { error += (error.empty() ? "" : "; ") + e; };
      if (!self->emit_) { // streaming already said it when it happened
        for (auto* c : {&self->out_, &self->err_})
          if (c->truncated)
            add(std::string{c->is_stderr ? "stderr" : "stdout"} + " truncated at " +
                std::to_string(c->cap) + " bytes");
        r.stdout_text = std::move(self->out_.kept);
        r.stderr_text = std::move(self->err_.kept);
      }
      if (self->open_error_) add(*self->open_error_);
      if (outcome.error) add(*outcome.error);
      if (!error.empty()) r.error = std::move(error);
      if (!self->emit_ || (!r.oom_killed && !r.truncated.any()))
        return self->done_(std::move(r));
      // Streaming: what the exit means goes out on its own line before the exit code.
      exec_stream_line said;
      said.type = exec_stream_line::kind::outcome;
      said.truncated = r.truncated;
      said.oom_killed = r.oom_killed;
      self->emit_(encode(said), [self, r = std::move(r)]() mutable {
        net::dispatch(self->io_,
                      [self, r = std::move(r)]() mutable { self->done_(std::move(r)); });
      });
    });
  });
}

void exec_pump::client_gone() {
  net::dispatch(io_, [self = shared_from_this()] {
    if (self->killed_ || self->finishing_) return;
    self->killed_ = true;
    net::post(self->worker_, [self] { self->run_->kill(); });
  });
}

} // namespace guestflow::local
