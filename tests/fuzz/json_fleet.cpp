// What fleet members decode from each other and from etcd (messages/fleet.hpp): a node's
// capacity record, a name claim, and the bodies of etcd's v3 JSON gateway (ranges, puts,
// txns, leases, errors) with their base64 keys and values.

#include "messages/base64.hpp"
#include "messages/fleet.hpp"
#include "tests/fuzz/json_support.hpp"

using namespace guestflow;
using namespace guestflow::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  check_decoder<node_capacity>(input, "node_capacity");
  check_decoder<name_claim>(input, "name_claim");
  if (auto kv = etcd::decode_kv_reply(input)) {
    for (auto& x : kv->kvs)
      FUZZ_CHECK(x.key.size() <= input.size(), "a key longer than its document");
  } else {
    check_refusal(kv.error(), "decode_kv_reply");
  }
  if (auto lease = etcd::decode_lease_reply(input); !lease)
    check_refusal(lease.error(), "decode_lease_reply");
  (void)etcd::decode_gateway_error(input);
  // base64 as etcd sends it: total on any text, and the inverse of base64_encode.
  if (auto bytes = base64_decode(input); !bytes) check_refusal(bytes.error(), "base64_decode");
  auto again = base64_decode(base64_encode(input));
  FUZZ_CHECK(again && *again == input, "base64 does not round-trip the input's bytes");
  return 0;
}
