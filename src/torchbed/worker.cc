// The worker process: one model, its own intra-op threads, an open-loop load generator.

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "corun/core/rng.h"
#include "corun/torchbed/torchbed.h"
#include "protocol.h"
#include "zoo.h"

namespace corun {

namespace {

using Clock = std::chrono::steady_clock;
using torchbed::WorkerJob;
using torchbed::WorkerReport;
using torchbed::ZooModel;

double ms_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

Clock::time_point at(Clock::time_point t0, double s) {
  return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

bool read_line(int fd, std::string& out) {
  out.clear();
  char c = 0;
  while (true) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return false;
    if (c == '\n') return true;
    out.push_back(c);
  }
}

bool write_line(int fd, const std::string& s) {
  const std::string line = s + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

/// Whether the model runs closed loop: a `concurrency` demand (benchmark mode), or a demand
/// of 0 (back to back, the way the tests drive it). A Poisson draw that happens to hold no
/// arrival is not a closed loop.
bool closed_loop(const WorkerJob& job) {
  if (job.demand.closed_loop()) return true;
  return job.arch.family == ModelFamily::kVision ? job.demand.fps <= 0 : job.demand.rps <= 0;
}

/// Requests a closed loop keeps in flight: the demand's concurrency, else one per server
/// (an LLM's request_concurrency slots; a batched model's single forward pass).
std::size_t in_flight(const WorkerJob& job) {
  if (job.demand.closed_loop()) return static_cast<std::size_t>(job.demand.concurrency);
  return job.arch.family == ModelFamily::kLlm
             ? static_cast<std::size_t>(std::max(1, job.settings.request_concurrency))
             : 1;
}

/// Arrival times (s) in [0, window): periodic frames with deterministic skipping, Poisson
/// requests, or none (closed loop) when the demand is 0.
std::vector<double> arrivals(const WorkerJob& job, Rng& rng) {
  std::vector<double> out;
  if (closed_loop(job)) return out;
  if (job.arch.family == ModelFamily::kVision) {
    const double keep = 1 - job.settings.skip_rate;
    for (long i = 0;; ++i) {
      const double t = static_cast<double>(i) / job.demand.fps;
      if (t >= job.window_s) break;
      const auto di = static_cast<double>(i);
      if (std::floor((di + 1) * keep) > std::floor(di * keep)) out.push_back(t);
    }
    return out;
  }
  for (double t = -std::log(1 - rng.uniform()) / job.demand.rps; t < job.window_s;
       t += -std::log(1 - rng.uniform()) / job.demand.rps) {
    out.push_back(t);
  }
  return out;
}

/// The hand-over of a make-before-break swap, as the old copy sees it: the parent may send a
/// cut line during the window; from its time on, arrivals are the new copy's. Checked
/// between passes without blocking (one poll(2), microseconds beside a forward pass).
class Handover {
 public:
  explicit Handover(int in_fd) : fd_(in_fd) {}
  /// Seconds after the window's start from which arrivals are not this copy's (infinity
  /// until a cut arrives).
  double cut_s() {
    if (cut_s_ == kNever) {
      pollfd p{fd_, POLLIN, 0};
      std::string line;
      if (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0 && read_line(fd_, line)) {
        if (auto cut = torchbed::decode_cut(line)) cut_s_ = cut->at_s;
      }
    }
    return cut_s_;
  }
  /// The earlier of `end` and the cut (no time point is formed from an infinite cut).
  Clock::time_point end(Clock::time_point t0, Clock::time_point window_end) {
    const double cut = cut_s();
    return cut == kNever ? window_end : std::min(window_end, at(t0, cut));
  }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  int fd_;
  double cut_s_ = kNever;
};

Precision cost_precision(const WorkerJob& job) {
  return job.int8 ? Precision::kInt8 : Precision::kFp32;
}

/// Vision and encoder: batches fill from the arrival stream, one server.
void serve_batches(const WorkerJob& job, ZooModel& model, Clock::time_point t0,
                   const std::vector<double>& arr, Handover& handover, WorkerReport& r) {
  const int size = job.arch.family == ModelFamily::kVision ? job.settings.imgsz
                                                            : job.arch.default_seq_len;
  const int b = std::max(1, job.settings.batch);
  const double bytes = forward_cost(job.arch, b, size, cost_precision(job)).bytes;
  const auto end = at(t0, job.window_s);
  if (closed_loop(job)) {
    // One server, N requests (batches) in flight, each re-sent when its answer returns: a
    // request waits for the ones sent before it, as a client of perf_analyzer would see.
    std::deque<Clock::time_point> sent(in_flight(job), Clock::now());
    while (Clock::now() < handover.end(t0, end)) {
      const auto sent_at = sent.front();
      sent.pop_front();
      model.forward(b, size);
      const auto done = Clock::now();
      const double ms = ms_since(sent_at, done);
      for (int i = 0; i < b; ++i) r.latency_ms.push_back(ms);
      r.served += b;
      r.dram_bytes += bytes;
      sent.push_back(done);
    }
    return;
  }
  for (std::size_t i = 0; i + static_cast<std::size_t>(b) <= arr.size(); i += b) {
    const auto ready = at(t0, arr[i + static_cast<std::size_t>(b) - 1]);
    std::this_thread::sleep_until(ready);
    if (Clock::now() >= end) break;
    if (arr[i + static_cast<std::size_t>(b) - 1] >= handover.cut_s()) break;  // the new copy's
    model.forward(b, size);
    const auto done = Clock::now();
    for (std::size_t k = i; k < i + static_cast<std::size_t>(b); ++k) {
      r.latency_ms.push_back(ms_since(at(t0, arr[k]), done));
    }
    r.served += b;
    r.dram_bytes += bytes;
  }
}

/// LLM: continuous batching. Waiting requests are admitted while fewer than
/// request_concurrency are in flight (their prefill runs in prefill_chunk pieces between
/// decode steps); every decode step advances all admitted sequences by one token.
void serve_llm(const WorkerJob& job, ZooModel& model, Clock::time_point t0,
               const std::vector<double>& arr, Handover& handover, WorkerReport& r) {
  struct Active {
    int slot;
    Clock::time_point arrival, first_token, last_token;
    int produced;
  };
  const int prompt = std::max(1, job.demand.prompt_tokens);
  const int output = std::max(1, job.demand.output_tokens);
  const int chunk = std::max(1, job.settings.prefill_chunk);
  const auto c = static_cast<std::size_t>(std::max(1, job.settings.request_concurrency));
  const Precision p = cost_precision(job);
  const auto end = at(t0, job.window_s);
  const bool closed = closed_loop(job);
  // Closed loop: the send times of requests not yet admitted; each answer sends the next.
  std::deque<Clock::time_point> pending;
  if (closed) pending.assign(in_flight(job), Clock::now());
  std::size_t next = 0;
  std::vector<Active> active;
  // Arrivals of this copy: those before a hand-over's cut (all of them without one).
  auto mine = [&](std::size_t i) { return i < arr.size() && arr[i] < handover.cut_s(); };
  while (Clock::now() < end) {
    // A closed loop sends nothing more after a hand-over; the new copy keeps the loop going.
    if (closed && Clock::now() >= handover.end(t0, end)) pending.clear();
    while (active.size() < c &&
           (closed ? !pending.empty() : (mine(next) && at(t0, arr[next]) <= Clock::now()))) {
      Clock::time_point arrival;
      if (closed) {
        arrival = pending.front();
        pending.pop_front();
      } else {
        arrival = at(t0, arr[next]);
        ++next;
      }
      const int slot = model.open_sequence(prompt + output + 1);
      for (int done = 0; done < prompt; done += chunk) {
        const int n = std::min(chunk, prompt - done);
        model.prefill(slot, n);
        r.dram_bytes += prefill_cost(job.arch, n, done, p).bytes;
      }
      const auto first = Clock::now();
      r.ttft_ms.push_back(ms_since(arrival, first));
      active.push_back({slot, arrival, first, first, 1});
      r.served += 1;
      if (Clock::now() >= end) break;
    }
    if (active.empty()) {
      if (closed || !mine(next)) break;
      std::this_thread::sleep_until(std::min(end, at(t0, arr[next])));
      continue;
    }
    std::vector<int> slots;
    double mean_context = 0;
    for (const auto& a : active) {
      slots.push_back(a.slot);
      mean_context += model.context(a.slot);
    }
    mean_context /= static_cast<double>(active.size());
    model.decode(slots);
    r.dram_bytes +=
        decode_cost(job.arch, static_cast<int>(active.size()), mean_context, p).bytes;
    r.served += static_cast<double>(active.size());
    const auto now = Clock::now();
    for (auto& a : active) {
      ++a.produced;
      a.last_token = now;
    }
    std::erase_if(active, [&](const Active& a) {
      if (a.produced < output) return false;
      r.latency_ms.push_back(ms_since(a.arrival, now));
      r.tpot_ms.push_back(ms_since(a.first_token, now) / (output - 1 > 0 ? output - 1 : 1));
      model.close_sequence(a.slot);
      if (closed) pending.push_back(now);
      return true;
    });
  }
  // A request still waiting for admission when the window closes has waited at least this
  // long for its first token: a lower bound, counted rather than dropped, or an overloaded
  // configuration would report only the lucky requests it admitted.
  const auto closed_at = Clock::now();
  for (; mine(next) && at(t0, arr[next]) <= closed_at; ++next) {
    r.ttft_ms.push_back(ms_since(at(t0, arr[next]), closed_at));
  }
  for (const auto& sent_at : pending) r.ttft_ms.push_back(ms_since(sent_at, closed_at));
  // A request still decoding when the window closes has shown its token gaps so far: count
  // them, or a window shorter than one request's decode would see no TPOT at all (and a
  // slow configuration would look fast by losing its slowest requests).
  // The worker serves further windows: free the caches of the unfinished requests.
  for (const auto& a : active) {
    if (a.produced >= 2) {
      r.tpot_ms.push_back(ms_since(a.first_token, a.last_token) / (a.produced - 1));
    }
    model.close_sequence(a.slot);
  }
}

void warm_up(const WorkerJob& job, ZooModel& model) {
  if (job.arch.family == ModelFamily::kLlm) {
    const int slot = model.open_sequence(job.demand.prompt_tokens + 4);
    model.prefill(slot, std::max(1, std::min(job.demand.prompt_tokens, job.settings.prefill_chunk)));
    const int slots[] = {slot};
    model.decode(slots);
    model.close_sequence(slot);
  } else {
    const int size = job.arch.family == ModelFamily::kVision ? job.settings.imgsz
                                                              : job.arch.default_seq_len;
    model.forward(std::max(1, job.settings.batch), size);
  }
}

}  // namespace

namespace {

/// Builds and warms up `job`'s model; on failure writes the error report and returns none.
std::unique_ptr<ZooModel> build_warm(const WorkerJob& job, int out_fd) {
  WorkerReport r;
  auto model = torchbed::ZooModel::build(job.arch, {job.int8, job.device, job.seed});
  if (!model) {
    r.error = model.error().what();
    write_line(out_fd, torchbed::encode_report(r));
    return nullptr;
  }
  try {
    warm_up(job, **model);
  } catch (const std::exception& e) {
    r.error = std::string("warm-up failed: ") + e.what();
    write_line(out_fd, torchbed::encode_report(r));
    return nullptr;
  }
  return std::move(*model);
}

/// Serves one window from its start line: the arrivals of this copy (from `from_s`; a
/// restarted vision stream loses the frames of its outage) against `model`.
WorkerReport serve_window(WorkerJob& job, ZooModel& model, const torchbed::WorkerGo& go,
                          Handover& handover) {
  const auto t0 = go.t0_ns > 0 ? Clock::time_point(std::chrono::nanoseconds(go.t0_ns))
                               : Clock::now();
  job.window_s = go.window_s;
  Rng rng(derive_seed(go.seed, {0x70726367ULL}));
  std::vector<double> arr = arrivals(job, rng);
  WorkerReport window;
  // This copy serves from now: after its build and warm-up when it (re)started in the window.
  const double ready_s = std::max(0.0, ms_since(t0, Clock::now()) / 1000);
  if (go.restarted) window.ready_ms = ready_s * 1000;
  const double lost_before =
      go.restarted && job.arch.family == ModelFamily::kVision ? std::max(go.from_s, ready_s)
                                                               : go.from_s;
  std::erase_if(arr, [&](double t) { return t < lost_before; });
  try {
    if (job.arch.family == ModelFamily::kLlm) {
      serve_llm(job, model, t0, arr, handover, window);
    } else {
      serve_batches(job, model, t0, arr, handover, window);
    }
  } catch (const std::exception& e) {
    window.error = std::string("inference failed: ") + e.what();
  }
  window.torch_config = torchbed::torch_config();
  return window;
}

}  // namespace

int torch_worker_main(int in_fd, int out_fd) {
  std::string line;
  if (!read_line(in_fd, line)) return 3;
  auto job = torchbed::decode_job(line);
  if (!job) {
    WorkerReport r;
    r.error = job.error().what();
    write_line(out_fd, torchbed::encode_report(r));
    return 2;
  }
  torchbed::init_torch_process(job->threads);
  std::unique_ptr<ZooModel> model = build_warm(*job, out_fd);
  if (model == nullptr) return 1;
  if (!write_line(out_fd, R"({"ready":true})")) return 3;
  // One window per start line, until the parent closes our input (it keeps idle workers
  // for later measurements of the same model and settings).
  Handover handover(in_fd);
  while (read_line(in_fd, line)) {
    switch (torchbed::kind_of(line)) {
      case torchbed::ParentLine::kCut:
        continue;  // a hand-over that came after this copy's window ended
      case torchbed::ParentLine::kJob: {
        // A reload: the same process frees the old model, then builds and warms up the new
        // one (a server that unloads before it loads). Threads are fixed at the process's
        // start; the parent restarts instead when they change.
        auto next = torchbed::decode_job(line);
        if (!next) return 2;
        model.reset();
        *job = std::move(*next);
        model = build_warm(*job, out_fd);
        if (model == nullptr) return 1;
        if (!write_line(out_fd, R"({"ready":true})")) return 3;
        continue;
      }
      case torchbed::ParentLine::kGo:
        break;
    }
    auto go = torchbed::decode_go(line);
    if (!go) return 3;
    handover = Handover(in_fd);
    const WorkerReport window = serve_window(*job, *model, *go, handover);
    if (!write_line(out_fd, torchbed::encode_report(window))) return 3;
    if (!window.error.empty()) return 1;
  }
  return 0;
}

std::string torch_build_info() { return torchbed::torch_config(); }

}  // namespace corun
