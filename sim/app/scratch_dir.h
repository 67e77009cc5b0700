// A sweep's scratch folder, $TMPDIR/kvtier-sweep-PID-XXXXXX: the points'
// run folders and an inline base go there, and it is removed however the
// sweep ends.
#pragma once

#include <string>

namespace kvtier {

struct ScratchDir {
  std::string path;
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace kvtier
