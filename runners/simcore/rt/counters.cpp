// Performance counters (request key `count 1`, checked builds only): what a GPU's memory system
// would see. The simulator runs one lane after another, so the lanes of one warp meet again by
// counting: a thread's k-th execution of an access site (pc) pairs with the k-th execution of the
// same site by the other lanes of its warp, and that set is one warp-level memory instruction.
// Per instruction: global memory -> the distinct aligned 32-byte sectors it touches; shared
// memory -> wavefronts (32 banks of 4 bytes: the most distinct words one bank must serve).
#include <malloc.h>

#include "runtime.h"

namespace __kp {

namespace {

struct Totals {
  uint64_t v[C_COUNT] = {};
};

struct ExecKey {
  uintptr_t pc;
  uint32_t warp, occ;
  bool operator==(const ExecKey& o) const { return pc == o.pc && warp == o.warp && occ == o.occ; }
};
struct ExecHash {
  uint64_t operator()(const ExecKey& k) const {
    return k.pc * 0x9E3779B97F4A7C15ull ^ ((uint64_t)k.warp << 40) ^ k.occ;
  }
};

// One warp-level instruction being assembled from its lanes' accesses.
struct Exec {
  uint8_t space = 0;  // 0 global, 1 shared, 2 global atomic, 3 shared atomic
  uint32_t buffer = 0;  // global: index in args of the buffer the first lane touched
  bool write = false;
  uint32_t lanes = 0;
  uint64_t bytes = 0;
  Vec<uint64_t> units;  // global: sector numbers; shared: 4-byte word numbers
};

struct State {
  uint32_t serial = ~0u;
  HashMap<uint64_t, uint32_t> occ;  // (pc, thread) -> executions so far
  HashMap<ExecKey, Exec, ExecHash> execs;
  Vec<uint64_t> scratch;
  // (buffer index << 48 | 64-byte segment) of each segment the running group read
  Vec<uint64_t> group_reads;
  Vec<uint64_t> buffer_group_reads;  // per buffer: the sum of those over groups
  struct Write { uint32_t warp; uint64_t sector, bytes; };
  Vec<Write> group_writes;  // (warp, sector, bytes) of the running group's stores
  HashMap<uintptr_t, char> atomic_addrs;  // distinct global atomic addresses
  Vec<uint64_t> blocks;  // executions per basic block ID (runners/opcount.py)
  Totals t;
};

thread_local State* t_state = nullptr;
Mutex g_mu;
Totals g_totals;
HashMap<uintptr_t, char> g_atomic_addrs;
Vec<uint64_t> g_buffer_group_reads;
Vec<uint64_t> g_blocks;
const uint64_t kSegMask = (1ull << 48) - 1;
// Launch footprint: one bit per 32-byte sector of each buffer argument read (2 i) and written
// (2 i + 1), i its index in args.
Vec<Vec<uint64_t>> g_touched;

uint64_t wavefronts(Vec<uint64_t>& words, Vec<uint64_t>& scratch) {
  sort(words.begin(), words.end());
  words.resize(unique(words.begin(), words.end()) - words.begin());
  scratch.assign(32, 0);
  uint64_t worst = 0;
  for (uint64_t w : words) worst = max(worst, ++scratch[w % 32]);
  uint64_t by_width = (words.size() * 4 + 127) / 128;  // 128 bytes per wavefront at best
  return max(worst, by_width);
}

void flush(State* s) {
  for (auto& [key, e] : s->execs) {
    Totals& t = s->t;
    if (e.space == 0) {
      sort(e.units.begin(), e.units.end());
      // per distinct sector: the bytes the lanes asked of it (lane accesses are 1-16 bytes)
      uint64_t lane_bytes = e.lanes ? e.bytes / e.lanes : 4, sectors = 0;
      uint64_t seg64 = 0, last_seg = ~0ull;
      for (size_t i = 0; i < e.units.size();) {
        size_t j = i;
        while (j < e.units.size() && e.units[j] == e.units[i]) j++;
        sectors++;
        if (e.write) s->group_writes.push_back({key.warp, e.units[i], (j - i) * lane_bytes});
        if (e.units[i] / 2 != last_seg) seg64++, last_seg = e.units[i] / 2;
        if (!e.write) s->group_reads.push_back((uint64_t)e.buffer << 48 | (e.units[i] / 2 & kSegMask));
        i = j;
      }
      t.v[e.write ? C_GST_INSTR : C_GLD_INSTR]++;
      t.v[e.write ? C_GST_SECTORS : C_GLD_SECTORS] += sectors;
      t.v[e.write ? C_GST_BYTES : C_GLD_BYTES] += e.bytes;
      t.v[e.write ? C_GST_SEG64 : C_GLD_SEG64] += seg64;
      t.v[C_LANE_ACCESSES] += e.lanes;
    } else if (e.space == 1) {
      uint64_t waves = wavefronts(e.units, s->scratch);
      t.v[e.write ? C_SST_INSTR : C_SLD_INSTR]++;
      t.v[e.write ? C_SST_WAVES : C_SLD_WAVES] += waves;
      t.v[C_LANE_ACCESSES] += e.lanes;
    } else {
      sort(e.units.begin(), e.units.end());
      uint64_t distinct = unique(e.units.begin(), e.units.end()) - e.units.begin();
      t.v[e.space == 2 ? C_GATOM_INSTR : C_SATOM_INSTR]++;
      t.v[e.space == 2 ? C_GATOM_OPS : C_SATOM_OPS] += e.lanes;
      // lanes that hit an address another lane of the instruction hit too: serialised
      t.v[C_ATOM_SAME_ADDR] += e.lanes - distinct;
      if (e.space == 2)
        for (uint64_t i = 0; i < distinct; i++) s->atomic_addrs[e.units[i]] = 1;
    }
  }
  s->execs.clear();
  s->occ.clear();
  // reads the group repeats hit in its SM's L1 or in L2: DRAM sees each segment once per group
  sort(s->group_reads.begin(), s->group_reads.end());
  uint64_t* end = unique(s->group_reads.begin(), s->group_reads.end());
  s->t.v[C_GLD_GROUP_SEG64] += end - s->group_reads.begin();
  s->buffer_group_reads.resize(g_launch.args.size());
  for (const uint64_t* it = s->group_reads.begin(); it != end; ++it)
    s->buffer_group_reads[*it >> 48]++;
  s->group_reads.clear();
  // sectors a warp writes only part of, over all its stores (a GPU with ECC reads them first)
  auto& w = s->group_writes;
  sort(w.begin(), w.end(), [](const State::Write& a, const State::Write& b) {
    return a.warp != b.warp ? a.warp < b.warp : a.sector < b.sector;
  });
  for (size_t i = 0; i < w.size();) {
    size_t j = i;
    uint64_t bytes = 0;
    for (; j < w.size() && w[j].warp == w[i].warp && w[j].sector == w[i].sector; j++)
      bytes += w[j].bytes;
    s->t.v[C_GST_PARTIAL] += bytes < 32;
    i = j;
  }
  // distinct sectors the group wrote: each reaches DRAM once, however many stores made it
  s->group_reads.clear();
  for (const State::Write& x : w) s->group_reads.push_back(x.sector);
  sort(s->group_reads.begin(), s->group_reads.end());
  s->t.v[C_GST_GROUP_SECTORS] +=
      unique(s->group_reads.begin(), s->group_reads.end()) - s->group_reads.begin();
  s->group_reads.clear();
  w.clear();
}

State* state_of(Worker* w) {
  State* s = t_state;
  if (!s) s = t_state = create<State>();
  if (s->serial != w->group_serial) {
    flush(s);
    s->serial = w->group_serial;
    s->t.v[C_GROUPS]++;
    s->t.v[C_THREADS] += w->n;
    s->t.v[C_TG_BYTES] = max<uint64_t>(s->t.v[C_TG_BYTES],
                                       w->tg_used - w->tg_first + g_launch.dyn_smem);
  }
  return s;
}

}  // namespace

void counters_setup() {
  // The counters free much memory on worker threads; glibc's trimming of a thread arena reads
  // /proc/sys/vm/overcommit_memory, which the lockdown forbids (and the fault handler would
  // then deadlock on the arena lock). A threshold no arena reaches keeps it from trimming.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // reads and writes apart: both cross DRAM
  g_touched.assign(2 * g_launch.args.size(), Vec<uint64_t>());
  for (size_t i = 0; i < g_launch.args.size(); i++) {
    const Arg& a = g_launch.args[i];
    if (!a.is_buffer) continue;
    g_touched[2 * i].assign((a.bytes + 31) / 32 / 64 + 1, 0);
    g_touched[2 * i + 1].assign((a.bytes + 31) / 32 / 64 + 1, 0);
  }
}

void count_access(Worker* w, uintptr_t a, size_t n, bool write, void* pc, int space) {
  if (!n) return;
  State* s = state_of(w);
  // tg memory also counts the dynamic shared memory of a CUDA launch; addresses are relative
  // to its start so banks line up as on the GPU (both are 16-byte aligned at least).
  uintptr_t base = 0;
  size_t buffer = 0;
  if (space == 1 || space == 3) {
    uintptr_t tg = (uintptr_t)w->tg_arena;
    base = a - tg < w->tg_capacity ? tg : (uintptr_t)w->dyn_smem;
  } else {
    const Arg* b = buffer_of(a);
    if (!b) return;  // thread-local data
    size_t index = buffer = b - g_launch.args.data();
    if (a >= (uintptr_t)b->data && a + n <= (uintptr_t)(b->data + b->bytes)) {
      Vec<uint64_t>& bits = g_touched[2 * index + write];
      for (uint64_t sec = (a - (uintptr_t)b->data) / 32; sec <= (a + n - 1 - (uintptr_t)b->data) / 32;
           sec++)
        __atomic_fetch_or(&bits[sec / 64], 1ull << (sec % 64), __ATOMIC_RELAXED);
    }
  }
  uint32_t me = w->running->pos.linear;
  uint64_t occ_key = ((uint64_t)(uintptr_t)pc << 1 | write) ^ ((uint64_t)me << 48);
  uint32_t k = s->occ[occ_key]++;
  Exec& e = s->execs[ExecKey{(uintptr_t)pc << 1 | write, me / __KP_SIMD_WIDTH, k}];
  if (!e.lanes) e.buffer = (uint32_t)buffer;
  e.space = (uint8_t)space;
  e.write = write;
  e.lanes++;
  e.bytes += n;
  if (space == 0) {
    for (uint64_t sec = a >> 5; sec <= (a + n - 1) >> 5; sec++) e.units.push_back(sec);
  } else if (space == 1) {
    for (uint64_t word = (a - base) >> 2; word <= (a - base + n - 1) >> 2; word++)
      e.units.push_back(word);
  } else {
    e.units.push_back(a);
  }
}

void count_event(int which) {
  Worker* w = t_worker;
  if (!w || !w->running) return;
  state_of(w)->t.v[which]++;
}

void counters_worker_done() {
  State* s = t_state;
  if (!s) return;
  flush(s);
  Lock lock(g_mu);
  for (auto& kv : s->atomic_addrs) g_atomic_addrs[kv.key] = 1;
  if (g_blocks.size() < s->blocks.size()) g_blocks.resize(s->blocks.size());
  for (size_t i = 0; i < s->blocks.size(); i++) g_blocks[i] += s->blocks[i];
  g_buffer_group_reads.resize(g_launch.args.size());
  for (size_t i = 0; i < s->buffer_group_reads.size(); i++)
    g_buffer_group_reads[i] += s->buffer_group_reads[i];
  for (int i = 0; i < C_COUNT; i++)
    g_totals.v[i] = i == C_TG_BYTES ? max(g_totals.v[i], s->t.v[i]) : g_totals.v[i] + s->t.v[i];
  destroy(s);
  t_state = nullptr;
}

static const char* const kNames[C_COUNT] = {
    "global_load_instructions", "global_load_sectors", "global_load_bytes",
    "global_store_instructions", "global_store_sectors", "global_store_bytes",
    "shared_load_instructions", "shared_load_wavefronts", "shared_store_instructions",
    "shared_store_wavefronts", "global_atomic_instructions", "global_atomic_ops",
    "shared_atomic_instructions", "shared_atomic_ops", "atomic_same_address_lanes",
    "barrier_arrivals", "collective_arrivals", "groups", "threads", "shared_bytes_per_group",
    "lane_accesses", "global_load_segments64", "global_store_segments64",
    "global_load_group_segments64", "global_store_partial_sectors",
    "global_store_group_sectors"};

void write_counters(Str& out) {
  char buf[96];
  out += ",\n \"counters\": {";
  for (int i = 0; i < C_COUNT; i++) {
    snprintf(buf, sizeof buf, "%s\"%s\": %llu", i ? ", " : "", kNames[i],
             (unsigned long long)g_totals.v[i]);
    out += buf;
  }
  uint64_t footprint = 0;
  for (const auto& bits : g_touched)
    for (uint64_t word : bits) footprint += __builtin_popcountll(word);
  snprintf(buf, sizeof buf, ", \"footprint_sectors\": %llu, \"atomic_addresses\": %llu",
           (unsigned long long)footprint, (unsigned long long)g_atomic_addrs.size());
  out += buf;
  // per buffer: bytes, sectors read and written, and the groups' distinct read segments
  out += ", \"buffers\": {";
  bool first = true;
  for (size_t i = 0; i < g_launch.args.size(); i++) {
    const Arg& a = g_launch.args[i];
    if (!a.is_buffer || strchr(a.name.c_str(), '"')) continue;
    uint64_t bits[2] = {0, 0};
    for (int w = 0; w < 2; w++)
      for (uint64_t word : g_touched[2 * i + w]) bits[w] += __builtin_popcountll(word);
    char one[224];
    snprintf(one, sizeof one, "%s\"%.64s\": {\"bytes\": %zu, \"read_sectors\": %llu, "
             "\"written_sectors\": %llu, \"group_read_segments64\": %llu}", first ? "" : ", ",
             a.name.c_str(), a.bytes, (unsigned long long)bits[0], (unsigned long long)bits[1],
             (unsigned long long)(i < g_buffer_group_reads.size() ? g_buffer_group_reads[i] : 0));
    out += one;
    first = false;
  }
  out += "}";
  // basic blocks executed (counting builds only: runners/opcount.py): [[ID, executions], ...]
  out += ", \"blocks\": [";
  first = true;
  for (size_t i = 0; i < g_blocks.size(); i++) {
    if (!g_blocks[i]) continue;
    snprintf(buf, sizeof buf, "%s[%zu, %llu]", first ? "" : ", ", i,
             (unsigned long long)g_blocks[i]);
    out += buf;
    first = false;
  }
  out += "]}";
}

}  // namespace __kp

// Counting builds call this at the start of every basic block of the kernel library (its
// SanitizerCoverage calls, renamed by runners/opcount.py); executions are summed per ID.
extern "C" void __kp_block(uint32_t id) {
  __kp::Worker* w = __kp::t_worker;
  if (!w || !w->running) return;
  __kp::Vec<uint64_t>& b = __kp::state_of(w)->blocks;
  if (id >= b.size()) b.resize(id + 1 + id / 2);
  b[id]++;
}

// The coverage module constructor's call; IDs are fixed at build time, so nothing to do.
extern "C" void __kp_block_init(uint32_t*, uint32_t*) {}
