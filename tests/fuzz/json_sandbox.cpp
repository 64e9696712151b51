// The control plane's wire bodies (messages/sandbox.hpp: what a runtime decodes from a local
// control plane or CreateOS, and what the local control plane decodes from its callers) and
// the egress rules in them (messages/egress.hpp). Every decoder gets the same bytes.

#include "messages/egress.hpp"
#include "messages/sandbox.hpp"
#include "tests/fuzz/json_support.hpp"

using namespace guestflow;
using namespace guestflow::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  check_decoder<shape_list>(input, "shape_list");
  check_decoder<sandbox_create_request>(input, "sandbox_create_request");
  check_decoder<sandbox_created>(input, "sandbox_created");
  check_decoder<sandbox_view>(input, "sandbox_view");
  check_decoder<sandbox_list>(input, "sandbox_list");
  check_decoder<sandbox_deleted>(input, "sandbox_deleted");
  check_decoder<whoami>(input, "whoami");
  check_decoder<egress_body>(input, "egress_body");
  check_decoder<exec_request>(input, "exec_request");
  check_decoder<exec_result>(input, "exec_result");
  check_decoder<exec_stream_line>(input, "exec_stream_line");
  check_decoder<capabilities>(input, "capabilities");
  check_raw_json(input);
  // One egress rule straight from the bytes (a CLI flag, an env setting).
  if (auto rule = parse_egress_rule(input)) {
    auto text = to_string(*rule);
    auto again = parse_egress_rule(text);
    FUZZ_CHECK(again, "egress rule " + text + " does not parse back");
    FUZZ_CHECK(*again == *rule, "egress rule changed through to_string: " + text);
  } else {
    check_refusal(rule.error(), "parse_egress_rule");
  }
  return 0;
}
