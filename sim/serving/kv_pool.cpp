#include "sim/serving/kv_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvtier {

KvPool::KvPool(const ReplayConfig& like, std::vector<Member> members, uint64_t distinct_blocks, Placement placement,
               uint32_t replicate_after, uint32_t max_copies)
    : cfg_(like),
      members_(std::move(members)),
      tiers_(uint32_t(like.tiers.size())),
      blocks_(distinct_blocks),
      placement_(placement),
      replicate_after_(replicate_after),
      max_copies_(std::max<uint32_t>(1, max_copies)) {
  for (uint32_t u = 0; u < tiers_; ++u) {
    uint64_t cap = 0;
    for (const Member& m : members_) cap += m.capacity[u];
    cfg_.tiers[u].capacity_blocks = cap;
  }
  index_ = std::make_unique<ReplaySession>(cfg_, blocks_);
  index_->observe(this);
  home_.assign(size_t(tiers_) * blocks_, kNoMember);
  used_.assign(members_.size() * tiers_, 0);
  freed_.assign(tiers_, kNoMember);
  pending_.resize(members_.size());
  brought_.resize(members_.size());
  boards_.assign(members_.size(), nullptr);
  writer_.assign(blocks_, kNoMember);
  write_job_.assign(blocks_, kNoJob);
  unsent_.assign(blocks_, 0);
  words_ = (members_.size() + 63) / 64;
  copy_bits_.assign(replicate_after_ > 0 ? blocks_ * words_ : 0, 0);
  copies_.assign(replicate_after_ > 0 ? blocks_ : 0, 0);
  remote_reads_.assign(replicate_after_ > 0 ? blocks_ : 0, 0);
  replica_order_.resize(members_.size());
  replica_head_.assign(members_.size(), 0);
}

KvPool::~KvPool() = default;

// The preferred share if it has room, else the slot the tier's last victim
// freed, else the share with the most room (the first of them). Copies
// yield: a share full with some of them gives the oldest one's slot.
uint32_t KvPool::place(uint32_t tier, uint32_t preferred) {
  auto room = [&](uint32_t m) { return members_[m].capacity[tier] - used(m, tier); };
  if (preferred != kNoMember && room(preferred) > 0) return preferred;
  if (tier == 0 && preferred != kNoMember && yield_replica(preferred)) return preferred;
  if (freed_[tier] != kNoMember && room(freed_[tier]) > 0) return freed_[tier];
  uint32_t best = kNoMember;
  for (uint32_t m = 0; m < members_.size(); ++m)
    if (room(m) > 0 && (best == kNoMember || room(m) > room(best))) best = m;
  if (best == kNoMember && tier == 0) {
    if (freed_[tier] != kNoMember && yield_replica(freed_[tier])) return freed_[tier];
    for (uint32_t m = 0; m < members_.size(); ++m)
      if (yield_replica(m)) return m;
  }
  // The index never holds more blocks than the shares add up to.
  if (best == kNoMember) throw std::logic_error("kv pool: tier " + std::to_string(tier) + " is full in every share");
  return best;
}

void KvPool::drop_copy(uint32_t b, uint32_t m) {
  copy_bits_[size_t(b) * words_ + m / 64] &= ~(uint64_t(1) << (m % 64));
  --copies_[b];
  --used_[size_t(m) * tiers_];
  --replicas_held_;
}

void KvPool::drop_copies(uint32_t b) {
  for (size_t w = 0; copies_[b] > 0 && w < words_; ++w)
    for (uint64_t bits = copy_bits_[size_t(b) * words_ + w]; bits != 0; bits &= bits - 1)
      drop_copy(b, static_cast<uint32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
}

bool KvPool::yield_replica(uint32_t m) {
  if (copy_bits_.empty()) return false;
  std::vector<uint32_t>& order = replica_order_[m];
  size_t& head = replica_head_[m];
  while (head < order.size()) {
    const uint32_t b = order[head++];
    if (!has_copy(b, m)) continue;  // dropped since
    drop_copy(b, m);
    if (head > 1024 && head * 2 > order.size()) {
      order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(head));
      head = 0;
    }
    return true;
  }
  order.clear();
  head = 0;
  return false;
}

void KvPool::read_remotely(uint32_t b, uint32_t reader) {
  if (replicate_after_ == 0 || copies_[b] >= max_copies_ || has_copy(b, reader)) return;
  // The k-th copy held at once after k x replicate_after remote reads since
  // the block entered the tier (a copy that yielded its slot is made again
  // at the next read).
  if (++remote_reads_[b] < uint64_t(replicate_after_) * (copies_[b] + 1)) return;
  const Member& r = members_[reader];
  if (r.capacity[0] <= used(reader, 0)) return;  // a copy never evicts
  copy_bits_[size_t(b) * words_ + reader / 64] |= uint64_t(1) << (reader % 64);
  ++copies_[b];
  ++used_[size_t(reader) * tiers_];
  ++replicas_made_;
  ++replicas_held_;
  replica_order_[reader].push_back(b);
  // From the reader's GPU, where the read brought it, into its own share.
  add_move(reader, 0, r.gpu, r.devs[0], r.gpu_node != r.nodes[0]);
}

void KvPool::add_move(uint32_t m, uint32_t tier, size_t from, size_t to, bool across_nodes) {
  for (Move& mv : pending_[m])
    if (mv.tier == tier && mv.from == from && mv.to == to) {
      ++mv.blocks;
      return;
    }
  pending_[m].push_back(Move{tier, from, to, 1, across_nodes});
}

// Block ids are numbered in the order the stream first names them, so
// neighbours in a prompt have neighbouring ids: they are mixed (splitmix64's
// finaliser) before taking the remainder, as a store hashes a block's key.
uint32_t KvPool::hashed_member(uint32_t b) const {
  uint64_t z = uint64_t(b) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<uint32_t>(z % members_.size());
}

void KvPool::warm(const std::vector<ServingRequest>& reqs) {
  warming_ = true;
  for (const ServingRequest& q : reqs)
    for (uint32_t b : q.prefix_blocks) index_->reference(b);
  warming_ = false;
}

// A block enters a tier: written from the acting member's GPU into the top
// tier (or every tier, inclusive), or demoted from the share above.
void KvPool::entered(uint32_t b, uint32_t tier) {
  const bool from_gpu = tier == 0 || cfg_.inclusive;
  const uint32_t above = from_gpu ? kNoMember : home(b, tier - 1);
  if (warming_) {  // there before time 0: placed, and nothing moves
    const uint32_t m = place(tier, placement_ == Placement::Hashed ? hashed_member(b) : above);
    home_[size_t(tier) * blocks_ + b] = m;
    ++used_[size_t(m) * tiers_ + tier];
    return;
  }
  const uint32_t local = from_gpu ? actor_ : (above == kNoMember ? actor_ : above);
  const uint32_t m = place(tier, placement_ == Placement::Hashed ? hashed_member(b) : local);
  home_[size_t(tier) * blocks_ + b] = m;
  ++used_[size_t(m) * tiers_ + tier];
  const Member& src = members_[above == kNoMember ? actor_ : above];
  const size_t from = from_gpu ? members_[actor_].gpu : src.devs[tier - 1];
  const uint32_t from_node = from_gpu ? members_[actor_].gpu_node : src.nodes[tier - 1];
  const size_t to = members_[m].devs[tier];
  brought_[actor_].push_back(b);
  writer_[b] = actor_;
  unsent_[b] = 1;
  add_move(actor_, tier, from, to, from_node != members_[m].nodes[tier]);
}

void KvPool::left(uint32_t b, uint32_t tier) {
  const uint32_t m = home(b, tier);
  --used_[size_t(m) * tiers_ + tier];
  freed_[tier] = m;
  if (tier == 0 && !copy_bits_.empty()) {
    drop_copies(b);
    remote_reads_[b] = 0;
  }
}

void KvPool::written(uint32_t m, JobId j) {
  for (uint32_t b : brought_[m]) {
    writer_[b] = m;
    write_job_[b] = j;
    unsent_[b] = 0;
  }
  brought_[m].clear();
}

std::vector<KvPool::Move> KvPool::take_moves(uint32_t m) {
  std::vector<Move> out;
  out.swap(pending_[m]);
  std::stable_sort(out.begin(), out.end(), [](const Move& a, const Move& b) { return a.tier < b.tier; });
  return out;
}

}  // namespace kvtier
