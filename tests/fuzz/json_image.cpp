// The image catalog's bodies (messages/image.hpp): what the CLI and a runtime decode from
// the control plane, and the import request and manifest the control plane decodes.

#include "messages/image.hpp"
#include "tests/fuzz/json_support.hpp"

using namespace guestflow;
using namespace guestflow::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  check_decoder<image_info>(input, "image_info");
  check_decoder<image_list>(input, "image_list");
  check_decoder<image_add_request>(input, "image_add_request");
  check_decoder<image_added>(input, "image_added");
  check_decoder<image_removed>(input, "image_removed");
  check_decoder<image_manifest>(input, "image_manifest");
  // Image names are validated by one function wherever they come from.
  (void)image_name_problem(input);
  return 0;
}
