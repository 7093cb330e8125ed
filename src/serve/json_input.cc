#include "corun/serve/json_input.h"

#include <cmath>
#include <set>
#include <vector>

namespace corun::serve {

namespace {

using nlohmann::json;

std::string clip(std::string_view s, std::size_t n = 64) {
  return std::string(s.substr(0, n)) + (s.size() > n ? "..." : "");
}

// Builds the document like nlohmann's own DOM parser, checking each event as it comes: the
// first failure stops the parse with the path of the value it concerns.
class StrictBuilder {
 public:
  explicit StrictBuilder(const JsonLimits& limits) : limits_(limits) {}

  json root;
  JsonInputError error;

  bool null() { return put(json(nullptr)); }
  bool boolean(bool b) { return put(json(b)); }
  bool number_integer(json::number_integer_t v) {
    if (v < -kMaxExactJsonInteger || v > kMaxExactJsonInteger) return inexact(std::to_string(v));
    return put(json(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (v > static_cast<std::uint64_t>(kMaxExactJsonInteger)) return inexact(std::to_string(v));
    return put(json(v));
  }
  bool number_float(json::number_float_t v, const std::string& text) {
    // An integer literal lands here when it does not fit in 64 bits.
    if (text.find_first_of(".eE") == std::string::npos) return inexact(text);
    if (!std::isfinite(v)) return overflow(text);
    return put(json(v));
  }
  bool string(std::string& s) { return put(json(std::move(s))); }
  bool binary(json::binary_t&) { return fail("bad_json", "binary values are not JSON"); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool key(std::string& k) {
    Frame& f = frames_.back();
    f.key = k;
    f.has_key = true;
    if (k.size() > limits_.max_key_bytes) {
      return fail("bad_json", "a key of " + std::to_string(k.size()) + " bytes (at most " +
                                  std::to_string(limits_.max_key_bytes) + ")");
    }
    if (!f.keys.insert(k).second) {
      return fail("duplicate_key", "duplicate key '" + clip(k) +
                                       "': keys within an object must be unique (RFC 8259 §4)");
    }
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_array() { return close(); }

  bool parse_error(std::size_t, const std::string& last_token,
                   const nlohmann::detail::exception& ex) {
    // nlohmann reports a number that overflows a double (out_of_range 406) as a parse error.
    if (ex.id == 406) return overflow(last_token);
    return fail("bad_json", std::string("malformed JSON: ") + ex.what());
  }

 private:
  struct Frame {
    json* node;
    std::set<std::string> keys;  // of an object: those seen so far
    std::string key;             // of an object: the key of the value being read
    bool has_key = false;
  };

  // Path of the value being read: keys joined by '.', array positions as [i].
  [[nodiscard]] std::string path() const {
    std::string p;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.node->is_array()) {
        // An open child container is the array's last element; a scalar is not placed yet.
        const bool child_open = i + 1 < frames_.size();
        p += "[" + std::to_string(f.node->size() - (child_open ? 1 : 0)) + "]";
      } else if (f.has_key) {
        p += (p.empty() ? "" : ".") + clip(f.key);
      }
    }
    return p;
  }

  bool fail(std::string code, std::string message) {
    error = {std::move(code), std::move(message), path()};
    return false;
  }
  bool inexact(const std::string& text) {
    return fail("bad_number", "integer " + clip(text, 32) +
                                  " is beyond ±(2^53 - 1), the integers a JSON number keeps "
                                  "exactly (RFC 8259 §6)");
  }
  bool overflow(const std::string& text) {
    return fail("bad_number", "number " + clip(text, 32) +
                                  " overflows a double (largest finite: 1.7976931348623157e308)");
  }

  // Stores a value where the parse is: the root, the current key of an object, or the end of
  // an array. Returns where it went (stable while it is the innermost open container: the
  // parent only grows after it closes).
  json* place(json v) {
    if (frames_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& parent = *frames_.back().node;
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[frames_.back().key];
    slot = std::move(v);
    return &slot;
  }
  bool put(json v) {
    place(std::move(v));
    return true;
  }
  bool open(json container) {
    if (static_cast<int>(frames_.size()) >= limits_.max_depth) {
      return fail("bad_json", "JSON nests deeper than " + std::to_string(limits_.max_depth));
    }
    json* node = place(std::move(container));
    frames_.push_back({node, {}, {}, false});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  const JsonLimits& limits_;
  std::vector<Frame> frames_;
};

// Tags of YAML 1.2's core schema (yaml-cpp spells them out).
constexpr const char* kStrTag = "tag:yaml.org,2002:str";
constexpr const char* kIntTag = "tag:yaml.org,2002:int";
constexpr const char* kFloatTag = "tag:yaml.org,2002:float";
constexpr const char* kBoolTag = "tag:yaml.org,2002:bool";

YAML::Node tagged_scalar(const std::string& text, const char* tag) {
  YAML::Node n(text);
  n.SetTag(tag);
  return n;
}

}  // namespace

std::variant<json, JsonInputError> parse_json_input(std::string_view text,
                                                    const JsonLimits& limits) {
  StrictBuilder b(limits);
  const bool ok = json::sax_parse(text, &b, json::input_format_t::json, true, false);
  if (!ok) {
    if (b.error.code.empty()) b.error = {"bad_json", "malformed JSON", ""};
    return b.error;
  }
  return std::move(b.root);
}

YAML::Node to_yaml_node(const json& value) {
  switch (value.type()) {
    case json::value_t::boolean:
      return tagged_scalar(value.get<bool>() ? "true" : "false", kBoolTag);
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return tagged_scalar(value.dump(), kIntTag);
    case json::value_t::number_float:
      return tagged_scalar(value.dump(), kFloatTag);
    case json::value_t::string:
      return tagged_scalar(value.get_ref<const std::string&>(), kStrTag);
    case json::value_t::array: {
      YAML::Node out(YAML::NodeType::Sequence);
      for (const auto& x : value) out.push_back(to_yaml_node(x));
      return out;
    }
    case json::value_t::object: {
      YAML::Node out(YAML::NodeType::Map);
      // force_insert: no lookup per key (a body of many keys would otherwise cost n^2).
      for (const auto& [k, x] : value.items()) out.force_insert(tagged_scalar(k, kStrTag), to_yaml_node(x));
      return out;
    }
    case json::value_t::null:
    case json::value_t::binary:
    case json::value_t::discarded:
      break;
  }
  return YAML::Node(YAML::NodeType::Null);
}

}  // namespace corun::serve
