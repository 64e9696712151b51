#include "controlplane/local/http/fault_injection.hpp"

#include "messages/json.hpp"

#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <thread>
#include <unistd.h>

namespace guestflow::local {
namespace {

std::shared_ptr<fault_injector>& installed() {
  static std::shared_ptr<fault_injector> injector;
  return injector;
}

std::string what(fault_op op, fault_kind kind, uint64_t call) {
  return "fault injected: " + std::string{to_string(op)} + " " + std::string{to_string(kind)} +
         " (call " + std::to_string(call) + ")";
}

/// An answer that stops after `sent` of its bytes although the header promises `promised`:
/// the session sends what the file holds, finds it short and closes the connection.
result<opened_file> cut_answer(std::string_view sent, uint64_t promised) {
  unique_fd fd{::memfd_create("guestflow-fault", MFD_CLOEXEC)};
  if (!fd) return fail(ec::unavailable, std::string{"memfd_create: "} + std::strerror(errno));
  if (::write(fd.get(), sent.data(), sent.size()) != static_cast<ssize_t>(sent.size()) ||
      ::lseek(fd.get(), 0, SEEK_SET) != 0)
    return fail(ec::unavailable, std::string{"fault answer: "} + std::strerror(errno));
  return opened_file{guest_file{std::move(fd), {}},
                     std::max<uint64_t>(promised, sent.size() + 1)};
}

/// A call held without an answer and without a thread: its "command" is a timer of `hold`
/// that the client's departure (the transport kills the exec) or the server's stop ends at
/// once. A client still waiting at the end gets an exec result it cannot use.
class held_call final : public running_exec {
public:
  explicit held_call(std::chrono::milliseconds hold)
      : timer_(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) {
    arm(std::chrono::duration_cast<std::chrono::nanoseconds>(hold));
  }
  int stdout_fd() const override { return -1; }
  int stderr_fd() const override { return -1; }
  int exit_fd() const override { return timer_.get(); }
  void kill() override { arm(std::chrono::nanoseconds{1}); }
  exec_outcome finish() override {
    timer_.reset();
    return {-1, std::string{"fault injected: the call was held and never carried out"}};
  }

private:
  void arm(std::chrono::nanoseconds in) {
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(in.count() / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(in.count() % 1'000'000'000);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    if (timer_) ::timerfd_settime(timer_.get(), 0, &spec, nullptr);
  }
  unique_fd timer_;
};

/// `a` after `delay` on the worker that carries it out (a slow backend holds a worker too);
/// false when `a` cannot wait: an immediate reply to a streamed request must go out before
/// its body is read.
bool delay_action(action& a, std::chrono::milliseconds delay, body_mode body) {
  auto pause = [delay] { std::this_thread::sleep_for(delay); };
  if (auto* r = std::get_if<reply>(&a)) {
    if (body == body_mode::streamed) return false;
    a = domain_call{[pause, r = std::move(*r)] {
      pause();
      return r;
    }};
  } else if (auto* d = std::get_if<domain_call>(&a)) {
    d->run = [pause, run = std::move(d->run)] {
      pause();
      return run();
    };
  } else if (auto* e = std::get_if<exec_call>(&a)) {
    e->start = [pause, start = std::move(e->start)] {
      pause();
      return start();
    };
  } else if (auto* f = std::get_if<file_download>(&a)) {
    f->open = [pause, open = std::move(f->open)] {
      pause();
      return open();
    };
  } else if (auto* u = std::get_if<file_upload>(&a)) {
    u->open = [pause, open = std::move(u->open)] {
      pause();
      return open();
    };
    u->open_with_room = nullptr; // the faulted open alone, as before the one-task upload
  }
  return true;
}

/// The fault itself; nullopt when it does not apply to this call (the call goes on as is).
std::optional<action> inject(fault_kind kind, fault_op op, uint64_t call,
                             std::chrono::milliseconds hold, const handler& inner,
                             const handler_request& r) {
  bool streamed = inner.body == body_mode::streamed;
  switch (kind) {
  case fault_kind::error_5xx:
    return action{failure_reply(500, what(op, kind, call))};
  case fault_kind::busy_429:
    return action{reply{429, R"({"status":"fail","data":{"code":"capacity","message":)" +
                                 quote_json(what(op, kind, call)) + "}}"}};
  case fault_kind::drop:
    if (streamed) return std::nullopt; // a PUT's body is the transport's until it answers
    return action{
        file_download{[] { return cut_answer(R"({"status":"success","data":{)", 4096); }}};
  case fault_kind::timeout:
    if (!streamed)
      return action{exec_call{[hold]() -> result<std::unique_ptr<running_exec>> {
                                return std::unique_ptr<running_exec>{new held_call(hold)};
                              },
                              false}};
    if (auto a = inner.handle(r); auto* up = std::get_if<file_upload>(&a)) {
      up->open = [hold, message = what(op, kind, call)]() -> result<guest_file> {
        std::this_thread::sleep_for(hold); // no thread-free hold for a body still unread
        return fail(ec::unavailable, message);
      };
      up->open_with_room = nullptr;
      return a;
    }
    return std::nullopt;
  case fault_kind::lost: {
    auto a = inner.handle(r);
    auto* call_it = std::get_if<domain_call>(&a);
    if (!call_it) return std::nullopt; // refused at once, or not a plain domain call
    // The answer is lost on the way, not abandoned: a caller gone meanwhile still gets
    // what was made undone (the call's undo goes along).
    return action{file_download{[run = std::move(call_it->run)] {
                                  auto answer = run();
                                  return cut_answer(std::string_view{answer.body}.substr(
                                                        0, answer.body.size() / 2),
                                                    answer.body.size());
                                },
                                std::move(call_it->undo)}};
  }
  }
  return std::nullopt;
}

} // namespace

std::string describe(const fault_event& e) {
  std::string out = "fault injected: " + std::string{to_string(e.op)} + " " +
                    (e.kind ? std::string{to_string(*e.kind)} : std::string{"delay"});
  if (e.delay.count() > 0) out += " after " + std::to_string(e.delay.count()) + "ms";
  return out + " (call " + std::to_string(e.call) + ")";
}

fault_injector::fault_injector(fault_plan plan,
                               std::function<void(const fault_event&)> on_fault)
    : plan_(std::move(plan))
    , on_fault_(std::move(on_fault)) {}

std::pair<uint64_t, fault_decision> fault_injector::next(fault_op op) {
  auto n = calls_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  return {n, plan_.decide(op, n)};
}

void fault_injector::applied(const fault_event& e) const {
  if (on_fault_) on_fault_(e);
}

void install_faults(std::shared_ptr<fault_injector> injector) {
  std::atomic_store(&installed(), std::move(injector));
}

std::shared_ptr<fault_injector> installed_faults() {
  return std::atomic_load(&installed());
}

fault_op fault_op_of(endpoint ep) {
  switch (ep) {
  case endpoint::create_sandbox:
    return fault_op::create;
  case endpoint::exec:
    return fault_op::exec;
  case endpoint::put_file:
  case endpoint::get_file:
    return fault_op::files;
  case endpoint::delete_sandbox:
    return fault_op::remove;
  case endpoint::pause:
    return fault_op::pause;
  case endpoint::resume:
    return fault_op::resume;
  case endpoint::list_sandboxes:
    return fault_op::list;
  case endpoint::get_sandbox:
    return fault_op::get;
  default:
    return fault_op::other;
  }
}

handler with_faults(endpoint ep, handler h) {
  auto inner = std::make_shared<handler>(std::move(h));
  return {inner->body, [ep, inner](const handler_request& r) -> action {
            auto injector = installed_faults();
            if (!injector) return inner->handle(r);
            auto op = fault_op_of(ep);
            auto [call, d] = injector->next(op);
            if (!d.kind && d.delay.count() <= 0) return inner->handle(r);
            fault_event e{op, std::nullopt, std::chrono::milliseconds{0}, call};
            std::optional<action> a;
            if (d.kind) a = inject(*d.kind, op, call, injector->plan().hold(), *inner, r);
            if (a) e.kind = d.kind;
            if (!a) a = inner->handle(r);
            if (d.delay.count() > 0 && e.kind != fault_kind::timeout &&
                delay_action(*a, d.delay, inner->body))
              e.delay = d.delay;
            if (e.kind || e.delay.count() > 0) injector->applied(e);
            return std::move(*a);
          }};
}

} // namespace guestflow::local
