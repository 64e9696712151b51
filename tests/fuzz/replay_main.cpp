// The corpus replay (the ordinary build's stand-in for libFuzzer's driver): feeds every file
// under the directories or files named on the command line to LLVMFuzzerTestOneInput once.
// A crash or a failed FUZZ_CHECK aborts with the file's name already printed; an empty or
// missing corpus fails, so a replay that checks nothing cannot pass.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "no such corpus: %s\n", argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR|FILE...  (found no input)\n", argv[0]);
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (auto& f : files) {
    std::fprintf(stderr, "replay %s\n", f.c_str());
    std::ifstream in(f, std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // A copy of exactly the input's size, so an overread is an overread here too.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
  }
  std::printf("%zu inputs replayed\n", files.size());
  return 0;
}
