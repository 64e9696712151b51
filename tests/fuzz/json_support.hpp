#pragma once

// The properties every JSON decoder of messages/ promises (messages/json.hpp): total on any
// bytes (a value or a bad_request with a message, never a crash, a throw or another code),
// within its size limit, and stable — whatever decodes re-encodes to bytes that decode to
// the same value, and encoding that value again gives the same bytes.

#include "messages/json.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace guestflow::fuzz {

template<class T, class = void>
struct has_encode : std::false_type {};
template<class T>
struct has_encode<T, std::void_t<decltype(encode(std::declval<const T&>()))>> : std::true_type {
};

template<class T, class = void>
struct has_redacted : std::false_type {};
template<class T>
struct has_redacted<T, std::void_t<decltype(redacted(std::declval<const T&>()))>>
    : std::true_type {};

/// What an encoding of `x` keeps: all of it, unless its type has secrets that every encoder
/// redacts (a run request's variables): then `redacted(x)`.
template<class T>
T as_encoded(const T& x) {
  if constexpr (has_redacted<T>::value)
    return redacted(x);
  else
    return x;
}

/// A refusal must be what decoders promise: bad_request, saying why.
inline void check_refusal(const failure& f, std::string_view decoder) {
  FUZZ_CHECK(f.code == ec::bad_request, std::string{decoder} + " failed with " +
                                            std::string{to_string(f.code)} + ": " + f.message);
  FUZZ_CHECK(!f.message.empty(), std::string{decoder} + " failed without a message");
}

/// `decode<T>` over `input` with the default limits, then with a size cap below the input's
/// size (which must refuse it), then the round trip when T has an encoder (to the value
/// with its secrets redacted, when it has any).
template<class T>
void check_decoder(std::string_view input, std::string_view name) {
  auto r = decode<T>(input);
  if (!input.empty()) {
    decode_limits tight;
    tight.max_bytes = input.size() - 1;
    auto capped = decode<T>(input, tight);
    FUZZ_CHECK(!capped, std::string{name} + " accepted a document over max_bytes");
    check_refusal(capped.error(), name);
  }
  if (!r) return check_refusal(r.error(), name);
  if constexpr (has_encode<T>::value) {
    auto bytes = encode(*r);
    auto back = decode<T>(bytes);
    FUZZ_CHECK(back, std::string{name} + ": its own encoding does not decode: " +
                         back.error().message + "\nencoded: " + bytes);
    FUZZ_CHECK(*back == as_encoded(*r), std::string{name} +
                                            ": the value changed through encode/decode\n"
                                            "encoded: " +
                                            bytes);
    FUZZ_CHECK(encode(*back) == bytes, std::string{name} +
                                           ": encoding is not stable\nfirst:  " + bytes +
                                           "\nsecond: " + encode(*back));
  }
}

/// `parse_raw_json` is canonical: its output parses to itself.
inline void check_raw_json(std::string_view input) {
  auto raw = parse_raw_json(input);
  if (!raw) return check_refusal(raw.error(), "parse_raw_json");
  auto again = parse_raw_json(raw->text);
  FUZZ_CHECK(again, "parse_raw_json refuses its own output: " + raw->text);
  FUZZ_CHECK(*again == *raw,
             "parse_raw_json is not canonical: " + raw->text + " -> " + again->text);
}

} // namespace guestflow::fuzz
