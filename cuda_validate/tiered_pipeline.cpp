#include "cuda_validate/tiered_pipeline.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <sstream>
#include <thread>
#include <fstream>
#include <list>
#include <random>
#include <stdexcept>

#include "cuda_validate/host_probes.h"

namespace kvtier::host {

namespace {

constexpr uint32_t kNone = 0xffffffffu;
enum Op : uint64_t { kRead = 1, kWrite = 2, kTokenWrite = 3 };

std::runtime_error sys_error(const std::string& what, int err) {
  return std::runtime_error(what + ": " + std::strerror(err));
}

// The attention trace, read whole before the timed loop (parsing JSON is no
// part of a decode step): the blocks of every (step, layer), step-major.
class TraceReader {
 public:
  TraceReader(const std::string& path, const PipelineConfig& c) : path_(path) {
    std::ifstream f(path);
    if (!f) throw ConfigError(path + ": cannot open the attention trace");
    std::string line;
    if (!std::getline(f, line)) throw ConfigError(path + ":1: empty file, expected the trace header");
    size_t line_no = 1;
    json h = parse(line, line_no);
    if (h.value("format", "") != "kvtier-attention-trace")
      throw ConfigError(path + ":1: format: expected \"kvtier-attention-trace\"");
    auto expect = [&](const char* key, int v) {
      if (!h.contains(key) || !h[key].is_number_integer() || h[key].get<int>() != v)
        throw ConfigError(path + ":1: " + key + ": expected " + std::to_string(v) + " (the pipeline's shape), got " +
                          (h.contains(key) ? h[key].dump() : std::string("nothing")));
    };
    expect("layers", c.layers);
    expect("block_tokens", c.shape.block_tokens);
    expect("context_tokens", c.context_tokens);
    if (!h.contains("steps") || !h["steps"].is_number_integer() || h["steps"].get<int>() < c.decode_steps)
      throw ConfigError(path + ":1: steps: expected at least " + std::to_string(c.decode_steps) + " decode steps");
    const size_t want = size_t(c.decode_steps) * c.layers;
    while (records_.size() < want && std::getline(f, line)) {
      ++line_no;
      if (line.empty()) continue;
      json r = parse(line, line_no);
      if (r.contains("seq") && r["seq"].is_number_integer() && r["seq"].get<int>() != 0) continue;
      const std::string w = path + ":" + std::to_string(line_no) + ": ";
      const int step = static_cast<int>(records_.size() / c.layers), layer = static_cast<int>(records_.size() % c.layers);
      if (r.value("step", -1) != step || r.value("layer", -1) != layer)
        throw ConfigError(w + "expected the record of step " + std::to_string(step) + " layer " + std::to_string(layer));
      if (!r.contains("blocks") || !r["blocks"].is_array()) throw ConfigError(w + "blocks: expected an array");
      std::vector<uint32_t> b;
      for (const auto& x : r["blocks"]) {
        if (!x.is_number_unsigned()) throw ConfigError(w + "blocks: expected block indices");
        b.push_back(x.get<uint32_t>());
      }
      records_.push_back(std::move(b));
    }
    if (records_.size() < want)
      throw ConfigError(path + ": ends after " + std::to_string(records_.size()) + " records, expected " +
                        std::to_string(want));
  }
  // The blocks of (step, layer) = record k.
  const std::vector<uint32_t>& at(uint64_t k) const { return records_[k]; }

 private:
  json parse(const std::string& line, size_t line_no) {
    try {
      return json::parse(line);
    } catch (const json::parse_error& e) {
      throw ConfigError(path_ + ":" + std::to_string(line_no) + ": not valid JSON: " + e.what());
    }
  }
  std::string path_;
  std::vector<std::vector<uint32_t>> records_;
};

struct Block {
  uint32_t slot = kNone;
  bool created = false, dirty = false, reading = false, writing = false;
  uint64_t last_use = 0;
  std::list<uint32_t>::iterator lru;
};

// Busy CPU time of the whole machine (user + nice + system, in clock ticks)
// and of this process (utime + stime).
void busy_ticks(double* machine, double* self) {
  *machine = *self = 0;
  std::ifstream st("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, sys = 0;
  if (st >> cpu >> user >> nice >> sys) *machine = user + nice + sys;
  std::ifstream ps("/proc/self/stat");
  std::string line;
  std::getline(ps, line);
  const size_t rp = line.rfind(')');
  if (rp == std::string::npos) return;
  std::istringstream rest(line.substr(rp + 2));
  std::string f;
  for (int i = 3; i <= 15 && rest >> f; ++i)
    if (i == 14 || i == 15) *self += std::stod(f);  // utime, stime
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

class Pipeline {
 public:
  explicit Pipeline(const PipelineConfig& c) : c_(c), sh_(c.shape), bb_(c.shape.block_bytes()), tb_(c.shape.token_bytes()) {
    if (c.cache_blocks < 2) throw ConfigError("cache_blocks: expected at least 2");
    if (tb_ % 512 != 0)
      throw ConfigError("shape: one token's KV (" + std::to_string(tb_) + " bytes) must be a multiple of 512 for O_DIRECT");
    bt_ = static_cast<uint32_t>(c.shape.block_tokens);
    ctx_blocks_ = (c.context_tokens + bt_ - 1) / bt_;
    max_blocks_ = (c.context_tokens + c.decode_steps - 1 + bt_) / bt_;
    blocks_.assign(size_t(c.layers) * max_blocks_, Block{});
    open_file();
    if (int rc = io_uring_queue_init(256, &ring_, 0); rc < 0) throw sys_error("io_uring_queue_init", -rc);
    ring_ok_ = true;
    if (posix_memalign(reinterpret_cast<void**>(&cache_), 4096, c.cache_blocks * bb_) != 0 ||
        posix_memalign(reinterpret_cast<void**>(&fill_), 4096, size_t(4) << 20) != 0 ||
        posix_memalign(reinterpret_cast<void**>(&token_buf_), 4096, tb_ * 64) != 0)
      throw std::runtime_error("out of memory for the DRAM cache");
    std::mt19937 g(3);
    uint16_t* h = reinterpret_cast<uint16_t*>(fill_);
    for (size_t i = 0; i < (size_t(4) << 20) / 2; ++i) h[i] = static_cast<uint16_t>(0x2c00 + (g() & 0x3ff));
    for (size_t i = 0; i < tb_ * 64 / 2; ++i) reinterpret_cast<uint16_t*>(token_buf_)[i] = static_cast<uint16_t>(0x3000 + (g() & 0xff));
    std::memset(cache_, 0, c.cache_blocks * bb_);
    for (size_t s = 0; s < c.cache_blocks; ++s) free_slots_.push_back(static_cast<uint32_t>(c.cache_blocks - 1 - s));
    q_.assign(size_t(sh_.heads) * sh_.head_dim, 0.02f);
    out_.assign(q_.size(), 0.f);
  }
  ~Pipeline() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
    if (fd_ >= 0) ::close(fd_);
    if (!made_dir_.empty()) ::rmdir(made_dir_.c_str());
    free(cache_);
    free(fill_);
    free(token_buf_);
  }

  PipelineResult run() {
    TraceReader trace(c_.trace, c_);
    prefill();
    const uint64_t N = uint64_t(c_.decode_steps) * c_.layers;
    const uint32_t depth = static_cast<uint32_t>(std::max(0, c_.prefetch_depth));
    std::vector<std::vector<uint32_t>> ring(depth + 1);
    uint64_t next = 0;
    double m0, s0;
    busy_ticks(&m0, &s0);
    const double t0 = now_s();
    double last = t0;
    for (uint64_t k = 0; k < N; ++k) {
      pin_stamp_ = k + 1;
      while (next < N && next <= k + depth) {
        select(next, trace, &ring[next % (depth + 1)]);
        ++next;
      }
      const std::vector<uint32_t>& sel = ring[k % (depth + 1)];
      const double w0 = now_s();
      for (uint32_t b : sel)
        while (blocks_[b].reading) reap(true);
      const double w1 = now_s(), c1 = thread_cpu_s();
      compute(k, sel);
      const double w2 = now_s();
      r_.compute_cpu_s += thread_cpu_s() - c1;
      r_.wait_s += w1 - w0;
      r_.compute_s += w2 - w1;
      append(k);
      if (k % c_.layers == uint64_t(c_.layers - 1)) {
        const double t = now_s();
        r_.step_s.push_back(t - last);
        last = t;
      }
    }
    r_.total_s = last - t0;
    double m1, s1;
    busy_ticks(&m1, &s1);
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double cpus = std::max(1u, std::thread::hardware_concurrency());
    if (r_.total_s > 0) r_.others_cpu_share = std::max(0.0, ((m1 - m0) - (s1 - s0)) / hz / (cpus * r_.total_s));
    drain();
    page_cache_check();
    return r_;
  }

 private:
  uint32_t id(uint32_t layer, uint32_t i) const { return layer * max_blocks_ + i; }
  uint64_t offset(uint32_t b) const { return uint64_t(b) * bb_; }
  unsigned char* slot_ptr(uint32_t s) const { return cache_ + size_t(s) * bb_; }

  void open_file() {
    std::string dir = c_.dir;
    if (dir.empty()) {
      const char* t = std::getenv("TMPDIR");
      std::string tmpl = std::string(t && *t ? t : "/tmp") + "/kvtier-pipeline-XXXXXX";
      std::vector<char> b(tmpl.begin(), tmpl.end());
      b.push_back(0);
      if (!mkdtemp(b.data())) throw sys_error("cannot create a temporary directory", errno);
      dir = made_dir_ = b.data();
    }
    r_.storage = storage_info(dir);
    const std::string path = dir + "/kvtier-kv-" + std::to_string(static_cast<long>(getpid()));
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
    if (fd_ < 0)
      throw std::runtime_error("cannot open the KV file with O_DIRECT in " + dir + " (" + std::strerror(errno) +
                               ", file system " + r_.storage.value("file_system", std::string("unknown")) +
                               "): the pipeline does not fall back to the page cache; name a directory on a disk");
    ::unlink(path.c_str());  // removed when closed, even if killed
    r_.storage["o_direct"] = true;
    r_.storage["file_bytes"] = double(blocks_.size()) * double(bb_);
  }

  io_uring_sqe* sqe() {
    io_uring_sqe* e = io_uring_get_sqe(&ring_);
    if (!e) {
      submit();
      e = io_uring_get_sqe(&ring_);
      if (!e) throw std::runtime_error("io_uring: no submission entry");
    }
    return e;
  }
  void submit() {
    last_write_ = nullptr;
    const int rc = io_uring_submit(&ring_);
    if (rc < 0) throw sys_error("io_uring_submit", -rc);
  }
  void tag(io_uring_sqe* e, Op op, uint32_t b, uint32_t slot) {
    io_uring_sqe_set_data64(e, (uint64_t(op) << 62) | (uint64_t(slot) << 32) | b);
    ++inflight_;
  }
  // One completion (waiting for it if `wait`); false when none was there.
  bool reap(bool wait) {
    if (inflight_ == 0) {
      if (wait) throw std::logic_error("pipeline: waiting with nothing in flight");
      return false;
    }
    io_uring_cqe* cqe = nullptr;
    int rc = wait ? io_uring_wait_cqe(&ring_, &cqe) : io_uring_peek_cqe(&ring_, &cqe);
    if (rc == -EAGAIN && !wait) return false;
    if (rc < 0) throw sys_error("io_uring_wait_cqe", -rc);
    const uint64_t d = io_uring_cqe_get_data64(cqe);
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    --inflight_;
    const Op op = static_cast<Op>(d >> 62);
    const uint32_t b = static_cast<uint32_t>(d & 0xffffffffu), slot = static_cast<uint32_t>((d >> 32) & 0x3fffffffu);
    const size_t want = op == kTokenWrite ? tb_ : bb_;
    if (res < 0) throw sys_error(op == kRead ? "KV read" : "KV write", -res);
    if (static_cast<size_t>(res) != want) throw std::runtime_error("short KV transfer: " + std::to_string(res) + " bytes");
    if (op == kRead) {
      blocks_[b].reading = false;
      ++r_.reads;
      r_.bytes_read += double(want);
    } else {
      if (op == kWrite) slot_writing_[slot] = false;
      else blocks_[b].writing = false;
      ++r_.writes;
      r_.bytes_written += double(want);
    }
    return true;
  }
  void drain() {
    while (inflight_ > 0) reap(true);
  }

  // The prompt: every block written to the file; the cache keeps the last
  // cache_blocks of them in placement order, dirty, as the engine leaves it.
  void prefill() {
    const size_t chunk = size_t(4) << 20;
    const size_t total = blocks_.size() * bb_;
    for (size_t off = 0; off < total; off += chunk) {
      io_uring_sqe* e = sqe();
      io_uring_prep_write(e, fd_, fill_, static_cast<unsigned>(std::min(chunk, total - off)), off);
      io_uring_sqe_set_data64(e, 0);
      submit();
      io_uring_cqe* cqe = nullptr;
      if (int rc = io_uring_wait_cqe(&ring_, &cqe); rc < 0) throw sys_error("io_uring_wait_cqe", -rc);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (res < 0) throw sys_error("writing the KV file", -res);
    }
    if (fdatasync(fd_) != 0) throw sys_error("fdatasync", errno);
    page_cache_check();
    if (!r_.storage["page_cache_check"].value("bypassed", true))
      throw std::runtime_error("the KV file's pages stay in memory (file system " +
                               r_.storage.value("file_system", std::string("?")) +
                               " accepts O_DIRECT but keeps files in memory): not storage; name a directory on a disk");
    slot_writing_.assign(c_.cache_blocks, false);
    for (uint32_t l = 0; l < uint32_t(c_.layers); ++l)
      for (uint32_t i = 0; i < ctx_blocks_; ++i) {
        const uint32_t b = id(l, i);
        blocks_[b].created = true;
        if (free_slots_.empty()) {  // the oldest leaves; settled, not timed
          const uint32_t v = lru_.front();
          lru_.pop_front();
          free_slots_.push_back(blocks_[v].slot);
          blocks_[v].slot = kNone;
          blocks_[v].dirty = false;
        }
        insert(b);
        blocks_[b].dirty = true;
        std::memcpy(slot_ptr(blocks_[b].slot), fill_ + (size_t(b) * bb_) % ((size_t(4) << 20) - bb_ + 1), bb_);
      }
  }

  void insert(uint32_t b) {
    Block& x = blocks_[b];
    x.slot = free_slots_.back();
    free_slots_.pop_back();
    x.lru = lru_.insert(lru_.end(), b);
  }
  void touch(uint32_t b) {
    Block& x = blocks_[b];
    lru_.erase(x.lru);
    x.lru = lru_.insert(lru_.end(), b);
  }

  // Frees one slot: the least recently used block that no pending layer
  // needs leaves; a dirty one is written to its place in the file first
  // (the slot is busy until that write completes).
  void make_room() {
    if (!free_slots_.empty()) return;
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      Block& v = blocks_[*it];
      if (v.last_use >= pin_stamp_ || v.reading) continue;
      const uint32_t s = v.slot;
      if (v.dirty) {
        // Room for a linked read after it in the same submission.
        if (io_uring_sq_space_left(&ring_) < 2) submit();
        io_uring_sqe* e = sqe();
        io_uring_prep_write(e, fd_, slot_ptr(s), static_cast<unsigned>(bb_), offset(*it));
        tag(e, kWrite, *it, s);
        slot_writing_[s] = true;
        last_write_ = e;
        last_write_slot_ = s;
      }
      v.slot = kNone;
      v.dirty = false;
      lru_.erase(it);
      free_slots_.push_back(s);
      return;
    }
    throw std::runtime_error("DRAM cache too small: every cached block is needed by a layer in flight");
  }
  // A slot taken for new contents: wait until the block that left it is written.
  void wait_slot(uint32_t s) {
    while (slot_writing_[s]) reap(true);
  }

  void select(uint64_t k, TraceReader& trace, std::vector<uint32_t>* sel) {
    const uint32_t step = static_cast<uint32_t>(k / c_.layers), layer = static_cast<uint32_t>(k % c_.layers);
    clock_ = k + 1;
    const uint32_t n = (c_.context_tokens + step + bt_) / bt_;
    // The block receiving this step's token exists from now on (in the cache).
    const uint32_t nb = id(layer, n - 1);
    if (!blocks_[nb].created) {
      make_room();
      insert(nb);
      blocks_[nb].created = true;
      blocks_[nb].dirty = true;
      blocks_[nb].last_use = clock_;
    }
    sel->clear();
    for (uint32_t i : trace.at(k)) {
      if (i >= n) throw ConfigError(c_.trace + ": step " + std::to_string(step) + " layer " + std::to_string(layer) +
                                    ": block " + std::to_string(i) + " does not exist yet (" + std::to_string(n) + ")");
      const uint32_t b = id(layer, i);
      sel->push_back(b);
      ++r_.accesses;
      blocks_[b].last_use = clock_;  // pass 1: pinned before anything is evicted
      if (blocks_[b].slot != kNone) {
        ++r_.hits;
        touch(b);
      }
    }
    bool any = false;
    for (uint32_t b : *sel) {
      Block& x = blocks_[b];
      if (x.slot != kNone) continue;
      while (x.writing) reap(true);  // a token written to it in the file lands first
      make_room();
      insert(b);
      const uint32_t s = x.slot;
      if (slot_writing_[s] && last_write_ && last_write_slot_ == s) {
        // The slot's previous block is written back first: the kernel starts
        // the read when that write completes (a linked pair), while other
        // requests proceed.
        io_uring_sqe_set_flags(last_write_, IOSQE_IO_LINK);
      } else if (slot_writing_[s]) {
        submit();
        wait_slot(s);
      }
      last_write_ = nullptr;
      io_uring_sqe* e = sqe();
      io_uring_prep_read(e, fd_, slot_ptr(s), static_cast<unsigned>(bb_), offset(b));
      tag(e, kRead, b, s);
      x.reading = true;
      any = true;
    }
    if (any || inflight_ > 0) submit();
  }

  void compute(uint64_t k, const std::vector<uint32_t>& sel) {
    const uint32_t step = static_cast<uint32_t>(k / c_.layers);
    const uint32_t tokens = c_.context_tokens + step + 1;
    ptrs_.clear();
    toks_.clear();
    for (uint32_t b : sel) {
      const uint32_t i = b % max_blocks_;
      ptrs_.push_back(reinterpret_cast<const uint16_t*>(slot_ptr(blocks_[b].slot)));
      toks_.push_back(static_cast<int>(std::min<uint32_t>(bt_, tokens - i * bt_)));
    }
    attend(sh_, q_.data(), ptrs_.data(), toks_.data(), ptrs_.size(), out_.data());
  }

  // The new token's K and V: into its block where it is cached, else written
  // to the block's place in the file.
  void append(uint64_t k) {
    const uint32_t step = static_cast<uint32_t>(k / c_.layers), layer = static_cast<uint32_t>(k % c_.layers);
    const uint32_t t = c_.context_tokens + step;
    const uint32_t b = id(layer, t / bt_);
    Block& x = blocks_[b];
    const unsigned char* src = token_buf_ + (k % 64) * tb_;
    if (x.slot != kNone) {
      while (x.reading) reap(true);
      wait_slot(x.slot);
      std::memcpy(slot_ptr(x.slot) + size_t(t % bt_) * tb_, src, tb_);
      x.dirty = true;
      return;
    }
    while (x.writing) reap(true);
    io_uring_sqe* e = sqe();
    io_uring_prep_write(e, fd_, src, static_cast<unsigned>(tb_), offset(b) + uint64_t(t % bt_) * tb_);
    tag(e, kTokenWrite, b, 0);
    x.writing = true;
    submit();
  }

  void page_cache_check() {
    const size_t bytes = blocks_.size() * bb_;
    void* m = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED) return;
    const long page = sysconf(_SC_PAGESIZE);
    std::vector<unsigned char> v((bytes + page - 1) / page);
    size_t resident = 0;
    if (mincore(m, bytes, v.data()) == 0)
      for (unsigned char c : v) resident += c & 1;
    munmap(m, bytes);
    r_.storage["page_cache_check"] = {{"pages", v.size()}, {"resident", resident}, {"bypassed", resident * 100 <= v.size()}};
  }

  const PipelineConfig& c_;
  AttentionShape sh_;
  size_t bb_, tb_;
  uint32_t bt_ = 0, ctx_blocks_ = 0, max_blocks_ = 0;
  std::vector<Block> blocks_;
  std::list<uint32_t> lru_;
  std::vector<uint32_t> free_slots_;
  std::vector<bool> slot_writing_;
  uint64_t clock_ = 0, pin_stamp_ = 0;
  unsigned inflight_ = 0;
  io_uring_sqe* last_write_ = nullptr;  // the write-back prepared last, not yet submitted
  uint32_t last_write_slot_ = kNone;
  io_uring ring_{};
  bool ring_ok_ = false;
  int fd_ = -1;
  std::string made_dir_;
  unsigned char* cache_ = nullptr;
  unsigned char* fill_ = nullptr;
  unsigned char* token_buf_ = nullptr;
  std::vector<float> q_, out_;
  std::vector<const uint16_t*> ptrs_;
  std::vector<int> toks_;
  PipelineResult r_;
};

}  // namespace

PipelineResult run_pipeline(const PipelineConfig& c) {
  Pipeline p(c);
  return p.run();
}

}  // namespace kvtier::host
