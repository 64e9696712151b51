#include "common/body_room.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/optional/optional.hpp>
#include <gtest/gtest.h>
#include <string>
#include <utility> // before the Asio headers (see CONTRIBUTING)

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using local_socket = net::local::stream_protocol::socket;

/// A socket that counts the reads Beast makes on it.
struct counting_stream {
  local_socket& socket;
  size_t reads = 0;

  using executor_type = local_socket::executor_type;
  executor_type get_executor() { return socket.get_executor(); }

  template<class Buffers, class Handler>
  auto async_read_some(const Buffers& buffers, Handler&& handler) {
    ++reads;
    return socket.async_read_some(buffers, std::forward<Handler>(handler));
  }
};

struct read_outcome {
  std::string body;
  size_t body_reads = 0;
  size_t capacity_after = 0;
};

/// Sends a request with a body of `size` bytes over a socket pair and reads it as the
/// servers do: the header first, then (with `room`) reserve_body_room, then the body.
read_outcome read_request(size_t size, bool room) {
  net::io_context io;
  local_socket a{io}, b{io};
  net::local::connect_pair(a, b);
  std::string body(size, 'x');
  for (size_t i = 0; i < size; ++i)
    body[i] = static_cast<char>('a' + i % 26);
  auto wire = "POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(size) +
              "\r\n\r\n" + body;
  net::write(a, net::buffer(wire)); // fits the pair's socket buffer: all of it is waiting

  counting_stream s{b};
  beast::flat_buffer buf;
  http::request_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  read_outcome out;
  http::async_read_header(s, buf, parser, [&](beast::error_code ec, size_t) {
    ASSERT_FALSE(ec) << ec.message();
    if (room) guestflow::reserve_body_room(buf, parser.content_length());
    auto header_reads = s.reads;
    http::async_read(s, buf, parser, [&, header_reads](beast::error_code ec2, size_t) {
      ASSERT_FALSE(ec2) << ec2.message();
      out.body_reads = s.reads - header_reads;
      guestflow::give_back_body_room(buf);
      out.capacity_after = buf.capacity();
      out.body = std::move(parser.get().body());
    });
  });
  io.run();
  EXPECT_EQ(out.body, body);
  return out;
}

TEST(body_room, a_body_of_known_length_is_read_in_a_few_reads_not_512_bytes_at_a_time) {
  auto without = read_request(57'727, false);
  auto with = read_request(57'727, true);
  EXPECT_GT(without.body_reads, 50u); // what Beast does by itself: why the helper exists
  EXPECT_LE(with.body_reads, 3u);
  EXPECT_EQ(with.capacity_after, 0u); // the room is given back once the body is in
}

TEST(body_room, the_room_is_capped_and_nothing_is_reserved_without_a_length) {
  beast::flat_buffer buf;
  guestflow::reserve_body_room(buf, boost::optional<std::uint64_t>{});
  EXPECT_EQ(buf.capacity(), 0u);
  guestflow::reserve_body_room(buf, boost::optional<std::uint64_t>{std::uint64_t{10} << 30});
  EXPECT_GE(buf.capacity(), 64u * 1024);
  EXPECT_LT(buf.capacity(), 128u * 1024);
  beast::flat_buffer small;
  guestflow::reserve_body_room(small, boost::optional<std::uint64_t>{2000});
  EXPECT_GE(small.capacity(), 2000u);
}

TEST(body_room, bytes_already_buffered_are_kept_and_counted) {
  beast::flat_buffer buf;
  auto n = net::buffer_copy(buf.prepare(300), net::buffer(std::string(300, 'p')));
  buf.commit(n);
  guestflow::reserve_body_room(buf, boost::optional<std::uint64_t>{4000});
  EXPECT_GE(buf.capacity(), 4300u);
  ASSERT_EQ(buf.size(), 300u);
  EXPECT_EQ(beast::buffers_to_string(buf.data()), std::string(300, 'p'));
  guestflow::give_back_body_room(buf);
  EXPECT_EQ(beast::buffers_to_string(buf.data()), std::string(300, 'p')); // a pipelined request
  EXPECT_LE(buf.capacity(), 4096u);
}

TEST(body_room, a_buffer_the_size_of_a_header_is_kept_for_the_next_read) {
  beast::flat_buffer buf;
  buf.reserve(1024);
  guestflow::give_back_body_room(buf);
  EXPECT_EQ(buf.capacity(), 1024u);
}

} // namespace
