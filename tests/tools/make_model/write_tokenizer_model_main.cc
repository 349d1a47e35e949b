// Test helper: writes just tokenizer.model (what ernie-make-model would
// write) to argv[1], so tokenizer tests need not write a whole checkpoint.
#include <cstdio>
#include <fstream>

#include "tools/make_model/tokenizer_maker.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_tokenizer_model OUT_FILE CORPUS_DIR\n");
    return 2;
  }
  const auto model = ernie::make_model::MakeTokenizerModel({.corpus_dir = argv[2]});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out.write(model->data(), static_cast<std::streamsize>(model->size()));
  out.close();
  return out ? 0 : 1;
}
