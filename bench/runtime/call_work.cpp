// bench_call_work [--runs N] [--smoke]
//
// The user-space work of a run's 4 control-plane calls (create, upload, exec, delete)
// without sockets, threads or actors: per call, the JSON request body (the codec's
// encode), the client's HTTP/1.1 request head (cp::request_head), Beast's parse of a canned
// answer as the local control plane sends it, and the JSend envelope and JSON payload decoded
// as the client does. One thread, a hot loop: a lower bound for what any client built on Beast
// and this codec adds per run to the round trips that bench_round_trip_floor prices. Together
// they estimate the floor of a single-threaded, run-to-completion client (no actor hop per
// call).
#include "bench/load_flags.hpp"
#include "controlplane/client/error_mapping.hpp"
#include "controlplane/client/http_call.hpp"
#include "messages/jsend.hpp"
#include "messages/sandbox.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdio>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

using namespace guestflow;
namespace http = boost::beast::http;

namespace {

/// An answer as the control plane writes it: status line, headers, a JSend body.
std::string answer(int status, const std::string& data_json) {
  auto body = jsend_success(data_json);
  return "HTTP/1.1 " + std::to_string(status) +
         " OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: keep-alive\r\n\r\n" + body;
}

/// The request head the client writes for these (cp::request_head, as http_call uses it).
std::string head(http::verb method, std::string target, const std::string& body,
                 const char* content_type) {
  cp::call_spec spec;
  spec.method = method;
  spec.target = std::move(target);
  if (content_type) {
    spec.content_type = content_type;
    spec.body = body;
  }
  return cp::request_head(spec, "localhost", "application/json", std::string(32, 'k'));
}

/// An answer's body, parsed by Beast.
std::string body_of(const std::string& wire) {
  http::response_parser<http::string_body> p;
  p.body_limit(1 << 20);
  p.eager(true); // header and body in one put()
  boost::system::error_code ec;
  p.put(boost::asio::buffer(wire), ec);
  if (ec || !p.is_done()) throw std::runtime_error("answer does not parse: " + ec.message());
  return p.release().body();
}

/// An answer without a typed payload (the upload's): its JSend envelope, decoded whole.
jsend envelope(const std::string& wire) {
  auto env = decode<jsend>(body_of(wire));
  if (!env || env->status != jsend::kind::success) throw std::runtime_error("bad envelope");
  return std::move(*env);
}

/// A typed answer, decoded as the client's fast path does: the `data` of an exact success
/// envelope (cp::success_data_of), then the codec's decode of it.
template<class T>
T receive(const std::string& wire) {
  auto body = body_of(wire);
  auto data = cp::success_data_of(body);
  if (!data) throw std::runtime_error("not an exact success envelope");
  auto v = decode<T>(*data);
  if (!v) throw std::runtime_error("bad payload: " + v.error().message);
  return std::move(*v);
}

double cpu_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

} // namespace

int main(int argc, char** argv) {
  size_t runs = 200'000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = bench::uint_flag<size_t>(a, argv[++i], 1);
    else if (a == "--smoke")
      runs = 1'000;
    else {
      std::fprintf(stderr, "usage: bench_call_work [--runs N] [--smoke]\n");
      return 2;
    }
  }
  // What a code run sends and gets back (the shapes of bench_runtime's runs).
  sandbox_create_request create;
  create.shape = "s-1vcpu-256mb";
  create.rootfs = "debian:12";
  create.name = "gf-b-a1b2c3-0123456789";
  create.egress = egress_policy::deny_all();
  create.auto_pause_after_seconds = 150;
  std::string program = "print('hello from a guest')\n";
  exec_request command{"timeout",
                       {"--signal=KILL", "30", "python3", "/workspace/main_0a1b2c3d.py"}};
  sandbox_created created;
  created.id = "sb-0123456789abcdef";
  created.name = *create.name;
  created.ip = "10.77.0.2";
  created.shape = create.shape;
  created.rootfs = *create.rootfs;
  created.vcpu = 1;
  created.mem_mib = 256;
  created.disk_mib = 1024;
  created.spawn_ms = 8;
  created.egress = create.egress;
  exec_result result;
  result.stdout_text = "hello from a guest\n";
  result.exec_ms = 12;
  sandbox_deleted deleted{created.id, sandbox_status::destroyed};
  const std::vector<std::string> answers{
      answer(201, encode(created)), answer(200, R"({"path":"/workspace/main_0a1b2c3d.py"})"),
      answer(200, encode(result)), answer(200, encode(deleted))};
  const std::string base = "/v1/sandboxes/" + created.id;

  size_t bytes = 0; // keeps the work observable
  auto one_run = [&] {
    auto body = encode(create);
    bytes += head(http::verb::post, "/v1/sandboxes", body, "application/json").size();
    auto c = receive<sandbox_created>(answers[0]);
    bytes += head(http::verb::put, base + "/files?path=%2Fworkspace%2Fmain_0a1b2c3d.py",
                  program, "application/octet-stream")
                 .size();
    bytes += envelope(answers[1]).data.text.size();
    body = encode(command);
    bytes += head(http::verb::post, base + "/exec", body, "application/json").size();
    auto r = receive<exec_result>(answers[2]);
    bytes += head(http::verb::delete_, base, {}, nullptr).size();
    auto d = receive<sandbox_deleted>(answers[3]);
    bytes += c.id.size() + r.stdout_text.size() + d.id.size();
  };
  try {
    for (size_t i = 0; i < runs / 10 + 1; ++i)
      one_run(); // warm-up
    auto t0 = cpu_us();
    for (size_t i = 0; i < runs; ++i)
      one_run();
    auto per_run = (cpu_us() - t0) / static_cast<double>(runs);
    std::printf(
        "call work: the user-space work of a run's 4 control-plane calls, in memory\n"
        "(encode, HTTP head, Beast parse, JSend + JSON decode), one thread, hot loop\n\n"
        "%zu runs: %.2f us CPU per run, %.2f us per call (%zu bytes handled)\n",
        runs, per_run, per_run / 4, bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_call_work: %s\n", e.what());
    return 1;
  }
  return 0;
}
