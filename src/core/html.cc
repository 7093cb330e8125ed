#include "corun/core/html.h"

#include <algorithm>
#include <cctype>

#include "corun/core/strings.h"

namespace corun {

namespace {

// One style sheet for every page. System fonts only: a web font would be an external file.
constexpr std::string_view kStyle =
    "body{font-family:sans-serif;max-width:1060px;margin:1.5em auto;padding:0 12px;color:#222;"
    "line-height:1.4}"
    "h1{font-size:1.6em}h2{font-size:1.3em;margin-top:1.6em;border-bottom:1px solid #ddd}"
    "h3{font-size:1.1em}"
    "table{border-collapse:collapse;margin:0.6em 0;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 7px;vertical-align:top}"
    "th{background:#f4f4f4;text-align:left}td.n,th.n{text-align:right}"
    ".bad{color:#c00;font-weight:bold}.muted{color:#999}.changed{background:#fff3c4}"
    ".note{color:#555;font-size:13px}"
    "svg{max-width:100%;height:auto}figure{margin:0.8em 0}"
    "code{background:#f4f4f4;padding:0 3px}pre{background:#f6f6f6;padding:8px;"
    "white-space:pre-wrap}";

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// `[text](target)` starting at s[i] == '[': the text and target, and where it ends.
bool parse_link(std::string_view s, std::size_t i, std::string_view& text, std::string_view& target,
                std::size_t& end) {
  const std::size_t close = s.find("](", i);
  if (close == std::string_view::npos) return false;
  const std::size_t paren = s.find(')', close + 2);
  if (paren == std::string_view::npos) return false;
  text = s.substr(i + 1, close - i - 1);
  target = s.substr(close + 2, paren - close - 2);
  end = paren + 1;
  return true;
}

// Bold (`**x**`) in already escaped text.
std::string emphasis(std::string_view escaped) {
  std::string out;
  bool open = false;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped.substr(i, 2) == "**") {
      out += open ? "</b>" : "<b>";
      open = !open;
      ++i;
    } else {
      out += escaped[i];
    }
  }
  if (open) out += "</b>";
  return out;
}

// Inline Markdown of one block's text: code spans, images, links, bold.
std::string inline_markdown(std::string_view s, const std::map<std::string, std::string>& images) {
  std::string out;
  std::string plain;  // raw text not yet emitted
  const auto flush = [&] {
    out += emphasis(markup_escape(plain));
    plain.clear();
  };
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '`') {
      const std::size_t close = s.find('`', i + 1);
      if (close != std::string_view::npos) {
        flush();
        out += "<code>" + markup_escape(s.substr(i + 1, close - i - 1)) + "</code>";
        i = close + 1;
        continue;
      }
    }
    const bool image = s[i] == '!' && i + 1 < s.size() && s[i + 1] == '[';
    if (image || s[i] == '[') {
      std::string_view text, target;
      std::size_t end = 0;
      if (parse_link(s, image ? i + 1 : i, text, target, end)) {
        flush();
        const auto svg = images.find(std::string(target));
        if (image && svg != images.end()) {
          out += "<figure>" + inline_svg(svg->second) + "</figure>";
        } else if (image) {
          out += "<em>[" + markup_escape(text) + "]</em>";
        } else {
          out += emphasis(markup_escape(text));  // a link would point outside the page
        }
        i = end;
        continue;
      }
    }
    plain += s[i];
    ++i;
  }
  flush();
  return out;
}

// The cells of a pipe-table row ("| a | b |"); `\|` is a literal bar.
std::vector<std::string> table_cells(std::string_view line) {
  line = trim(line);
  if (starts_with(line, "|")) line.remove_prefix(1);
  if (!line.empty() && line.back() == '|') line.remove_suffix(1);
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.emplace_back(trim(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  cells.emplace_back(trim(cell));
  return cells;
}

// A list item marker ("* ", "- ", "12. "): its length, or 0.
std::size_t list_marker(std::string_view line, bool& ordered) {
  if (starts_with(line, "* ") || starts_with(line, "- ")) {
    ordered = false;
    return 2;
  }
  std::size_t i = 0;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i > 0 && line.substr(i, 2) == ". ") {
    ordered = true;
    return i + 2;
  }
  return 0;
}

bool is_block_start(std::string_view line) {
  bool ordered = false;
  return starts_with(line, "#") || starts_with(line, "|") || starts_with(line, "```") ||
         starts_with(line, "<!--") || list_marker(line, ordered) > 0;
}

// A Markdown document being converted: its lines, the next one to read, and the HTML so far.
struct MarkdownBlocks {
  std::vector<std::string_view> lines;
  const std::map<std::string, std::string>& images;
  std::size_t i = 0;
  std::string out;

  /// Inline Markdown of one block's text.
  [[nodiscard]] std::string in(std::string_view s) const { return inline_markdown(s, images); }
};

/// The lines of `markdown`, without their line breaks.
std::vector<std::string_view> split_lines(std::string_view markdown) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start <= markdown.size();) {
    std::size_t nl = markdown.find('\n', start);
    if (nl == std::string_view::npos) nl = markdown.size();
    lines.push_back(markdown.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

/// Converts the fenced code block at line b.i, verbatim.
void convert_fenced_code(MarkdownBlocks& b) {
  const std::vector<std::string_view>& lines = b.lines;
  std::size_t& i = b.i;
  std::string& out = b.out;
  out += "<pre><code>";
  for (++i; i < lines.size() && !starts_with(trim(lines[i]), "```"); ++i) {
    out += markup_escape(lines[i]) + "\n";
  }
  out += "</code></pre>\n";
  ++i;
}

/// Copies the HTML comment at line b.i, closing it if the document does not.
void convert_comment(MarkdownBlocks& b) {
  const std::vector<std::string_view>& lines = b.lines;
  std::size_t& i = b.i;
  std::string& out = b.out;
  std::string comment;
  for (; i < lines.size(); ++i) {
    comment += std::string(lines[i]) + "\n";
    if (lines[i].find("-->") != std::string_view::npos) break;
  }
  ++i;
  // HTML allows "--" inside a comment (XML does not); only "-->" ends it.
  out += comment;
  if (comment.find("-->") == std::string::npos) out += "-->\n";
}

/// Converts the heading `t` (line b.i, trimmed).
void convert_heading(MarkdownBlocks& b, std::string_view t) {
  std::string& out = b.out;
  std::size_t level = 0;
  while (level < t.size() && t[level] == '#') ++level;
  level = std::min<std::size_t>(level, 6);
  const std::string tag = "h" + std::to_string(level);
  out += "<" + tag + ">" + b.in(trim(t.substr(level))) + "</" + tag + ">\n";
  ++b.i;
}

/// Converts the pipe table starting at line b.i.
void convert_table(MarkdownBlocks& b) {
  const std::vector<std::string_view>& lines = b.lines;
  std::size_t& i = b.i;
  std::string& out = b.out;
  std::vector<std::vector<std::string>> rows;
  for (; i < lines.size() && starts_with(trim(lines[i]), "|"); ++i) {
    rows.push_back(table_cells(lines[i]));
  }
  // The second row aligns the columns (`---:` right); without one every row is body.
  std::vector<bool> right;
  bool has_align =
      rows.size() >= 2 && std::all_of(rows[1].begin(), rows[1].end(), [](const std::string& c) {
        return !c.empty() && c.find_first_not_of(":-") == std::string::npos;
      });
  if (has_align) {
    for (const auto& c : rows[1]) right.push_back(c.size() > 1 && c.back() == ':');
  }
  out += "<table>";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (has_align && r == 1) continue;
    const bool head = has_align && r == 0;
    out += "<tr>";
    for (std::size_t c = 0; c < rows[r].size(); ++c) {
      const bool n = c < right.size() && right[c];
      const std::string cell = head ? "th" : "td";
      out += "<" + cell + (n ? " class=\"n\">" : ">") + b.in(rows[r][c]) + "</" + cell + ">";
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
}

/// Converts the list (ordered or not) starting at line b.i.
void convert_list(MarkdownBlocks& b, bool ordered) {
  const std::vector<std::string_view>& lines = b.lines;
  std::size_t& i = b.i;
  std::string& out = b.out;
  const std::string tag = ordered ? "ol" : "ul";
  out += "<" + tag + ">";
  while (i < lines.size()) {
    const std::string_view item_line = trim(lines[i]);
    bool this_ordered = false;
    const std::size_t marker = list_marker(item_line, this_ordered);
    if (marker == 0 || this_ordered != ordered) break;
    std::string item(item_line.substr(marker));
    // Continuation lines are indented and belong to the item.
    for (++i; i < lines.size() && !trim(lines[i]).empty() && !is_block_start(trim(lines[i])) &&
              (lines[i].front() == ' ' || lines[i].front() == '\t');
         ++i) {
      item += " " + std::string(trim(lines[i]));
    }
    out += "<li>" + b.in(item) + "</li>";
    while (i < lines.size() && trim(lines[i]).empty()) {
      // A blank line between items keeps the list going only if another item follows.
      std::size_t j = i;
      while (j < lines.size() && trim(lines[j]).empty()) ++j;
      bool next_ordered = false;
      if (j < lines.size() && list_marker(trim(lines[j]), next_ordered) > 0 &&
          next_ordered == ordered) {
        i = j;
      } else {
        break;
      }
    }
  }
  out += "</" + tag + ">\n";
}

/// Converts the paragraph starting with `t` (line b.i, trimmed): lines up to a blank line or the
/// start of another block.
void convert_paragraph(MarkdownBlocks& b, std::string_view t) {
  const std::vector<std::string_view>& lines = b.lines;
  std::size_t& i = b.i;
  std::string& out = b.out;
  std::string para(t);
  for (++i; i < lines.size() && !trim(lines[i]).empty() && !is_block_start(trim(lines[i])); ++i) {
    para += " " + std::string(trim(lines[i]));
  }
  const std::string html = b.in(para);
  // An image alone is a figure, which a paragraph may not hold.
  const bool figure = starts_with(html, "<figure>") && html.ends_with("</figure>") &&
                      html.find("<figure>", 1) == std::string::npos;
  out += figure ? html + "\n" : "<p>" + html + "</p>\n";
}

}  // namespace

std::string html_document(std::string_view title, std::string_view body) {
  std::string out = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>";
  out += markup_escape(title);
  out += "</title><style>";
  out += kStyle;
  out += "</style></head><body>\n";
  out += body;
  out += "\n</body></html>\n";
  return out;
}

std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& numeric_columns) {
  const auto numeric = [&](std::size_t c) {
    return c < numeric_columns.size() && numeric_columns[c];
  };
  std::string out = "<table><tr>";
  for (std::size_t c = 0; c < header.size(); ++c) {
    out +=
        std::string(numeric(c) ? "<th class=\"n\">" : "<th>") + markup_escape(header[c]) + "</th>";
  }
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (std::size_t c = 0; c < std::max(header.size(), row.size()); ++c) {
      out += std::string(numeric(c) ? "<td class=\"n\">" : "<td>") +
             (c < row.size() ? markup_escape(row[c]) : "") + "</td>";
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
  return out;
}

std::string inline_svg(std::string_view svg) {
  const std::size_t start = svg.find("<svg");
  return std::string(start == std::string_view::npos ? svg : svg.substr(start));
}

std::string markdown_to_html(std::string_view markdown,
                             const std::map<std::string, std::string>& inline_images) {
  MarkdownBlocks b{split_lines(markdown), inline_images, 0, {}};
  while (b.i < b.lines.size()) {
    const std::string_view line = b.lines[b.i];
    const std::string_view t = trim(line);
    if (t.empty()) {
      ++b.i;
      continue;
    }
    if (starts_with(t, "```")) {  // fenced code, verbatim
      convert_fenced_code(b);
      continue;
    }
    if (starts_with(t, "<!--")) {  // a comment says where the document came from: keep it
      convert_comment(b);
      continue;
    }
    if (starts_with(t, "#")) {
      convert_heading(b, t);
      continue;
    }
    if (starts_with(t, "|")) {
      convert_table(b);
      continue;
    }
    bool ordered = false;
    if (list_marker(t, ordered) > 0) {
      convert_list(b, ordered);
      continue;
    }
    convert_paragraph(b, t);
  }
  return b.out;
}

}  // namespace corun