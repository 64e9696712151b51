// Run results and events (messages/run.hpp: run events a client of the bridge decodes, the
// sandbox result, the /api/v1/run body) and JSend envelopes (messages/jsend.hpp: every
// control plane answer). Guest frames have their own target (guest_frames.cpp).

#include "messages/jsend.hpp"
#include "messages/run.hpp"
#include "tests/fuzz/json_support.hpp"

using namespace guestflow;
using namespace guestflow::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  check_decoder<run_event>(input, "run_event");
  check_decoder<sandbox_result>(input, "sandbox_result");
  check_decoder<jsend>(input, "jsend");
  if (auto body = decode_run_outputs(input)) {
    auto bytes = encode(*body);
    auto back = decode_run_outputs(bytes);
    FUZZ_CHECK(back, "run outputs: own encoding refused: " + bytes);
    FUZZ_CHECK(*back == *body, "run outputs changed through encode/decode: " + bytes);
  } else {
    check_refusal(body.error(), "decode_run_outputs");
  }
  return 0;
}
