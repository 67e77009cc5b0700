// What a host measurement records about the machine it ran on, so that a
// calibration can name the machine and a reader can tell two apart.
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "cuda_validate/host_probes.h"

namespace kvtier::host {

namespace {

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (f) std::getline(f, s);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s;
}

std::string cpuinfo_field(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    auto c = line.find(':');
    if (c == std::string::npos) continue;
    std::string v = line.substr(c + 1);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
  return "";
}

double meminfo_kB(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  std::string k;
  double v;
  std::string unit;
  while (f >> k >> v) {
    std::getline(f, unit);
    if (k == key + ":") return v;
  }
  return 0;
}

std::string fs_name(long type) {
  switch (static_cast<unsigned long>(type)) {
    case 0xEF53: return "ext2/3/4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794C7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    case 0x2FC12FC1: return "zfs";
    case 0xF2F52010: return "f2fs";
    default: {
      std::ostringstream o;
      o << "0x" << std::hex << type;
      return o.str();
    }
  }
}

}  // namespace

json machine_info() {
  json m = json::object();
  char host[256] = {0};
  m["hostname"] = gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("unknown");
  utsname u{};
  if (uname(&u) == 0) {
    m["kernel"] = std::string(u.sysname) + " " + u.release;
    m["arch"] = u.machine;
  }
  m["cpu_model"] = cpuinfo_field("model name");
  m["online_cpus"] = static_cast<int>(std::thread::hardware_concurrency());
  m["cpu_mhz"] = cpuinfo_field("cpu MHz");
  std::string flags = cpuinfo_field("flags"), keep;
  std::istringstream fs(flags);
  for (std::string f; fs >> f;)
    if (f.rfind("avx", 0) == 0 || f.rfind("sse", 0) == 0 || f == "fma" || f == "f16c" || f == "ssse3" ||
        f.rfind("amx", 0) == 0 || f == "hypervisor")
      keep += (keep.empty() ? "" : " ") + f;
  m["cpu_flags"] = keep;
  m["memory_bytes"] = meminfo_kB("MemTotal") * 1024.0;
  m["l3_bytes"] = sysconf(_SC_LEVEL3_CACHE_SIZE) > 0 ? static_cast<double>(sysconf(_SC_LEVEL3_CACHE_SIZE)) : 0.0;
  m["os"] = first_line("/etc/debian_version").empty() ? "unknown" : "Debian " + first_line("/etc/debian_version");
  return m;
}

json storage_info(const std::string& dir) {
  json s = json::object();
  s["directory"] = dir;
  struct statfs sf {};
  if (statfs(dir.c_str(), &sf) == 0) {
    s["file_system"] = fs_name(sf.f_type);
    s["free_bytes"] = static_cast<double>(sf.f_bavail) * static_cast<double>(sf.f_bsize);
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    const unsigned maj = major(st.st_dev), min = minor(st.st_dev);
    s["device_number"] = std::to_string(maj) + ":" + std::to_string(min);
    // /sys/dev/block/M:m is the partition or the disk; queue/ lives on the disk.
    const std::string base = "/sys/dev/block/" + std::to_string(maj) + ":" + std::to_string(min);
    std::string disk = base;
    if (first_line(base + "/queue/rotational").empty()) disk = base + "/..";
    std::ifstream ue(base + "/uevent");
    for (std::string line; std::getline(ue, line);)
      if (line.rfind("DEVNAME=", 0) == 0) s["block_device"] = line.substr(8);
    const std::string model = first_line(disk + "/device/model");
    const std::string vendor = first_line(disk + "/device/vendor");
    // virtio block devices have no model, only the PCI vendor id 0x1af4.
    s["device_model"] = !model.empty() ? model : vendor == "0x1af4" ? "virtio block device (vendor 0x1af4)"
                                                  : vendor.empty() ? "unknown" : vendor;
    const std::string rot = first_line(disk + "/queue/rotational");
    if (!rot.empty()) s["rotational"] = rot == "1";
    const std::string lbs = first_line(disk + "/queue/logical_block_size");
    if (!lbs.empty()) s["logical_block_bytes"] = std::stoi(lbs);
    const std::string sched = first_line(disk + "/queue/scheduler");
    if (!sched.empty()) s["scheduler"] = sched;
  }
  // The mount line for the longest mount point that prefixes dir.
  std::ifstream mounts("/proc/mounts");
  std::string best;
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream l(line);
    std::string dev, mp, type;
    l >> dev >> mp >> type;
    if (dir.rfind(mp, 0) == 0 && mp.size() >= best.size()) {
      best = mp;
      s["mount_point"] = mp;
      s["mount_source"] = dev;
      s["mount_type"] = type;
    }
  }
  return s;
}

}  // namespace kvtier::host
