// What the bridge decodes from its callers (messages/graph.hpp, flow_run.hpp, bridge.hpp):
// flow graphs, run requests with their inputs and tweaks, sandbox and component calls.

#include "messages/bridge.hpp"
#include "messages/flow_run.hpp"
#include "messages/graph.hpp"
#include "tests/fuzz/json_support.hpp"

using namespace guestflow;
using namespace guestflow::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  check_decoder<flow_graph>(input, "flow_graph");
  check_decoder<run_request>(input, "run_request");
  check_decoder<sandbox_call>(input, "sandbox_call");
  check_decoder<component_call>(input, "component_call");
  // The building blocks take an already canonical value (what a run request carries).
  if (auto raw = parse_raw_json(input)) {
    if (auto inputs = decode_run_inputs(*raw, "inputs"); !inputs)
      check_refusal(inputs.error(), "decode_run_inputs");
    if (auto members = decode_members(*raw, "tweaks")) {
      auto object = encode_members(*members);
      auto back = decode_members(object, "tweaks");
      FUZZ_CHECK(back, "members: own encoding refused: " + object.text);
      FUZZ_CHECK(*back == *members, "members changed through encode/decode: " + object.text);
    } else {
      check_refusal(members.error(), "decode_members");
    }
  }
  return 0;
}
