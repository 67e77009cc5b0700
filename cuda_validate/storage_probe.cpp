// Storage: O_DIRECT reads and writes through io_uring, against request size
// and queue depth, on a file this probe creates in the directory it is given
// and removes (it is unlinked as soon as it is open, so it goes away even if
// the probe is killed). One timed run submits Q requests of S bytes at once
// at random S-aligned offsets and waits for all Q: what a pipeline fetching Q
// KV blocks of S bytes for one layer does. The page cache is never used: a
// file system that refuses O_DIRECT (tmpfs, some overlays) makes the probe
// skip with the reason, and after the runs mincore() checks that none of the
// file's pages became resident.
#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "cuda_validate/host_probes.h"

namespace kvtier::host {

namespace {

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Ring {
  io_uring ring{};
  explicit Ring(unsigned entries) {
    const int rc = io_uring_queue_init(entries, &ring, 0);
    if (rc < 0) throw std::runtime_error(std::string("io_uring_queue_init: ") + std::strerror(-rc));
  }
  ~Ring() { io_uring_queue_exit(&ring); }
  // Q requests of `size` bytes at `offsets`, all submitted at once, all waited for.
  void batch(bool write, int fd, unsigned char* buf, size_t size, const std::vector<uint64_t>& offsets) {
    for (size_t i = 0; i < offsets.size(); ++i) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) throw std::runtime_error("io_uring: submission queue full");
      if (write) io_uring_prep_write(sqe, fd, buf + i * size, static_cast<unsigned>(size), offsets[i]);
      else io_uring_prep_read(sqe, fd, buf + i * size, static_cast<unsigned>(size), offsets[i]);
    }
    const int sub = io_uring_submit(&ring);
    if (sub < 0) throw std::runtime_error(std::string("io_uring_submit: ") + std::strerror(-sub));
    for (size_t i = 0; i < offsets.size(); ++i) {
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc < 0) throw std::runtime_error(std::string("io_uring_wait_cqe: ") + std::strerror(-rc));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      if (res < 0) throw std::runtime_error(std::string(write ? "write: " : "read: ") + std::strerror(-res));
      if (static_cast<size_t>(res) != size)
        throw std::runtime_error("short " + std::string(write ? "write" : "read") + ": " + std::to_string(res) + " of " +
                                 std::to_string(size) + " bytes");
    }
  }
};

// Share of the file's pages resident in memory (mincore), 0 when unknown.
double resident_fraction(int fd, size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  void* m = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return 0;
  std::vector<unsigned char> vec((bytes + page - 1) / page);
  size_t resident = 0;
  if (mincore(m, bytes, vec.data()) == 0)
    for (unsigned char c : vec) resident += c & 1;
  munmap(m, bytes);
  return vec.empty() ? 0 : double(resident) / double(vec.size());
}

struct AlignedBuf {
  unsigned char* p = nullptr;
  explicit AlignedBuf(size_t n) {
    if (posix_memalign(reinterpret_cast<void**>(&p), 4096, n) != 0) throw std::runtime_error("out of memory");
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(i * 131 + 7);
  }
  ~AlignedBuf() { free(p); }
};

}  // namespace

json probe_storage(const std::string& dir_in, const Settings& s, json* probes) {
  std::string dir = dir_in;
  std::string made_dir;
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/kvtier-storage-XXXXXX";
    std::vector<char> b(tmpl.begin(), tmpl.end());
    b.push_back(0);
    if (!mkdtemp(b.data())) return json{{"skipped", "cannot create a temporary directory: " + std::string(std::strerror(errno))}};
    dir = made_dir = b.data();
  }
  json info = storage_info(dir);
  auto finish = [&](json j) {
    if (!made_dir.empty()) rmdir(made_dir.c_str());
    for (auto it = info.begin(); it != info.end(); ++it) j[it.key()] = it.value();
    return j;
  };
  const std::string path = dir + "/kvtier-probe-" + std::to_string(static_cast<long>(getpid()));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
  if (fd < 0) {
    const int e = errno;
    return finish(json{{"o_direct", false},
                       {"skipped", "cannot open a file with O_DIRECT in " + dir + " (" + std::strerror(e) + "; file system " +
                                       info.value("file_system", std::string("unknown")) +
                                       "): storage not measured rather than measured through the page cache; name a "
                                       "directory on a disk with --dir"}});
  }
  ::unlink(path.c_str());
  const size_t file_bytes = s.quick ? (size_t(64) << 20) : (size_t(1) << 30);
  const size_t batch_cap = s.quick ? (size_t(16) << 20) : (size_t(256) << 20);
  json out = json::object();
  out["o_direct"] = true;
  out["file_bytes"] = file_bytes;
  out["max_bytes_per_run"] = batch_cap;
  out["engine"] = "io_uring (liburing), O_DIRECT, one ring, requests of one run submitted together";
  try {
    Ring ring(64);
    AlignedBuf buf(std::max(batch_cap, size_t(4) << 20));
    // Fill the file with O_DIRECT writes, so reads hit allocated blocks.
    const size_t chunk = size_t(4) << 20;
    for (size_t off = 0; off < file_bytes; off += chunk * 4) {
      std::vector<uint64_t> offs;
      for (size_t k = 0; k < 4 && off + k * chunk < file_bytes; ++k) offs.push_back(off + k * chunk);
      ring.batch(true, fd, buf.p, chunk, offs);
    }
    if (fdatasync(fd) != 0) throw std::runtime_error(std::string("fdatasync: ") + std::strerror(errno));
    // Some file systems take O_DIRECT and still keep the file in memory
    // (tmpfs since Linux 6.6): that is DRAM, not storage.
    const double resident = resident_fraction(fd, file_bytes);
    if (resident > 0.01) {
      ::close(fd);
      return finish(json{{"o_direct", true},
                         {"skipped", "the file system under " + dir + " (" + info.value("file_system", std::string("?")) +
                                         ") accepts O_DIRECT but keeps " + std::to_string(int(resident * 100)) +
                                         "% of the file's pages in memory: storage not measured; name a directory on "
                                         "a disk with --dir"}});
    }
    uint64_t rng = 0x6b767469657221ull;
    const std::vector<int> depths = s.quick ? std::vector<int>{1, 8, 32} : std::vector<int>{1, 4, 16, 64};
    const auto sizes = geometric(4096, s.quick ? (size_t(4) << 20) : (size_t(64) << 20), s.quick ? 4 : 2);
    for (bool write : {false, true}) {
      for (int q : depths) {
        const std::string name = std::string(write ? "storage_write_qd" : "storage_read_qd") + std::to_string(q);
        json p{{"kind", "storage"},
               {"path", write ? "storage_write" : "storage_read"},
               {"queue_depth", q},
               {"what", std::string("Q=") + std::to_string(q) + " O_DIRECT " + (write ? "writes" : "reads") +
                            " of S bytes submitted at once through io_uring, random S-aligned offsets; a run "
                            "ends when all Q complete; bytes = S (one request), times_us per run"},
               {"samples", json::array()}};
        for (size_t size : sizes) {
          if (size * q > batch_cap || size > file_bytes) continue;
          if (std::chrono::steady_clock::now() > s.deadline) {
            p["truncated"] = true;
            break;
          }
          const size_t slots = file_bytes / size;
          std::vector<double> t;
          // Small runs are cheap and noisy: more of them.
          const int reps = size * q <= (size_t(256) << 10) ? s.repetitions * 3 : s.repetitions;
          for (int r = 0; r < s.warmup + reps; ++r) {
            std::vector<uint64_t> offs(q);
            for (auto& o : offs) o = (splitmix(rng) % slots) * size;
            const double t0 = now_s();
            ring.batch(write, fd, buf.p, size, offs);
            if (r >= s.warmup) t.push_back((now_s() - t0) * 1e6);
          }
          json smp = sample(static_cast<double>(size), t);
          smp["queue_depth"] = q;
          smp["GBps"] = static_cast<double>(size) * q / smp["median_us"].get<double>() * 1e-3;
          p["samples"].push_back(smp);
        }
        if (!p["samples"].empty()) (*probes)[name] = p;
      }
    }
    // Page-cache bypass: with O_DIRECT none of the file's pages is resident.
    const long page = sysconf(_SC_PAGESIZE);
    void* m = mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      std::vector<unsigned char> vec((file_bytes + page - 1) / page);
      size_t resident = 0;
      if (mincore(m, file_bytes, vec.data()) == 0)
        for (unsigned char c : vec) resident += c & 1;
      munmap(m, file_bytes);
      out["page_cache_check"] = {{"pages", vec.size()},
                                 {"resident", resident},
                                 {"bypassed", resident * 100 <= vec.size()},
                                 {"how", "mincore() over the probe file after every run"}};
    } else {
      out["page_cache_check"] = {{"bypassed", nullptr}, {"how", std::string("mmap failed: ") + std::strerror(errno)}};
    }
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  ::close(fd);
  return finish(out);
}

}  // namespace kvtier::host
