#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace guestflow {

/// Beast reads a body into the connection's buffer max(512, spare capacity) bytes at a
/// time, and a parser that takes the body as it comes never lets that buffer grow: a
/// 57 KB flow request took 113 reads, each a system call and a turn of the I/O loop.
/// Room for the rest of a body of known length (at most `cap`) before reading it makes
/// that one or a few reads. Give it back (`give_back_body_room`) once the body is in, so a
/// connection that then streams an answer for seconds holds no more than before.
///
/// A template so that this layer names no Beast type: `Buffer` is a beast::flat_buffer,
/// `Length` what a Beast parser's content_length() returns.
template<class Buffer, class Length>
void reserve_body_room(Buffer& buf, const Length& content_length, std::size_t cap = 64 * 1024) {
  if (!content_length) return;
  auto want = std::min<std::uint64_t>(*content_length, cap);
  if (buf.size() + want > buf.capacity())
    buf.reserve(static_cast<std::size_t>(buf.size() + want));
}

/// Frees the room `reserve_body_room` made, keeping any bytes already buffered (a pipelined
/// request). A buffer no larger than a header needs is left alone: freeing it would only
/// have the next read allocate it again.
template<class Buffer>
void give_back_body_room(Buffer& buf) {
  if (buf.capacity() > 4096 && buf.capacity() > buf.size()) buf.shrink_to_fit();
}

} // namespace guestflow
