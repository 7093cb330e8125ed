#include "corun/serve/json_input.h"

#include <cmath>
#include <cstdio>
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

// Appends `s` as a YAML double-quoted scalar. JSON text is valid UTF-8 (the parser checked);
// YAML 1.2 allows only printable characters raw (c-printable: no C0 or C1 controls but tab, LF,
// CR and NEL; no DEL, U+FFFE, U+FFFF), so everything else is escaped, and so are the BOM and
// line breaks, which would otherwise fold.
void append_quoted(std::string& out, const std::string& s) {
  out += '"';
  char buf[16];
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const std::size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    std::uint32_t cp = c & (n == 4 ? 0x07U : n == 3 ? 0x0fU : 0x1fU);
    for (std::size_t k = 1; k < n && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3fU);
    }
    if ((cp >= 0x80 && cp <= 0x9f) || cp == 0xfeff || cp == 0xfffe || cp == 0xffff ||
        cp == 0x2028 || cp == 0x2029) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  out += '"';
}

void append_flow(std::string& out, const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      out += "null";
      break;
    case json::value_t::boolean:
      out += v.get<bool>() ? "!!bool true" : "!!bool false";
      break;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      out += "!!int " + v.dump();
      break;
    case json::value_t::number_float:
      out += "!!float " + v.dump();
      break;
    case json::value_t::string:
      append_quoted(out, v.get_ref<const std::string&>());
      break;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& x : v) {
        out += first ? "" : ", ";
        first = false;
        append_flow(out, x);
      }
      out += ']';
      break;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        out += first ? "" : ", ";
        first = false;
        append_quoted(out, k);
        out += ": ";
        append_flow(out, x);
      }
      out += '}';
      break;
    }
    case json::value_t::binary:
    case json::value_t::discarded:
      out += "null";
      break;
  }
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

std::string to_yaml_flow(const json& value) {
  std::string out;
  append_flow(out, value);
  return out;
}

}  // namespace corun::serve
