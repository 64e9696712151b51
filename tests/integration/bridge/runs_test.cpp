// Whole-flow runs over HTTP: streaming order, the /api/v1/run answer, late joins,
// cancellation, dropped clients, many streams at once, and shutdown.

#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/support/eventually.hpp"

#include <poll.h>
#include <set>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

class runs_test : public bridge_fixture {};

/// seq 0, 1, 2… without a gap, one run id, exactly one terminal event, last.
void expect_well_formed(const std::vector<run_event>& events, const std::string& run_id) {
  ASSERT_FALSE(events.empty());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq, i);
    EXPECT_EQ(events[i].run_id, run_id);
    EXPECT_EQ(events[i].terminal(), i + 1 == events.size()) << i;
  }
}

} // namespace

TEST_F(runs_test, a_streamed_run_sends_each_event_in_order_and_ends_with_complete) {
  auto s = stream("POST", "/v1/runs", run_body("diamond", R"("inputs":"hi there")"));
  ASSERT_EQ(s->status(), 200u);
  EXPECT_EQ(s->headers().at("content-type"), "application/x-ndjson");
  auto run_id = s->headers().at("x-guestflow-run-id");
  auto events = drain(*s);
  expect_well_formed(events, run_id);
  ASSERT_EQ(events.back().type, run_event::kind::complete) << events.back().message;
  size_t built = 0;
  for (auto& e : events)
    built += e.type == run_event::kind::vertex_built ? 1 : 0;
  EXPECT_EQ(built, 5u); // input, two branches, their join, output
  auto text = encode(events.back().run_outputs_list);
  EXPECT_NE(text.find("Shout: hi there! | Whisper: (hi there)"), std::string::npos) << text;
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
  EXPECT_EQ(metric("guestflow_runs_total{outcome=\"complete\"}"), 1);
  EXPECT_GE(metric("guestflow_controlplane_call_seconds_count"),
            4); // create, put, exec, delete
}

TEST_F(runs_test, stream_false_answers_like_langflows_api_v1_run) {
  auto r =
      call("POST", "/v1/runs", run_body("python", R"("inputs":"hi there","stream":false)"));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body.rfind(R"({"run_id":"run-)", 0), 0u) << r.body.substr(0, 80);
  auto outs = decode_run_outputs(r.body);
  ASSERT_TRUE(outs) << r.body;
  ASSERT_EQ(outs->size(), 1u);
  EXPECT_NE(r.body.find("2 words; most common: hi (1); reversed: there hi"), std::string::npos);
}

// Callers pool their connections (Langflow's and agents' HTTP clients): a collected run's
// answer keeps the connection alive as a plain answer does, an error answer included; one
// whose client sent bytes during the run (read and dropped by the disconnect watch) closes
// after its answer instead of taking them for a request.
TEST_F(runs_test, a_collected_run_keeps_the_connection_alive_unless_bytes_came_during_it) {
  int fd = connect_raw();
  auto send = [&](const std::string& target, const std::string& body) {
    auto request = "POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                   "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    for (size_t sent = 0; sent < request.size();) {
      auto n = ::write(fd, request.data() + sent, request.size() - sent);
      ASSERT_GT(n, 0);
      sent += static_cast<size_t>(n);
    }
  };
  // One answer, whole (head and its Content-Length body); "closed" at EOF before one.
  std::string pending;
  auto answer = [&]() -> std::string {
    char buf[4096];
    for (;;) {
      auto head_end = pending.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        auto cl = pending.find("Content-Length: ");
        auto len =
            cl == std::string::npos || cl > head_end ? 0 : std::stoul(pending.substr(cl + 16));
        if (pending.size() >= head_end + 4 + len) {
          auto whole = pending.substr(0, head_end + 4 + len);
          pending.erase(0, whole.size());
          return whole;
        }
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 120'000) != 1) return "timeout";
      auto n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return "closed";
      pending.append(buf, static_cast<size_t>(n));
    }
  };
  auto contains = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  send("/v1/runs", run_body("python", R"("inputs":"hi there","stream":false)"));
  auto first = answer();
  EXPECT_EQ(first.substr(0, 13), "HTTP/1.1 200 ") << first.substr(0, 200);
  EXPECT_FALSE(contains(first, "Connection: close")) << first.substr(0, 200);
  EXPECT_TRUE(contains(first, "reversed: there hi")) << first.substr(0, 400);
  send("/v1/runs", "{"); // an error answer, on the same connection
  EXPECT_EQ(answer().substr(0, 13), "HTTP/1.1 400 ");
  send("/v1/runs", run_body("python", R"("inputs":"once more","stream":false)"));
  auto second = answer();
  EXPECT_EQ(second.substr(0, 13), "HTTP/1.1 200 ") << second.substr(0, 200);
  EXPECT_TRUE(contains(second, "reversed: more once")) << second.substr(0, 400);
  EXPECT_EQ(metric("guestflow_runs_accepted_total"), 2);
  // The slow flow sleeps 2 s: once it is admitted the watch reads the socket, and a request
  // sent now is read by it, not by the request reader.
  send("/v1/runs", run_body("slow", R"("inputs":"x","stream":false)"));
  ASSERT_TRUE(test_support::eventually(
      [&] { return metric("guestflow_runs_accepted_total") == 3; }, 30s));
  std::string healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fd, healthz.data(), healthz.size()), static_cast<ssize_t>(healthz.size()));
  auto slow = answer();
  EXPECT_EQ(slow.substr(0, 13), "HTTP/1.1 200 ") << slow.substr(0, 200);
  EXPECT_TRUE(contains(slow, "Connection: close")) << slow.substr(0, 200);
  EXPECT_EQ(answer(), "closed"); // the dropped request is never answered
  ::close(fd);
  EXPECT_TRUE(wait_until_no_guest_is_owed());
}

TEST_F(runs_test, a_failing_run_without_streaming_answers_its_error_code) {
  auto r = call("POST", "/v1/runs",
                run_body("slow", R"("inputs":"x","stream":false,"timeout_seconds":1)"));
  EXPECT_NE(r.status, 200u) << r.body;
  EXPECT_NE(r.body.find(R"("run_id":"run-)"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("error":{"code":")"), std::string::npos) << r.body;
  EXPECT_TRUE(wait_until_no_guest_is_owed());
}

TEST_F(runs_test, a_late_joiner_gets_the_replay_then_the_live_events) {
  auto first = stream("POST", "/v1/runs", run_body("slow", R"("inputs":"x")"));
  ASSERT_EQ(first->status(), 200u);
  auto run_id = first->headers().at("x-guestflow-run-id");
  auto line = first->next_line(60s); // the run has started
  ASSERT_TRUE(line);
  auto late = stream("GET", "/v1/runs/" + run_id + "/events?from_seq=0");
  ASSERT_EQ(late->status(), 200u);
  auto joined = drain(*late);
  auto rest = drain(*first);
  expect_well_formed(joined, run_id);
  ASSERT_EQ(joined.size(), rest.size() + 1);
  for (size_t i = 0; i < rest.size(); ++i)
    EXPECT_EQ(encode(joined[i + 1]), encode(rest[i]));
  EXPECT_EQ(joined.back().type, run_event::kind::complete);
  // From the middle: exactly the tail.
  auto tail = stream("GET", "/v1/runs/" + run_id + "/events?from_seq=2");
  auto from2 = drain(*tail);
  ASSERT_EQ(from2.size(), joined.size() - 2);
  EXPECT_EQ(from2.front().seq, 2u);
  EXPECT_EQ(call("GET", "/v1/runs/run-unknown/events").status, 404u);
}

TEST_F(runs_test, delete_cancels_a_running_run_and_deletes_its_guest) {
  auto s = stream("POST", "/v1/runs", run_body("slow", R"("inputs":"x")"));
  auto run_id = s->headers().at("x-guestflow-run-id");
  ASSERT_TRUE(s->next_line(60s));
  auto r = call("DELETE", "/v1/runs/" + run_id);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body, R"({"run_id":")" + run_id + R"(","cancelled":true})");
  auto rest = drain(*s);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().type, run_event::kind::error);
  auto again = call("DELETE", "/v1/runs/" + run_id);
  EXPECT_EQ(again.status, 200u);
  EXPECT_NE(again.body.find(R"("cancelled":false)"), std::string::npos) << again.body;
  EXPECT_EQ(call("DELETE", "/v1/runs/run-unknown").status, 404u);
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(runs_test, a_dropped_stream_leaves_the_run_going_unless_it_asked_otherwise) {
  auto kept = stream("POST", "/v1/runs", run_body("slow", R"("inputs":"x")"));
  auto kept_id = kept->headers().at("x-guestflow-run-id");
  ASSERT_TRUE(kept->next_line(60s));
  kept->disconnect();
  auto watch = stream("GET", "/v1/runs/" + kept_id + "/events");
  auto events = drain(*watch);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, run_event::kind::complete) << events.back().message;

  auto cancelled = stream("POST", "/v1/runs",
                          run_body("slow", R"("inputs":"x","cancel_on_disconnect":true)"));
  auto cancelled_id = cancelled->headers().at("x-guestflow-run-id");
  ASSERT_TRUE(cancelled->next_line(60s));
  cancelled->disconnect();
  // Joining now would make the joiner the run's last subscriber: wait for the end first.
  test_support::eventually([&] { return metric("guestflow_runs_finished_total") >= 2; }, 60s,
                           20ms);
  auto after = stream("GET", "/v1/runs/" + cancelled_id + "/events");
  auto ended = drain(*after);
  ASSERT_FALSE(ended.empty());
  EXPECT_EQ(ended.back().type, run_event::kind::error);
  EXPECT_NE(ended.back().message.find("disconnect"), std::string::npos) << ended.back().message;
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(runs_test, two_hundred_concurrent_streamed_runs_all_complete) {
  constexpr size_t n = 200;
  // Room for all of them: the default slots follow the host's memory (75 on 24 GiB), and
  // the control plane's budget must hold 200 guests of the executor's shape.
  start_serve({{"GUESTFLOW_MAX_INFLIGHT", std::to_string(n)},
               {"CREATEOS_EXECUTOR_SHAPE", "s-1vcpu-64mb"}});
  std::vector<std::unique_ptr<http_stream>> streams;
  for (size_t i = 0; i < n; ++i)
    streams.push_back(stream(
        "POST", "/v1/runs", run_body("hello", R"("inputs":"run )" + std::to_string(i) + "\"")));
  std::set<std::string> ids;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(streams[i]->status(), 200u) << i;
    auto id = streams[i]->headers().at("x-guestflow-run-id");
    ids.insert(id);
    auto events = drain(*streams[i]);
    expect_well_formed(events, id);
    ASSERT_EQ(events.back().type, run_event::kind::complete)
        << i << ": " << events.back().message;
    auto text = encode(events.back().run_outputs_list);
    EXPECT_NE(text.find("\"text\":\"run " + std::to_string(i) + "\""), std::string::npos) << i;
  }
  EXPECT_EQ(ids.size(), n);
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_EQ(metric("guestflow_guests_created_total"), static_cast<double>(n));
  EXPECT_EQ(metric("guestflow_guests_deleted_total"), static_cast<double>(n));
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(runs_test, sigterm_deletes_every_ephemeral_guest_before_exit) {
  auto s = stream("POST", "/v1/runs", run_body("slow", R"("inputs":"x")"));
  ASSERT_TRUE(s->next_line(60s));
  ASSERT_TRUE(wait_for_live(1));
  EXPECT_EQ(serve->stop(), 0) << serve->stderr_text();
  // Every delete was asked for before exit; a guest may still be `destroying` while the
  // control plane finishes the teardown it started.
  EXPECT_TRUE(wait_for_live(0)) << serve->stderr_text();
}

TEST_F(runs_test, a_quiet_stream_gets_keepalive_blank_lines) {
  // The slow flow's Python vertex sleeps 2 s; the fixture's heartbeat is 1 s.
  auto s = stream("POST", "/v1/runs", run_body("slow", R"("inputs":"x")"));
  size_t blank = 0, events = 0;
  while (auto line = s->next_line(60s))
    (line->empty() ? blank : events)++;
  EXPECT_GE(blank, 1u);
  EXPECT_GE(events, 4u);
  EXPECT_EQ(metric("guestflow_run_events_sent_total"), static_cast<double>(events));
}

TEST_F(runs_test, a_client_that_never_reads_holds_neither_its_connection_nor_its_run) {
  // A small receive window that is never read: the run still completes for whoever joins
  // it, and the server closes the connection (client timeout, 2 s here) instead of
  // keeping it, its buffers and its relay forever.
  int fd = connect_raw(4096);
  auto body = run_body("hello", R"("inputs":")" + std::string(300'000, 'x') + "\"");
  auto request = "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                 "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    auto n = ::write(fd, request.data() + sent, request.size() - sent);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return metric("guestflow_runs_finished_total") == 1 &&
               metric("guestflow_streams_open") == 0;
      },
      60s, 20ms));
  std::string got(4096, '\0'); // the head is first in what the kernel kept for us
  auto n = ::read(fd, got.data(), got.size());
  ::close(fd);
  ASSERT_GT(n, 0);
  got.resize(static_cast<size_t>(n));
  const std::string key = "X-Guestflow-Run-Id: ";
  auto at = got.find(key);
  ASSERT_NE(at, std::string::npos) << got.substr(0, 300);
  auto run_id = got.substr(at + key.size(), got.find("\r\n", at) - at - key.size());
  auto late = stream("GET", "/v1/runs/" + run_id + "/events");
  auto events = drain(*late);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, run_event::kind::complete) << events.back().message;
  EXPECT_TRUE(wait_until_no_guest_is_owed());
}

TEST_F(runs_test, a_burst_of_large_events_over_the_backlog_cap_reaches_a_reading_client) {
  start_serve({{"GUESTFLOW_STREAM_BACKLOG_BYTES", "4096"}});
  auto s = stream("POST", "/v1/runs",
                  run_body("hello", R"("inputs":")" + std::string(100'000, 'y') + "\""));
  auto events = drain(*s);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, run_event::kind::complete) << events.back().message;
  EXPECT_EQ(metric("guestflow_slow_clients_dropped_total"), 0);
}
