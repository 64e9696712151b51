// Run results and events (messages/run.hpp: run events a client of the bridge decodes, the
// sandbox result, the /api/v1/run body) and JSend envelopes (messages/jsend.hpp: every
// control plane answer). Guest frames have their own target (guest_frames.cpp).

#include "messages/jsend.hpp"
#include "messages/run.hpp"
#include "tests/fuzz/json_support.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

using namespace guestflow;
using namespace guestflow::fuzz;

namespace {

/// Scrubbing an event for a secret cut from the input itself leaves an event that encodes
/// to a line that decodes, with the secret in none of the fields a guest could fill. (Only
/// a secret of letters, digits, '-' and '_' is looked for afterwards: JSON's own structure
/// or a mask's stars could spell another one anew.)
void check_scrub(std::string_view input) {
  auto e = decode<run_event>(input);
  if (!e || input.size() < 8) return;
  auto secret = std::string{input.substr(input.size() / 3, 4 + input.size() % 13)};
  secret_vars vars;
  vars.set("S", secret);
  scrub(*e, secret_scrubber{vars});
  auto line = encode(*e);
  FUZZ_CHECK(decode<run_event>(line), "a scrubbed event does not decode: " + line);
  auto plain = std::all_of(secret.begin(), secret.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
  if (!plain) return;
  std::vector<const std::string*> fields{
      &e->id,          &e->name,          &e->logs,          &e->line,
      &e->message,     &e->outputs.text,  &e->result().text, &e->types().text,
      &e->data().text, &e->context().text};
  for (auto& id : e->failed)
    fields.push_back(&id);
  for (auto& ro : e->run_outputs_list) {
    fields.push_back(&ro.inputs.text);
    for (auto& r : ro.outputs)
      if (r)
        for (auto* f : {&r->results.text, &r->artifacts.text, &r->outputs.text, &r->logs.text,
                        &r->messages.text, &r->component_display_name, &r->component_id})
          fields.push_back(f);
  }
  for (auto* f : fields)
    FUZZ_CHECK(f->find(secret) == std::string::npos, "a secret survived scrubbing: " + line);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  check_decoder<run_event>(input, "run_event");
  check_scrub(input);
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
