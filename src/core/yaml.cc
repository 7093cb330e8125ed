#include "corun/core/yaml.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "corun/core/strings.h"

namespace corun {

std::string Diagnostic::to_string() const {
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  out += ": ";
  if (!path.empty()) out += path + ": ";
  out += reason;
  return out;
}

Error Diagnostics::to_error() const {
  std::string msg;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    if (i) msg += "\n";
    msg += items_[i].to_string();
  }
  return Error(msg, Error::Kind::kInvalidInput);
}

Result<YAML::Node> parse_yaml(std::string_view text, const std::string& file) {
  // yaml-cpp accepts NUL bytes inside scalars; a text file never has them.
  if (text.find('\0') != std::string_view::npos) {
    const auto pos = text.find('\0');
    int line = 1;
    for (std::size_t i = 0; i < pos; ++i) line += text[i] == '\n' ? 1 : 0;
    return Error(Diagnostic{file, line, 0, "", "not a YAML text file (contains a NUL byte)"}
                     .to_string());
  }
  try {
    YAML::Node root = YAML::Load(std::string(text));
    return root;
  } catch (const YAML::Exception& e) {
    Diagnostic d{file, e.mark.is_null() ? 0 : e.mark.line + 1,
                 e.mark.is_null() ? 0 : e.mark.column + 1, "", "invalid YAML: " + e.msg};
    return Error(d.to_string());
  } catch (const std::exception& e) {
    return Error(Diagnostic{file, 0, 0, "", std::string("invalid YAML: ") + e.what()}.to_string());
  }
}

YamlField::YamlField(YAML::Node node, std::string file, std::string path, Diagnostics* diags)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)), diags_(diags) {}

int YamlField::line() const {
  const YAML::Mark m = node_.IsDefined() ? node_.Mark() : YAML::Mark::null_mark();
  return m.is_null() ? parent_line_ : m.line + 1;
}

int YamlField::column() const {
  const YAML::Mark m = node_.IsDefined() ? node_.Mark() : YAML::Mark::null_mark();
  return m.is_null() ? parent_column_ : m.column + 1;
}

namespace {

// yaml-cpp returns an "invalid" (zombie) node for a missing key, on which most calls -- and
// assignment -- throw; hand out a valid, undefined node instead.
YAML::Node child_or_undefined(const YAML::Node& parent, const std::string* key, std::size_t i) {
  if (key != nullptr ? !parent.IsMap() : (!parent.IsSequence() || i >= parent.size())) {
    return YAML::Node(YAML::NodeType::Undefined);
  }
  YAML::Node c = key != nullptr ? parent[*key] : parent[i];
  if (!c.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
  return c;
}

}  // namespace

YamlField YamlField::operator[](std::string_view key) const {
  const std::string k(key);
  YamlField f(child_or_undefined(node_, &k, 0), file_, path_.empty() ? k : path_ + "." + k,
              diags_);
  f.parent_line_ = line();
  f.parent_column_ = column();
  return f;
}

YamlField YamlField::at(std::size_t i) const {
  YamlField f(child_or_undefined(node_, nullptr, i), file_, path_ + "[" + std::to_string(i) + "]",
              diags_);
  f.parent_line_ = line();
  f.parent_column_ = column();
  return f;
}

std::vector<std::string> YamlField::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (const auto& kv : node_) {
    out.push_back(kv.first.IsScalar() ? kv.first.Scalar() : std::string("<non-scalar key>"));
  }
  return out;
}

void YamlField::error(std::string reason) const {
  if (diags_ == nullptr) return;
  diags_->add(Diagnostic{file_, line(), column(), path_, std::move(reason)});
}

namespace {

// YAML's core schema types a scalar by its tag: a quoted scalar ("30", tag "!") or one tagged
// !!str is a string whatever it spells, one tagged !!int, !!float or !!bool is that type (JSON
// bodies of `corun serve` arrive tagged so, see serve/json_input.h). A plain scalar (tag "?")
// is typed by what the reader expects.
bool is_string_scalar(const YAML::Node& n) {
  return n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str";
}
bool is_number_scalar(const YAML::Node& n) {
  return n.Tag() == "tag:yaml.org,2002:int" || n.Tag() == "tag:yaml.org,2002:float";
}
bool is_bool_scalar(const YAML::Node& n) { return n.Tag() == "tag:yaml.org,2002:bool"; }

std::string type_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "unknown";
}

}  // namespace

bool YamlField::expect_map() const {
  if (node_.IsMap()) return true;
  error("expected a mapping (key: value), got " + type_name(node_));
  return false;
}

bool YamlField::expect_sequence(bool allow_empty) const {
  if (!node_.IsSequence()) {
    error("expected a list, got " + type_name(node_));
    return false;
  }
  if (!allow_empty && node_.size() == 0) {
    error("must not be empty");
    return false;
  }
  return true;
}

void YamlField::check_keys(std::initializer_list<std::string_view> known) const {
  std::vector<std::string> k;
  k.reserve(known.size());
  for (auto s : known) k.emplace_back(s);
  check_keys(k);
}

void YamlField::check_keys(const std::vector<std::string>& known) const {
  if (!node_.IsMap()) return;
  std::vector<std::string> seen;
  for (const auto& kv : node_) {
    const YAML::Mark m = kv.first.Mark();
    const int l = m.is_null() ? line() : m.line + 1;
    const int c = m.is_null() ? column() : m.column + 1;
    if (!kv.first.IsScalar()) {
      if (diags_) diags_->add({file_, l, c, path_, "keys must be plain names"});
      continue;
    }
    const std::string& key = kv.first.Scalar();
    const std::string p = path_.empty() ? key : path_ + "." + key;
    bool is_known = false;
    for (const auto& s : known) is_known = is_known || s == key;
    if (!is_known) {
      if (diags_) {
        diags_->add({file_, l, c, p, "unknown field '" + key + "'" + did_you_mean(key, known)});
      }
    }
    for (const auto& s : seen) {
      if (s == key && diags_) diags_->add({file_, l, c, p, "duplicate field '" + key + "'"});
    }
    seen.push_back(key);
  }
}

std::optional<double> YamlField::number(double min, double max) const {
  if (!node_.IsScalar()) {
    error("expected a number, got " + type_name(node_));
    return std::nullopt;
  }
  if (is_string_scalar(node_) || is_bool_scalar(node_)) {
    error("expected a number, got the " + std::string(is_bool_scalar(node_) ? "boolean" : "string") +
          " '" + node_.Scalar() + "'");
    return std::nullopt;
  }
  const std::string& s = node_.Scalar();
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v) ||
      s.find_first_of("xXnN") != std::string::npos) {
    error("expected a number, got '" + s + "'");
    return std::nullopt;
  }
  if (v < min || v > max) {
    error("value " + s + " is out of range [" + format_number(min) + ", " + format_number(max) +
          "]");
    return std::nullopt;
  }
  return v;
}

std::optional<long long> YamlField::integer(long long min, long long max) const {
  const auto v = number(static_cast<double>(min), static_cast<double>(max));
  if (!v) return std::nullopt;
  if (*v != std::floor(*v)) {
    error("expected a whole number, got '" + node_.Scalar() + "'");
    return std::nullopt;
  }
  return static_cast<long long>(*v);
}

std::optional<std::string> YamlField::string() const {
  if (!node_.IsScalar()) {
    error("expected a name, got " + type_name(node_));
    return std::nullopt;
  }
  if (is_number_scalar(node_) || is_bool_scalar(node_)) {
    error("expected a name, got the " + std::string(is_bool_scalar(node_) ? "boolean" : "number") +
          " " + node_.Scalar());
    return std::nullopt;
  }
  if (node_.Scalar().empty()) {
    error("must not be empty");
    return std::nullopt;
  }
  return node_.Scalar();
}

std::optional<bool> YamlField::boolean() const {
  if (node_.IsScalar() && !is_string_scalar(node_) && !is_number_scalar(node_)) {
    const std::string& s = node_.Scalar();
    if (s == "true" || s == "True" || s == "yes") return true;
    if (s == "false" || s == "False" || s == "no") return false;
  }
  error("expected true or false, got " +
        (is_string_scalar(node_) ? "the string '" + node_.Scalar() + "'" : type_name(node_)));
  return std::nullopt;
}

std::optional<double> YamlField::number_at(std::string_view key, double min, double max,
                                           bool required) const {
  const YamlField f = (*this)[key];
  if (!f.present()) {
    if (required) f.error("missing required field");
    return std::nullopt;
  }
  return f.number(min, max);
}

std::optional<long long> YamlField::integer_at(std::string_view key, long long min,
                                               long long max, bool required) const {
  const YamlField f = (*this)[key];
  if (!f.present()) {
    if (required) f.error("missing required field");
    return std::nullopt;
  }
  return f.integer(min, max);
}

std::optional<std::string> YamlField::string_at(std::string_view key, bool required) const {
  const YamlField f = (*this)[key];
  if (!f.present()) {
    if (required) f.error("missing required field");
    return std::nullopt;
  }
  return f.string();
}

}  // namespace corun
