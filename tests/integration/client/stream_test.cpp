// Streamed exec: lines are delivered while the body is still arriving, reassembled across
// chunk boundaries, and the stream ends exactly once — exit code, failure, or cancel.
#include "messages/sandbox.hpp"
#include "tests/integration/client/client_fixture.hpp"

#include <mutex>

using namespace gft;
using namespace guestflow;

namespace {

const std::string stream_path = "/v1/sandboxes/sb-1/exec";

/// Collects lines (thread-safe) and the one on_done.
struct stream_probe {
  std::mutex mtx;
  std::vector<exec_stream_line> lines;
  std::function<void(const exec_stream_line&)> on_each;
  std::shared_ptr<outcome<int32_t>> done = expect<int32_t>();

  cp::exec_stream_callbacks callbacks() {
    cp::exec_stream_callbacks cbs;
    cbs.on_line = [this](exec_stream_line l) {
      {
        std::lock_guard<std::mutex> lock(mtx);
        lines.push_back(l);
      }
      if (on_each) on_each(l);
    };
    cbs.on_done = done->cb();
    return cbs;
  }

  std::vector<exec_stream_line> snapshot() {
    std::lock_guard<std::mutex> lock(mtx);
    return lines;
  }
};

exec_stream_line out(std::string text) {
  return {exec_stream_line::kind::stdout_chunk, std::move(text), 0};
}

} // namespace

TEST_F(cp_client, stream_lines_arrive_before_the_stream_ends) {
  auto observed = srv->make_gate();
  std::atomic<bool> saw_in_time{false};
  std::string query;
  srv->route("POST", stream_path, [&](exchange& ex) {
    query = ex.req.query;
    ex.begin_chunked(200);
    ex.chunk("{\"stdout\":\"first\\n\"}\n");
    // The rest is only sent once the client delivered line 1: proves incremental reading.
    saw_in_time = observed->wait(10s);
    ex.chunk("{\"hb\":true}\n{\"stderr\":\"warn\"}\n");
    ex.chunk("{\"exit_code\":0}\n");
    ex.end_chunked();
  });
  stream_probe probe;
  probe.on_each = [&](const exec_stream_line& l) {
    if (l.type == exec_stream_line::kind::stdout_chunk) observed->open();
  };
  auto h =
      cl->exec_stream("sb-1", exec_request{"python3", {"main.py"}}, 10s, probe.callbacks());
  auto r = probe.done->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 0);
  EXPECT_TRUE(saw_in_time.load());
  EXPECT_EQ(query, "stream=true");
  auto lines = probe.snapshot();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], out("first\n"));
  EXPECT_EQ(lines[1].type, exec_stream_line::kind::heartbeat);
  EXPECT_EQ(lines[2].type, exec_stream_line::kind::stderr_chunk);
  EXPECT_EQ(lines[3].type, exec_stream_line::kind::exit_code);
  EXPECT_EQ(probe.done->calls.load(), 1);
  h->cancel(); // after completion: nothing happens
  EXPECT_EQ(probe.done->calls.load(), 1);
}

TEST_F(cp_client, stream_lines_split_across_chunks_reassemble) {
  srv->route("POST", stream_path, [](exchange& ex) {
    ex.begin_chunked(200);
    for (auto piece :
         {"{\"std", "out\":\"hel", "lo\"}", "\r", "\n{\"stdout\":\"x\"}\n{\"exit_co",
          "de\":7}"}) // the last line has no terminator
      ex.chunk(piece);
    ex.end_chunked();
  });
  stream_probe probe;
  cl->exec_stream("sb-1", exec_request{"true", {}}, 10s, probe.callbacks());
  auto r = probe.done->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 7);
  auto lines = probe.snapshot();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], out("hello"));
  EXPECT_EQ(lines[1], out("x"));
}

TEST_F(cp_client, stream_without_exit_code_is_transient) {
  srv->route("POST", stream_path, [](exchange& ex) {
    ex.begin_chunked(200);
    ex.chunk("{\"stdout\":\"a\"}\n");
    ex.end_chunked();
  });
  stream_probe probe;
  cl->exec_stream("sb-1", exec_request{"true", {}}, 10s, probe.callbacks());
  auto r = probe.done->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_EQ(r.error().message, "stream ended without exit code");
  EXPECT_EQ(probe.snapshot().size(), 1u);
}

TEST_F(cp_client, stream_connection_closed_mid_body_is_transient) {
  srv->route("POST", stream_path, [](exchange& ex) {
    ex.begin_chunked(200);
    ex.chunk("{\"stdout\":\"a\"}\n{\"stdo");
    ex.close_now();
  });
  stream_probe probe;
  cl->exec_stream("sb-1", exec_request{"true", {}}, 10s, probe.callbacks());
  auto r = probe.done->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_EQ(r.error().message.rfind("stream ended without exit code", 0), 0u)
      << r.error().message;
  EXPECT_EQ(probe.snapshot().size(), 1u); // the cut line is not delivered
  EXPECT_EQ(srv->hits("POST", stream_path), 1u);
}

TEST_F(cp_client, stream_cancel_closes_the_connection_and_ends_once) {
  std::atomic<bool> finished_sending{false};
  srv->route("POST", stream_path, [&](exchange& ex) {
    ex.begin_chunked(200);
    ex.chunk("{\"stdout\":\"started\"}\n");
    // Heartbeats until the client hangs up (a write fails): the server notices the cancel.
    for (int i = 0; i < 1'000'000; ++i)
      if (!ex.chunk("{\"hb\":true}\n")) return;
    finished_sending = true;
  });
  stream_probe probe;
  std::shared_ptr<cp::stream_handle> h;
  std::mutex hm;
  probe.on_each = [&](const exec_stream_line& l) {
    if (l.type == exec_stream_line::kind::stdout_chunk) {
      std::lock_guard<std::mutex> lock(hm);
      h->cancel();
      h->cancel(); // any number of times
    }
  };
  {
    std::lock_guard<std::mutex> lock(hm);
    h = cl->exec_stream("sb-1", exec_request{"sleep", {"1000"}}, 30s, probe.callbacks());
  }
  auto r = probe.done->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_EQ(r.error().message, "cancelled");
  EXPECT_TRUE(srv->wait_until([&] { return srv->write_failures() >= 1; }));
  EXPECT_FALSE(finished_sending.load());
  h->cancel();
  EXPECT_EQ(probe.done->calls.load(), 1);
}

TEST_F(cp_client, stream_cancel_before_any_answer) {
  auto never = srv->make_gate();
  srv->route("POST", stream_path, [never](exchange&) { never->wait(); });
  stream_probe probe;
  auto h = cl->exec_stream("sb-1", exec_request{"true", {}}, 30s, probe.callbacks());
  ASSERT_TRUE(srv->wait_until([&] { return srv->hits("POST", stream_path) == 1; }));
  h->cancel();
  auto r = probe.done->get(10s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cancelled");
  EXPECT_EQ(probe.done->calls.load(), 1);
}

TEST_F(cp_client, stream_deadline_is_a_backstop_that_heartbeats_do_not_extend) {
  auto stop = srv->make_gate();
  srv->route("POST", stream_path, [stop](exchange& ex) {
    ex.begin_chunked(200);
    while (!stop->is_open() && ex.chunk("{\"hb\":true}\n"))
      stop->wait(20ms);
  });
  stream_probe probe;
  cl->exec_stream("sb-1", exec_request{"sleep", {"1000"}}, 400ms, probe.callbacks());
  auto r = probe.done->get(10s);
  stop->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_GE(probe.snapshot().size(), 1u); // heartbeats were delivered meanwhile
}

TEST_F(cp_client, stream_line_over_16_mib_fails) {
  srv->route("POST", stream_path, [](exchange& ex) {
    ex.begin_chunked(200);
    ex.chunk("{\"stdout\":\"");
    std::string mib(size_t{1} << 20, 'x');
    for (int i = 0; i < 20; ++i)
      if (!ex.chunk(mib)) return;
    ex.chunk("\"}\n{\"exit_code\":0}\n");
    ex.end_chunked();
  });
  stream_probe probe;
  cl->exec_stream("sb-1", exec_request{"true", {}}, 20s, probe.callbacks());
  auto r = probe.done->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  EXPECT_NE(r.error().message.find("longer than"), std::string::npos);
  EXPECT_TRUE(probe.snapshot().empty());
}

TEST_F(cp_client, stream_malformed_line_fails) {
  srv->route("POST", stream_path, [](exchange& ex) {
    ex.begin_chunked(200);
    ex.chunk("{\"stdout\":\"ok\"}\nnot json at all\n{\"exit_code\":0}\n");
    ex.end_chunked();
  });
  stream_probe probe;
  cl->exec_stream("sb-1", exec_request{"true", {}}, 10s, probe.callbacks());
  auto r = probe.done->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  EXPECT_EQ(probe.snapshot().size(), 1u);
}

TEST_F(cp_client, stream_error_status_is_mapped) {
  srv->route("POST", stream_path,
             [](exchange& ex) { ex.respond(409, fail_body("sandbox is paused")); });
  stream_probe probe;
  cl->exec_stream("sb-1", exec_request{"true", {}}, 10s, probe.callbacks());
  auto r = probe.done->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::paused);
}

TEST_F(cp_client, a_finished_stream_leaves_its_connection_in_the_pool) {
  srv->route("POST", stream_path, [](exchange& ex) {
    ex.begin_chunked(200);
    ex.chunk("{\"exit_code\":0}\n");
    ex.end_chunked();
  });
  for (int i = 0; i < 3; ++i) {
    stream_probe probe;
    cl->exec_stream("sb-1", exec_request{"true", {}}, 10s, probe.callbacks());
    auto r = probe.done->get();
    ASSERT_TRUE(r) << r.error().message;
  }
  EXPECT_EQ(srv->connections(), 1u);
}
