#include "common/accept_loop.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <gtest/gtest.h>
#include <vector>

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct listening {
  net::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint{net::ip::make_address("127.0.0.1"), 0}};
  std::vector<tcp::socket> clients;

  listening() { acceptor.non_blocking(true); }

  /// `n` clients whose connects completed: each waits in the listen queue.
  void connect(int n) {
    for (int i = 0; i < n; ++i) {
      clients.emplace_back(io);
      clients.back().connect(acceptor.local_endpoint());
    }
  }

  int take(int limit) {
    int served = 0;
    guestflow::accept_queued(
        acceptor, [this] { return tcp::socket{io}; },
        [&](tcp::socket s) {
          EXPECT_TRUE(s.is_open());
          ++served;
        },
        limit);
    return served;
  }
};

TEST(accept_loop, it_takes_every_queued_connection_and_returns_when_none_is_left) {
  listening l;
  l.connect(5);
  EXPECT_EQ(l.take(256), 5); // and returns: the acceptor never blocks
  EXPECT_EQ(l.take(256), 0);
}

TEST(accept_loop, it_takes_at_most_its_limit) {
  listening l;
  l.connect(5);
  EXPECT_EQ(l.take(3), 3);
  EXPECT_EQ(l.take(3), 2);
}

TEST(accept_loop, out_of_descriptors_pauses_and_anything_else_does_not) {
  using boost::system::error_code;
  using boost::system::system_category;
  EXPECT_EQ(guestflow::accept_pause(error_code{EMFILE, system_category()}).count(), 50);
  EXPECT_EQ(guestflow::accept_pause(error_code{ENFILE, system_category()}).count(), 50);
  EXPECT_EQ(guestflow::accept_pause(error_code{ECONNABORTED, system_category()}).count(), 0);
  EXPECT_EQ(guestflow::accept_pause(error_code{}).count(), 0);
}

} // namespace
