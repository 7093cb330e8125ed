#include "protocol.h"

#include <nlohmann/json.hpp>

namespace corun::torchbed {

namespace {

using nlohmann::json;

json dims_to_json(const TransformerDims& d) {
  return {{"layers", d.layers}, {"hidden", d.hidden},       {"heads", d.heads},
          {"kv_heads", d.kv_heads}, {"head_dim", d.head_dim}, {"intermediate", d.intermediate},
          {"vocab", d.vocab},     {"gated_mlp", d.gated_mlp}, {"tied", d.tied_embeddings},
          {"positions", d.position_embeddings}};
}

TransformerDims dims_from_json(const json& j) {
  TransformerDims d;
  d.layers = j.at("layers");
  d.hidden = j.at("hidden");
  d.heads = j.at("heads");
  d.kv_heads = j.at("kv_heads");
  d.head_dim = j.at("head_dim");
  d.intermediate = j.at("intermediate");
  d.vocab = j.at("vocab");
  d.gated_mlp = j.at("gated_mlp");
  d.tied_embeddings = j.at("tied");
  d.position_embeddings = j.at("positions");
  return d;
}

}  // namespace

std::string encode_job(const WorkerJob& job) {
  const ModelArch& a = job.arch;
  json convs = json::array();
  for (const auto& l : a.conv_layers) {
    convs.push_back({l.c_in, l.c_out, l.kernel, l.stride, l.groups, l.repeats, l.conv_stride,
                     l.pooled});
  }
  const Settings& s = job.settings;
  const json j = {
      {"arch",
       {{"name", a.name},
        {"family", static_cast<int>(a.family)},
        {"reference_size", a.reference_size},
        {"conv_layers", convs},
        {"aux_kernels", a.aux_kernels},
        {"encoder", dims_to_json(a.encoder)},
        {"decoder", dims_to_json(a.decoder)},
        {"default_seq_len", a.default_seq_len}}},
      {"settings",
       {{"batch", s.batch},
        {"imgsz", s.imgsz},
        {"skip_rate", s.skip_rate},
        {"request_concurrency", s.request_concurrency},
        {"prefill_chunk", s.prefill_chunk}}},
      {"demand",
       {{"fps", job.demand.fps},
        {"rps", job.demand.rps},
        {"prompt_tokens", job.demand.prompt_tokens},
        {"output_tokens", job.demand.output_tokens},
        {"concurrency", job.demand.concurrency}}},
      {"int8", job.int8},
      {"threads", job.threads},
      {"window_s", job.window_s},
      {"seed", job.seed},
      {"device", job.device}};
  return j.dump();
}

Result<WorkerJob> decode_job(const std::string& line) {
  try {
    const json j = json::parse(line);
    WorkerJob job;
    const json& a = j.at("arch");
    job.arch.name = a.at("name");
    job.arch.family = static_cast<ModelFamily>(a.at("family").get<int>());
    job.arch.reference_size = a.at("reference_size");
    for (const auto& l : a.at("conv_layers")) {
      ConvLayer c;
      c.c_in = l.at(0);
      c.c_out = l.at(1);
      c.kernel = l.at(2);
      c.stride = l.at(3);
      c.groups = l.at(4);
      c.repeats = l.at(5);
      c.conv_stride = l.at(6);
      c.pooled = l.at(7);
      job.arch.conv_layers.push_back(c);
    }
    job.arch.aux_kernels = a.at("aux_kernels");
    job.arch.encoder = dims_from_json(a.at("encoder"));
    job.arch.decoder = dims_from_json(a.at("decoder"));
    job.arch.default_seq_len = a.at("default_seq_len");
    const json& s = j.at("settings");
    job.settings.batch = s.at("batch");
    job.settings.imgsz = s.at("imgsz");
    job.settings.skip_rate = s.at("skip_rate");
    job.settings.request_concurrency = s.at("request_concurrency");
    job.settings.prefill_chunk = s.at("prefill_chunk");
    const json& d = j.at("demand");
    job.demand.fps = d.at("fps");
    job.demand.rps = d.at("rps");
    job.demand.prompt_tokens = d.at("prompt_tokens");
    job.demand.output_tokens = d.at("output_tokens");
    job.demand.concurrency = d.value("concurrency", 0);
    job.int8 = j.at("int8");
    job.threads = j.at("threads");
    job.window_s = j.at("window_s");
    job.seed = j.at("seed");
    job.device = j.at("device");
    return job;
  } catch (const std::exception& e) {
    return Error(std::string("bad worker job: ") + e.what());
  }
}

std::string encode_go(const WorkerGo& go) {
  return json{{"go",
               {{"window_s", go.window_s},
                {"seed", go.seed},
                {"t0_ns", go.t0_ns},
                {"from_s", go.from_s},
                {"restarted", go.restarted}}}}
      .dump();
}

Result<WorkerGo> decode_go(const std::string& line) {
  try {
    const json j = json::parse(line).at("go");
    WorkerGo go;
    go.window_s = j.at("window_s");
    go.seed = j.at("seed");
    go.t0_ns = j.value("t0_ns", std::int64_t{0});
    go.from_s = j.value("from_s", 0.0);
    go.restarted = j.value("restarted", false);
    return go;
  } catch (const std::exception& e) {
    return Error(std::string("bad start line: ") + e.what());
  }
}

std::string encode_cut(const WorkerCut& cut) { return json{{"cut", {{"at_s", cut.at_s}}}}.dump(); }

Result<WorkerCut> decode_cut(const std::string& line) {
  try {
    WorkerCut cut;
    cut.at_s = json::parse(line).at("cut").at("at_s");
    return cut;
  } catch (const std::exception& e) {
    return Error(std::string("bad hand-over line: ") + e.what());
  }
}

ParentLine kind_of(const std::string& line) {
  // encode_go and encode_cut write one top-level key; a job starts with "arch" (keys sorted).
  if (line.rfind(R"({"go")", 0) == 0) return ParentLine::kGo;
  if (line.rfind(R"({"cut")", 0) == 0) return ParentLine::kCut;
  return ParentLine::kJob;
}

std::string worker_key(const WorkerJob& job) {
  WorkerJob k = job;
  k.window_s = 0;
  k.seed = 0;
  return encode_job(k);
}

std::string encode_report(const WorkerReport& r) {
  const json j = {{"error", r.error},       {"latency_ms", r.latency_ms},
                  {"ttft_ms", r.ttft_ms},   {"tpot_ms", r.tpot_ms},
                  {"served", r.served},     {"dram_bytes", r.dram_bytes},
                  {"ready_ms", r.ready_ms},
                  {"torch_config", r.torch_config}};
  return j.dump();
}

Result<WorkerReport> decode_report(const std::string& line) {
  try {
    const json j = json::parse(line);
    WorkerReport r;
    r.error = j.at("error");
    r.latency_ms = j.at("latency_ms").get<std::vector<double>>();
    r.ttft_ms = j.at("ttft_ms").get<std::vector<double>>();
    r.tpot_ms = j.at("tpot_ms").get<std::vector<double>>();
    r.served = j.at("served");
    r.dram_bytes = j.at("dram_bytes");
    r.ready_ms = j.value("ready_ms", 0.0);
    r.torch_config = j.at("torch_config");
    return r;
  } catch (const std::exception& e) {
    return Error(std::string("bad worker report: ") + e.what(), Error::Kind::kInternal);
  }
}

}  // namespace corun::torchbed
