// A KV cache pool across the nodes of a cluster (Mooncake Store): the host
// memory and drives below every instance's GPU form one prefix cache with one
// index of cached prompt blocks, which every instance looks up and reads.
//
// Each instance brings its share of its tier devices (what its own prefix
// cache would have held); a pool tier's capacity is the sum of the shares,
// and the tier evicts in one order over all of them (the eviction policy the
// local caches use, over the whole tier). Where a block lies is the pool's
// placement: local first, a block an instance writes (or promotes) goes to
// its own share and a victim demoted to the tier below stays with the share
// it was in; or hashed, every block goes to the share its hash names, in
// every tier. Where that share is full the block takes the slot the tier's
// last victim freed, or else the share with the most room. A block is read from
// the device of the share that holds it, over the route from there to the
// reading GPU: the fabric when the share is on another node.
//
// Hot blocks may be replicated (replicate_after > 0): a block of the top
// tier read from another node that many times gets a copy in the share of
// the member whose read made it hot, written from that member's GPU once the
// read brought it there; that member reads it locally from then on. A copy
// is extra: it holds a slot of its share that the index does not count, and
// gives it back to a block the index places there when the share is
// otherwise full (copies yield, oldest first), or when its block leaves the
// top tier. Where a block is cached stays the index's alone.
//
// The pool is one index; the instances are its members, numbered as the
// cluster numbers its instances. Member m acts (act_as) before it references
// blocks, so that the moves the pool makes on its behalf (writes into a
// share, demotions between shares) are the ones its transfer planner runs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/core/job.h"
#include "sim/replay/replay.h"
#include "sim/serving/scheduler.h"

namespace kvtier {

class JobBoard;

class KvPool final : public ReplayObserver {
 public:
  struct Member {
    size_t gpu = 0;                   // the instance's (first) GPU
    uint32_t gpu_node = 0;            // its node
    std::vector<size_t> devs;         // per pool tier: the device its share is on
    std::vector<uint32_t> nodes;      // per pool tier: that device's node
    std::vector<uint64_t> capacity;   // per pool tier: its share, in blocks
  };
  // A move the pool made for the member acting: `blocks` blocks into tier
  // `tier` from device `from` (its GPU, or a share of the tier above) to `to`.
  struct Move {
    uint32_t tier = 0;
    size_t from = 0, to = 0;
    uint64_t blocks = 0;
    bool across_nodes = false;
  };
  static constexpr uint32_t kNoMember = UINT32_MAX;
  enum class Placement { LocalFirst, Hashed };

  // `like`: one member's tiers (their policy, inclusion, block size); the
  // pool's capacities are the members' shares summed.
  KvPool(const ReplayConfig& like, std::vector<Member> members, uint64_t distinct_blocks,
         Placement placement = Placement::LocalFirst, uint32_t replicate_after = 0, uint32_t max_copies = 1);
  ~KvPool() override;
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  ReplaySession& index() { return *index_; }
  const ReplaySession& index() const { return *index_; }
  uint32_t tiers() const { return tiers_; }
  size_t members() const { return members_.size(); }
  const Member& member(size_t m) const { return members_[m]; }
  // The member whose share of tier `tier` holds block b (kNoMember: not there).
  uint32_t home(uint32_t b, uint32_t tier) const { return home_[size_t(tier) * blocks_ + b]; }
  // Where member `reader` reads block b of tier `tier` from: its own copy if
  // it holds one, else the block's home.
  uint32_t source(uint32_t b, uint32_t tier, uint32_t reader) const {
    return tier == 0 && has_copy(b, reader) ? reader : home(b, tier);
  }
  // Member `reader` read block b of the top tier from another node: one more
  // read towards replicate_after, and a copy made for it when it gets there
  // (a move from its GPU into its own share) if its share has room and the
  // block has fewer than max_copies copies (the k-th held at once after k x
  // replicate_after such reads).
  void read_remotely(uint32_t b, uint32_t reader);
  uint32_t replicate_after() const { return replicate_after_; }
  uint32_t max_copies() const { return max_copies_; }
  // Copies made so far, and held now.
  uint64_t replicas_made() const { return replicas_made_; }
  uint64_t replicas_held() const { return replicas_held_; }
  // Member m references blocks next.
  void act_as(uint32_t m) { actor_ = m; }
  // serving.prefix_cache.warm: the pool starts holding every block of `reqs`
  // (the whole stream), referenced in stream order before time 0, as far as
  // its tiers hold them. No member writes them: each is placed with no share
  // preferred (hashed: its hash's; a demotion stays with the share above),
  // no move is made, and each is landed.
  void warm(const std::vector<ServingRequest>& reqs);
  // Blocks of member m's share of tier `tier` in use.
  uint64_t used(uint32_t m, uint32_t tier) const { return used_[size_t(m) * tiers_ + tier]; }
  // The moves made for member m since the last call, tier by tier, each
  // tier's in the order first made; the list is emptied.
  std::vector<Move> take_moves(uint32_t m);
  // The transfers member m runs are jobs of `board`; the moves it took last
  // end with job `j` (its writes are one chain: each waits for the one
  // before), so the blocks they brought in are there once j is done.
  void set_board(uint32_t m, JobBoard* board) { boards_[m] = board; }
  JobBoard* board(uint32_t m) const { return boards_[m]; }
  void written(uint32_t m, JobId j);
  // The member whose move last brought block b in, and that move's last job
  // (kNoMember, kNoJob: none yet); unsent: the move is not submitted yet (its
  // member references blocks at an iteration's start and moves them after it).
  uint32_t writer(uint32_t b) const { return writer_[b]; }
  JobId write_job(uint32_t b) const { return write_job_[b]; }
  bool unsent(uint32_t b) const { return unsent_[b] != 0; }

  void entered(uint32_t block, uint32_t tier) override;
  void left(uint32_t block, uint32_t tier) override;

 private:
  uint32_t place(uint32_t tier, uint32_t preferred);
  // Placement::Hashed: the member block b belongs to.
  uint32_t hashed_member(uint32_t b) const;
  bool has_copy(uint32_t b, uint32_t m) const {
    return !copy_bits_.empty() && (copy_bits_[size_t(b) * words_ + m / 64] >> (m % 64) & 1u);
  }
  // Block b's copy in member m's share, or every copy of b, gives its slot back.
  void drop_copy(uint32_t b, uint32_t m);
  void drop_copies(uint32_t b);
  // Member m's oldest copy gives its slot back (false: it holds none).
  bool yield_replica(uint32_t m);
  // A move of one block for member m (merged into one of the same route).
  void add_move(uint32_t m, uint32_t tier, size_t from, size_t to, bool across_nodes);

  ReplayConfig cfg_;
  std::unique_ptr<ReplaySession> index_;
  std::vector<Member> members_;
  uint32_t tiers_ = 0;
  uint64_t blocks_ = 0;
  Placement placement_ = Placement::LocalFirst;
  uint32_t replicate_after_ = 0, max_copies_ = 1;
  size_t words_ = 0;                    // 64-bit words of members per block in copy_bits_
  std::vector<uint64_t> copy_bits_;     // block x member: a copy in that member's share of the top tier
  std::vector<uint32_t> copies_;        // per block: its copies now
  std::vector<uint32_t> remote_reads_;  // per block: reads from other nodes since it entered the top tier
  std::vector<std::vector<uint32_t>> replica_order_;  // per member: its copies, oldest first (some dropped since)
  std::vector<size_t> replica_head_;    // per member: where its oldest live copy may be in replica_order_
  uint64_t replicas_made_ = 0, replicas_held_ = 0;
  std::vector<uint32_t> home_;     // tier x block: the member whose share holds it (the last one, once it left)
  std::vector<uint64_t> used_;     // member x tier
  std::vector<uint32_t> freed_;    // per tier: the member whose share the tier's last victim left
  uint32_t actor_ = 0;
  bool warming_ = false;  // warm(): blocks enter with no writer
  std::vector<std::vector<Move>> pending_;  // per member
  std::vector<std::vector<uint32_t>> brought_;  // per member: blocks its pending moves bring in
  std::vector<JobBoard*> boards_;
  std::vector<uint32_t> writer_;  // per block
  std::vector<JobId> write_job_;  // per block
  std::vector<uint8_t> unsent_;   // per block
};

}  // namespace kvtier
